// cmd_torch.hpp: `qkv torch --seed S [--dtype float32|float64] OP...`, PyTorch's CPU generator.
//
// The ops run in order on one generator, exactly as the same PyTorch calls would after
// torch.manual_seed(S) (docs/cli.md lists them). Every op is parsed and checked, sizes included,
// before anything is drawn or allocated; a bad op, number, dimension or size is an input_error
// (message on stderr, exit status 2, nothing on stdout).
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <qkv/core/torch.hpp>

#include "cli.hpp"

namespace qkv::cli {

namespace torch_cmd {

/// the largest tensor one op may make: 2^24 elements (64 MB of float32; its JSON is ~350 MB)
inline constexpr std::uint64_t max_elements = std::uint64_t{1} << 24;
/// and all ops together
inline constexpr std::uint64_t max_total_elements = std::uint64_t{1} << 25;

enum class kind { rand, randn, uniform, normal, linear, embedding, xavier, mha, seed };

struct op {
  std::string_view text;  // as given, echoed in the output
  kind k{};
  std::vector<std::uint64_t> dims;  // rand, randn, uniform, normal, xavier
  double a = 0, b = 0;              // uniform: lo, hi; normal: mean, std
  std::uint64_t n1 = 0, n2 = 0;     // linear: in, out; embedding: num, dim; mha: E, H
  bool bias = true;                 // linear
  bool has_padding = false;         // embedding
  std::int64_t padding = 0;
  std::uint64_t seed = 0;  // seed (two's complement of a negative one)
};

[[nodiscard]] inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto k = s.find(sep);
    out.push_back(s.substr(0, k));
    if (k == std::string_view::npos) return out;
    s.remove_prefix(k + 1);
  }
}

/// a seed: any integer from -2^63 to 2^64 - 1, as torch.manual_seed accepts
[[nodiscard]] inline std::uint64_t parse_seed(std::string_view s, std::string_view what) {
  const char* end = s.data() + s.size();
  if (!s.empty() && s[0] == '-') {
    std::int64_t v = 0;
    const auto r = std::from_chars(s.data(), end, v);
    if (r.ec != std::errc{} || r.ptr != end)
      throw input_error(std::string(what) + ": '" + std::string(s) +
                        "' is not a seed (an integer from -2^63 to 2^64 - 1)");
    return static_cast<std::uint64_t>(v);
  }
  std::uint64_t v = 0;
  const auto r = std::from_chars(s.data(), end, v);
  if (s.empty() || r.ec != std::errc{} || r.ptr != end)
    throw input_error(std::string(what) + ": '" + std::string(s) +
                      "' is not a seed (an integer from -2^63 to 2^64 - 1)");
  return v;
}

/// a positive size (dimension, feature count)
[[nodiscard]] inline std::uint64_t parse_size(std::string_view s, std::string_view op,
                                              std::string_view what) {
  const char* end = s.data() + s.size();
  if (!s.empty() && s[0] == '-')
    throw input_error("op '" + std::string(op) + "': " + std::string(what) + " '" + std::string(s) +
                      "' is negative; sizes must be positive");
  std::uint64_t v = 0;
  const auto r = std::from_chars(s.data(), end, v);
  if (s.empty() || r.ec != std::errc{} || r.ptr != end)
    throw input_error("op '" + std::string(op) + "': " + std::string(what) + " '" + std::string(s) +
                      "' is not a whole number");
  if (v == 0)
    throw input_error("op '" + std::string(op) + "': " + std::string(what) + " is 0; sizes must be positive");
  return v;
}

[[nodiscard]] inline std::int64_t parse_index(std::string_view s, std::string_view op,
                                              std::string_view what) {
  const char* end = s.data() + s.size();
  std::int64_t v = 0;
  const auto r = std::from_chars(s.data(), end, v);
  if (s.empty() || r.ec != std::errc{} || r.ptr != end)
    throw input_error("op '" + std::string(op) + "': " + std::string(what) + " '" + std::string(s) +
                      "' is not an integer");
  return v;
}

[[nodiscard]] inline double parse_number(std::string_view s, std::string_view op, std::string_view what) {
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  if (!s.empty() && s[0] == '+') ++begin;  // from_chars refuses a leading '+'; Python's float() takes it
  double v = 0;
  const auto r = std::from_chars(begin, end, v);
  if (s.empty() || r.ec != std::errc{} || r.ptr != end || !std::isfinite(v))
    throw input_error("op '" + std::string(op) + "': " + std::string(what) + " '" + std::string(s) +
                      "' is not a finite number");
  return v;
}

[[nodiscard]] inline std::vector<std::uint64_t> parse_dims(std::string_view s, std::string_view op) {
  std::vector<std::uint64_t> dims;
  for (auto d : split(s, ',')) dims.push_back(parse_size(d, op, "dimension"));
  return dims;
}

/// the element count of a shape, refusing (before anything is allocated) more than max_elements
[[nodiscard]] inline std::uint64_t checked_elements(const std::vector<std::uint64_t>& dims,
                                                    std::string_view op) {
  std::uint64_t n = 1;
  for (auto d : dims) {
    if (d > max_elements || n > max_elements / d)
      throw input_error("op '" + std::string(op) + "': the tensor is too large (more than 2^24 = " +
                        std::to_string(max_elements) + " elements)");
    n *= d;
  }
  return n;
}

[[nodiscard]] inline std::string_view kind_name(std::string_view text) {
  return text.substr(0, text.find(':'));
}

/// parse one op and check it completely; the elements it will make are added to total
[[nodiscard]] inline op parse_op(std::string_view text, std::string_view dtype, std::uint64_t& total) {
  const auto p = split(text, ':');
  const auto name = p[0];
  op o;
  o.text = text;
  auto arity = [&](std::size_t lo, std::size_t hi, std::string_view form) {
    if (p.size() < lo || p.size() > hi)
      throw input_error("op '" + std::string(text) + "' is malformed; expected " + std::string(form));
  };
  auto count = [&](const std::vector<std::uint64_t>& dims) {
    const auto n = checked_elements(dims, text);
    total += n;
    if (total > max_total_elements)
      throw input_error("op '" + std::string(text) + "': all ops together would make more than 2^25 = " +
                        std::to_string(max_total_elements) + " elements");
  };
  const double type_max = dtype == "float32" ? static_cast<double>(std::numeric_limits<float>::max())
                                             : std::numeric_limits<double>::max();
  if (name == "rand" || name == "randn") {
    arity(2, 2, std::string(name) + ":A,B,...");
    o.k = name == "rand" ? kind::rand : kind::randn;
    o.dims = parse_dims(p[1], text);
    count(o.dims);
  } else if (name == "uniform") {
    arity(4, 4, "uniform:A,B,...:LO:HI");
    o.k = kind::uniform;
    o.dims = parse_dims(p[1], text);
    o.a = parse_number(p[2], text, "LO");
    o.b = parse_number(p[3], text, "HI");
    if (!(o.a <= o.b))
      throw input_error("op '" + std::string(text) +
                        "': LO must not be above HI (uniform_ expects a [from, to) range)");
    if (!(o.a >= -type_max && o.b <= type_max))
      throw input_error("op '" + std::string(text) + "': LO and HI must fit in " + std::string(dtype));
    if (!(o.b - o.a <= type_max))
      throw input_error("op '" + std::string(text) + "': HI - LO does not fit in " + std::string(dtype));
    count(o.dims);
  } else if (name == "normal") {
    arity(4, 4, "normal:A,B,...:MEAN:STD");
    o.k = kind::normal;
    o.dims = parse_dims(p[1], text);
    o.a = parse_number(p[2], text, "MEAN");
    o.b = parse_number(p[3], text, "STD");
    if (o.b < 0) throw input_error("op '" + std::string(text) + "': STD must not be negative");
    if (!(o.a >= -type_max && o.a <= type_max && o.b <= type_max))
      throw input_error("op '" + std::string(text) + "': MEAN and STD must fit in " + std::string(dtype));
    count(o.dims);
  } else if (name == "linear") {
    arity(3, 4, "linear:IN:OUT or linear:IN:OUT:nobias");
    o.k = kind::linear;
    o.n1 = parse_size(p[1], text, "IN");
    o.n2 = parse_size(p[2], text, "OUT");
    if (p.size() == 4) {
      if (p[3] != "nobias")
        throw input_error("op '" + std::string(text) + "': the fourth field can only be 'nobias'");
      o.bias = false;
    }
    count({o.n2, o.n1});
    if (o.bias) count({o.n2});
  } else if (name == "embedding") {
    arity(3, 4, "embedding:NUM:DIM or embedding:NUM:DIM:PAD");
    o.k = kind::embedding;
    o.n1 = parse_size(p[1], text, "NUM");
    o.n2 = parse_size(p[2], text, "DIM");
    count({o.n1, o.n2});
    if (p.size() == 4) {
      o.has_padding = true;
      o.padding = parse_index(p[3], text, "PAD");
      const auto num = static_cast<std::int64_t>(o.n1);
      if (o.padding >= num || o.padding < -num)
        throw input_error("op '" + std::string(text) + "': PAD must be within num_embeddings (from " +
                          std::to_string(-num) + " to " + std::to_string(num - 1) + ")");
    }
  } else if (name == "xavier") {
    arity(2, 2, "xavier:A,B,...");
    o.k = kind::xavier;
    o.dims = parse_dims(p[1], text);
    if (o.dims.size() < 2)
      throw input_error("op '" + std::string(text) +
                        "': xavier needs at least 2 dimensions (fan in and fan out)");
    count(o.dims);
  } else if (name == "mha") {
    arity(3, 3, "mha:E:H");
    o.k = kind::mha;
    o.n1 = parse_size(p[1], text, "E");
    o.n2 = parse_size(p[2], text, "H");
    if (o.n1 % o.n2 != 0)
      throw input_error("op '" + std::string(text) + "': embed_dim " + std::to_string(o.n1) +
                        " is not divisible by num_heads " + std::to_string(o.n2));
    count({3 * o.n1, o.n1});  // n1 <= 2^24 here: no overflow
    count({3 * o.n1});
    count({o.n1, o.n1});
    count({o.n1});
  } else if (name == "seed") {
    arity(2, 2, "seed:S");
    o.k = kind::seed;
    o.seed = parse_seed(p[1], "op '" + std::string(text) + "'");
  } else {
    throw input_error("unknown op '" + std::string(text) +
                      "'; the ops are rand, randn, uniform, normal, linear, embedding, xavier, mha, seed");
  }
  return o;
}

// --- JSON output ------------------------------------------------------------------------------------

/// a float32 as the shortest double that reads back as the float's exact value; a float64 in
/// shortest round-trip form. Either way: parse as double (and round to float for float32) and the
/// bits come back.
template <class T>
void write_number(std::string& out, T x) {
  if (!std::isfinite(x)) {  // a normal_ with a huge std can overflow: "Infinity", as io/json.hpp spells it
    out += std::isnan(x) ? "\"NaN\"" : x > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    return;
  }
  if (x == 0 && std::signbit(x)) {  // "-0" reads back as the integer 0: keep the sign
    out += "-0.0";
    return;
  }
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, static_cast<double>(x));
  out.append(buf, r.ptr);
}

template <class T>
void write_data(std::string& out, const T* data, const std::vector<std::uint64_t>& shape, std::size_t dim) {
  if (dim == shape.size()) {
    write_number(out, *data);
    return;
  }
  std::uint64_t stride = 1;
  for (std::size_t d = dim + 1; d < shape.size(); ++d) stride *= shape[d];
  out += '[';
  for (std::uint64_t i = 0; i < shape[dim]; ++i) {
    if (i) out += ", ";
    write_data(out, data + i * stride, shape, dim + 1);
  }
  out += ']';
}

template <class T>
void write_tensor(std::string& out, std::string_view name, const std::vector<T>& data,
                  const std::vector<std::uint64_t>& shape, bool first) {
  if (!first) out += ", ";
  out += '"';
  out += name;
  out += "\": {\"dtype\": \"";
  out += std::is_same_v<T, float> ? "float32" : "float64";
  out += "\", \"shape\": [";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d) out += ", ";
    out += std::to_string(shape[d]);
  }
  out += "], \"data\": ";
  write_data(out, data.data(), shape, 0);
  out += '}';
}

inline void write_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      const auto r = std::to_chars(buf, buf + sizeof buf, static_cast<int>(c), 16);
      out += "\\u00";
      if (r.ptr - buf == 1) out += '0';
      out.append(buf, r.ptr);
      continue;
    }
    out += c;
  }
  out += '"';
}

// --- running --------------------------------------------------------------------------------------

template <class T>
void run(const std::vector<op>& ops, std::uint64_t seed, std::string& out) {
  qkv::torch::generator g{seed};
  out += "[\n";
  bool first_op = true;
  for (const auto& o : ops) {
    out += first_op ? "" : ",\n";
    first_op = false;
    out += "{\"op\": ";
    write_json_string(out, o.text);
    out += ", \"tensors\": {";
    auto elements = [](const std::vector<std::uint64_t>& d) {
      std::uint64_t n = 1;
      for (auto x : d) n *= x;
      return static_cast<std::size_t>(n);
    };
    switch (o.k) {
      case kind::rand:
      case kind::randn:
      case kind::uniform:
      case kind::normal:
      case kind::xavier: {
        std::vector<T> v(elements(o.dims));
        if (o.k == kind::rand) g.uniform_(std::span<T>(v));
        if (o.k == kind::randn) g.normal_(std::span<T>(v));
        if (o.k == kind::uniform) g.uniform_(std::span<T>(v), o.a, o.b);
        if (o.k == kind::normal) g.normal_(std::span<T>(v), o.a, o.b);
        if (o.k == kind::xavier) {
          // fan_in = size(1) * receptive field, fan_out = size(0) * receptive field
          std::uint64_t receptive = 1;
          for (std::size_t d = 2; d < o.dims.size(); ++d) receptive *= o.dims[d];
          g.xavier_uniform_(std::span<T>(v), o.dims[1] * receptive, o.dims[0] * receptive);
        }
        write_tensor(out, "out", v, o.dims, true);
        break;
      }
      case kind::linear: {
        std::vector<T> w(o.n1 * o.n2), b(o.bias ? o.n2 : 0);
        g.linear_(std::span<T>(w), std::span<T>(b), o.n1);
        write_tensor(out, "weight", w, {o.n2, o.n1}, true);
        if (o.bias) write_tensor(out, "bias", b, {o.n2}, false);
        break;
      }
      case kind::embedding: {
        std::vector<T> w(o.n1 * o.n2);
        g.normal_(std::span<T>(w));
        if (o.has_padding) {
          const auto row = qkv::torch::generator::padding_row(o.padding, o.n1);
          for (std::uint64_t j = 0; j < o.n2; ++j) w[row * o.n2 + j] = T(0);
        }
        write_tensor(out, "weight", w, {o.n1, o.n2}, true);
        break;
      }
      case kind::mha: {
        // nn.MultiheadAttention(E, H): out_proj = Linear(E, E) draws first, then
        // xavier_uniform_(in_proj_weight); both biases end at 0
        const std::uint64_t e = o.n1;
        std::vector<T> ipw(3 * e * e), ipb(3 * e), opw(e * e), opb(e);
        g.linear_(std::span<T>(opw), std::span<T>(opb), e);
        g.xavier_uniform_(std::span<T>(ipw), e, 3 * e);
        for (auto& x : opb) x = T(0);
        write_tensor(out, "in_proj_weight", ipw, {3 * e, e}, true);
        write_tensor(out, "in_proj_bias", ipb, {3 * e}, false);
        write_tensor(out, "out_proj_weight", opw, {e, e}, false);
        write_tensor(out, "out_proj_bias", opb, {e}, false);
        break;
      }
      case kind::seed: g.manual_seed(o.seed); break;
    }
    out += "}}";
  }
  out += "\n]\n";
}

}  // namespace torch_cmd

/// qkv torch --seed S [--dtype float32|float64] OP...
int cmd_torch(const args& a);  // tools/cmd_torch.cpp

}  // namespace qkv::cli
