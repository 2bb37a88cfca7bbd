// cmd_encode.hpp: `qkv encode CASE.json [--json]`: a stack of transformer encoder layers
// (nn.TransformerEncoderLayer / nn.TransformerEncoder, batch_first, dropout 0) on the runtime path.
//
// The case (docs/cli.md):
//   x       T x d_model, one token per row
//   config  {d_model, nhead, dim_feedforward, activation: "relu"|"gelu", norm_first,
//            layer_norm_eps, causal, key_padding: optional T booleans, true = padding}
//   layers  a list of objects whose keys are exactly one layer's PyTorch state_dict names
//           (self_attn.in_proj_weight, ..., norm2.bias), each a tensor in the tool's JSON format
//   dtype   optional: "float32" (default) or "float64", the arithmetic type (as qkv attend)
// Any other field is refused, as qkv attend refuses them: a misspelt optional field would
// otherwise be ignored silently. That includes `expected`, under which the fixtures of
// tests/data/encoder/ keep PyTorch's results: the tool does not compare, so it does not accept
// a field that looks as if it did.
// Output with --json: {"layers": [{"output": ...}, ...], "output": ...}; without it, a trace.
// Every field is checked before any arithmetic; a bad one is an input_error naming the file,
// the field, the expected and the actual shape (exit 2, nothing on stdout).
// Limits (docs/cli.md): each buffer a layer keeps for the trace (the heads' scores and weights,
// nhead x T x T; the feed-forward activations, T x dim_feedforward; the T x d_model ones) and the
// --json output hold at most --max-elements numbers, checked before the layers run.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/io/json.hpp>
#include <qkv/io/print.hpp>
#include <qkv/runtime/encoder.hpp>

#include "cli.hpp"
#include "cmd_attend.hpp"

namespace qkv::cli {

namespace encode_detail {

namespace rt = qkv::runtime;

/// one layer's state_dict names, in PyTorch's order
inline const std::vector<std::string>& layer_keys() {
  static const std::vector<std::string> k{"self_attn.in_proj_weight",
                                          "self_attn.in_proj_bias",
                                          "self_attn.out_proj.weight",
                                          "self_attn.out_proj.bias",
                                          "linear1.weight",
                                          "linear1.bias",
                                          "linear2.weight",
                                          "linear2.bias",
                                          "norm1.weight",
                                          "norm1.bias",
                                          "norm2.weight",
                                          "norm2.bias"};
  return k;
}

inline std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ", ") + e;
  return s;
}

/// the config object, every field checked
inline rt::encoder_options read_config(const qkv::io::json_document& doc, std::size_t tokens,
                                       std::optional<std::vector<unsigned char>>& key_padding) {
  const auto& j = doc.json().at("config");
  auto err = [&](const std::string& field, const std::string& msg) {
    return input_error(doc.error(field, msg).what());
  };
  if (!j.is_object())
    throw err("config", "expected an object {d_model, nhead, dim_feedforward, ...}, got " +
                            qkv::io::detail::kind_of(j));
  static const std::set<std::string> known{"d_model",    "nhead",          "dim_feedforward", "activation",
                                           "norm_first", "layer_norm_eps", "causal",          "key_padding"};
  for (const auto& [key, value] : j.items())
    if (!known.count(key))
      throw err("config." + key,
                "unknown field; the fields are d_model, nhead, dim_feedforward, activation, norm_first, "
                "layer_norm_eps, causal, key_padding");
  rt::encoder_options c;
  auto positive = [&](const char* name) {
    if (!j.contains(name))
      throw err(std::string("config.") + name, "missing (required: d_model, nhead, dim_feedforward)");
    const auto& v = j.at(name);
    if (!v.is_number_unsigned() || v.get<std::size_t>() == 0)
      throw err(std::string("config.") + name, "expected a positive whole number, got " + v.dump());
    return v.get<std::size_t>();
  };
  c.d_model = positive("d_model");
  c.nhead = positive("nhead");
  c.dim_feedforward = positive("dim_feedforward");
  if (c.d_model % c.nhead != 0)
    throw err("config.nhead", std::to_string(c.nhead) +
                                  " heads must divide d_model = " + std::to_string(c.d_model) + " evenly");
  if (j.contains("activation")) {
    const auto& a = j.at("activation");
    if (a == "relu")
      c.act = qkv::activation::relu;
    else if (a == "gelu")
      c.act = qkv::activation::gelu;
    else
      throw err("config.activation", "expected \"relu\" or \"gelu\", got " + a.dump());
  }
  auto flag = [&](const char* name, bool& out) {
    if (!j.contains(name)) return;
    const auto& v = j.at(name);
    if (!v.is_boolean()) throw err(std::string("config.") + name, "expected true or false, got " + v.dump());
    out = v.get<bool>();
  };
  flag("norm_first", c.norm_first);
  flag("causal", c.causal);
  if (j.contains("layer_norm_eps")) {
    const auto& e = j.at("layer_norm_eps");
    if (!e.is_number() || !(e.get<double>() >= 0) || !std::isfinite(e.get<double>()))
      throw err("config.layer_norm_eps", "expected a finite number >= 0, got " + e.dump());
    c.layer_norm_eps = e.get<double>();
  }
  if (j.contains("key_padding")) {
    const auto& k = j.at("key_padding");
    if (!k.is_array() || k.size() != tokens)
      throw err("config.key_padding", "expected " + std::to_string(tokens) +
                                          " booleans (one per token of x, true = padding), got " +
                                          qkv::io::detail::kind_of(k));
    key_padding = std::vector<unsigned char>(tokens);
    for (std::size_t t = 0; t < tokens; ++t) {
      if (!k[t].is_boolean())
        throw err("config.key_padding",
                  "element [" + std::to_string(t) + "] must be true or false, got " + k[t].dump());
      (*key_padding)[t] = k[t].get<bool>() ? 1 : 0;
    }
  }
  return c;
}

/// layers[l]: exactly the 12 state_dict names, each of the shape the config implies
template <class T>
rt::encoder_layer_parameters<T> read_layer(const qkv::io::json_document& doc, const nlohmann::json& j,
                                           std::size_t l, const rt::encoder_options& c) {
  const std::string at = "layers[" + std::to_string(l) + "]";
  if (!j.is_object())
    throw input_error(
        doc.error(at, "expected an object of state_dict tensors, got " + qkv::io::detail::kind_of(j)).what());
  for (const auto& [key, value] : j.items())
    if (std::find(layer_keys().begin(), layer_keys().end(), key) == layer_keys().end())
      throw input_error(
          doc.error(at + "." + key, "unknown name; a layer's names are " + joined(layer_keys())).what());
  for (const auto& key : layer_keys())
    if (!j.contains(key))
      throw input_error(
          doc.error(at + "." + key, "missing (a layer needs all of " + joined(layer_keys()) + ")").what());
  const std::size_t d = c.d_model, f = c.dim_feedforward;
  auto matrix = [&](const std::string& key, std::size_t rows, std::size_t cols, const std::string& what) {
    const std::string field = at + "." + key;
    auto m = qkv::io::read_matrix<T>(doc, field, j.at(key), what);
    if (m.rows() != rows || m.cols() != cols)
      throw input_error(
          doc.error(field, "expected " + what + " = " + rt::shape_string(rows, cols) + ", got " + m.shape())
              .what());
    return m;
  };
  auto vector = [&](const std::string& key, std::size_t n) {
    return qkv::io::read_vector<T>(doc, at + "." + key, j.at(key), n);
  };
  rt::encoder_layer_parameters<T> w;
  w.in_proj_weight = matrix("self_attn.in_proj_weight", 3 * d, d, "3 d_model x d_model");
  w.in_proj_bias = vector("self_attn.in_proj_bias", 3 * d);
  w.out_proj_weight = matrix("self_attn.out_proj.weight", d, d, "d_model x d_model");
  w.out_proj_bias = vector("self_attn.out_proj.bias", d);
  w.linear1_weight = matrix("linear1.weight", f, d, "dim_feedforward x d_model");
  w.linear1_bias = vector("linear1.bias", f);
  w.linear2_weight = matrix("linear2.weight", d, f, "d_model x dim_feedforward");
  w.linear2_bias = vector("linear2.bias", d);
  w.norm1_weight = vector("norm1.weight", d);
  w.norm1_bias = vector("norm1.bias", d);
  w.norm2_weight = vector("norm2.weight", d);
  w.norm2_bias = vector("norm2.bias", d);
  return w;
}

template <class T>
std::string trace(const std::string& file, const rt::encoder_options& c,
                  const std::optional<std::vector<unsigned char>>& padding, const rt::dynamic_matrix<T>& x,
                  const std::vector<rt::encoder_layer_result<T>>& traces) {
  using attend_detail::torch_str;
  std::ostringstream s;
  s << "qkv encode " << file << ": " << traces.size() << " x nn.TransformerEncoderLayer(d_model=" << c.d_model
    << ", nhead=" << c.nhead << ", dim_feedforward=" << c.dim_feedforward << ", activation=\""
    << qkv::activation_name(c.act) << "\", layer_norm_eps=" << c.layer_norm_eps
    << ", norm_first=" << (c.norm_first ? "True" : "False") << ", batch_first=True, dropout=0)\n";
  s << "masks: " << (c.causal ? "causal" : "no causal mask");
  if (padding) {
    s << ", key padding [";
    for (std::size_t t = 0; t < padding->size(); ++t)
      s << (t ? ", " : "") << ((*padding)[t] ? "True" : "False");
    s << "]";
  }
  s << "\n\nx (" << x.shape() << ")\n" << torch_str(x) << "\n";
  for (std::size_t l = 0; l < traces.size(); ++l) {
    const auto& t = traces[l];
    s << "\n== layer " << l
      << (c.norm_first ? ": h = x + sa(norm1(x)); out = h + ff(norm2(h))\n"
                       : ": h = norm1(x + sa(x)); out = norm2(h + ff(h))\n");
    if (c.norm_first) s << "norm1(x)\n" << torch_str(t.attention_input) << "\n";
    for (std::size_t h = 0; h < t.attention.weights.size(); ++h)
      s << "head " << h << " weights = softmax(q_h k_hᵀ / sqrt(" << c.d_model / c.nhead << ") + mask)\n"
        << torch_str(t.attention.weights[h]) << "\n";
    s << "sa = concat(heads) W_outᵀ + b_out\n" << torch_str(t.attention.output) << "\n";
    s << (c.norm_first ? "h = x + sa\n" : "h = norm1(x + sa)\n") << torch_str(t.hidden) << "\n";
    s << "ff = linear2(" << qkv::activation_name(c.act) << "(linear1(" << (c.norm_first ? "norm2(h)" : "h")
      << ")))\n"
      << torch_str(t.feed_forward_output) << "\n";
    s << (c.norm_first ? "output = h + ff\n" : "output = norm2(h + ff)\n") << torch_str(t.output) << "\n";
  }
  return s.str();
}

/// the top level of a case: one object, only known fields, the required ones present
inline void check_case(const qkv::io::json_document& doc) {
  if (!doc.json().is_object())
    throw input_error(doc.file() +
                      ": expected one JSON object with the fields x, config, layers (docs/cli.md), got " +
                      qkv::io::detail::kind_of(doc.json()));
  static const std::set<std::string> known{"x", "config", "layers", "dtype"};
  for (const auto& [key, value] : doc.json().items())
    if (!known.count(key))
      throw input_error(doc.error(key, "unknown field; the fields are x, config, layers, dtype").what());
  for (const char* f : {"x", "config", "layers"})
    if (!doc.json().contains(f))
      throw input_error(doc.error(f, "missing (required: x, config, layers)").what());
}

/// @brief the case's arithmetic ("dtype": "float32", the default, or "float64") and every
/// tensor's dtype tag agree, x's and each layer's (cli.hpp's check_tensor_dtypes): a float32-tagged
/// weight in a float64 case is refused naming its field, never read as another type
inline void check_encode_dtypes(const qkv::io::json_document& doc) {
  const auto& j = doc.json();
  const bool given = j.contains("dtype") && j.at("dtype").is_string();
  const std::string d = read_dtype(doc) == dtype::float64 ? "float64" : "float32";
  const std::string why =
      given ? "its \"dtype\": \"" + d + "\"" : "it has no top-level \"dtype\", and float32 is the default";
  const std::string fix = std::string("give the case \"dtype\": \"") +
                          (d == "float32" ? "float64" : "float32") +
                          "\" to compute in that type, or tag the tensor \"" + d + "\"";
  check_tensor_dtypes(doc, d, d, why, fix, "layers");
}

/// @brief the buffers each layer keeps and the --json output against the limit (limit_error
/// naming the first too large); before any layer runs
inline void check_sizes(std::uint64_t tokens, const rt::encoder_options& c, std::uint64_t layers,
                        const limits& lim, bool as_json) {
  using qkv::io::checked_product;
  const std::uint64_t t = tokens, d = c.d_model, f = c.dim_feedforward, h = c.nhead;
  const std::string td = std::to_string(t) + " x " + std::to_string(d);
  lim.check("each layer's scores and weights kept for the trace (each nhead x T x T = " + std::to_string(h) +
                " x " + std::to_string(t) + " x " + std::to_string(t) + ")",
            checked_product({h, t, t}));
  lim.check("each layer's feed-forward activations (T x dim_feedforward = " + std::to_string(t) + " x " +
                std::to_string(f) + ")",
            checked_product({t, f}));
  lim.check("each layer's queries, keys, values and outputs (each T x d_model = " + td + ")",
            checked_product({t, d}));
  if (as_json)
    lim.check("the --json output (every layer's output and the output, (layers + 1) x T x d_model = " +
                  std::to_string(layers) + " + 1 x " + td + ")",
              checked_product({layers + 1, t, d}));
}

/// the output of a case, in memory
template <class T>
struct outputs {
  rt::dynamic_matrix<T> output;
  std::string text;  // the trace, or the JSON with as_json
};

/// @brief read the case, check every size against the limit, run the layers and make the output;
/// writes nothing (the fuzz target fuzz/encode_case_fuzz.cpp calls this)
template <class T>
outputs<T> make_outputs(const qkv::io::json_document& doc, bool as_json, const limits& lim) {
  const auto x = qkv::io::read_matrix_field<T>(doc, "x", "T x d_model, one token per row");
  if (x.rows() == 0 || x.cols() == 0)
    throw input_error(doc.error("x", "expected at least one token and one feature, got " + x.shape()).what());
  std::optional<std::vector<unsigned char>> padding;
  const auto c = read_config(doc, x.rows(), padding);
  if (x.cols() != c.d_model)
    throw input_error(
        doc.error("x", "expected T x d_model = T x " + std::to_string(c.d_model) + ", got " + x.shape())
            .what());
  const auto& lj = doc.json().at("layers");
  if (!lj.is_array() || lj.empty())
    throw input_error(
        doc.error("layers", "expected a list of at least one layer, got " + qkv::io::detail::kind_of(lj))
            .what());
  try {
    check_sizes(x.rows(), c, lj.size(), lim, as_json);
  } catch (const qkv::io::limit_error& e) { throw input_error(doc.file() + ": " + e.what()); }
  std::vector<rt::encoder_layer_parameters<T>> layers;
  for (std::size_t l = 0; l < lj.size(); ++l) layers.push_back(read_layer<T>(doc, lj[l], l, c));
  rt::encoder_run_options run;
  run.key_padding = padding;
  run.keep_weights = true;  // the tool shows every step of every layer
  std::vector<rt::encoder_layer_result<T>> traces;
  outputs<T> o;
  o.output = rt::encoder(x, layers, c, run, traces);
  if (!as_json) {
    o.text = trace(doc.file(), c, padding, x, traces);
    return o;
  }
  std::string s = "{\"layers\": [";
  for (std::size_t l = 0; l < traces.size(); ++l) {
    s += l ? ", {\"output\": " : "{\"output\": ";
    qkv::io::write_tensor(s, traces[l].output);
    s += "}";
  }
  s += "], \"output\": ";
  qkv::io::write_tensor(s, o.output);
  o.text = s + "}\n";
  return o;
}

template <class T>
int run(const qkv::io::json_document& doc, bool as_json, const limits& lim) {
  std::cout << make_outputs<T>(doc, as_json, lim).text;
  return exit_ok;
}

/// the case file, read whole (a directory, a missing file, more bytes than the limit allows:
/// an error naming it; json_document::load turns every nlohmann exception at parse time, 1e400
/// included, into "FILE: not valid JSON")
inline qkv::io::json_document load(const std::string& path, const limits& lim) {
  return qkv::io::json_document::load(path, lim.max_case_bytes(), "--max-elements");
}

inline constexpr std::string_view usage = "qkv encode CASE.json [--json] [--max-elements N]";

// The layers themselves, for float and double, are compiled once, in tools/cmd_encode.cpp (the
// library qkv_commands, which the tool and fuzz/encode_case_fuzz.cpp's replay link).
extern template outputs<float> make_outputs<float>(const qkv::io::json_document&, bool, const limits&);
extern template outputs<double> make_outputs<double>(const qkv::io::json_document&, bool, const limits&);

}  // namespace encode_detail

/// `qkv encode CASE.json [--json] [--max-elements N]`
int cmd_encode(const args& a);  // tools/cmd_encode.cpp

}  // namespace qkv::cli
