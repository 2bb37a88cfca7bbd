// cmd_attend.hpp: `qkv attend CASE.json [--json] [--svg FILE] [--html FILE]`: attention on the
// runtime path for a case given as JSON, printed as a step-by-step trace or as JSON tensors.
//
// The contract is DESIGN.md's "qkv attend" and docs/cli.md. Every field is checked before any
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

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/io/file.hpp>
#include <qkv/io/json.hpp>
#include <qkv/io/limit.hpp>
#include <qkv/io/print.hpp>
#include <qkv/runtime/multihead.hpp>

#include <qkv/io/html.hpp>
#include <qkv/io/svg.hpp>

#include "cli.hpp"

namespace qkv::cli {

namespace attend_detail {

namespace rt = qkv::runtime;

inline constexpr std::string_view usage =
    "qkv attend CASE.json [--json] [--svg FILE] [--html FILE] [--max-elements N] [--max-cells N]";

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

/// the top level of a case: one object, only known fields, the required ones present
inline void check_case(const qkv::io::json_document& doc) {
  if (!doc.json().is_object())
    throw input_error(doc.file() + ": expected one JSON object with the fields x, wq, wk, wv, ... (docs/cli.md), got " +
                      qkv::io::detail::kind_of(doc.json()));
  for (const auto& [key, value] : doc.json().items())
    if (!known_fields().count(key))
      throw input_error(doc.error(key, "unknown field; the fields are dtype, x, context, wq, wk, wv, bq, bk, bv, "
                                       "weight_layout, heads, wo, bo, scale, causal, allowed").what());
  for (const char* f : {"x", "wq", "wk", "wv"})
    if (!doc.json().contains(f)) throw input_error(doc.error(f, "missing (required: x, wq, wk, wv)").what());
}

/// @brief every buffer the attention will make, and the outputs asked for, against the limits:
/// limit_error naming the first one too large. Called before anything of that size exists.
template <class T>
void check_sizes(const rt::dynamic_matrix<T>& x, const rt::dynamic_matrix<T>& c, const rt::attention_weights<T>& w,
                 std::size_t heads, const limits& lim, bool as_json, bool pictures) {
  using qkv::io::checked_product;
  const std::uint64_t t = x.rows(), s = c.rows(), dq = w.q.out_features(), dv = w.v.out_features(),
                      dout = w.o ? w.o->out_features() : dv;
  auto dims = [](std::initializer_list<std::uint64_t> d) {
    std::string r;
    for (auto v : d) r += (r.empty() ? "" : " x ") + std::to_string(v);
    return r;
  };
  const std::uint64_t q = checked_product({t, dq}), k = checked_product({s, dq}), v = checked_product({s, dv}),
                      hts = checked_product({heads, t, s}), ctx = checked_product({t, dv}), out = checked_product({t, dout});
  lim.check("the queries (T x d_q = " + dims({t, dq}) + ")", q);
  lim.check("the keys (S x d_q = " + dims({s, dq}) + ")", k);
  lim.check("the values (S x d_v = " + dims({s, dv}) + ")", v);
  lim.check("the scores and the weights kept (each heads x T x S = " + dims({heads, t, s}) + ")", hts);
  lim.check("the context (T x d_v = " + dims({t, dv}) + ")", ctx);
  lim.check("the output (T x d_out = " + dims({t, dout}) + ")", out);
  if (as_json)
    lim.check("the --json output (every tensor: queries, keys, values, scores, weights, context, concat, output)",
              qkv::io::checked_sum({q, k, v, hts, hts, ctx, ctx, out}));
  // the heatmap of --svg and --html: one cell per weight
  if (pictures) lim.check_cells("the heatmap of the weights (heads x T x S = " + dims({heads, t, s}) + ")", hts);
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

/// the weights as (heads, T, S) nested vectors, and index labels "0", "1", ...
template <class T>
std::vector<std::vector<std::vector<double>>> weights_3d(const rt::attention_result<T>& r) {
  std::vector<std::vector<std::vector<double>>> w;
  for (const auto& m : r.weights) {
    auto& head = w.emplace_back();
    for (std::size_t i = 0; i < m.rows(); ++i) head.emplace_back(m.row(i), m.row(i) + m.cols());
  }
  return w;
}

inline std::vector<std::string> index_labels(std::size_t n) {
  std::vector<std::string> l;
  for (std::size_t i = 0; i < n; ++i) l.push_back(std::to_string(i));
  return l;
}

template <class T>
std::string heatmap(const parsed_case& pc, const rt::attention_result<T>& r, std::size_t t_len, std::size_t s_len,
                    const std::string& id) {
  qkv::io::heatmap_options o;
  o.title = "attention weights, " + pc.file;
  o.id = id;
  return qkv::io::attention_svg(index_labels(t_len), index_labels(s_len), weights_3d(r), o);
}

template <class T>
std::string html_page(const parsed_case& pc, const rt::dynamic_matrix<T>& x, const rt::dynamic_matrix<T>& context,
                      bool has_context, const rt::attention_result<T>& r, const std::string& text) {
  const std::size_t t_len = x.rows(), s_len = has_context ? context.rows() : x.rows();
  qkv::io::html_page page("qkv attend " + pc.file);
  auto table = [&](const std::string& name, const rt::dynamic_matrix<T>& m) {
    if (m.size() > 4096) {
      page.paragraph(name + " (" + m.shape() + "): too large for a table, see the trace above");
      return;
    }
    std::vector<double> v(m.data(), m.data() + m.size());
    page.matrix(name, m.rows(), m.cols(), v);
  };
  page.heading("The walkthrough").preformatted(text);
  page.heading("The weights").svg(heatmap(pc, r, t_len, s_len, "qkv_attend"));
  page.heading("Every matrix");
  table("x", x);
  if (has_context) table("context", context);
  table("queries", r.queries);
  table("keys", r.keys);
  table("values", r.values);
  for (std::size_t h = 0; h < r.weights.size(); ++h) {
    const std::string head = r.weights.size() > 1 ? " (head " + std::to_string(h) + ")" : "";
    table("scores" + head, r.scores[h]);
    table("weights" + head, r.weights[h]);
    table("context" + head, r.context[h]);
  }
  table("concat", r.concat);
  table("output", r.output);
  return page.str();
}

/// everything a case makes, in memory: the result, the trace, and the outputs asked for
template <class T>
struct outputs {
  rt::attention_result<T> result;
  std::string text, json, svg, html;  // json, svg, html: empty unless asked for
};

/// @brief read the case, check every size against the limits, run the attention and make every
/// output asked for; writes nothing (the fuzz target fuzz/attend_case_fuzz.cpp calls this)
template <class T>
outputs<T> make_outputs(const qkv::io::json_document& doc, parsed_case& pc, bool as_json, bool want_svg, bool want_html,
                        const limits& lim) {
  rt::dynamic_matrix<T> x, context;
  bool has_context = false;
  rt::attention_weights<T> w;
  rt::attention_options<T> opt;
  read_case(doc, pc, x, context, has_context, w, opt);
  try {
    check_sizes(x, has_context ? context : x, w, pc.heads, lim, as_json, want_svg || want_html);
  } catch (const qkv::io::limit_error& e) {
    throw input_error(doc.file() + ": " + e.what());
  }
  outputs<T> o;
  o.result = rt::attention(x, has_context ? context : x, w, opt);
  const auto& r = o.result;
  const std::size_t s_len = has_context ? context.rows() : x.rows();
  o.text = trace(pc, x, context, has_context, w, opt, r);
  if (as_json) o.json = json_output(r, x.rows(), s_len);
  if (want_svg) o.svg = heatmap(pc, r, x.rows(), s_len, "qkv");
  if (want_html) o.html = html_page(pc, x, context, has_context, r, o.text);
  return o;
}

template <class T>
int run(const qkv::io::json_document& doc, parsed_case& pc, bool as_json, const std::string& svg, const std::string& html,
        const limits& lim) {
  // every output made before anything is written
  const auto o = make_outputs<T>(doc, pc, as_json, !svg.empty(), !html.empty(), lim);
  std::vector<qkv::io::text_output> files;
  if (!svg.empty()) files.push_back({svg, o.svg});
  if (!html.empty()) files.push_back({html, o.html});
  qkv::io::write_text_files(files);  // all or none
  std::cout << (as_json ? o.json : o.text);
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

}  // namespace attend_detail

/// `qkv attend CASE.json [--json] [--svg FILE] [--html FILE] [--max-elements N] [--max-cells N]`
inline int cmd_attend(const args& a) {
  std::string path, svg, html;
  bool as_json = false;
  limits lim;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (parse_limit_option(a, k, lim)) {
      continue;
    } else if (a[k] == "--json") {
      as_json = true;
    } else if (a[k] == "--svg" || a[k] == "--html") {
      if (k + 1 >= a.size()) throw input_error(std::string(a[k]) + " needs a file name");
      (a[k] == "--svg" ? svg : html) = std::string(a[k + 1]);
      ++k;
    } else if (!a[k].empty() && a[k][0] == '-') {
      throw input_error("unknown option '" + std::string(a[k]) + "' (usage: " + std::string(attend_detail::usage) + ")");
    } else if (path.empty()) {
      path = std::string(a[k]);
    } else {
      throw input_error("one case file expected, got '" + path + "' and '" + std::string(a[k]) + "'");
    }
  }
  if (path.empty()) throw input_error("usage: " + std::string(attend_detail::usage));
  attend_detail::check_outputs(path, svg, html);
  try {
    const auto doc = attend_detail::load(path, lim);
    attend_detail::check_case(doc);
    attend_detail::parsed_case pc;
    pc.file = path;
    return read_dtype(doc) == dtype::float64 ? attend_detail::run<double>(doc, pc, as_json, svg, html, lim)
                                             : attend_detail::run<float>(doc, pc, as_json, svg, html, lim);
  } catch (const qkv::io::json_error& e) {
    throw input_error(e.what());
  } catch (const qkv::runtime::shape_error& e) {
    throw input_error(path + ": " + e.what());
  }
}

}  // namespace qkv::cli
