// attend_page.hpp: the learner's page and the heatmap SVG of `qkv attend` (--html, --svg).
//
// The page's steps are the trace's own "Step N: ..." lines (the text `qkv attend` prints), so the
// prose has one source; each step shows its matrices with how they were computed (io/page.hpp).
// Size: a page or figure is complete up to 65,536 numbers and summarised above (io/page.hpp);
// beyond heads x T x S = 2^24 attention weights the tool refuses --html and --svg (exit 2)
// before computing anything.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/io/page.hpp>
#include <qkv/io/svg.hpp>
#include <qkv/runtime/multihead.hpp>

#include "cli.hpp"

namespace qkv::cli::attend_page {

namespace rt = qkv::runtime;

/// the most attention weights (heads x T x S) qkv computes for a page or a figure
inline constexpr std::uint64_t max_weights = std::uint64_t{1} << 24;
/// the most heatmap cells an --svg draws in full; above, each head is downsampled
inline constexpr std::uint64_t svg_full_cells = 65536;
/// a downsampled --svg head has at most this many blocks per side
inline constexpr std::size_t svg_side = 64;

/// throws input_error (exit 2) when --html / --svg would need more than max_weights weights;
/// called before the attention is computed
inline void check_size(const std::string& file, const std::string& option, std::uint64_t heads, std::uint64_t t,
                       std::uint64_t s) {
  // the product, saturating instead of wrapping around
  auto times = [](std::uint64_t a, std::uint64_t b) {
    return b != 0 && a > std::numeric_limits<std::uint64_t>::max() / b ? std::numeric_limits<std::uint64_t>::max() : a * b;
  };
  const std::uint64_t n = times(times(heads, t), s);
  if (n > max_weights)
    throw input_error(file + ": " + option + " would need " + std::to_string(heads) + " x " + std::to_string(t) + " x " +
                      std::to_string(s) + " = " + std::to_string(n) + " attention weights (heads x queries x keys), above " +
                      "the limit of " + std::to_string(max_weights) + " (2^24) for a page or figure; pages and figures are " +
                      "summarised above 65536 numbers, see docs/pages.md");
}

/// the mask of query i and key j as the runtime applies it: causal (j > i) or not allowed
template <class T>
std::vector<bool> mask_of(const rt::attention_options<T>& opt, std::size_t t, std::size_t s) {
  std::vector<bool> m;
  if (!opt.causal && !opt.allowed) return m;
  m.assign(t * s, false);
  for (std::size_t i = 0; i < t; ++i)
    for (std::size_t j = 0; j < s; ++j)
      m[i * s + j] = (opt.causal && j > i) || (opt.allowed && !(*opt.allowed)(i, j));
  return m;
}

template <class T>
std::vector<double> values_of(const rt::dynamic_matrix<T>& m) {
  return std::vector<double>(m.data(), m.data() + m.size());
}

inline std::vector<std::string> labels_or(const std::vector<std::string>& tokens, const char* prefix, std::size_t n) {
  return tokens.size() == n ? tokens : qkv::io::page::labels(prefix, n);
}

/// the learner's page of an attend case; `trace` is the text qkv attend prints (its Step lines
/// are the page's steps); tokens / context_tokens label rows and keys when given
template <class T>
std::string page(const std::string& file, const std::string& trace, const rt::dynamic_matrix<T>& x,
                 const rt::dynamic_matrix<T>& context, bool has_context, const rt::attention_weights<T>& w,
                 const rt::attention_options<T>& opt, const rt::attention_result<T>& r, const std::string& scale_text,
                 const std::vector<std::string>& tokens = {}, const std::vector<std::string>& context_tokens = {}) {
  using how = qkv::io::page_how;
  const std::size_t t_len = x.rows(), s_len = has_context ? context.rows() : x.rows(), H = r.weights.size();
  const std::size_t dq = r.queries.cols(), dv = r.values.cols(), dk = dq / H, dvh = dv / H;
  const bool out_in = w.q.layout == rt::weight_layout::out_in;
  const auto qrow = labels_or(tokens, "q", t_len);
  const auto krow = labels_or(has_context ? context_tokens : tokens, "k", s_len);
  const std::string dtype = sizeof(T) == 4 ? "float32" : "float64";

  qkv::io::page p("qkv attend " + file);
  std::string intro;
  {
    std::istringstream in(trace);
    std::getline(in, intro);
  }
  p.intro(intro);
  auto add = [&](const std::string& id, const rt::dynamic_matrix<T>& m) {
    return p.matrix(id, m.rows(), m.cols(), values_of(m)).dtype(dtype);
  };
  // a projection y = x W^T + b (out_in) or x W + b (in_out): the weights and bias as data
  auto projection = [&](const std::string& id, const rt::dynamic_matrix<T>& y, const std::string& src,
                        const rt::linear_weights<T>& l, const std::string& wname, const std::string& bname,
                        const std::vector<std::string>& rows) {
    if (!l.bias.empty())
      p.matrix(bname, 1, l.bias.size(), std::vector<double>(l.bias.begin(), l.bias.end())).dtype(dtype).hidden();
    const std::size_t in = l.in_features();
    auto ref = add(id, y).rows(rows);
    ref.how(out_in ? how::dot(src, wname, in, 0, 0, l.bias.empty() ? "" : bname)
                   : how::matmul(src, wname, in, 0, 0, 0, l.bias.empty() ? "" : bname));
  };
  std::istringstream in(trace);
  std::string line;
  std::vector<bool> mask = mask_of(opt, t_len, s_len);
  std::string mask_note;
  if (opt.causal && opt.allowed) mask_note = "the key comes after the query (causal), or the case's allowed is false";
  else if (opt.causal) mask_note = "the key comes after the query (causal)";
  else if (opt.allowed) mask_note = "the case's allowed is false here";
  std::vector<std::string> weight_ids;
  while (std::getline(in, line)) {
    if (line.rfind("Step ", 0) != 0 && line.rfind("Output", 0) != 0) continue;
    std::string title = line;
    while (!title.empty() && (title.back() == '=' || title.back() == ' ')) title.pop_back();
    const int n = line.rfind("Step ", 0) == 0 ? std::atoi(line.c_str() + 5) : 0;
    std::size_t h = 0;
    if (const auto at = line.find("of head "); at != std::string::npos) h = std::strtoul(line.c_str() + at + 8, nullptr, 10);
    const std::string hs = H > 1 ? "[" + std::to_string(h) + "]" : "";
    p.step(title);
    if (n == 1) {
      add("x", x).rows(qrow);
      if (has_context) add("context", context).rows(krow);
    } else if (n == 2) {
      const std::string src = has_context ? "context" : "x";
      add("wq", w.q.weight);
      add("wk", w.k.weight);
      add("wv", w.v.weight);
      projection("queries", r.queries, "x", w.q, "wq", "bq", qrow);
      projection("keys", r.keys, src, w.k, "wk", "bk", krow);
      projection("values", r.values, src, w.v, "wv", "bv", krow);
    } else if (n == 3) {
      add("scores" + hs, r.scores[h]).rows(qrow).cols(krow).how(how::dot("queries", "keys", dk, h * dk, h * dk));
    } else if (n == 4) {
      rt::dynamic_matrix<T> scaled(t_len, s_len);
      for (std::size_t i = 0; i < t_len; ++i)
        for (std::size_t j = 0; j < s_len; ++j)
          scaled(i, j) = !mask.empty() && mask[i * s_len + j] ? -std::numeric_limits<T>::infinity()
                                                              : T(r.scale * r.scores[h](i, j));
      add("scaled" + hs, scaled).rows(qrow).cols(krow).caption("scaled, masked scores" + hs)
          .how(how::scaled("scores" + hs, double(r.scale), scale_text, mask_note));
      add("weights" + hs, r.weights[h]).rows(qrow).cols(krow).how(how::softmax("scaled" + hs));
      weight_ids.push_back("weights" + hs);
      if (h + 1 == H) {
        std::vector<std::string> names;
        for (std::size_t k = 0; k < H; ++k) names.push_back("head " + std::to_string(k));
        p.heatmap("attention weights" + std::string(H > 1 ? " per head" : "") + " (rows: queries, columns: keys)",
                  weight_ids, names);
        if (!mask.empty()) p.heatmap_mask(mask);
      }
    } else if (n == 5) {
      add("context" + hs, r.context[h]).rows(qrow).caption("context" + hs)
          .how(how::matmul("weights" + hs, "values", s_len, 0, 0, h * dvh));
    } else if (n == 6 && H > 1) {
      add("concat", r.concat).rows(qrow);
    } else if (w.o) {  // the output projection (Step 6 or 7)
      add("wo", w.o->weight);
      projection("output", r.output, H > 1 ? "concat" : "context", *w.o, "wo", "bo", qrow);
    } else {
      p.text("No output projection: the output is the concatenated heads.");
    }
  }
  // the heatmap of a head must be after its weights; with more than one head, the steps of
  // head 0 come first and the heatmap (all heads) after the last head's step 4
  return p.str();
}

/// the --svg heatmap: every head as a panel, masked entries hatched; above svg_full_cells
/// cells in all, each head downsampled to at most svg_side x svg_side blocks (their mean), and
/// the title says so
template <class T>
std::string svg(const std::string& file, const rt::attention_result<T>& r, const rt::attention_options<T>& opt,
                std::size_t t_len, std::size_t s_len, const std::vector<std::string>& tokens = {},
                const std::vector<std::string>& context_tokens = {}, bool has_context = false) {
  const std::size_t H = r.weights.size();
  auto rows = labels_or(tokens, "q", t_len);
  auto cols = labels_or(has_context ? context_tokens : tokens, "k", s_len);
  auto mask = mask_of(opt, t_len, s_len);
  qkv::io::heatmap_options o;
  o.title = "attention weights, " + file;
  o.id = "qkv";
  std::size_t fr = 1, fc = 1;
  if (std::uint64_t{H} * t_len * s_len > svg_full_cells) {
    fr = (t_len + svg_side - 1) / svg_side;
    fc = (s_len + svg_side - 1) / svg_side;
  }
  const std::size_t br = (t_len + fr - 1) / fr, bc = (s_len + fc - 1) / fc;
  std::vector<qkv::io::heatmap_panel> panels;
  for (std::size_t h = 0; h < H; ++h) {
    qkv::io::heatmap_panel p{"head " + std::to_string(h), br, bc, std::vector<double>(br * bc, 0.0)};
    for (std::size_t bi = 0; bi < br; ++bi)
      for (std::size_t bj = 0; bj < bc; ++bj) {
        double sum = 0;
        std::size_t n = 0;
        for (std::size_t i = bi * fr; i < std::min(t_len, (bi + 1) * fr); ++i)
          for (std::size_t j = bj * fc; j < std::min(s_len, (bj + 1) * fc); ++j, ++n) sum += double(r.weights[h](i, j));
        p.values[bi * bc + bj] = sum / double(n);
      }
    panels.push_back(std::move(p));
  }
  if (fr > 1 || fc > 1) {
    auto block = [](const std::vector<std::string>& l, std::size_t n, std::size_t f, std::size_t count) {
      std::vector<std::string> out;
      for (std::size_t b = 0; b < count; ++b) {
        const std::size_t lo = b * f, hi = std::min(n, (b + 1) * f) - 1;
        out.push_back(lo == hi ? l[lo] : l[lo] + "\u2013" + l[hi]);
      }
      return out;
    };
    rows = block(rows, t_len, fr, br);
    cols = block(cols, s_len, fc, bc);
    o.title += " (downsampled: each cell the mean of " + std::to_string(fr) + " x " + std::to_string(fc) + " weights)";
    o.cell = 10;
    if (!mask.empty()) {  // a block is hatched when every entry in it is masked
      std::vector<bool> m(br * bc, true);
      for (std::size_t i = 0; i < t_len; ++i)
        for (std::size_t j = 0; j < s_len; ++j)
          if (!mask[i * s_len + j]) m[(i / fr) * bc + j / fc] = false;
      mask = std::move(m);
    }
  }
  o.masked = std::move(mask);
  return qkv::io::heatmap_svg(rows, cols, panels, o);
}

}  // namespace qkv::cli::attend_page
