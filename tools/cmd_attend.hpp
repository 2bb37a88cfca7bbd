// cmd_attend.hpp: `qkv attend CASE.json [--json] [--svg FILE] [--html FILE]`: attention on the
// runtime path for a case given as JSON, printed as a step-by-step trace or as JSON tensors.
//
// The contract is docs/cli.md. Every field is checked before any
// arithmetic; a bad one is an input_error naming the file, the field, the expected and the
// actual shape (exit 2, nothing on stdout).
//
// --svg writes the heatmap of the weights (io/svg.hpp: a panel per head, query and key indices
// on the axes); --html a self-contained page (io/html.hpp) with the trace, every matrix of up to
// 4096 elements as a table, and the heatmap.
//
// Limits (docs/cli.md): every buffer the case makes (queries, keys, values, scores and weights
// kept, context, output) holds at most --max-elements numbers, the --json output too, and the
// heatmap at most --max-cells cells; each is checked after the case is read and before the
// attention runs. Every output is made in memory first; then the files are written all or none
// (io/file.hpp: temporaries renamed), then stdout: a failure anywhere leaves no file and prints
// nothing on stdout.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <qkv/core/flat_attention.hpp>
#include <qkv/io/file.hpp>
#include <qkv/io/json.hpp>
#include <qkv/io/limit.hpp>
#include <qkv/io/print.hpp>
#include <qkv/runtime/batch.hpp>
#include <qkv/runtime/half.hpp>
#include <qkv/runtime/multihead.hpp>

#include <qkv/io/svg.hpp>

#include "attend_backward.hpp"
#include "attend_page.hpp"
#include "cli.hpp"

namespace qkv::cli {

namespace attend_detail {

namespace rt = qkv::runtime;

inline constexpr std::string_view usage =
    "qkv attend CASE.json [--json] [--svg FILE] [--html FILE] [--arithmetic runtime|core] [--max-elements N] "
    "[--max-cells N]";

/// @brief which arithmetic computes the case (--arithmetic, docs/cli.md): the runtime path
/// (include/qkv/runtime/: SIMD, fma chains, its vector exp), or the core's
/// (core/flat_attention.hpp: one rounding per product and per sum, left to right, the core's exp;
/// what the examples prove and the pages' WebAssembly module recomputes with). `unset`: the
/// runtime, except for an editable --html page, which is written in the core's arithmetic
enum class arithmetic { unset, runtime, core };

/// "runtime" or "core", as --arithmetic and --json's "arithmetic" name them
inline const char* arithmetic_name(arithmetic a) { return a == arithmetic::core ? "core" : "runtime"; }

inline const std::set<std::string>& known_fields() {
  static const std::set<std::string> f{"dtype",
                                       "x",
                                       "context",
                                       "wq",
                                       "wk",
                                       "wv",
                                       "bq",
                                       "q",
                                       "k",
                                       "v",
                                       "bk",
                                       "bv",
                                       "weight_layout",
                                       "heads",
                                       "wo",
                                       "bo",
                                       "scale",
                                       "causal",
                                       "allowed",
                                       "tokens",
                                       "context_tokens",
                                       "key_padding",
                                       "rope",
                                       "kv_heads",
                                       "causal_alignment",
                                       "window",
                                       "alibi",
                                       "bias",
                                       "lengths",
                                       "d_output"};
  return f;
}

/// a matrix printed as PyTorch prints it; over 1000 elements, the first and last 3 rows and
/// columns with "..." between (PyTorch's summarisation)
template <class T>
std::string torch_str(const rt::dynamic_matrix<T>& m, std::size_t indent = 0) {
  const bool summarise = m.size() > 1000;
  auto pick = [&](std::size_t n) {
    std::vector<std::size_t> idx;
    for (std::size_t k = 0; k < n; ++k)
      if (!summarise || n <= 6 || k < 3 || k + 3 >= n) idx.push_back(k);
    return idx;
  };
  const auto rows = pick(m.rows()), cols = pick(m.cols());
  std::vector<double> shown;
  for (auto i : rows)
    for (auto j : cols) shown.push_back(double(m(i, j)));
  const qkv::io::detail::torch_formatter f(shown);
  const std::string pad(indent + 8, ' ');
  std::string s = "tensor([";
  std::size_t k = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (r > 0) s += ",\n" + pad;
    if (r > 0 && rows[r] != rows[r - 1] + 1) s += "...,\n" + pad;
    s += "[";
    for (std::size_t c = 0; c < cols.size(); ++c, ++k) {
      if (c > 0) s += ", ";
      if (c > 0 && cols[c] != cols[c - 1] + 1) s += "..., ";
      s += f.format(shown[k]);
    }
    s += "]";
  }
  return s + "])";
}

struct parsed_case {
  std::string file;
  rt::weight_layout layout = rt::weight_layout::out_in;
  std::size_t heads = 1;
  std::optional<double> scale;
  bool causal = false;
  std::vector<std::string> tokens, context_tokens;  // labels of x's rows and context's (or none)
  std::vector<unsigned char> key_padding;           // one flag per key, 1 = padded (or none)
  bool has_allowed = false;                         // the case gave `allowed`
  bool has_context = false;                         // keys from context (else from x)
  std::optional<rt::rope_options> rope;             // the case's `rope`, checked (or none)
  std::size_t kv_heads = 0;                         // the case's kv_heads (0: as many as heads)
  bool chapter_two = false;                         // rope, kv_heads, alignment, window, alibi or bias given
  std::string half;        // "bfloat16" or "float16": the inputs' type (float32 arithmetic), or ""
  bool projected = false;  // the case gave q, k, v (already projected), not x and weights
};

/// a string as Python's repr() quotes it: in single quotes, or in double quotes when it holds a
/// single quote and no double quote ("'" for the apostrophe token); a backslash, and the quote
/// character when it must stay single, escaped
inline std::string python_repr(const std::string& t) {
  const bool dq = t.find('\'') != std::string::npos && t.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string s(1, q);
  for (const char ch : t) {
    if (ch == '\\' || ch == q) s += '\\';
    s += ch;
  }
  return s + q;
}

/// ['Life', 'is', ...]: labels as a Python list prints them (over 20: the first and last 8)
inline std::string label_list(const std::vector<std::string>& l) {
  std::string s = "[";
  for (std::size_t k = 0; k < l.size(); ++k) {
    if (l.size() > 20 && k == 8) {
      s += ", ...";
      k = l.size() - 8;
    }
    s += (k == 0 ? "" : ", ") + python_repr(l[k]);
  }
  return s + "]";
}

/// the case's file name for a title: its last path component, and at most 40 characters (code
/// points): a longer name keeps its first 19 and last 20 with "…" between
inline std::string short_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  std::vector<std::size_t> starts;  // byte offset of each code point
  for (std::size_t b = 0; b < name.size(); ++b)
    if ((static_cast<unsigned char>(name[b]) & 0xC0) != 0x80) starts.push_back(b);
  if (starts.size() <= 40) return name;
  return name.substr(0, starts[19]) + "\u2026" + name.substr(starts[starts.size() - 20]);
}

/// "0", "1", ...: the labels where the case gives no tokens
inline std::vector<std::string> index_labels(std::size_t n) {
  std::vector<std::string> l;
  for (std::size_t i = 0; i < n; ++i) l.push_back(std::to_string(i));
  return l;
}
/// the labels of the queries (x's rows) and of the keys: the tokens, else the indices
inline std::vector<std::string> query_labels(const parsed_case& pc, std::size_t t_len) {
  return pc.tokens.empty() ? index_labels(t_len) : pc.tokens;
}
inline std::vector<std::string> key_labels(const parsed_case& pc, std::size_t s_len) {
  const auto& l = pc.has_context ? pc.context_tokens : pc.tokens;
  return l.empty() ? index_labels(s_len) : l;
}

/// @brief the learner's fields: `tokens` (one label per row of x), `context_tokens` (one per
/// row of context) and `key_padding` (one flag per key, nn.MultiheadAttention's
/// key_padding_mask: true = the key is padding and is ignored). apply_key_padding gives the
/// padding to the runtime, so it skips a padded key (weight 0) and a query whose every key is
/// padded or masked gets weights 0 and context 0.
inline void read_learner_fields(const qkv::io::json_document& doc, parsed_case& pc, std::size_t t_len,
                                bool has_context, std::size_t s_len) {
  const auto& j = doc.json();
  pc.has_context = has_context;
  auto err = [&](const std::string& field, const std::string& msg) {
    return input_error(doc.error(field, msg).what());
  };
  auto read_labels = [&](const std::string& field, std::size_t n, const std::string& rows_of) {
    const auto& a = j.at(field);
    if (!a.is_array())
      throw err(field, "expected an array of " + std::to_string(n) + " strings, one per row of " + rows_of +
                           ", got " + qkv::io::detail::kind_of(a));
    if (a.size() != n)
      throw err(field, "expected " + std::to_string(n) + " labels, one per row of " + rows_of + " (" +
                           std::to_string(n) + " rows), got " + std::to_string(a.size()));
    std::vector<std::string> labels;
    for (std::size_t k = 0; k < a.size(); ++k) {
      if (!a[k].is_string())
        throw err(field + "[" + std::to_string(k) + "]",
                  "expected a string, got " + qkv::io::detail::kind_of(a[k]));
      labels.push_back(a[k].get<std::string>());
    }
    return labels;
  };
  if (j.contains("tokens")) pc.tokens = read_labels("tokens", t_len, pc.projected ? "q" : "x");
  if (j.contains("context_tokens")) {
    if (!has_context)
      throw err("context_tokens",
                "labels the rows of context, but the case has no context (the keys are x's rows, "
                "labelled by tokens)");
    pc.context_tokens = read_labels("context_tokens", s_len, "context");
  }
  if (!j.contains("key_padding")) return;
  const std::string keys_of = pc.projected ? "k" : has_context ? "context" : "x";
  const auto& a = j.at("key_padding");
  if (!a.is_array())
    throw err("key_padding", "expected an array of " + std::to_string(s_len) +
                                 " booleans, one per key (row of " + keys_of + "), got " +
                                 qkv::io::detail::kind_of(a));
  if (a.size() != s_len)
    throw err("key_padding", "expected " + std::to_string(s_len) + " flags, one per key (the " +
                                 std::to_string(s_len) + " rows of " + keys_of + "), got " +
                                 std::to_string(a.size()));
  for (std::size_t k = 0; k < a.size(); ++k) {
    const auto& f = a[k];
    const bool ok =
        f.is_boolean() || (f.is_number_integer() && (f.get<long long>() == 0 || f.get<long long>() == 1));
    if (!ok)
      throw err("key_padding[" + std::to_string(k) + "]",
                "expected true (padding: ignored) or false (a real key), or 1 or 0, got " + f.dump());
    pc.key_padding.push_back(f.is_boolean() ? (f.get<bool>() ? 1 : 0)
                                            : static_cast<unsigned char>(f.get<long long>()));
  }
}

/// @brief key_padding as the runtime takes it (attention_options::key_padding, S flags): key k
/// masked for every query, the same bits as allowed(i, k) = allowed(i, k) and not key_padding[k]
template <class T>
void apply_key_padding(const parsed_case& pc, rt::attention_options<T>& opt) {
  if (pc.key_padding.empty()) return;
  opt.key_padding = pc.key_padding;
}

/// `rope`'s positions stay below 2^24 (position_offset + T - 1, key_position_offset + S - 1).
/// Past it, the double angle's own rounding (about p * 2^-51 rad, runtime/rope.hpp) would come
/// within reach of float's resolution.
inline constexpr std::uint64_t max_rope_position = std::uint64_t(1) << 24;

/// @brief `rope`: {"layout": "half_split" | "interleaved", "base": 10000, "rotary_dim": 0 (the
/// whole head), "position_offset": 0, "key_position_offset": position_offset}, every member
/// optional; checked against the head's width and the positions' limit
inline void read_rope(const qkv::io::json_document& doc, parsed_case& pc, std::size_t head_dim,
                      std::size_t t_len, std::size_t s_len) {
  const auto& j = doc.json();
  if (!j.contains("rope")) return;
  auto err = [&](const std::string& field, const std::string& msg) {
    return input_error(doc.error(field, msg).what());
  };
  const auto& r = j.at("rope");
  if (!r.is_object())
    throw err("rope",
              "expected an object {\"layout\", \"base\", \"rotary_dim\", \"position_offset\", "
              "\"key_position_offset\"} (each optional), got " +
                  qkv::io::detail::kind_of(r));
  if (t_len > max_rope_position || s_len > max_rope_position)
    throw err("rope", "takes at most " + std::to_string(max_rope_position) +
                          " positions (2^24), the case has " + std::to_string(t_len) + " queries and " +
                          std::to_string(s_len) + " keys");
  rt::rope_options o;
  auto whole = [&](const std::string& key, std::uint64_t max, const std::string& why) -> std::uint64_t {
    const auto& v = r.at(key);
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() > max)
      throw err("rope." + key, "expected a whole number from 0 to " + std::to_string(max) + " (" + why +
                                   "), got " + v.dump());
    return v.get<std::uint64_t>();
  };
  const std::string below = "positions stay below 2^24 = " + std::to_string(max_rope_position);
  for (const auto& [key, v] : r.items()) {
    if (key == "layout") {
      if (v == "half_split")
        o.layout = rt::rope_layout::half_split;
      else if (v == "interleaved")
        o.layout = rt::rope_layout::interleaved;
      else
        throw err("rope.layout",
                  "expected \"half_split\" (LLaMA, GPT-NeoX) or \"interleaved\" (RoFormer, GPT-J), got " +
                      v.dump());
    } else if (key == "base") {
      if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
        throw err("rope.base",
                  "expected a positive finite number (10000 in RoFormer and LLaMA), got " + v.dump());
      o.base = v.get<double>();
    } else if (key == "rotary_dim") {
      if (!v.is_number_unsigned() || v.get<std::uint64_t>() > head_dim || v.get<std::uint64_t>() % 2 != 0)
        throw err("rope.rotary_dim",
                  "expected an even whole number (columns are rotated in pairs) from 0 (the whole head) to "
                  "the head's " +
                      std::to_string(head_dim) + " columns, got " + v.dump());
      o.rotary_dim = v.get<std::size_t>();
    } else if (key == "position_offset") {
      o.position_offset = static_cast<std::size_t>(
          whole(key, max_rope_position - t_len, below + " with " + std::to_string(t_len) + " queries"));
    } else if (key == "key_position_offset") {
      o.key_position_offset = static_cast<std::size_t>(
          whole(key, max_rope_position - s_len, below + " with " + std::to_string(s_len) + " keys"));
    } else {
      throw err(
          "rope." + key,
          "unknown field; rope's fields are layout, base, rotary_dim, position_offset, key_position_offset");
    }
  }
  if (head_dim % 2 != 0 && o.rotary_dim == 0)
    throw err(
        "rope",
        "the heads are " + std::to_string(head_dim) +
            " columns wide, an odd number: give an even rope.rotary_dim (columns are rotated in pairs)");
  if (!o.key_position_offset && o.position_offset > max_rope_position - s_len)
    throw err("rope.position_offset", "the keys take position_offset too (no key_position_offset given): " +
                                          std::to_string(o.position_offset) + " + " + std::to_string(s_len) +
                                          " keys is past the limit of " + std::to_string(max_rope_position) +
                                          " positions");
  pc.rope = o;
}

/// @brief the case's "dtype": "float32" (default) and "float64" as cli.hpp's read_dtype, or
/// "bfloat16" / "float16": the case's numbers are that type (each value rounded to it as stored:
/// to nearest, ties to even; float16 past 65504 becomes infinity), the arithmetic float32, as the
/// runtime's 16-bit inputs path (runtime/half.hpp: converted to float exactly, float accumulation).
/// `half` is set to the 16-bit name, or left empty.
inline dtype read_attend_dtype(const qkv::io::json_document& doc, std::string& half) {
  if (doc.json().contains("dtype")) {
    const auto& d = doc.json().at("dtype");
    if (d == "bfloat16" || d == "float16") {
      half = d.get<std::string>();
      return dtype::float32;
    }
    if (d != "float32" && d != "float64")
      throw input_error(
          doc.error("dtype",
                    "expected \"float32\", \"float64\", \"bfloat16\" or \"float16\", got " + d.dump())
              .what());
  }
  return read_dtype(doc);
}

/// @brief the case's type and its tensors' tags agree (docs/cli.md, "dtype"): a tensor tagged
/// with a floating type must be tagged with the case's arithmetic type, float64 in a float64
/// case and float32 otherwise (a bfloat16 or float16 case computes in float32; its top-level
/// dtype says that every number is rounded to 16 bits as read). Any other tag is refused naming
/// the field (exit 2), never converted silently: a "float64" tensor in a case without "dtype"
/// would otherwise run in float32.
inline void check_attend_dtypes(const qkv::io::json_document& doc) {
  const auto& j = doc.json();
  const bool given = j.is_object() && j.contains("dtype") && j.at("dtype").is_string();
  const std::string d = given ? j.at("dtype").get<std::string>() : "float32";
  const bool half = d == "bfloat16" || d == "float16";
  const std::string arithmetic = d == "float64" ? "float64" : "float32";
  const std::string why = !given ? "it has no top-level \"dtype\", and float32 is the default"
                          : half ? "its \"dtype\": \"" + d + "\": " + d + " numbers, float32 arithmetic"
                                 : "its \"dtype\": \"" + d + "\"";
  const std::string fix =
      half ? "tag it \"float32\" or leave it untagged (each number is rounded to " + d + " as read)"
           : std::string("give the case \"dtype\": \"") + (d == "float32" ? "float64" : "float32") +
                 "\" to compute in that type, or tag the tensor \"" + d + "\"";
  check_tensor_dtypes(doc, arithmetic, half ? "float32 (rounded to " + d + ")" : arithmetic, why, fix);
}

/// every number of the case (x, context, the weights and biases, bias) rounded to the 16-bit
/// type S, kept as the float of the same value (exact: every bfloat16 and float16 is a float)
template <class S>
void round_values(float* p, std::size_t n) {
  for (std::size_t e = 0; e < n; ++e) p[e] = static_cast<float>(S(p[e]));
}
template <class S>
void round_inputs(rt::dynamic_matrix<float>& x, rt::dynamic_matrix<float>& context,
                  rt::attention_weights<float>& w, rt::attention_options<float>& opt) {
  auto round = [](float* p, std::size_t n) { round_values<S>(p, n); };
  round(x.data(), x.size());
  round(context.data(), context.size());
  for (auto* l : {&w.q, &w.k, &w.v}) {
    round(l->weight.data(), l->weight.size());
    round(l->bias.data(), l->bias.size());
  }
  if (w.o) {
    round(w.o->weight.data(), w.o->weight.size());
    round(w.o->bias.data(), w.o->bias.size());
  }
  if (opt.bias) round(opt.bias->data(), opt.bias->size());
}

/// `heads` and `kv_heads` into pc; returns the key/value heads (kv_heads, or heads)
inline std::size_t read_heads(const qkv::io::json_document& doc, parsed_case& pc) {
  const auto& j = doc.json();
  auto err = [&](const std::string& field, const std::string& msg) {
    return input_error(doc.error(field, msg).what());
  };
  if (j.contains("heads")) {
    const auto& h = j.at("heads");
    if (!h.is_number_unsigned() || h.get<std::size_t>() == 0)
      throw err("heads", "expected a positive whole number, got " + h.dump());
    pc.heads = h.get<std::size_t>();
  }
  std::size_t hk = pc.heads;  // key/value heads
  if (j.contains("kv_heads")) {
    const auto& h = j.at("kv_heads");
    if (!h.is_number_unsigned() || h.get<std::size_t>() == 0 || pc.heads % h.get<std::size_t>() != 0)
      throw err("kv_heads",
                "expected a positive whole number that divides heads = " + std::to_string(pc.heads) +
                    " (grouped-query attention: query head h uses key/value head h / (heads / kv_heads); 1 = "
                    "multi-query), got " +
                    h.dump());
    pc.kv_heads = hk = h.get<std::size_t>();
  }
  return hk;
}

/// everything after the projections (scale, causal, allowed, the learner's fields, rope,
/// causal_alignment, window, alibi, bias), each shape checked against t_len queries and s_len
/// keys (the rows of `cname`), with messages naming the field
template <class T>
void read_options(const qkv::io::json_document& doc, parsed_case& pc, std::size_t t_len, std::size_t s_len,
                  std::size_t dq, const std::string& cname, bool has_context, rt::attention_options<T>& opt,
                  bool batch) {
  const auto& j = doc.json();
  auto err = [&](const std::string& field, const std::string& msg) {
    return input_error(doc.error(field, msg).what());
  };
  if (j.contains("scale")) {  // a number or a 0-d tensor, finite in T (cli.hpp)
    opt.scale = read_finite_scale<T>(doc);
    pc.scale = double(*opt.scale);
  }
  if (j.contains("causal")) {
    const auto& cz = j.at("causal");
    if (!cz.is_boolean()) throw err("causal", "expected true or false, got " + cz.dump());
    pc.causal = opt.causal = cz.get<bool>();
  }
  if (j.contains("allowed")) {
    auto a = qkv::io::read_matrix_field<unsigned char>(doc, "allowed", "T x S booleans");
    if (a.rows() != t_len || a.cols() != s_len)
      throw err("allowed", "expected " + rt::shape_string(t_len, s_len) + " (T x S: a row per query of " +
                               (pc.projected ? "q" : "x") + ", a column per key of " + cname + "), got " +
                               a.shape());
    opt.allowed = std::move(a);
    pc.has_allowed = true;
  }
  if (batch)
    pc.has_context = has_context;
  else
    read_learner_fields(doc, pc, t_len, has_context, s_len);
  read_rope(doc, pc, dq / pc.heads, t_len, s_len);
  opt.rope = pc.rope;
  opt.kv_heads = pc.kv_heads;
  if (j.contains("causal_alignment")) {
    const auto& a = j.at("causal_alignment");
    if (a == "upper_left")
      opt.alignment = rt::causal_alignment::upper_left;
    else if (a == "lower_right")
      opt.alignment = rt::causal_alignment::lower_right;
    else
      throw err("causal_alignment",
                "expected \"upper_left\" (query i at position i) or \"lower_right\" (query i at "
                "position i + S - T, KV-cache decoding), got " +
                    a.dump());
  }
  if (j.contains("window")) {
    const auto& wd = j.at("window");
    if (!wd.is_number_unsigned())
      throw err("window",
                "expected a whole number (0 = none; else a query at position p sees keys j with p - window < "
                "j), got " +
                    wd.dump());
    opt.window = wd.get<std::size_t>();
  }
  if (j.contains("alibi")) {
    const auto& al = j.at("alibi");
    if (!al.is_boolean()) throw err("alibi", "expected true or false, got " + al.dump());
    opt.alibi = al.get<bool>();
  }
  if (j.contains("bias")) {
    auto b = qkv::io::read_matrix_field<T>(doc, "bias", "T x S or heads*T x S numbers");
    if (!((b.rows() == t_len || b.rows() == pc.heads * t_len) && b.cols() == s_len))
      throw err("bias", "expected " + rt::shape_string(t_len, s_len) + " (T x S, every head) or " +
                            rt::shape_string(pc.heads * t_len, s_len) +
                            " (heads*T x S, head h's rows h*T ..), got " + b.shape());
    opt.bias = std::move(b);
  }
  pc.chapter_two = pc.rope || j.contains("kv_heads") || j.contains("causal_alignment") ||
                   j.contains("window") || j.contains("alibi") || j.contains("bias");
  opt.heads = pc.heads;
  opt.keep_weights = true;
}

/// everything but x and context (already read: in the batch form, x and context are sequence
/// 0's, whose shapes every sequence shares), each shape checked against x and context, with
/// messages naming the field. `batch`: the learner's fields are the batch reader's
template <class T>
void read_fields(const qkv::io::json_document& doc, parsed_case& pc, const rt::dynamic_matrix<T>& x,
                 const rt::dynamic_matrix<T>& context, bool has_context, rt::attention_weights<T>& w,
                 rt::attention_options<T>& opt, bool batch) {
  const auto& j = doc.json();
  auto err = [&](const std::string& field, const std::string& msg) {
    return input_error(doc.error(field, msg).what());
  };
  const auto& c = has_context ? context : x;
  const std::string cname = has_context ? "context" : "x";
  if (j.contains("weight_layout")) {
    const auto& l = j.at("weight_layout");
    if (l == "out_in")
      pc.layout = rt::weight_layout::out_in;
    else if (l == "in_out")
      pc.layout = rt::weight_layout::in_out;
    else
      throw err("weight_layout", "expected \"out_in\" or \"in_out\", got " + l.dump());
  }
  const bool out_in = pc.layout == rt::weight_layout::out_in;
  // one projection: its input width must be `in` (the columns of x or context)
  auto read_linear = [&](const std::string& name, const std::string& out_name, std::size_t in,
                         const std::string& in_name, rt::linear_weights<T>& l, const std::string& bias) {
    const std::string expected =
        out_in ? out_name + " x " + std::to_string(in) : std::to_string(in) + " x " + out_name;
    l.layout = pc.layout;
    l.weight = qkv::io::read_matrix_field<T>(doc, name, expected);
    if (l.in_features() != in || l.out_features() == 0)
      throw err(name, "expected " + expected + " (" +
                          (out_in ? "out_in: (out, in), its columns" : "in_out: (in, out), its rows") +
                          " must match the " + std::to_string(in) + " columns of " + in_name + "), got " +
                          l.weight.shape());
    if (j.contains(bias)) l.bias = qkv::io::read_vector<T>(doc, bias, j.at(bias), l.out_features());
  };
  read_linear("wq", "d_q", x.cols(), "x", w.q, "bq");
  const std::size_t hk = read_heads(doc, pc);  // key/value heads
  const std::size_t dq_heads = w.q.out_features() % pc.heads == 0 ? w.q.out_features() / pc.heads * hk : 0;
  const std::string kv_note = std::to_string(hk);
  read_linear("wk", std::to_string(dq_heads ? dq_heads : w.q.out_features()), c.cols(), cname, w.k, "bk");
  read_linear("wv", "d_v", c.cols(), cname, w.v, "bv");
  const std::size_t dq = w.q.out_features(), dv = w.v.out_features();
  if (dq % pc.heads != 0 || dv % hk != 0)
    throw err("heads", std::to_string(pc.heads) + " heads must divide d_q = " + std::to_string(dq) + " (wq " +
                           w.q.weight.shape() + ") and " +
                           (hk == pc.heads ? "" : std::to_string(hk) + " kv_heads ") +
                           "d_v = " + std::to_string(dv) + " (wv " + w.v.weight.shape() + ") evenly");
  if (w.k.out_features() != dq / pc.heads * hk)
    throw err("wk", "expected " + std::to_string(dq / pc.heads * hk) + " outputs, " +
                        (hk == pc.heads ? "as many as wq (" + w.q.weight.shape() + ")"
                                        : kv_note + (hk == 1 ? " key/value head" : " key/value heads") +
                                              " of d_q / heads = " + std::to_string(dq / pc.heads) +
                                              " columns (wq is " + w.q.weight.shape() + ")") +
                        ", got " + w.k.weight.shape());
  const std::size_t dcat = dv / hk * pc.heads;  // the concatenated heads
  if (j.contains("wo")) {
    rt::linear_weights<T> o;
    read_linear("wo", "d_out", dcat,
                "the concatenated heads (" + std::to_string(pc.heads) + " x d_v / " +
                    (hk == pc.heads ? "heads" : "kv_heads") + " = " + std::to_string(dcat) + ")",
                o, "bo");
    w.o = std::move(o);
  } else if (j.contains("bo")) {
    throw err("bo", "an output bias needs an output projection wo");
  }
  read_options(doc, pc, x.rows(), c.rows(), dq, cname, has_context, opt, batch);
}

/// read everything of a one-sequence case, check every shape against x and context, with
/// messages naming the field
template <class T>
void read_case(const qkv::io::json_document& doc, parsed_case& pc, rt::dynamic_matrix<T>& x,
               rt::dynamic_matrix<T>& context, bool& has_context, rt::attention_weights<T>& w,
               rt::attention_options<T>& opt) {
  auto err = [&](const std::string& field, const std::string& msg) {
    return input_error(doc.error(field, msg).what());
  };
  x = qkv::io::read_matrix_field<T>(doc, "x", "T x d, one token per row");
  if (x.rows() == 0 || x.cols() == 0)
    throw err("x", "expected at least one token and one feature, got " + x.shape());
  has_context = doc.json().contains("context");
  if (has_context) {
    context = qkv::io::read_matrix_field<T>(doc, "context", "S x d_c, one key/value token per row");
    if (context.rows() == 0 || context.cols() == 0)
      throw err("context", "expected at least one token and one feature, got " + context.shape());
  }
  read_fields(doc, pc, x, context, has_context, w, opt, false);
}

/// the top level of a case: one object, only known fields, the required ones present
inline void check_case(const qkv::io::json_document& doc) {
  if (!doc.json().is_object())
    throw input_error(doc.file() +
                      ": expected one JSON object with the fields x, wq, wk, wv, ... (docs/cli.md), got " +
                      qkv::io::detail::kind_of(doc.json()));
  for (const auto& [key, value] : doc.json().items())
    if (!known_fields().count(key))
      throw input_error(
          doc.error(
                 key,
                 "unknown field; the fields are dtype, x, context, wq, wk, wv, bq, bk, bv, "
                 "weight_layout, heads, wo, bo, scale, causal, allowed, tokens, context_tokens, key_padding, "
                 "rope, kv_heads, causal_alignment, window, alibi, bias, lengths, d_output")
              .what());
  const auto& j = doc.json();
  if (j.contains("q") || j.contains("k") ||
      j.contains("v")) {  // already projected: q, k, v, no x and no weights
    for (const char* f : {"q", "k", "v"})
      if (!j.contains(f))
        throw input_error(
            doc.error(f,
                      "missing: a case of already-projected queries, keys and values gives all three "
                      "(q, k, v), or none of them and x, wq, wk, wv")
                .what());
    for (const char* f :
         {"x", "context", "wq", "wk", "wv", "bq", "bk", "bv", "weight_layout", "wo", "bo", "lengths"})
      if (j.contains(f))
        throw input_error(
            doc.error(f,
                      "the case gives q, k, v (already projected), so it takes no x, context, weights "
                      "(wq, wk, wv, bq, bk, bv, weight_layout, wo, bo) or lengths: give either q, k, v or "
                      "x and wq, wk, wv")
                .what());
    return;
  }
  for (const char* f : {"x", "wq", "wk", "wv"})
    if (!doc.json().contains(f))
      throw input_error(
          doc.error(f, "missing (required: x, wq, wk, wv; or q, k, v already projected)").what());
}

/// @brief a case of already-projected queries, keys and values (docs/cli.md, "q, k, v"): q
/// (T, heads d_k), k (S, kv_heads d_k), v (S, kv_heads d_v), every shape checked and named, then
/// every option as read_options reads it. The keys are labelled by context_tokens when it is
/// given or S != T, else by tokens.
template <class T>
void read_projected_case(const qkv::io::json_document& doc, parsed_case& pc, rt::dynamic_matrix<T>& q,
                         rt::dynamic_matrix<T>& k, rt::dynamic_matrix<T>& v, rt::attention_options<T>& opt) {
  auto err = [&](const std::string& field, const std::string& msg) {
    return input_error(doc.error(field, msg).what());
  };
  pc.projected = true;
  q = qkv::io::read_matrix_field<T>(doc, "q", "T x heads*d_k, one query per row");
  if (q.rows() == 0 || q.cols() == 0)
    throw err("q", "expected at least one query and one column, got " + q.shape());
  const std::size_t hk = read_heads(doc, pc);
  if (q.cols() % pc.heads != 0)
    throw err("q", "expected heads x d_k columns (" + std::to_string(pc.heads) +
                       " heads side by side), got " + q.shape());
  const std::size_t dk = q.cols() / pc.heads;
  k = qkv::io::read_matrix_field<T>(doc, "k", "S x kv_heads*d_k, one key per row");
  if (k.rows() == 0 || k.cols() != hk * dk)
    throw err("k", "expected S x " + std::to_string(hk * dk) + " (at least one key; " + std::to_string(hk) +
                       (hk == pc.heads ? " heads"
                        : hk == 1      ? " key/value head (kv_heads)"
                                       : " key/value heads (kv_heads)") +
                       " of q's d_k = " + std::to_string(dk) + " columns, q is " + q.shape() + "), got " +
                       k.shape());
  v = qkv::io::read_matrix_field<T>(doc, "v", "S x kv_heads*d_v, one value per row");
  if (v.rows() != k.rows() || v.cols() == 0 || v.cols() % hk != 0)
    throw err("v", "expected " + std::to_string(k.rows()) + " rows (a value per key of k " + k.shape() +
                       ") of " + std::to_string(hk) +
                       (hk == pc.heads ? " heads"
                        : hk == 1      ? " key/value head"
                                       : " key/value heads") +
                       " x d_v columns, got " + v.shape());
  const bool keys_labelled_apart = k.rows() != q.rows() || doc.json().contains("context_tokens");
  read_options(doc, pc, q.rows(), k.rows(), q.cols(), "k", keys_labelled_apart, opt, false);
}

/// @brief every buffer the attention will make, and the outputs asked for, against the limits:
/// limit_error naming the first one too large. Called before anything of that size exists.
/// `batch`: 0 for a one-sequence case, else B, the sequences of a batch case (all of x's and c's
/// shape): every buffer is then the sum over the batch (B times one sequence's), "B x " named.
template <class T>
void check_sizes(const rt::dynamic_matrix<T>& x, const rt::dynamic_matrix<T>& c,
                 const rt::attention_weights<T>& w, std::size_t heads, const limits& lim, bool as_json,
                 bool pictures, std::uint64_t batch = 0, bool backward = false) {
  using qkv::io::checked_product;
  // with kv_heads, keys and values are narrower than the queries and the concatenated heads
  const std::uint64_t hk = w.q.out_features() == 0 ? heads : heads * w.k.out_features() / w.q.out_features();
  const std::uint64_t t = x.rows(), s = c.rows(), dq = w.q.out_features(), dk = w.k.out_features(),
                      dvv = w.v.out_features(), dv = hk == 0 ? dvv : dvv / hk * heads,
                      dout = w.o ? w.o->out_features() : dv;
  const std::uint64_t nb = batch ? batch : 1;
  const std::string bn = batch ? "B x " : "";
  auto dims = [&](std::initializer_list<std::uint64_t> d) {
    std::string r = batch ? std::to_string(batch) : "";
    for (auto v : d) r += (r.empty() ? "" : " x ") + std::to_string(v);
    return r;
  };
  const std::uint64_t q = checked_product({nb, t, dq}), k = checked_product({nb, s, dk}),
                      v = checked_product({nb, s, dvv}), hts = checked_product({nb, heads, t, s}),
                      ctx = checked_product({nb, t, dv}), out = checked_product({nb, t, dout});
  lim.check("the queries (" + bn + "T x d_q = " + dims({t, dq}) + ")", q);
  lim.check("the keys (" + bn + "S x d_k = " + dims({s, dk}) + ")", k);
  lim.check("the values (" + bn + "S x d_v = " + dims({s, dvv}) + ")", v);
  lim.check("the scores and the weights kept (each " + bn + "heads x T x S = " + dims({heads, t, s}) + ")",
            hts);
  lim.check("the context (" + bn + "T x d_v = " + dims({t, dv}) + ")", ctx);
  lim.check("the output (" + bn + "T x d_out = " + dims({t, dout}) + ")", out);
  if (as_json)
    lim.check(
        "the --json output (every tensor: mask, scaled scores, queries, keys, values, scores, weights, "
        "context, concat, output)",
        qkv::io::checked_sum({checked_product({nb, t, s}), hts, q, k, v, hts, hts, ctx, ctx, out}));
  if (backward) {  // d_weights and d_scaled_scores per head; every other gradient has a forward tensor's shape
    lim.check(
        "the backward's d_weights and d_scaled_scores (each heads x T x S = " + dims({heads, t, s}) + ")",
        hts);
    if (as_json) {
      const std::uint64_t x_size = checked_product({t, x.cols()}),
                          wsize =
                              qkv::io::checked_sum({w.q.weight.size(), w.k.weight.size(), w.v.weight.size(),
                                                    w.o ? w.o->weight.size() : 0, dq, dk, dvv, dout});
      lim.check(
          "the --json output with the gradients (every forward tensor, d_output, d_concat, d_weights, D, "
          "d_scaled_scores, d_queries, d_keys, d_values, the weights' and biases' gradients, d_x)",
          qkv::io::checked_sum(
              {checked_product({nb, t, s}), hts, q, k, v, hts,   hts,   ctx, ctx, out, out, ctx, hts,
               checked_product({heads, t}), hts, q, k, v, wsize, x_size}));
    }
  }
  // the heatmap of --svg and --html: one cell per weight
  if (pictures)
    lim.check_cells("the heatmap of the weights (heads x T x S = " + dims({heads, t, s}) + ")", hts);
}

/// the runtime's mask for head h (attention()'s steps: causal with its alignment, window,
/// allowed, key_padding, and when `scores` is set, ALiBi and the bias rows of head h)
template <class T>
rt::attention_mask head_mask(const rt::attention_options<T>& opt, std::size_t h, std::size_t t_len,
                             std::size_t s_len, bool scores) {
  return scores ? rt::detail::head_mask(opt, h, opt.heads, t_len, s_len)
                : rt::detail::options_mask(opt, t_len, s_len);
}

/// the mask as the attention applied it, (T, S): 1 where key j is masked for query i (causal,
/// aligned upper_left: j > i, lower_right: j > i + S - T; outside the window; `allowed` false;
/// key_padding true), PyTorch's boolean attn_mask convention. A -inf in `bias` masks too; it is
/// in scaled_scores, per head.
template <class T>
rt::mask_matrix effective_mask(const rt::attention_options<T>& opt, std::size_t t_len, std::size_t s_len) {
  rt::mask_matrix m(t_len, s_len, 0);
  const auto mask = head_mask(opt, 0, t_len, s_len, false);
  for (std::size_t i = 0; i < t_len; ++i)
    for (std::size_t k = 0; k < s_len; ++k)
      m(i, k) =
          rt::detail::masked_score<T>(mask, i, k, s_len, T(0)) == -std::numeric_limits<T>::infinity() ? 1 : 0;
  return m;
}

/// per head, the scores the softmax saw: scale * (q · k) as the runtime rounds it (one
/// multiplication in T), then the bias and ALiBi terms as the runtime adds them, -inf where masked
template <class T>
std::vector<rt::dynamic_matrix<T>> scaled_masked_scores(const rt::multihead_result<T>& r,
                                                        const rt::attention_options<T>& opt) {
  std::vector<rt::dynamic_matrix<T>> out;
  for (std::size_t h = 0; h < r.scores.size(); ++h) {
    const auto& raw = r.scores[h];
    const auto mask = head_mask(opt, h, raw.rows(), raw.cols(), true);
    auto& s = out.emplace_back(raw.rows(), raw.cols());
    for (std::size_t i = 0; i < raw.rows(); ++i)
      for (std::size_t k = 0; k < raw.cols(); ++k)
        s(i, k) = rt::detail::masked_score<T>(mask, i, k, raw.cols(), T(raw(i, k) * r.scale));
  }
  return out;
}

/// runtime::rope_table's cos (or sin) for `count` positions from `first`, (count, r/2): the
/// numbers apply_rope multiplies by, position p's row p - first
template <class T>
rt::dynamic_matrix<T> rope_table_matrix(const rt::rope_options& ro, std::size_t rw, std::size_t first,
                                        std::size_t count, bool cosine) {
  const rt::rope_table<T> t(ro, rw, first, count);
  rt::dynamic_matrix<T> m(count, rw / 2);
  for (std::size_t p = 0; p < count; ++p)
    for (std::size_t i = 0; i < rw / 2; ++i) m(p, i) = (cosine ? t.cos : t.sin)[p * (rw / 2) + i];
  return m;
}

/// --json's last members when the case uses them (docs/cli.md): "rope" {the rotary width, the
/// first query and key positions, cos_q, sin_q (T, r/2), cos_k, sin_k (S, r/2): the tables the
/// rotation used} and "alibi_slopes" (heads numbers in the case's type: m_h as added)
template <class T>
void json_position_terms(std::string& s, const rt::multihead_result<T>& r, std::size_t t_len,
                         std::size_t s_len, const rt::attention_options<T>& opt) {
  if (opt.rope) {
    const auto& ro = *opt.rope;
    const std::size_t dh = r.queries.cols() / opt.heads, rw = ro.rotary_dim ? ro.rotary_dim : dh,
                      kp = ro.key_position_offset.value_or(ro.position_offset);
    s += ",\n \"rope\": {\"layout\": \"";
    s += ro.layout == rt::rope_layout::half_split ? "half_split" : "interleaved";
    s += "\", \"base\": ";
    qkv::io::write_number(s, ro.base);
    s += ", \"rotary_dim\": " + std::to_string(rw) + ", \"head_dim\": " + std::to_string(dh) +
         ", \"query_positions\": [" + std::to_string(ro.position_offset) + ", " +
         std::to_string(ro.position_offset + t_len) + "], \"key_positions\": [" + std::to_string(kp) + ", " +
         std::to_string(kp + s_len) + "],\n  \"cos_q\": ";
    qkv::io::write_tensor(s, rope_table_matrix<T>(ro, rw, ro.position_offset, t_len, true));
    s += ",\n  \"sin_q\": ";
    qkv::io::write_tensor(s, rope_table_matrix<T>(ro, rw, ro.position_offset, t_len, false));
    s += ",\n  \"cos_k\": ";
    qkv::io::write_tensor(s, rope_table_matrix<T>(ro, rw, kp, s_len, true));
    s += ",\n  \"sin_k\": ";
    qkv::io::write_tensor(s, rope_table_matrix<T>(ro, rw, kp, s_len, false));
    s += "}";
  }
  if (opt.alibi) {
    std::vector<T> m;
    for (const double slope : rt::alibi_slopes(opt.heads))
      m.push_back(static_cast<T>(slope));  // as mask_scores adds it
    s += ",\n \"alibi_slopes\": ";
    qkv::io::write_tensor(s, m);
  }
}

// --- --arithmetic core (docs/cli.md): the case in the core's arithmetic -------------------------

/// the trace's third line when the case ran in the core's arithmetic
inline constexpr const char* core_arithmetic_line =
    "(in the core's arithmetic, --arithmetic core: include/qkv/core/flat_attention.hpp, one rounding per "
    "product and per sum, summed left to right, the core's exp; the arithmetic the examples prove and the "
    "editable page's WebAssembly module recomputes with)";

/// the input_error of `--arithmetic core` on a case it does not compute: the file and the field
inline input_error core_refusal(const qkv::io::json_document& doc, const std::string& field,
                                const std::string& what) {
  return input_error(
      doc.error(field, "--arithmetic core does not compute " + what +
                           " (core/flat_attention.hpp computes what the pages' WebAssembly "
                           "module does: self- or cross-attention with heads, kv_heads, biases, "
                           "wo, causal, window, allowed, key_padding, bias, alibi and rope, in "
                           "float32 or float64, 16-bit inputs in float32); run "
                           "without --arithmetic core for the runtime path")
          .what());
}

/// @brief the case as qkv::flat::attend's second form takes it (core/flat_attention.hpp's
/// attend_args), with what it points to: the runtime's mask for these options (effective_mask:
/// causal with its alignment, window, allowed, key_padding), the bias rows (every head's or one per
/// head), ALiBi's slopes as the runtime adds them (alibi_slopes(heads), each rounded to T once) and
/// its query offset (the aligned position of query i is i + offset), RoPE's cos and sin tables
/// (runtime::rope_table's, as --json's "rope" prints them). Built in place: args points into it.
template <class T>
struct core_case {
  rt::mask_matrix mask;
  std::vector<T> slopes;
  rt::dynamic_matrix<T> cos_q, sin_q, cos_k, sin_k;
  qkv::flat::attend_args<T> args;

  core_case(const rt::dynamic_matrix<T>& x, const rt::dynamic_matrix<T>& c, bool has_context,
            const rt::attention_weights<T>& w, const rt::attention_options<T>& opt, T scale)
      : mask(effective_mask(opt, x.rows(), has_context ? c.rows() : x.rows())) {
    const std::size_t t = x.rows(), s = has_context ? c.rows() : t, H = opt.heads,
                      hk = opt.kv_heads ? opt.kv_heads : H, dq = w.q.out_features(),
                      dv = w.v.out_features() / hk * H;
    auto bias = [](const std::vector<T>& b) { return b.empty() ? nullptr : b.data(); };
    auto& a = args;
    a.x = x.data(), a.t = t, a.d = x.cols();
    if (has_context) a.context = c.data(), a.s = s, a.dc = c.cols();
    a.wq = w.q.weight.data(), a.bq = bias(w.q.bias), a.wk = w.k.weight.data(), a.bk = bias(w.k.bias);
    a.wv = w.v.weight.data(), a.bv = bias(w.v.bias);
    a.wo = w.o ? w.o->weight.data() : nullptr, a.bo = w.o ? bias(w.o->bias) : nullptr;
    a.dq = dq, a.dv = dv, a.heads = H, a.kv_heads = hk == H ? 0 : hk, a.dout = w.o ? w.o->out_features() : 0;
    a.out_in = w.q.layout == rt::weight_layout::out_in;
    set_options(opt, t, s, H, dq / H, scale);
  }
  /// already-projected q (t, heads d_k), k (s, kv_heads d_k), v (s, kv_heads d_v): the second
  /// form's q, k, v (no x, no weights, no output projection), the options as above
  core_case(const rt::dynamic_matrix<T>& q, const rt::dynamic_matrix<T>& k, const rt::dynamic_matrix<T>& v,
            const rt::attention_options<T>& opt, T scale)
      : mask(effective_mask(opt, q.rows(), k.rows())) {
    const std::size_t t = q.rows(), s = k.rows(), H = opt.heads, hk = opt.kv_heads ? opt.kv_heads : H;
    auto& a = args;
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.t = t, a.s = s;
    a.dq = q.cols(), a.dv = v.cols() / hk * H, a.heads = H, a.kv_heads = hk == H ? 0 : hk;
    set_options(opt, t, s, H, q.cols() / H, scale);
  }
  core_case(const core_case&) = delete;
  core_case& operator=(const core_case&) = delete;

 private:
  // the scale, the mask, the bias, ALiBi and RoPE of the options (t queries, s keys, H heads of d_k)
  void set_options(const rt::attention_options<T>& opt, std::size_t t, std::size_t s, std::size_t H,
                   std::size_t dk, T scale) {
    auto& a = args;
    a.scale = scale;
    a.masked = mask.data();
    if (opt.bias) a.bias = opt.bias->data(), a.bias_heads = opt.bias->rows() == t ? 1 : H;
    if (opt.alibi) {
      for (const double m : rt::alibi_slopes(H)) slopes.push_back(static_cast<T>(m));  // as mask_scores
      a.slopes = slopes.data();
      a.offset = static_cast<long long>(rt::detail::options_mask(opt, t, s).offset);
    }
    if (opt.rope) {
      const auto& ro = *opt.rope;
      const std::size_t rw = ro.rotary_dim ? ro.rotary_dim : dk,
                        kp = ro.key_position_offset.value_or(ro.position_offset);
      cos_q = rope_table_matrix<T>(ro, rw, ro.position_offset, t, true);
      sin_q = rope_table_matrix<T>(ro, rw, ro.position_offset, t, false);
      cos_k = rope_table_matrix<T>(ro, rw, kp, s, true);
      sin_k = rope_table_matrix<T>(ro, rw, kp, s, false);
      a.cos_q = cos_q.data(), a.sin_q = sin_q.data(), a.cos_k = cos_k.data(), a.sin_k = sin_k.data();
      a.rotary_dim = rw, a.interleaved = ro.layout == rt::rope_layout::interleaved;
    }
  }
};

/// @brief flat::attend's output on a core_case as the runtime's result holds it (core_attention)
template <class T>
rt::multihead_result<T> core_result(const core_case<T>& cc, const rt::attention_options<T>& opt,
                                    std::vector<rt::dynamic_matrix<T>>& scaled,
                                    std::vector<T>* steps = nullptr) {
  const std::size_t t = cc.args.t, H = opt.heads, dq = cc.args.dq;
  rt::multihead_result<T> r;
  r.scale = cc.args.scale;
  const auto at = cc.args.layout();
  const std::size_t s = at.keys_rows();
  std::vector<T> out(at.size());
  if (qkv::flat::attend<T>(cc.args, out.data()) != 0)  // read_fields checked every size
    throw std::logic_error("qkv attend: qkv::flat::attend refused the sizes read_fields accepted");
  auto take = [&](std::size_t first, std::size_t rows, std::size_t cols) {
    rt::dynamic_matrix<T> m(rows, cols);
    std::copy(out.begin() + std::ptrdiff_t(first), out.begin() + std::ptrdiff_t(first + rows * cols),
              m.data());
    return m;
  };
  r.queries = take(at.queries(), t, dq);
  r.keys = take(at.keys(), s, at.dkv());
  r.values = take(at.values(), s, at.dvkv());
  scaled.clear();
  for (std::size_t h = 0; h < H; ++h) {
    r.scores.push_back(take(at.scores(h), t, s));
    scaled.push_back(take(at.scaled(h), t, s));
    r.weights.push_back(take(at.weights(h), t, s));
    r.context.push_back(take(at.context(h), t, at.dvh()));
  }
  r.concat = take(at.concat(), t, at.dv);
  r.output = at.dout ? take(at.output(), t, at.dout) : r.concat;
  if (steps) *steps = std::move(out);
  return r;
}

/// @brief attention in the core's arithmetic: qkv::flat::attend's second form (core/flat_attention.hpp)
/// on core_case (the runtime's mask, bias, ALiBi and RoPE tables for these options; grouped-query
/// heads; keys and values from the context when has_context) with the scale (the case's, else
/// 1/sqrt(d_k) with the core's correctly rounded sqrt, so the same factor as the runtime's), every
/// step as the runtime's result holds it; `scaled`: each head's scaled, masked scores (the
/// softmax's input); `steps`, when given: flat::attend's whole output (for the backward,
/// run_core_backward, and the page's projections before RoPE)
template <class T>
rt::multihead_result<T> core_attention(const rt::dynamic_matrix<T>& x, const rt::dynamic_matrix<T>& c,
                                       bool has_context, const rt::attention_weights<T>& w,
                                       const rt::attention_options<T>& opt,
                                       std::vector<rt::dynamic_matrix<T>>& scaled,
                                       std::vector<T>* steps = nullptr) {
  const std::size_t H = opt.heads, dq = w.q.out_features();
  const T scale = opt.scale ? *opt.scale : T(1) / qkv::sqrt(T(dq / H));
  const core_case<T> cc(x, c, has_context, w, opt, scale);
  return core_result(cc, opt, scaled, steps);
}

/// @brief attention of already-projected q, k, v (a q/k/v case) in the core's arithmetic:
/// qkv::flat::attend's second form with attend_args' q, k, v (core/flat_attention.hpp), the
/// options as core_attention applies them (RoPE rotates the given q and k); no output projection
/// (output is concat, as the runtime's multihead_attention gives it)
template <class T>
rt::multihead_result<T> core_projected_attention(const rt::dynamic_matrix<T>& q,
                                                 const rt::dynamic_matrix<T>& k,
                                                 const rt::dynamic_matrix<T>& v,
                                                 const rt::attention_options<T>& opt,
                                                 std::vector<rt::dynamic_matrix<T>>& scaled) {
  const T scale = opt.scale ? *opt.scale : T(1) / qkv::sqrt(T(q.cols() / opt.heads));
  const core_case<T> cc(q, k, v, opt, scale);
  return core_result(cc, opt, scaled);
}

/// the --json object (docs/cli.md); `core`: the case ran in the core's arithmetic, whose scaled
/// scores these are, and the object says so first ("arithmetic": "core")
template <class T>
std::string json_output(const rt::multihead_result<T>& r, std::size_t t_len, std::size_t s_len,
                        const rt::attention_options<T>& opt,
                        const std::vector<rt::dynamic_matrix<T>>* core = nullptr) {
  const auto mask = effective_mask(opt, t_len, s_len);
  std::string s = core ? "{\"arithmetic\": \"core\",\n \"scale\": " : "{\"scale\": ";
  qkv::io::write_number(s, r.scale);
  s += ",\n \"mask\": ";
  qkv::io::write_tensor(s, mask);
  s += ",\n \"scaled_scores\": ";
  qkv::io::write_tensor(s, core ? *core : scaled_masked_scores(r, opt), t_len, s_len);
  s += ",\n \"queries\": ";
  qkv::io::write_tensor(s, r.queries);
  s += ",\n \"keys\": ";
  qkv::io::write_tensor(s, r.keys);
  s += ",\n \"values\": ";
  qkv::io::write_tensor(s, r.values);
  s += ",\n \"scores\": ";
  qkv::io::write_tensor(s, r.scores, t_len, s_len);
  s += ",\n \"weights\": ";
  qkv::io::write_tensor(s, r.weights, t_len, s_len);
  s += ",\n \"context\": ";
  qkv::io::write_tensor(s, r.context);
  s += ",\n \"concat\": ";
  qkv::io::write_tensor(s, r.concat);
  s += ",\n \"output\": ";
  qkv::io::write_tensor(s, r.output);
  json_position_terms(s, r, t_len, s_len, opt);
  // the kernels that computed it (runtime/kernels.hpp): float runs libqkv_kernels' avx512 or avx2
  // when the tool links it, double the tool's own header-only code
  s += ",\n \"kernels\": \"";
  s += std::is_same_v<T, float> ? rt::kernels_name(rt::kernels_in_use()) : "header-only";
  return s + "\"}\n";
}

/// the step-by-step trace; `core`: the case ran in the core's arithmetic (its scaled scores), and
/// the trace says so on its third line
template <class T>
std::string trace(const parsed_case& pc, const rt::dynamic_matrix<T>& x, const rt::dynamic_matrix<T>& context,
                  bool has_context, const rt::attention_weights<T>& w, const rt::attention_options<T>& opt,
                  const rt::multihead_result<T>& r,
                  const std::vector<rt::dynamic_matrix<T>>* core = nullptr) {
  const bool out_in = pc.layout == rt::weight_layout::out_in;
  const auto& c = has_context || pc.projected ? context : x;  // projected: x is q and context k
  const std::size_t H = pc.heads, HK = pc.kv_heads ? pc.kv_heads : H, dq = r.queries.cols(),
                    dv = r.values.cols();
  std::ostringstream o;
  o << "qkv attend " << pc.file << ": "
    << (pc.half.empty() ? std::string(qkv::io::dtype_name<T>())
                        : pc.half + " inputs (each number rounded to " + pc.half +
                              ", to nearest even) with float32 arithmetic")
    << ", "
    << (pc.projected  ? "attention of the given q, k, v (already projected: no x, no weights), "
        : has_context ? "cross-attention, "
                      : "self-attention, ")
    << x.rows() << " queries over " << c.rows() << " keys, " << H << (H == 1 ? " head" : " heads")
    << " (d_q = " << dq << ", d_v = " << dv
    << (H > 1 ? ", per head " + std::to_string(dq / H) + " and " + std::to_string(dv / HK) : "")
    << (HK != H ? "; " + std::to_string(HK) + (HK == 1 ? " key/value head" : " key/value heads") +
                      " (kv_heads: grouped-query attention, query head h uses key/value head "
                      "h / " +
                      std::to_string(H / HK) + ")"
                : "")
    << ")\n"
    << "(this trace counts from 0, as --json and C++ do: head 0, query 0 and position 0 are the first)\n";
  if (core) o << core_arithmetic_line << "\n";
  o << "\n";
  if (pc.projected) {  // q, k, v given: no projections to show
    o << "Step 1: the queries, keys and values, given (already projected: no x, no weights, no Step 2)\n";
    o << "queries = q, " << r.queries.shape() << " =\n" << torch_str(r.queries) << "\n";
    if (!pc.tokens.empty()) o << "tokens (the rows of q) = " << label_list(pc.tokens) << "\n";
    o << "keys = k, " << r.keys.shape() << " =\n" << torch_str(r.keys) << "\n";
    o << "values = v, " << r.values.shape() << " =\n" << torch_str(r.values) << "\n";
    if (!pc.context_tokens.empty())
      o << "context_tokens (the rows of k and v) = " << label_list(pc.context_tokens) << "\n";
  } else {
    o << "Step 1: the inputs, one token per row\n";
    o << "x " << x.shape() << " =\n" << torch_str(x) << "\n";
    if (!pc.tokens.empty()) o << "tokens (the rows of x) = " << label_list(pc.tokens) << "\n";
    if (has_context) o << "context " << context.shape() << " =\n" << torch_str(context) << "\n";
    if (!pc.context_tokens.empty())
      o << "context_tokens (the rows of context) = " << label_list(pc.context_tokens) << "\n";
    const std::string src = has_context ? "context" : "x";
    const std::string prod = out_in ? " Wᵀ" : " W";
    o << "\nStep 2: queries, keys and values ("
      << (out_in ? "out_in: y = x Wᵀ + b, nn.Linear" : "in_out: y = x W + b") << ")\n";
    o << "queries = x" << prod << "q" << (w.q.bias.empty() ? "" : " + bq") << ", " << r.queries.shape()
      << " =\n"
      << torch_str(r.queries) << "\n";
    o << "keys = " << src << prod << "k" << (w.k.bias.empty() ? "" : " + bk") << ", " << r.keys.shape()
      << " =\n"
      << torch_str(r.keys) << "\n";
    o << "values = " << src << prod << "v" << (w.v.bias.empty() ? "" : " + bv") << ", " << r.values.shape()
      << " =\n"
      << torch_str(r.values) << "\n";
  }
  if (pc.rope) {
    const auto& ro = *pc.rope;
    const std::size_t hd = dq / H, kp = ro.key_position_offset.value_or(ro.position_offset);
    o << "rotary position embeddings (RoPE, "
      << (core ? "in the core's arithmetic: core/flat_steps.hpp's rope with runtime::rope_table's cos and sin"
               : "runtime/rope.hpp")
      << "): "
      << (ro.layout == rt::rope_layout::half_split ? "half_split (pairs i, i + r/2: LLaMA, GPT-NeoX)"
                                                   : "interleaved (pairs 2i, 2i + 1: RoFormer, GPT-J)")
      << ", base " << ro.base << ", r = " << (ro.rotary_dim ? ro.rotary_dim : hd) << " of each head's " << hd
      << " columns rotated; queries at positions " << ro.position_offset << ".."
      << ro.position_offset + x.rows() - 1 << ", keys at " << kp << ".." << kp + c.rows() - 1
      << ". The queries and keys above are the rotated ones.\n";
  }
  std::ostringstream scale;
  scale << double(r.scale);
  const std::string how = pc.scale ? (*pc.scale == 1 ? "1 (unscaled)" : scale.str())
                                   : scale.str() + " = 1/sqrt(" + std::to_string(dq / H) + ")";
  std::string mask = "none";
  if (opt.causal && pc.has_allowed)
    mask = "causal and allowed";
  else if (opt.causal)
    mask = opt.alignment == rt::causal_alignment::lower_right && x.rows() != c.rows()
               ? "causal (key j <= query i + S - T)"
               : "causal (key j <= query i)";
  else if (pc.has_allowed)
    mask = "allowed (false = -inf)";
  {  // decode's steps (runtime/attention.hpp): alignment, window, ALiBi, bias
    std::vector<std::string> more;
    if (opt.causal && opt.alignment == rt::causal_alignment::lower_right && x.rows() != c.rows())
      more.push_back("aligned lower_right (query i at position i + S - T = i + " +
                     std::to_string(static_cast<long long>(c.rows()) - static_cast<long long>(x.rows())) +
                     ")");
    if (opt.window)
      more.push_back("window " + std::to_string(opt.window) + " (keys j with p - " +
                     std::to_string(opt.window) + " < j)");
    if (opt.alibi) more.push_back("ALiBi (m_h (j - p) added, slopes of Press et al. 2022)");
    if (opt.bias) more.push_back("the case's bias added (" + opt.bias->shape() + ")");
    for (const auto& m : more) mask = mask == "none" ? m : mask + ", " + m;
  }
  if (!pc.key_padding.empty()) {
    const auto keys = key_labels(pc, c.rows());
    std::vector<std::string> padded;
    for (std::size_t k = 0; k < pc.key_padding.size(); ++k)
      if (pc.key_padding[k]) padded.push_back(keys[k]);
    const std::string kp =
        "key_padding (padded keys -inf: " + (padded.empty() ? std::string("none") : label_list(padded)) + ")";
    mask = mask == "none" ? kp : mask + " and " + kp;
  }
  std::string axes;
  if (!pc.tokens.empty() || !pc.context_tokens.empty())
    axes = "rows: queries " + label_list(query_labels(pc, x.rows())) + ", columns: keys " +
           label_list(key_labels(pc, c.rows())) + "\n";
  const auto scaled = core ? *core : scaled_masked_scores(r, opt);
  for (std::size_t h = 0; h < H; ++h) {
    const std::string head = H > 1 ? " of head " + std::to_string(h) : "";
    o << "\nStep 3: scores" << head << " = q · k (raw), " << r.scores[h].shape() << " =\n"
      << axes << torch_str(r.scores[h]) << "\n";
    o << "scaled, masked scores" << head << " = scale * scores, -inf where masked (the softmax's input) =\n"
      << axes << torch_str(scaled[h]) << "\n";
    std::vector<std::string>
        nan_rows;  // rows a NaN reached (a NaN or an infinity in the inputs): they do not sum to 1
    const auto qlabels = query_labels(pc, x.rows());
    for (std::size_t i = 0; i < r.weights[h].rows(); ++i)
      for (std::size_t k = 0; k < r.weights[h].cols(); ++k)
        if (std::isnan(r.weights[h](i, k))) {
          nan_rows.push_back(qlabels[i]);
          break;
        }
    o << "Step 4: weights" << head << " = softmax of each row of scale * scores + mask (scale " << how
      << ", mask " << mask
      << (nan_rows.size() == r.weights[h].rows()
              ? "), every row NaN (a NaN or an infinity reached the scores)"
              : "), each row sums to 1 (a row with every key masked is 0)" +
                    (nan_rows.empty() ? std::string()
                                      : " except the NaN rows " + label_list(nan_rows) +
                                            " (a NaN or an infinity reached their scores)"))
      << " =\n"
      << axes << torch_str(r.weights[h]) << "\n";
    o << "Step 5: context" << head << " = weights · values"
      << (HK != H ? " of key/value head " + std::to_string(h / (H / HK))
          : H > 1 ? " of head " + std::to_string(h)
                  : "")
      << ", " << r.context[h].shape() << " =\n"
      << torch_str(r.context[h]) << "\n";
  }
  if (H > 1)
    o << "\nStep 6: the heads side by side, concat " << r.concat.shape() << " =\n"
      << torch_str(r.concat) << "\n";
  if (w.o)
    o << "\nStep " << (H > 1 ? 7 : 6) << ": output = concat" << (out_in ? " Woᵀ" : " Wo")
      << (w.o->bias.empty() ? "" : " + bo") << ", " << r.output.shape() << " =\n"
      << torch_str(r.output) << "\n";
  else
    o << "\nOutput (no output projection: the concatenated heads), " << r.output.shape() << " =\n"
      << torch_str(r.output) << "\n";
  return o.str();
}

/// how the scale came: "1 (unscaled)", the case's value, or "1/sqrt(d_k)"
inline std::string scale_text(const parsed_case& pc, double scale, std::size_t dk) {
  std::ostringstream s;
  s << scale;
  if (pc.scale) return *pc.scale == 1 ? "1 (unscaled)" : s.str() + " (the case's scale)";
  return s.str() + " = 1/sqrt(" + std::to_string(dk) + ")";
}

/// @brief what the page and the figure show beyond the result, from the runtime's own steps:
/// the mask (effective_mask, plus a -inf of the bias in every head), the softmax's input per head
/// (scaled_masked_scores), the bias and ALiBi terms (detail::mask_scores on a score of 0, the
/// causal/window/allowed masks left out), and with rope the projections before the rotation
/// (runtime::linear, the same product attention() makes) and runtime::rope_table's cos and sin.
/// The rotated projections must be attention()'s queries and keys bit for bit: a std::logic_error
/// otherwise (never seen; tests/cli/attend_pages_test.py checks the page against --json).
template <class T>
attend_page::page_data<T> make_page_data(const rt::dynamic_matrix<T>& x, const rt::dynamic_matrix<T>& c,
                                         const rt::attention_weights<T>& w,
                                         const rt::attention_options<T>& opt,
                                         const rt::multihead_result<T>& r, std::size_t heads,
                                         const std::vector<T>* core_steps = nullptr) {
  attend_page::page_data<T> d;
  const std::size_t t_len = x.rows(), s_len = c.rows();
  d.scaled = scaled_masked_scores(r, opt);
  const auto structural = effective_mask(opt, t_len, s_len);
  const T ninf = -std::numeric_limits<T>::infinity();
  if (opt.alibi || opt.bias) {
    auto terms = opt;  // the bias and ALiBi steps alone
    terms.causal = false;
    terms.window = 0;
    terms.allowed.reset();
    terms.key_padding.reset();
    for (std::size_t h = 0; h < heads; ++h) {
      const auto m = head_mask(terms, h, t_len, s_len, true);
      auto& a = d.added.emplace_back(t_len, s_len);
      for (std::size_t i = 0; i < t_len; ++i)
        for (std::size_t k = 0; k < s_len; ++k) a(i, k) = rt::detail::masked_score<T>(m, i, k, s_len, T(0));
    }
    d.added_note = opt.bias && opt.alibi ? "bias + ALiBi" : opt.bias ? "bias" : "ALiBi";
  }
  bool any = false;
  std::vector<bool> mask(t_len * s_len, false);
  for (std::size_t i = 0; i < t_len; ++i)
    for (std::size_t k = 0; k < s_len; ++k) {
      bool all_heads = !d.added.empty();
      for (const auto& a : d.added) all_heads = all_heads && a(i, k) == ninf;
      any |= (mask[i * s_len + k] = structural(i, k) != 0 || all_heads);
    }
  if (any)
    d.mask = std::move(mask);  // nothing masked: no mask, so the figure's legend has no "masked" swatch
  std::vector<std::string> why;
  if (opt.causal)
    why.push_back(opt.alignment == rt::causal_alignment::lower_right && t_len != s_len
                      ? "the key comes after the query's position i + S - T (causal, aligned lower_right)"
                      : "the key comes after the query (causal)");
  if (opt.window)
    why.push_back("the key is outside the window of " + std::to_string(opt.window) + " positions");
  if (opt.allowed || opt.key_padding) why.push_back("the case's allowed or key_padding masks it");
  if (opt.bias) why.push_back("the case's bias is -inf here");
  for (std::size_t k = 0; k < why.size(); ++k)
    d.mask_note += (k == 0 ? "" : k + 1 == why.size() ? ", or " : ", ") + why[k];
  if (opt.rope) {
    const auto& ro = *opt.rope;
    const std::size_t dh = r.queries.cols() / heads, rw = ro.rotary_dim ? ro.rotary_dim : dh,
                      kp = ro.key_position_offset.value_or(ro.position_offset);
    if (core_steps) {  // the core's projections before RoPE: flat::attend's, kept in its steps
      const qkv::flat::steps_layout at{t_len,
                                       r.queries.cols(),
                                       r.concat.cols(),
                                       heads,
                                       w.o ? w.o->out_features() : 0,
                                       &c != &x ? s_len : 0,
                                       r.keys.cols() / (r.queries.cols() / heads),
                                       true};
      auto take = [&](std::size_t first, std::size_t rows, std::size_t cols) {
        rt::dynamic_matrix<T> m(rows, cols);
        for (std::size_t n = 0; n < rows * cols; ++n) m.data()[n] = (*core_steps)[first + n];
        return m;
      };
      d.q_linear = take(at.queries_linear(), t_len, r.queries.cols());
      d.k_linear = take(at.keys_linear(), s_len, r.keys.cols());
    } else {
      d.q_linear = rt::linear(x, w.q);
      d.k_linear = rt::linear(c, w.k);
    }
    auto q = *d.q_linear, k = *d.k_linear;
    if (core_steps) {
      q = r.queries, k = r.keys;  // the core's rotation (flat::rope), on the page as it computed it
    } else {
      rt::apply_rope<T>(q.view(), dh, ro, ro.position_offset);
      rt::apply_rope<T>(k.view(), dh, ro, kp);
    }
    auto same = [](const rt::dynamic_matrix<T>& a, const rt::dynamic_matrix<T>& b) {
      if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
      for (std::size_t e = 0; e < a.size(); ++e)
        if (std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(a.data()[e]) !=
            std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(b.data()[e]))
          return false;
      return true;
    };
    if (!same(q, r.queries) || !same(k, r.keys))
      throw std::logic_error(
          "qkv attend: the page's rotation of the projections differs from attention()'s queries or keys");
    auto table = [&](std::size_t first, std::size_t count, bool cosine) {
      return rope_table_matrix<T>(ro, rw, first, count, cosine);
    };
    d.cos_q = table(ro.position_offset, t_len, true);
    d.sin_q = table(ro.position_offset, t_len, false);
    d.cos_k = table(kp, s_len, true);
    d.sin_k = table(kp, s_len, false);
  }
  return d;
}

// --- the batch form (docs/cli.md, "A batch of sequences") ---------------------------------------
// x [B, T, d] (and context [B, S, d_c]): B sequences padded to one length, as a PyTorch batch
// (nn.MultiheadAttention(batch_first=True)); their padding as key_padding [B, S] booleans
// (key_padding_mask: true = padding, ignored) or lengths [B] (key j of sequence b is padding
// when j >= lengths[b]). The weights and every other field are read once, for every sequence.

/// the case is a batch: x is 3-d ([B, T, d]), or lengths is given
inline bool is_batch(const qkv::io::json_document& doc) {
  const auto& j = doc.json();
  if (!j.is_object() || !j.contains("x")) return false;
  if (j.contains("lengths")) return true;
  const auto& x = j.at("x");
  if (x.is_object()) return x.contains("shape") && x.at("shape").is_array() && x.at("shape").size() == 3;
  return x.is_array() && !x.empty() && x[0].is_array() && !x[0].empty() && x[0][0].is_array();
}

/// a batch case's sequences and their padding (padding: B vectors of S flags, or empty: none given)
template <class T>
struct batch_input {
  std::vector<rt::dynamic_matrix<T>> x, context;
  std::vector<std::vector<unsigned char>> padding;
};

/// field `field` as B matrices of one shape [T, d]: a sequence of another shape is refused
/// naming it, its shape and sequence 0's (a padded batch gives every sequence T rows)
template <class T>
std::vector<rt::dynamic_matrix<T>> read_sequences(const qkv::io::json_document& doc, const std::string& field,
                                                  const std::string& dims, const std::string& what) {
  auto err = [&](const std::string& f, const std::string& msg) {
    return input_error(doc.error(f, msg).what());
  };
  const auto& j = doc.json().at(field);
  if (j.is_array() && !j.empty()) {  // the shape of each sequence, before the flat reader's check
    auto shape = [](const nlohmann::json& m) -> std::vector<std::size_t> {
      if (!m.is_array()) return {};
      return {m.size(), !m.empty() && m[0].is_array() ? m[0].size() : 0};
    };
    const auto first = shape(j[0]);
    for (std::size_t b = 1; b < j.size(); ++b) {
      const auto sb = shape(j[b]);
      if (!sb.empty() && !first.empty() && sb != first)
        throw err(field + "[" + std::to_string(b) + "]",
                  "sequence " + std::to_string(b) + " is " + qkv::io::detail::shape_text(sb) +
                      " but sequence 0 is " + qkv::io::detail::shape_text(first) +
                      ": a batch gives every sequence one shape [" + dims +
                      "] (pad the shorter sequences to one length and mark the padding with lengths or "
                      "key_padding)");
    }
  }
  const auto t = qkv::io::read_tensor<T>(doc, field, j);
  if (t.shape.size() != 3)
    throw err(field, "expected a 3-d tensor [B, " + dims +
                         "] (a batch of B sequences padded to one length, " + what +
                         (doc.json().contains("lengths") ? ": lengths is given" : "") + "), got shape " +
                         qkv::io::detail::shape_text(t.shape));
  if (t.shape[0] == 0)
    throw err(field, "an empty batch (shape " + qkv::io::detail::shape_text(t.shape) +
                         "): expected at least one sequence");
  if (t.shape[1] == 0 || t.shape[2] == 0)
    throw err(field, "expected at least one token and one feature per sequence, got shape " +
                         qkv::io::detail::shape_text(t.shape));
  std::vector<rt::dynamic_matrix<T>> out;
  const std::size_t n = t.shape[1] * t.shape[2];
  for (std::size_t b = 0; b < t.shape[0]; ++b) {
    auto& m = out.emplace_back(t.shape[1], t.shape[2]);
    for (std::size_t k = 0; k < n; ++k) m.data()[k] = t.data[b * n + k];
  }
  return out;
}

/// @brief a batch case: the sequences, their padding, and every other field once (read_fields,
/// against sequence 0's shapes, which every sequence shares); fields that label or mask one
/// sequence (tokens, context_tokens, allowed) are refused
template <class T>
batch_input<T> read_batch_case(const qkv::io::json_document& doc, parsed_case& pc,
                               rt::attention_weights<T>& w, rt::attention_options<T>& opt) {
  const auto& j = doc.json();
  auto err = [&](const std::string& f, const std::string& msg) {
    return input_error(doc.error(f, msg).what());
  };
  if (j.contains("allowed"))
    throw err("allowed",
              "a batch case (x [B, T, d]) takes no T x S mask: give each sequence's padding as key_padding "
              "[B, S] or lengths [B], and a mask shared by every sequence as a bias with -Infinity");
  for (const char* f : {"tokens", "context_tokens"})
    if (j.contains(f))
      throw err(
          f,
          "labels the rows of one sequence; a batch case (x [B, T, d]) has no labels (run a sequence alone "
          "to label it)");
  batch_input<T> in;
  in.x = read_sequences<T>(doc, "x", "T, d", "one token per row");
  const bool has_context = j.contains("context");
  if (has_context) {
    in.context = read_sequences<T>(doc, "context", "S, d_c", "one key/value token per row");
    if (in.context.size() != in.x.size())
      throw err(
          "context",
          "has " + std::to_string(in.context.size()) + " sequences but x has " + std::to_string(in.x.size()) +
              ": one context per sequence (context " +
              qkv::io::detail::shape_text({in.context.size(), in.context[0].rows(), in.context[0].cols()}) +
              ", x " + qkv::io::detail::shape_text({in.x.size(), in.x[0].rows(), in.x[0].cols()}) + ")");
  }
  const std::size_t B = in.x.size(), S = has_context ? in.context[0].rows() : in.x[0].rows();
  const std::string keys = has_context ? "context" : "x";
  read_fields(doc, pc, in.x[0], has_context ? in.context[0] : in.x[0], has_context, w, opt, true);
  if (j.contains("lengths") && j.contains("key_padding"))
    throw err("lengths", "give the padding once: lengths [B] or key_padding [B, S], not both");
  if (j.contains("key_padding")) {
    const auto t = qkv::io::read_tensor<unsigned char>(doc, "key_padding", j.at("key_padding"));
    if (t.shape != std::vector<std::size_t>{B, S})
      throw err("key_padding",
                "expected [" + std::to_string(B) + ", " + std::to_string(S) +
                    "] booleans (a row per sequence, a flag per key of " + keys +
                    ": true = padding, ignored; nn.MultiheadAttention's key_padding_mask), got shape " +
                    qkv::io::detail::shape_text(t.shape));
    for (std::size_t b = 0; b < B; ++b)
      in.padding.emplace_back(t.data.begin() + b * S, t.data.begin() + (b + 1) * S);
  }
  if (j.contains("lengths")) {
    const auto& l = j.at("lengths");
    if (!l.is_array() || l.size() != B)
      throw err("lengths", "expected " + std::to_string(B) + " whole numbers, one per sequence of x " +
                               qkv::io::detail::shape_text({B, in.x[0].rows(), in.x[0].cols()}) + ", got " +
                               qkv::io::detail::kind_of(l));
    for (std::size_t b = 0; b < B; ++b) {
      if (!l[b].is_number_unsigned() || l[b].get<std::uint64_t>() > S)
        throw err("lengths[" + std::to_string(b) + "]",
                  "expected a whole number from 0 to " + std::to_string(S) + " (sequence " +
                      std::to_string(b) + "'s keys: the " + std::to_string(S) + " rows of " + keys + "[" +
                      std::to_string(b) + "]), got " + l[b].dump());
      const std::size_t n = l[b].get<std::size_t>();
      auto& f = in.padding.emplace_back(S, 0);
      for (std::size_t k = n; k < S; ++k) f[k] = 1;
    }
  }
  return in;
}

/// "[3, 4]" (indices), "none", or "every key"
inline std::string padded_list(const std::vector<unsigned char>& flags) {
  std::string s;
  std::size_t n = 0;
  for (std::size_t k = 0; k < flags.size(); ++k)
    if (flags[k]) s += (n++ ? ", " : "") + std::to_string(k);
  if (n == 0) return "none";
  return n == flags.size() ? "every key [" + s + "]" : "[" + s + "]";
}

/// @brief a batch case's outputs: runtime::batch_attention over the sequences (one set of
/// weights), then per sequence the trace and --json of that sequence alone (sequence b's result
/// is attention() of x[b] with its padding as the mask, bit for bit: runtime/batch.hpp), so a
/// sequence reads as `qkv attend` of x[b] with key_padding[b]
template <class T>
void make_batch_outputs(const qkv::io::json_document& doc, parsed_case& pc, bool as_json, const limits& lim,
                        std::vector<rt::multihead_result<T>>& results, std::string& text, std::string& json) {
  rt::attention_weights<T> w;
  rt::attention_options<T> opt;
  auto in = read_batch_case<T>(doc, pc, w, opt);
  const bool has_context = !in.context.empty();
  if constexpr (std::is_same_v<T, float>) {  // 16-bit inputs: rounded as stored, float32 arithmetic
    rt::dynamic_matrix<float> none;          // no context: x[0] is not rounded twice (it would not change)
    auto round_all = [&]<class S>() {
      round_inputs<S>(in.x[0], has_context ? in.context[0] : none, w, opt);
      for (std::size_t b = 1; b < in.x.size(); ++b) round_values<S>(in.x[b].data(), in.x[b].size());
      for (std::size_t b = 1; b < in.context.size(); ++b)
        round_values<S>(in.context[b].data(), in.context[b].size());
    };
    if (pc.half == "bfloat16")
      round_all.template operator()<rt::bfloat16>();
    else if (pc.half == "float16")
      round_all.template operator()<rt::float16>();
  }
  const std::size_t B = in.x.size(), t_len = in.x[0].rows(),
                    s_len = has_context ? in.context[0].rows() : t_len;
  try {  // summed over the batch, before the attention allocates anything
    check_sizes(in.x[0], has_context ? in.context[0] : in.x[0], w, pc.heads, lim, as_json, false, B);
  } catch (const qkv::io::limit_error& e) { throw input_error(doc.file() + ": " + e.what()); }
  std::vector<rt::batch_sequence<T>> seqs;
  for (std::size_t b = 0; b < B; ++b) {
    rt::batch_sequence<T> s{in.x[b].view()};
    if (has_context) s.context = rt::matrix_view<const T>(in.context[b].view());
    if (!in.padding.empty()) s.key_padding = in.padding[b];
    seqs.push_back(std::move(s));
  }
  rt::batch_attention<T>(std::span<const rt::batch_sequence<T>>(seqs), w, opt, results);
  std::ostringstream o;
  o << "qkv attend " << pc.file << ": a batch of " << B << (B == 1 ? " sequence" : " sequences") << ", x "
    << qkv::io::detail::shape_text({B, t_len, in.x[0].cols()})
    << (has_context ? ", context " + qkv::io::detail::shape_text({B, s_len, in.context[0].cols()}) : "")
    << " (B, T, d): one set of weights, read once, for every sequence; each sequence runs as it would alone "
       "(runtime/batch.hpp: bit for bit), its padded keys skipped (weight 0); the query rows at padded "
       "positions "
       "are computed too, as nn.MultiheadAttention computes them (PyTorch masks keys, not queries); a "
       "sequence "
       "whose every key is padded gets weights 0, context 0 and output bo (or 0), where PyTorch gives NaN\n";
  std::string js = "{\"batch\": " + std::to_string(B) + ",\n \"lengths\": [";
  for (std::size_t b = 0; b < B; ++b) {
    parsed_case pb = pc;  // sequence b as a case of its own: its padding as key_padding
    if (!in.padding.empty()) pb.key_padding = in.padding[b];
    auto ob = opt;
    apply_key_padding(pb, ob);
    std::size_t real = s_len;
    for (auto f : pb.key_padding) real -= f != 0;
    o << "\n=== sequence " << b << " of " << B << " (x[" << b << "]): length " << real << " of " << s_len
      << " keys, padded keys "
      << (in.padding.empty() ? std::string("none (no lengths or key_padding given)")
                             : padded_list(pb.key_padding))
      << (real == 0 ? ": every key padded, so weights 0, context 0, output bo (or 0)" : "") << " ===\n";
    o << trace(pb, in.x[b], has_context ? in.context[b] : in.x[b], has_context, w, ob, results[b]);
    js += (b ? ", " : "") + std::to_string(real);
    if (as_json) {
      auto one = json_output(results[b], t_len, s_len, ob);
      one.pop_back();  // its "\n"
      json += (b ? ",\n  " : "") + one;
    }
  }
  text = o.str();
  if (as_json) json = js + "],\n \"sequences\": [" + json + "]}\n";
}

/// everything a case makes, in memory: the result (a batch case: one per sequence, in `batch`;
/// `result` is then left empty), the trace, and the outputs asked for
template <class T>
struct outputs {
  rt::multihead_result<T> result;
  std::vector<rt::multihead_result<T>> batch;
  std::optional<backward_result<T>> backward;  // the case gave d_output
  std::string text, json, svg, html;           // json, svg, html: empty unless asked for
};

/// @brief a case of already-projected q, k, v (read_projected_case): runtime::multihead_attention
/// on them (no projections, no output projection), or with `in_core` (--arithmetic core)
/// qkv::flat::attend's second form on them (core_projected_attention); the trace (its Step 1 the
/// given q, k, v), the --json and the --svg heatmap as for any case; --html (a page about the
/// projections) refused
template <class T>
outputs<T> make_projected_outputs(const qkv::io::json_document& doc, parsed_case& pc, bool as_json,
                                  bool want_svg, bool want_html, const limits& lim, bool in_core = false) {
  if (want_html)
    throw input_error(doc.file() +
                      ": --html draws the page of x and its projections, and this case gives q, k, v "
                      "already projected: use --svg for the heatmap, or --json");
  rt::dynamic_matrix<T> q, k, v;
  rt::attention_options<T> opt;
  read_projected_case(doc, pc, q, k, v, opt);
  if constexpr (std::is_same_v<T, float>) {  // 16-bit inputs: rounded as stored, float32 arithmetic
    auto round_all = [&]<class S>() {
      for (auto* m : {&q, &k, &v}) round_values<S>(m->data(), m->size());
      if (opt.bias) round_values<S>(opt.bias->data(), opt.bias->size());
    };
    if (pc.half == "bfloat16")
      round_all.template operator()<rt::bfloat16>();
    else if (pc.half == "float16")
      round_all.template operator()<rt::float16>();
  }
  if (want_svg) attend_page::check_size(pc.file, "--svg", pc.heads, q.rows(), k.rows());
  try {  // check_sizes reads the widths from the weights: (out, 0) stand-ins of q's, k's and v's widths
    rt::attention_weights<T> widths;
    widths.q.weight.resize(q.cols(), 0);
    widths.k.weight.resize(k.cols(), 0);
    widths.v.weight.resize(v.cols(), 0);
    check_sizes(q, k, widths, pc.heads, lim, as_json, want_svg);
  } catch (const qkv::io::limit_error& e) { throw input_error(doc.file() + ": " + e.what()); }
  outputs<T> o;
  apply_key_padding(pc, opt);
  std::vector<rt::dynamic_matrix<T>> core_scaled;  // the core's scaled, masked scores per head
  o.result =
      in_core ? core_projected_attention(q, k, v, opt, core_scaled) : rt::multihead_attention(q, k, v, opt);
  const auto* core = in_core ? &core_scaled : nullptr;
  const auto& r = o.result;
  o.text = trace(pc, q, k, false, rt::attention_weights<T>{}, opt, r, core);
  if (as_json) o.json = json_output(r, q.rows(), k.rows(), opt, core);
  if (want_svg) {
    auto shown = opt;  // the mask and the added terms; the rotation is shown by the trace
    shown.rope.reset();
    const auto d = make_page_data(q, k, rt::attention_weights<T>{}, shown, r, pc.heads);
    o.svg = attend_page::svg(short_name(pc.file), r, d.mask, q.rows(), k.rows(), pc.tokens, pc.context_tokens,
                             pc.has_context);
  }
  return o;
}

/// @brief read the case, check every size against the limits, run the attention and make every
/// output asked for; writes nothing (the fuzz target fuzz/attend_case_fuzz.cpp calls this)
/// `how`: --arithmetic (docs/cli.md). arithmetic::core refuses, naming the field, a case the
/// core's arithmetic does not compute (a batch of sequences: core/flat_attention.hpp computes
/// every other case, as the pages' WebAssembly module does);
/// unset computes on the runtime path, except that a --html page that would be editable is
/// written in the core's arithmetic (the case is computed again in it), every output with it
template <class T>
outputs<T> make_outputs(const qkv::io::json_document& doc, parsed_case& pc, bool as_json, bool want_svg,
                        bool want_html, const limits& lim, arithmetic how = arithmetic::unset) {
  const parsed_case as_given = pc;  // before read_case fills it: for computing the case again
  if (how == arithmetic::core && is_batch(doc))
    throw core_refusal(doc, doc.json().contains("lengths") ? "lengths" : "x", "a batch of sequences");
  if (is_batch(doc)) {
    if (doc.json().contains("d_output"))
      throw input_error(doc.error("d_output",
                                  "the backward takes one sequence, and this case is a batch (x [B, T, d]): "
                                  "run a sequence alone with its d_output")
                            .what());
    if (want_svg || want_html)
      throw input_error(
          doc.file() + ": " + (want_html ? "--html" : "--svg") +
          " draws one sequence, and this case is a batch (x [B, T, d]): run a sequence alone to draw it "
          "(its x[b] as x, its padding as key_padding)");
    outputs<T> o;
    make_batch_outputs<T>(doc, pc, as_json, lim, o.batch, o.text, o.json);
    return o;
  }
  if (doc.json().contains("q"))
    return make_projected_outputs<T>(doc, pc, as_json, want_svg, want_html, lim, how == arithmetic::core);
  rt::dynamic_matrix<T> x, context;
  bool has_context = false;
  rt::attention_weights<T> w;
  rt::attention_options<T> opt;
  read_case(doc, pc, x, context, has_context, w, opt);
  if constexpr (std::is_same_v<T, float>) {  // 16-bit inputs: rounded as stored, float32 arithmetic
    if (pc.half == "bfloat16")
      round_inputs<rt::bfloat16>(x, context, w, opt);
    else if (pc.half == "float16")
      round_inputs<rt::float16>(x, context, w, opt);
  }
  std::optional<backward_result<T>> bw;
  if (doc.json().contains("d_output")) {
    bw.emplace();
    const std::size_t d_out =
        w.o ? w.o->out_features() : w.v.out_features() / (pc.kv_heads ? pc.kv_heads : pc.heads) * pc.heads;
    bw->d_output = read_d_output<T>(doc, has_context, pc.rope.has_value(), x.rows(), d_out, bw->sum);
  }
  if (want_svg || want_html)  // a page or figure: never beyond 2^24 weights (tools/attend_page.hpp)
    attend_page::check_size(pc.file, want_html ? "--html" : "--svg", pc.heads, x.rows(),
                            has_context ? context.rows() : x.rows());
  try {
    check_sizes(x, has_context ? context : x, w, pc.heads, lim, as_json, want_svg || want_html, 0,
                bw.has_value());
  } catch (const qkv::io::limit_error& e) { throw input_error(doc.file() + ": " + e.what()); }
  outputs<T> o;
  apply_key_padding(pc, opt);                      // S flags (read_learner_fields checked their number)
  std::vector<rt::dynamic_matrix<T>> core_scaled;  // the core's scaled, masked scores per head
  std::vector<T> core_steps;                       // and every step of flat::attend, for the backward
  const bool in_core = how == arithmetic::core;
  if (in_core)
    o.result = core_attention(x, context, has_context, w, opt, core_scaled, &core_steps);
  else
    o.result = rt::attention(x, has_context ? context : x, w, opt);
  const auto* core = in_core ? &core_scaled : nullptr;
  const auto& r = o.result;
  const std::size_t s_len = has_context ? context.rows() : x.rows();
  o.text = trace(pc, x, context, has_context, w, opt, r, core);
  if (as_json) o.json = json_output(r, x.rows(), s_len, opt, core);
  if (bw) {
    if (in_core)  // the core's gradients: flat::attend_backward on flat::attend's steps
      run_core_backward(x, w, pc.heads, r.scale, core_steps, *bw, pc.kv_heads);
    else
      run_backward(x, w, opt, r, *bw);
    o.text += backward_trace(
        pc.layout == rt::weight_layout::out_in, w, opt, r, *bw,
        [](const rt::dynamic_matrix<T>& m) { return torch_str(m); }, in_core);
    if (as_json) o.json.insert(o.json.size() - 2, json_gradients(*bw, w.o.has_value()));  // before "}\n"
    o.backward = std::move(bw);
  }
  if (!want_svg && !want_html) return o;
  auto d = make_page_data(x, has_context ? context : x, w, opt, r, pc.heads, in_core ? &core_steps : nullptr);
  if (in_core) d.scaled = core_scaled;
  if (o.backward) d.backward = &*o.backward;
  d.half_inputs = !pc.half.empty();
  d.half_type = pc.half;
  if (want_html) {
    // the page's arithmetic: an editable page is written in the core's, which its module
    // recomputes with (docs/pages.md, "Editing a page"); a page that would be editable but was
    // computed on the runtime path by default is computed again, in the core's arithmetic
    bool editable = false;
    o.html = attend_page::page(pc.file, o.text, x, context, has_context, w, opt, r,
                               scale_text(pc, r.scale, r.queries.cols() / pc.heads), d, pc.tokens,
                               pc.context_tokens, in_core, &editable);
    if (how == arithmetic::unset && editable) {
      pc = as_given;
      return make_outputs<T>(doc, pc, as_json, want_svg, want_html, lim, arithmetic::core);
    }
  }
  if (want_svg)  // the title names the case by its last path component, shortened (short_name)
    o.svg = attend_page::svg(short_name(pc.file), r, d.mask, x.rows(), s_len, pc.tokens, pc.context_tokens,
                             has_context);
  return o;
}

template <class T>
int run(const qkv::io::json_document& doc, parsed_case& pc, bool as_json, const std::string& svg,
        const std::string& html, const limits& lim, arithmetic how) {
  // every output made before anything is written
  const auto o = make_outputs<T>(doc, pc, as_json, !svg.empty(), !html.empty(), lim, how);
  std::vector<qkv::io::text_output> files;
  if (!svg.empty()) files.push_back({svg, o.svg});
  if (!html.empty()) files.push_back({html, o.html});
  qkv::io::write_text_files(files);  // all or none
  std::cout << (as_json ? o.json : o.text);
  if (!as_json) {  // --json: stdout is the JSON alone
    if (!svg.empty()) std::cout << wrote_line(svg, false);
    if (!html.empty()) std::cout << wrote_line(html, true);
  }
  return exit_ok;
}

/// the case file, read whole (a directory, a missing file, more bytes than the limit allows:
/// an input_error naming it)
inline qkv::io::json_document load(const std::string& path, const limits& lim) {
  return qkv::io::json_document::load(path, lim.max_case_bytes(), "--max-elements");
}

/// --svg and --html must name two different files, neither of them the case
inline void check_outputs(const std::string& path, const std::string& svg, const std::string& html) {
  namespace fs = std::filesystem;
  auto same = [](const std::string& a, const std::string& b) {
    if (a == b) return true;
    std::error_code ec;
    return fs::equivalent(a, b, ec) && !ec;
  };
  if (!svg.empty() && !html.empty() && same(svg, html))
    throw input_error("--svg and --html name the same file '" + svg + "'");
  for (const auto* o : {&svg, &html})
    if (!o->empty() && same(*o, path))
      throw input_error(std::string(o == &svg ? "--svg" : "--html") + " names the case file '" + path +
                        "' itself; it would be overwritten");
}

// The attention itself, for float and double, is compiled once, in tools/cmd_attend.cpp (the
// library qkv_commands, which the tool and fuzz/attend_case_fuzz.cpp's replay link): a file that
// includes this header does not instantiate it again.
extern template outputs<float> make_outputs<float>(const qkv::io::json_document&, parsed_case&, bool, bool,
                                                   bool, const limits&, arithmetic);
extern template outputs<double> make_outputs<double>(const qkv::io::json_document&, parsed_case&, bool, bool,
                                                     bool, const limits&, arithmetic);

}  // namespace attend_detail

/// `qkv attend CASE.json [--json] [--svg FILE] [--html FILE] [--arithmetic runtime|core] [--max-elements N]
/// [--max-cells N]`
int cmd_attend(const args& a);  // tools/cmd_attend.cpp

}  // namespace qkv::cli
