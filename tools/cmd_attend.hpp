// cmd_attend.hpp: `qkv attend CASE.json [--json] [--svg FILE] [--html FILE]`: attention on the
// runtime path for a case given as JSON, printed as a step-by-step trace or as JSON tensors.
//
// The contract is DESIGN.md's "qkv attend" and docs/cli.md. Every field is checked before any
// arithmetic; a bad one is an input_error naming the file, the field, the expected and the
// actual shape (exit 2, nothing on stdout).
//
// --svg writes the heatmap of the weights (io/svg.hpp: a panel per head, query and key indices
// on the axes); --html a self-contained page (io/html.hpp) with the trace, every matrix of up to
// 4096 elements as a table, and the heatmap. Files are written before anything is printed, so a
// file that cannot be written is an error with nothing on stdout.
#pragma once

#include <cmath>
#include <cstddef>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/io/json.hpp>
#include <qkv/io/print.hpp>
#include <qkv/runtime/multihead.hpp>

#include <qkv/io/svg.hpp>

#include "attend_page.hpp"
#include "cli.hpp"

namespace qkv::cli {

namespace attend_detail {

namespace rt = qkv::runtime;

inline const std::set<std::string>& known_fields() {
  static const std::set<std::string> f{"dtype", "x",  "context", "wq",    "wk",     "wv",      "bq",
                                       "bk",    "bv", "weight_layout", "heads", "wo", "bo", "scale",
                                       "causal", "allowed"};
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
};

/// read everything, check every shape against x and context, with messages naming the field
template <class T>
void read_case(const qkv::io::json_document& doc, parsed_case& pc, rt::dynamic_matrix<T>& x,
               rt::dynamic_matrix<T>& context, bool& has_context, rt::attention_weights<T>& w,
               rt::attention_options<T>& opt) {
  const auto& j = doc.json();
  auto err = [&](const std::string& field, const std::string& msg) { return input_error(doc.error(field, msg).what()); };
  x = qkv::io::read_matrix_field<T>(doc, "x", "T x d, one token per row");
  if (x.rows() == 0 || x.cols() == 0) throw err("x", "expected at least one token and one feature, got " + x.shape());
  has_context = j.contains("context");
  if (has_context) {
    context = qkv::io::read_matrix_field<T>(doc, "context", "S x d_c, one key/value token per row");
    if (context.rows() == 0 || context.cols() == 0)
      throw err("context", "expected at least one token and one feature, got " + context.shape());
  }
  const auto& c = has_context ? context : x;
  const std::string cname = has_context ? "context" : "x";
  if (j.contains("weight_layout")) {
    const auto& l = j.at("weight_layout");
    if (l == "out_in") pc.layout = rt::weight_layout::out_in;
    else if (l == "in_out") pc.layout = rt::weight_layout::in_out;
    else throw err("weight_layout", "expected \"out_in\" or \"in_out\", got " + l.dump());
  }
  const bool out_in = pc.layout == rt::weight_layout::out_in;
  // one projection: its input width must be `in` (the columns of x or context)
  auto read_linear = [&](const std::string& name, const std::string& out_name, std::size_t in,
                         const std::string& in_name, rt::linear_weights<T>& l, const std::string& bias) {
    const std::string expected = out_in ? out_name + " x " + std::to_string(in) : std::to_string(in) + " x " + out_name;
    l.layout = pc.layout;
    l.weight = qkv::io::read_matrix_field<T>(doc, name, expected);
    if (l.in_features() != in || l.out_features() == 0)
      throw err(name, "expected " + expected + " (" + (out_in ? "out_in: (out, in), its columns" : "in_out: (in, out), its rows") +
                          " must match the " + std::to_string(in) + " columns of " + in_name + "), got " + l.weight.shape());
    if (j.contains(bias)) l.bias = qkv::io::read_vector<T>(doc, bias, j.at(bias), l.out_features());
  };
  read_linear("wq", "d_q", x.cols(), "x", w.q, "bq");
  read_linear("wk", std::to_string(w.q.out_features()), c.cols(), cname, w.k, "bk");
  if (w.k.out_features() != w.q.out_features())
    throw err("wk", "expected " + std::to_string(w.q.out_features()) + " outputs, as many as wq (" + w.q.weight.shape() +
                        "), got " + w.k.weight.shape());
  read_linear("wv", "d_v", c.cols(), cname, w.v, "bv");
  if (j.contains("heads")) {
    const auto& h = j.at("heads");
    if (!h.is_number_unsigned() || h.get<std::size_t>() == 0)
      throw err("heads", "expected a positive whole number, got " + h.dump());
    pc.heads = h.get<std::size_t>();
  }
  const std::size_t dq = w.q.out_features(), dv = w.v.out_features();
  if (dq % pc.heads != 0 || dv % pc.heads != 0)
    throw err("heads", std::to_string(pc.heads) + " heads must divide d_q = " + std::to_string(dq) + " (wq " +
                           w.q.weight.shape() + ") and d_v = " + std::to_string(dv) + " (wv " + w.v.weight.shape() + ") evenly");
  if (j.contains("wo")) {
    rt::linear_weights<T> o;
    read_linear("wo", "d_out", dv, "the concatenated heads (d_v = " + std::to_string(dv) + ")", o, "bo");
    w.o = std::move(o);
  } else if (j.contains("bo")) {
    throw err("bo", "an output bias needs an output projection wo");
  }
  if (j.contains("scale")) {
    const auto& s = j.at("scale");
    if (!s.is_number() || !std::isfinite(s.get<double>()))
      throw err("scale", "expected a finite number, got " + s.dump());
    pc.scale = s.get<double>();
    opt.scale = T(s.get<double>());
  }
  if (j.contains("causal")) {
    const auto& cz = j.at("causal");
    if (!cz.is_boolean()) throw err("causal", "expected true or false, got " + cz.dump());
    pc.causal = opt.causal = cz.get<bool>();
  }
  if (j.contains("allowed")) {
    auto a = qkv::io::read_matrix_field<unsigned char>(doc, "allowed", "T x S booleans");
    if (a.rows() != x.rows() || a.cols() != c.rows())
      throw err("allowed", "expected " + rt::shape_string(x.rows(), c.rows()) + " (T x S: a row per query of x, a column per key of " +
                               cname + "), got " + a.shape());
    opt.allowed = std::move(a);
  }
  opt.heads = pc.heads;
  opt.keep_weights = true;
}

template <class T>
std::string json_output(const rt::attention_result<T>& r, std::size_t t_len, std::size_t s_len) {
  std::string s = "{\"queries\": ";
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
  return s + "}\n";
}

template <class T>
std::string trace(const parsed_case& pc, const rt::dynamic_matrix<T>& x, const rt::dynamic_matrix<T>& context,
                  bool has_context, const rt::attention_weights<T>& w, const rt::attention_options<T>& opt,
                  const rt::attention_result<T>& r) {
  const bool out_in = pc.layout == rt::weight_layout::out_in;
  const auto& c = has_context ? context : x;
  const std::size_t H = pc.heads, dq = r.queries.cols(), dv = r.values.cols();
  std::ostringstream o;
  o << "qkv attend " << pc.file << ": " << qkv::io::dtype_name<T>() << ", " << (has_context ? "cross" : "self")
    << "-attention, " << x.rows() << " queries over " << c.rows() << " keys, " << H << (H == 1 ? " head" : " heads")
    << " (d_q = " << dq << ", d_v = " << dv << (H > 1 ? ", per head " + std::to_string(dq / H) + " and " + std::to_string(dv / H) : "")
    << ")\n\n";
  o << "Step 1: the inputs, one token per row\n";
  o << "x " << x.shape() << " =\n" << torch_str(x) << "\n";
  if (has_context) o << "context " << context.shape() << " =\n" << torch_str(context) << "\n";
  const std::string src = has_context ? "context" : "x";
  const std::string prod = out_in ? " Wᵀ" : " W";
  o << "\nStep 2: queries, keys and values (" << (out_in ? "out_in: y = x Wᵀ + b, nn.Linear" : "in_out: y = x W + b") << ")\n";
  o << "queries = x" << prod << "q" << (w.q.bias.empty() ? "" : " + bq") << ", " << r.queries.shape() << " =\n" << torch_str(r.queries) << "\n";
  o << "keys = " << src << prod << "k" << (w.k.bias.empty() ? "" : " + bk") << ", " << r.keys.shape() << " =\n" << torch_str(r.keys) << "\n";
  o << "values = " << src << prod << "v" << (w.v.bias.empty() ? "" : " + bv") << ", " << r.values.shape() << " =\n" << torch_str(r.values) << "\n";
  std::ostringstream scale;
  scale << double(r.scale);
  const std::string how = pc.scale ? (*pc.scale == 1 ? "1 (unscaled)" : scale.str())
                                   : scale.str() + " = 1/sqrt(" + std::to_string(dq / H) + ")";
  std::string mask = "none";
  if (opt.causal && opt.allowed) mask = "causal and allowed";
  else if (opt.causal) mask = "causal (key j <= query i)";
  else if (opt.allowed) mask = "allowed (false = -inf)";
  for (std::size_t h = 0; h < H; ++h) {
    const std::string head = H > 1 ? " of head " + std::to_string(h) : "";
    o << "\nStep 3: scores" << head << " = q · k (raw), " << r.scores[h].shape() << " =\n" << torch_str(r.scores[h]) << "\n";
    o << "Step 4: weights" << head << " = softmax of each row of scale * scores + mask (scale " << how << ", mask " << mask
      << "), each row sums to 1 (a row with every key masked is 0) =\n" << torch_str(r.weights[h]) << "\n";
    o << "Step 5: context" << head << " = weights · values" << (H > 1 ? " of head " + std::to_string(h) : "") << ", "
      << r.context[h].shape() << " =\n" << torch_str(r.context[h]) << "\n";
  }
  if (H > 1) o << "\nStep 6: the heads side by side, concat " << r.concat.shape() << " =\n" << torch_str(r.concat) << "\n";
  if (w.o)
    o << "\nStep " << (H > 1 ? 7 : 6) << ": output = concat" << (out_in ? " Woᵀ" : " Wo") << (w.o->bias.empty() ? "" : " + bo")
      << ", " << r.output.shape() << " =\n" << torch_str(r.output) << "\n";
  else
    o << "\nOutput (no output projection: the concatenated heads), " << r.output.shape() << " =\n" << torch_str(r.output) << "\n";
  return o.str();
}

/// how the scale came: "1 (unscaled)", the case's value, or "1/sqrt(d_k)"
inline std::string scale_text(const parsed_case& pc, double scale, std::size_t dk) {
  std::ostringstream s;
  s << scale;
  if (pc.scale) return *pc.scale == 1 ? "1 (unscaled)" : s.str() + " (the case's scale)";
  return s.str() + " = 1/sqrt(" + std::to_string(dk) + ")";
}

template <class T>
int run(const qkv::io::json_document& doc, parsed_case& pc, bool as_json, const std::string& svg, const std::string& html) {
  rt::dynamic_matrix<T> x, context;
  bool has_context = false;
  rt::attention_weights<T> w;
  rt::attention_options<T> opt;
  read_case(doc, pc, x, context, has_context, w, opt);
  const std::size_t s_len = has_context ? context.rows() : x.rows();
  if (!svg.empty() || !html.empty())  // before anything is computed (tools/attend_page.hpp)
    attend_page::check_size(pc.file, html.empty() ? "--svg" : "--html", pc.heads, x.rows(), s_len);
  const auto r = rt::attention(x, has_context ? context : x, w, opt);
  const std::string text = trace(pc, x, context, has_context, w, opt, r);
  try {
    if (!svg.empty()) qkv::io::write_text_file(svg, attend_page::svg(pc.file, r, opt, x.rows(), s_len));
    if (!html.empty())
      qkv::io::write_text_file(html, attend_page::page(pc.file, text, x, context, has_context, w, opt, r,
                                                       scale_text(pc, r.scale, r.queries.cols() / pc.heads)));
  } catch (const std::runtime_error& e) {
    throw input_error(std::string(e.what()));
  }
  std::cout << (as_json ? json_output(r, x.rows(), s_len) : text);
  return exit_ok;
}

}  // namespace attend_detail

/// `qkv attend CASE.json [--json] [--svg FILE] [--html FILE]`
inline int cmd_attend(const args& a) {
  std::string path, svg, html;
  bool as_json = false;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k] == "--json") {
      as_json = true;
    } else if (a[k] == "--svg" || a[k] == "--html") {
      if (k + 1 >= a.size()) throw input_error(std::string(a[k]) + " needs a file name");
      (a[k] == "--svg" ? svg : html) = std::string(a[k + 1]);
      ++k;
    } else if (!a[k].empty() && a[k][0] == '-') {
      throw input_error("unknown option '" + std::string(a[k]) + "' (usage: qkv attend CASE.json [--json] [--svg FILE] [--html FILE])");
    } else if (path.empty()) {
      path = std::string(a[k]);
    } else {
      throw input_error("one case file expected, got '" + path + "' and '" + std::string(a[k]) + "'");
    }
  }
  if (path.empty()) throw input_error("usage: qkv attend CASE.json [--json] [--svg FILE] [--html FILE]");
  try {
    const auto doc = qkv::io::json_document::load(path);
    if (!doc.json().is_object())
      throw input_error(path + ": expected one JSON object with the fields x, wq, wk, wv, ... (docs/cli.md), got " +
                        qkv::io::detail::kind_of(doc.json()));
    for (const auto& [key, value] : doc.json().items())
      if (!attend_detail::known_fields().count(key))
        throw input_error(doc.error(key, "unknown field; the fields are dtype, x, context, wq, wk, wv, bq, bk, bv, "
                                         "weight_layout, heads, wo, bo, scale, causal, allowed").what());
    for (const char* f : {"x", "wq", "wk", "wv"})
      if (!doc.json().contains(f)) throw input_error(doc.error(f, "missing (required: x, wq, wk, wv)").what());
    attend_detail::parsed_case pc;
    pc.file = path;
    std::string dtype = "float32";
    if (doc.json().contains("dtype")) {
      const auto& d = doc.json().at("dtype");
      if (!d.is_string() || (d != "float32" && d != "float64"))
        throw input_error(doc.error("dtype", "expected \"float32\" or \"float64\", got " + d.dump()).what());
      dtype = d.get<std::string>();
    }
    return dtype == "float64" ? attend_detail::run<double>(doc, pc, as_json, svg, html)
                              : attend_detail::run<float>(doc, pc, as_json, svg, html);
  } catch (const qkv::io::json_error& e) {
    throw input_error(e.what());
  } catch (const qkv::runtime::shape_error& e) {
    throw input_error(path + ": " + e.what());
  }
}

}  // namespace qkv::cli
