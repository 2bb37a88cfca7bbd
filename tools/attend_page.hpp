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
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <qkv/io/page.hpp>
#include <qkv/io/svg.hpp>
#include <qkv/runtime/multihead.hpp>

#include "attend_backward.hpp"
#include "cli.hpp"
#include "page_attend_wasm.hpp"

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
inline void check_size(const std::string& file, const std::string& option, std::uint64_t heads,
                       std::uint64_t t, std::uint64_t s) {
  // the product, saturating instead of wrapping around
  auto times = [](std::uint64_t a, std::uint64_t b) {
    return b != 0 && a > std::numeric_limits<std::uint64_t>::max() / b
               ? std::numeric_limits<std::uint64_t>::max()
               : a * b;
  };
  const std::uint64_t n = times(times(heads, t), s);
  if (n > max_weights)
    throw input_error(file + ": " + option + " would need " + std::to_string(heads) + " x " +
                      std::to_string(t) + " x " + std::to_string(s) + " = " + std::to_string(n) +
                      " attention weights (heads x queries x keys), above " + "the limit of " +
                      std::to_string(max_weights) + " (2^24) for a page or figure; pages and figures are " +
                      "summarised above 65536 numbers, see docs/pages.md");
}

/// @brief what the runtime applied and computed beyond multihead_result, for the page and the
/// figure (cmd_attend.hpp fills it from the runtime's own mask step, detail::mask_scores):
/// - mask: (T x S, row-major; empty: no mask) true where key j is masked for query i in every
///   head (causal with its alignment, window, allowed, key_padding, a -inf of a bias every head shares);
/// - mask_note: why a key may be masked, in words;
/// - scaled: per head, the softmax's input as the runtime computed it (scale * score rounded,
///   the bias and ALiBi added, -inf where masked);
/// - added: per head, the bias and ALiBi terms as the runtime adds them to a score of 0 (empty
///   when the case has neither); added_note says what they are;
/// - q_linear, k_linear: the projections before the rotary embeddings (when rope is set);
///   cos_q, sin_q, cos_k, sin_k: runtime::rope_table's cos and sin per position and pair
template <class T>
struct page_data {
  std::vector<bool> mask;
  std::string mask_note;
  std::vector<rt::dynamic_matrix<T>> scaled, added;
  std::string added_note;
  std::optional<rt::dynamic_matrix<T>> q_linear, k_linear, cos_q, sin_q, cos_k, sin_k;
  const attend_detail::backward_result<T>* backward = nullptr;  // the case's d_output's gradients (or none)
  bool half_inputs = false;  // the case's numbers are bfloat16 or float16 (float32 arithmetic)
  std::string half_type;     // "bfloat16" or "float16": what the page rounds a typed number to
};

/// where query 0 sits among the keys (causal_alignment lower_right with S != T: S - T), as the
/// runtime resolves the mask: the position ALiBi measures from and causal and window align to
template <class T>
long long resolved_offset(const rt::attention_options<T>& opt, std::size_t t_len, std::size_t s_len) {
  return static_cast<long long>(rt::detail::options_mask(opt, t_len, s_len).offset);
}

template <class T>
std::vector<double> values_of(const rt::dynamic_matrix<T>& m) {
  return std::vector<double>(m.data(), m.data() + m.size());
}

inline std::vector<std::string> labels_or(const std::vector<std::string>& tokens, const char* prefix,
                                          std::size_t n) {
  return tokens.size() == n ? tokens : qkv::io::page::labels(prefix, n);
}

/// a matrix's transpose, hidden (an operand of the gradients' products)
template <class T>
void hidden_transpose(qkv::io::page& p, const std::string& id, const rt::dynamic_matrix<T>& m,
                      const std::string& dtype) {
  rt::dynamic_matrix<T> t(m.cols(), m.rows());
  for (std::size_t i = 0; i < m.rows(); ++i)
    for (std::size_t j = 0; j < m.cols(); ++j) t(j, i) = m(i, j);
  p.matrix(id + "\u1d40", t.rows(), t.cols(), values_of(t))
      .dtype(dtype)
      .hidden()
      .how(qkv::io::page_how::transposed(id));
}

/// @brief where the editor finds the numbers of one page matrix of the backward after an edit
/// (docs/pages.md, "Gradients on a page"): its blocks, each [source, start, row stride, column
/// stride, first row, first column, rows, columns]; the source is "#g" (the module's gradients,
/// qkv::flat::gradients_layout), "#f" (its forward steps, qkv::flat::steps_layout) or an input
/// matrix of the page (x, a weight, d_output); cell (r, c) of a block is source[start + r row
/// stride + c column stride]. One view as the edit object's JSON: ["id", [[block], ...]]
struct grad_view {
  struct block {
    std::string src;
    std::size_t start, rs, cs, i0, j0, rows, cols;
  };
  std::string id;
  std::vector<block> blocks;
};

/// the views as a JSON array (edit_spec's "grad_outputs")
inline std::string grad_views_json(const std::vector<grad_view>& views) {
  namespace pd = qkv::io::page_detail;
  std::string s = "[";
  for (const auto& v : views) {
    if (s.size() > 1) s += ",";
    s += "[";
    pd::json_string(s, v.id);
    s += ",[";
    for (std::size_t k = 0; k < v.blocks.size(); ++k) {
      const auto& b = v.blocks[k];
      if (k) s += ",";
      s += "[";
      pd::json_string(s, b.src);
      for (std::size_t n : {b.start, b.rs, b.cs, b.i0, b.j0, b.rows, b.cols}) s += "," + std::to_string(n);
      s += "]";
    }
    s += "]]";
  }
  return s + "]";
}

/// @brief the backward's steps on the page (docs/pages.md, "Gradients"): every gradient as a
/// table whose cells explain themselves from the page's own numbers, as the forward's do: a
/// product's terms (MmBackward0), D's row dot, dS = P × (dP − D) (SoftmaxBackward0), the scale.
/// `core`: the gradients are the core's (qkv::flat::attend_backward; its D is rowsum(dP ∘ P));
/// `views`, when given: where the page's editor finds each gradient matrix (and each hidden
/// operand) after an edit (grad_view)
template <class T>
void backward_steps(qkv::io::page& p, const rt::dynamic_matrix<T>& x, const rt::attention_weights<T>& w,
                    const rt::multihead_result<T>& r, const attend_detail::backward_result<T>& bw,
                    const std::string& scale_text, const std::string& mask_note,
                    const std::vector<std::string>& qrow, const std::vector<std::string>& krow,
                    const std::string& dtype, bool core = false, std::vector<grad_view>* views = nullptr) {
  using how = qkv::io::page_how;
  const auto& g = bw.g;
  const std::size_t t_len = x.rows(), s_len = t_len, H = r.weights.size(),
                    HK = r.values.cols() * H / r.concat.cols();
  const std::size_t group = H / HK, dq = r.queries.cols(), dk = dq / H, dvh = r.concat.cols() / H;
  const bool out_in = w.q.layout == rt::weight_layout::out_in;
  const std::size_t dv = r.concat.cols(), dm = x.cols(), dout = w.o ? w.o->out_features() : 0;
  const qkv::flat::gradients_layout ga{t_len, dm, dq, dv, H, dout, HK == H ? 0 : HK};
  const qkv::flat::steps_layout fa{t_len, dq, dv, H, dout, 0, HK == H ? 0 : HK};
  const std::size_t dkv = ga.dkv(), dvkv = ga.dvkv();
  // a view of rows x cols numbers of src from start, row stride rs, column stride cs (one block)
  auto view = [&](const std::string& id, const std::string& src, std::size_t start, std::size_t rows,
                  std::size_t cols, std::size_t rs, std::size_t cs) {
    if (views) views->push_back({id, {{src, start, rs, cs, 0, 0, rows, cols}}});
  };
  auto add = [&](const std::string& id, const rt::dynamic_matrix<T>& m) {
    return p.matrix(id, m.rows(), m.cols(), values_of(m)).dtype(dtype);
  };
  auto add_vector = [&](const std::string& id, const std::vector<T>& v) {
    return p.matrix(id, 1, v.size(), std::vector<double>(v.begin(), v.end())).dtype(dtype);
  };
  const std::string concat = H > 1 ? "concat" : "context";
  rt::dynamic_matrix<T> ones(1, t_len, T(1));
  p.matrix("ones", 1, t_len, values_of(ones)).dtype(dtype).hidden();
  p.step(
      "The backward: the gradients for d_output " +
          std::string(bw.sum ? "= \"sum\" (output.sum(): all ones)" : "(the case's)"),
      "Each gradient is the derivative of the loss with respect to one forward matrix, computed in reverse "
      "order from d_output (" +
          std::string(core ? "core/flat_attention_backward.hpp, in the core's arithmetic"
                           : "runtime/multihead_backward.hpp") +
          "); each cell explains itself from this page's "
          "numbers "
          "as the forward's cells do, with the grad_fn PyTorch records for the step (docs/gradients.md). "
          "The gradients have no 50-digit truth line on this page (neither has the forward's: the tool's "
          "pages "
          "show what qkv computed and how).");
  add("d_output", bw.d_output).rows(qrow);
  if (w.o) {
    p.step(std::string(w.o->bias.empty() ? "MmBackward0" : "AddmmBackward0") + ": the output projection");
    if (out_in) {
      hidden_transpose(p, "d_output", bw.d_output, dtype);
      view("d_output\u1d40", "d_output", 0, dout, t_len, 1, dout);
      add("d_wo", g.d_w_output).how(how::matmul("d_output\u1d40", concat, t_len));
    } else {
      hidden_transpose(p, concat, r.concat, dtype);
      view(concat + "\u1d40", "#f", fa.concat(), dv, t_len, 1, dv);
      add("d_wo", g.d_w_output).how(how::matmul(concat + "\u1d40", "d_output", t_len));
    }
    view("d_wo", "#g", ga.d_wo(), g.d_w_output.rows(), g.d_w_output.cols(), g.d_w_output.cols(), 1);
    if (!g.d_b_output.empty()) {
      add_vector("d_bo", g.d_b_output).how(how::matmul("ones", "d_output", t_len));
      view("d_bo", "#g", ga.d_bo(), 1, dout, dout, 1);
    }
    add("d_concat", g.d_concat)
        .rows(qrow)
        .how(out_in ? how::matmul("d_output", "wo", w.o->out_features())
                    : how::dot("d_output", "wo", w.o->out_features()));
  } else {
    p.text("No output projection: d_concat is d_output.");
    p.matrix("zeros", t_len, g.d_concat.cols(), std::vector<double>(t_len * g.d_concat.cols(), 0.0))
        .dtype(dtype)
        .hidden();
    add("d_concat", g.d_concat).rows(qrow).how(how::add("d_output", "zeros"));
  }
  view("d_concat", "#g", ga.d_concat(), t_len, dv, dv, 1);
  for (std::size_t h = 0; h < H; ++h) {
    const std::size_t kv = h / group;
    const std::string hs = H > 1 ? "[" + std::to_string(h) + "]" : "";
    p.step("MmBackward0 and SoftmaxBackward0" + std::string(H > 1 ? ": head " + std::to_string(h) : "") +
           ": d_weights = d_context \u00b7 values\u1d40, D, d_scaled_scores = weights \u2218 (d_weights "
           "\u2212 D)");
    add("d_weights" + hs, bw.d_weights[h])
        .rows(qrow)
        .cols(krow)
        .caption("dP" + hs)
        .how(how::dot("d_concat", "values", dvh, h * dvh, kv * dvh));
    rt::dynamic_matrix<T> dcol(t_len, 1);
    for (std::size_t i = 0; i < t_len; ++i) dcol(i, 0) = bw.row_dots(h, i);
    if (core)  // the core's D: rowsum(dP ∘ P) (core/softmax_backward.hpp)
      add("D" + hs, dcol).rows(qrow).how(how::row_dot("d_weights" + hs, "weights" + hs, s_len, 0, 0));
    else
      add("D" + hs, dcol).rows(qrow).how(how::row_dot("d_concat", "context" + hs, dvh, h * dvh, 0));
    view("d_weights" + hs, "#g", ga.d_weights(h), t_len, s_len, s_len, 1);
    view("D" + hs, "#g", ga.row_dots(h), t_len, 1, 1, 1);
    view("d_scaled_scores" + hs, "#g", ga.d_scaled_scores(h), t_len, s_len, s_len, 1);
    view("d_scores" + hs, "#g", ga.d_scores(h), t_len, s_len, s_len, 1);
    view("d_queries" + hs, "#g", ga.d_queries() + h * dk, t_len, dk, dq, 1);
    if (group == 1) {  // each head its own keys and values
      view("d_scores" + hs + "\u1d40", "#g", ga.d_scores(h), s_len, t_len, 1, s_len);
      view("d_keys" + hs, "#g", ga.d_keys() + h * dk, s_len, dk, dq, 1);
      view("weights" + hs + "\u1d40", "#f", fa.weights(h), s_len, t_len, 1, s_len);
      view("d_values" + hs, "#g", ga.d_values() + h * dvh, s_len, dvh, dv, 1);
    } else if (h % group == group - 1) {  // key/value head kv's: the sum over its query heads
      view("d_keys[kv " + std::to_string(kv) + "]", "#g", ga.d_keys() + kv * dk, s_len, dk, dkv, 1);
      view("d_values[kv " + std::to_string(kv) + "]", "#g", ga.d_values() + kv * dvh, s_len, dvh, dvkv, 1);
    }
    add("d_scaled_scores" + hs, bw.d_scaled_scores[h])
        .rows(qrow)
        .cols(krow)
        .caption("dS" + hs)
        .how(how::softmax_backward("weights" + hs, "d_weights" + hs, "D" + hs, mask_note));
    rt::dynamic_matrix<T> dsc(t_len, s_len);
    for (std::size_t i = 0; i < t_len; ++i)
      for (std::size_t j = 0; j < s_len; ++j) dsc(i, j) = T(r.scale * bw.d_scaled_scores[h](i, j));
    add("d_scores" + hs, dsc)
        .rows(qrow)
        .cols(krow)
        .how(how::scaled("d_scaled_scores" + hs, double(r.scale), scale_text));
    add("d_queries" + hs, attend_detail::columns(g.d_queries, h * dk, dk))
        .rows(qrow)
        .how(how::matmul("d_scores" + hs, "keys", s_len, 0, 0, kv * dk));
    if (group == 1) {
      hidden_transpose(p, "d_scores" + hs, dsc, dtype);
      add("d_keys" + hs, attend_detail::columns(g.d_keys, h * dk, dk))
          .rows(krow)
          .how(how::matmul("d_scores" + hs + "\u1d40", "queries", t_len, 0, 0, h * dk));
      hidden_transpose(p, "weights" + hs, r.weights[h], dtype);
      add("d_values" + hs, attend_detail::columns(g.d_values, h * dvh, dvh))
          .rows(krow)
          .how(how::matmul("weights" + hs + "\u1d40", "d_concat", t_len, 0, 0, h * dvh));
    } else if (h % group == group - 1) {
      p.text("Key/value head " + std::to_string(kv) + " is shared by query heads " +
             std::to_string(kv * group) + " to " + std::to_string(h) +
             ": its d_keys and d_values are the sums of theirs (scale d_scaled_scores\u1d40 queries and "
             "weights\u1d40 d_context per head), added in head order" +
             std::string(core ? " (core/multihead_backward.hpp's grouped_query_attention_backward)."
                              : ", as the runtime computed them."));
      add("d_keys[kv " + std::to_string(kv) + "]", attend_detail::columns(g.d_keys, kv * dk, dk))
          .rows(krow)
          .derived();
      add("d_values[kv " + std::to_string(kv) + "]", attend_detail::columns(g.d_values, kv * dvh, dvh))
          .rows(krow)
          .derived();
    }
  }
  p.step("MmBackward0 / AddmmBackward0: the projections' weights and biases, and d_x");
  const std::pair<const char*, const rt::dynamic_matrix<T>*> grads[3] = {
      {"d_queries", &g.d_queries}, {"d_keys", &g.d_keys}, {"d_values", &g.d_values}};
  const rt::linear_weights<T>* lw[3] = {&w.q, &w.k, &w.v};
  const rt::dynamic_matrix<T>* dws[3] = {&g.d_w_query, &g.d_w_key, &g.d_w_value};
  const std::vector<T>* dbs[3] = {&g.d_b_query, &g.d_b_key, &g.d_b_value};
  const char* names[3] = {"q", "k", "v"};
  if (!out_in) {
    hidden_transpose(p, "x", x, dtype);
    view("x\u1d40", "x", 0, dm, t_len, 1, dm);
  }
  const std::size_t gstart[3] = {ga.d_queries(), ga.d_keys(), ga.d_values()};
  const std::size_t wstart[3] = {ga.d_wq(), ga.d_wk(), ga.d_wv()};
  const std::size_t bstart[3] = {ga.d_bq(), ga.d_bk(), ga.d_bv()};
  for (int k = 0; k < 3; ++k) {
    const std::string all = std::string(grads[k].first) + " (all heads)";
    const std::size_t n = grads[k].second->cols();
    add(all, *grads[k].second).hidden();
    view(all, "#g", gstart[k], t_len, n, n, 1);
    if (out_in) {
      hidden_transpose(p, all, *grads[k].second, dtype);
      view(all + "\u1d40", "#g", gstart[k], n, t_len, 1, n);
      add(std::string("d_w") + names[k], *dws[k]).how(how::matmul(all + "\u1d40", "x", t_len));
    } else {
      add(std::string("d_w") + names[k], *dws[k]).how(how::matmul("x\u1d40", all, t_len));
    }
    view(std::string("d_w") + names[k], "#g", wstart[k], dws[k]->rows(), dws[k]->cols(), dws[k]->cols(), 1);
    if (!dbs[k]->empty()) {
      add_vector(std::string("d_b") + names[k], *dbs[k]).how(how::matmul("ones", all, t_len));
      view(std::string("d_b") + names[k], "#g", bstart[k], 1, n, n, 1);
    }
    (void)lw[k];
  }
  // d_x = [dQ | dK | dV] [Wq; Wk; Wv] (out_in; in_out: the transposes): one sum over every column of the three
  const std::size_t n = g.d_queries.cols() + g.d_keys.cols() + g.d_values.cols();
  rt::dynamic_matrix<T> lhs(t_len, n), rhs(out_in ? n : dm, out_in ? dm : n);
  std::size_t c0 = 0;
  for (int k = 0; k < 3; ++k) {
    const auto& dg = *grads[k].second;
    for (std::size_t i = 0; i < t_len; ++i)
      for (std::size_t c = 0; c < dg.cols(); ++c) lhs(i, c0 + c) = dg(i, c);
    const auto& wm = lw[k]->weight;  // out_in: (out, in) = (dg.cols, dm); in_out: (dm, dg.cols)
    for (std::size_t a = 0; a < wm.rows(); ++a)
      for (std::size_t b = 0; b < wm.cols(); ++b) {
        if (out_in)
          rhs(c0 + a, b) = wm(a, b);
        else
          rhs(a, c0 + b) = wm(a, b);
      }
    c0 += dg.cols();
  }
  add("[d_queries | d_keys | d_values]", lhs).hidden();
  add(out_in ? "[Wq; Wk; Wv]" : "[Wq | Wk | Wv]", rhs).hidden();
  if (views) {  // the three side by side: the gradients' columns, the weights' rows (out_in) or columns
    grad_view l{"[d_queries | d_keys | d_values]", {}}, wr{out_in ? "[Wq; Wk; Wv]" : "[Wq | Wk | Wv]", {}};
    const char* wid[3] = {"wq", "wk", "wv"};
    std::size_t at = 0;
    for (int k = 0; k < 3; ++k) {
      const std::size_t c = grads[k].second->cols();
      l.blocks.push_back({"#g", gstart[k], c, 1, 0, at, t_len, c});
      const auto& wm = lw[k]->weight;
      wr.blocks.push_back({wid[k], 0, wm.cols(), 1, out_in ? at : 0, out_in ? 0 : at, wm.rows(), wm.cols()});
      at += c;
    }
    views->push_back(l);
    views->push_back(wr);
  }
  view("d_x", "#g", ga.d_x(), t_len, dm, dm, 1);
  add("d_x", g.d_x)
      .rows(qrow)
      .how(out_in ? how::matmul("[d_queries | d_keys | d_values]", "[Wq; Wk; Wv]", n)
                  : how::dot("[d_queries | d_keys | d_values]", "[Wq | Wk | Wv]", n));
  p.text(
      "d_x sums what flows back through all three projections (x feeds the queries, the keys and the "
      "values): "
      "d_queries Wq + d_keys Wk + d_values Wv" +
      std::string(out_in ? "" : " (each W transposed: in_out)") + ", one sum over their " +
      std::to_string(n) + " columns side by side.");
}

/// @brief the most bytes a summarised page embeds whole for its WebAssembly module (docs/pages.md,
/// "The summarised attend page"): the inputs' bits in base 85 (page::pack_numbers' `rows`, 5
/// characters each 4 bytes of float32 or float64), with the terms and tables it adds (the bias,
/// ALiBi's slopes, RoPE's cos and sin). Issue 12 holds a BERT-size attend page (128 tokens, 12
/// heads) to 2 MB (tests/browser/page_test.py); this leaves about 450 KB for the rest of it (the
/// shown rows and the rows their explanations read, the script, the module's base64). 128 tokens,
/// 12 heads of 64: q, k, v take 1,474,560 bytes.
inline constexpr std::size_t summarised_embed_bytes = 1600 * 1024;

/// @brief how a summarised page is editable (docs/pages.md, "The summarised attend page"):
/// - full: x (the context), every weight and bias embedded whole (their packed bits fit
///   summarised_embed_bytes): every step recomputed, as on a full page;
/// - projected: they do not fit, the queries, keys and values do: those are the inputs (before
///   RoPE when the case has it: the module rotates them with the page's tables), and the module
///   recomputes every step after them; the output projection (W_o not whole on the page) is not
///   recomputed, and says why;
/// - none: neither fits, or the case has gradients (the page's gradient tables hold only their
///   shown rows): not editable, and `why` says so with the bytes.
/// `why` is the sentence the page shows: which it did, and why; `stale`: the matrices not
/// recomputed after an edit, with why
struct summarised_choice {
  enum class mode { none, full, projected } how = mode::none;
  std::string why;
  std::vector<std::string> whole;   // the matrices embedded whole (the module's inputs and tables)
  std::vector<std::string> inputs;  // projected: the module's q, k, v inputs (page ids)
  std::vector<std::pair<std::string, std::string>> stale;
};

/// the bytes of n numbers of `size` bytes (4 or 8) in base 85 (page_detail::json_b85)
inline std::size_t packed_bytes(std::size_t n, std::size_t size) { return n * size / 4 * 5; }

inline std::string kilobytes(std::size_t b) {
  std::ostringstream o;
  o << (b + 512) / 1024 << " KB";
  return o.str();
}

/// which way a summarised page is editable (summarised_choice), from the page's own matrices
template <class T>
summarised_choice choose_summarised(const qkv::io::page& p, bool has_context,
                                    const rt::attention_weights<T>& w, const rt::attention_options<T>& opt,
                                    bool grads) {
  summarised_choice c;
  std::map<std::string, std::size_t> n;
  for (const auto& m : p.entries()) n[m.id] = m.rows * m.cols;
  auto bytes = [&](const std::vector<std::string>& ids) {
    std::size_t b = 0;
    for (const auto& id : ids) b += packed_bytes(n.count(id) ? n.at(id) : 0, sizeof(T));
    return b;
  };
  std::vector<std::string> fixed;  // what the module adds and rotates with, in either mode
  if (opt.bias) fixed.push_back("scores bias");
  if (opt.alibi) fixed.push_back("ALiBi slopes");
  if (opt.rope) fixed.insert(fixed.end(), {"cos (queries)", "sin (queries)", "cos (keys)", "sin (keys)"});
  std::vector<std::string> full = {"x", "wq", "wk", "wv"};
  if (has_context) full.push_back("context (input)");
  for (const char* b : {"bq", "bk", "bv"})
    if (n.count(b)) full.push_back(b);
  if (w.o) full.push_back("wo");
  if (w.o && !w.o->bias.empty()) full.push_back("bo");
  std::vector<std::string> qkv_ids =
      opt.rope ? std::vector<std::string>{"queries before RoPE", "keys before RoPE", "values"}
               : std::vector<std::string>{"queries", "keys", "values"};
  const std::size_t fixed_b = bytes(fixed), full_b = bytes(full) + fixed_b, proj_b = bytes(qkv_ids) + fixed_b;
  const std::string limit = kilobytes(summarised_embed_bytes);
  const std::string sizes = "x and the weights take " + kilobytes(full_b) +
                            " as packed bits, the queries, keys and values " + kilobytes(proj_b) +
                            (fixed.empty() ? "" : " (each with the terms and tables the module adds)") +
                            "; a summarised page embeds at most " + limit + " whole";
  if (grads) {
    c.why =
        std::string("This page is not editable: it is summarised and has gradients (d_output), ") +
        "whose tables hold only their shown rows on a summarised page, and the module's backward needs x " +
        "and the weights whole; a case of at most 65,536 numbers has an editable page with its gradients.";
    return c;
  }
  if (full_b <= summarised_embed_bytes) {
    c.how = summarised_choice::mode::full;
    c.whole = full;
    c.whole.insert(c.whole.end(), fixed.begin(), fixed.end());
    c.why = "This page is summarised (its tables show their first and last rows), and editable in full: x" +
            std::string(has_context ? ", the context" : "") + " and every weight are embedded whole (" +
            kilobytes(full_b) + " as packed bits, within the " + limit +
            " a summarised page embeds), so every step is recomputed.";
    return c;
  }
  if (proj_b <= summarised_embed_bytes) {
    c.how = summarised_choice::mode::projected;
    c.whole = qkv_ids;
    c.whole.insert(c.whole.end(), fixed.begin(), fixed.end());
    c.inputs = qkv_ids;
    c.why =
        "This page is summarised, and its inputs here are the queries, keys and values" +
        std::string(opt.rope ? " before RoPE (the module rotates them with the page's cos and sin)" : "") +
        ": " + sizes + ", so x" + (has_context ? ", the context" : "") +
        " and the weights are not on it whole (not editable) and the queries, keys and values are. " +
        "Every step after them is recomputed" +
        (w.o ? "; the output projection is not (grey after an edit): W_o is not on the page whole." : ".");
    if (w.o)
      c.stale.push_back(
          {"output", "W_o (" + std::to_string(w.o->weight.rows()) + " x " +
                         std::to_string(w.o->weight.cols()) +
                         ") is not on this summarised page whole, so the output is not recomputed"});
    return c;
  }
  c.why = "This page is not editable: it is summarised, and " + sizes + ", so neither fits.";
  return c;
}

/// @brief the page's "edit" object (docs/pages.md, "Editing a page"): the WebAssembly module
/// (wasm/qkv_wasm.cpp, embedded by scripts/embed_wasm.py), the case's sizes and options, which
/// matrices are the inputs and which the module recomputes (its second form, qkv_attend_case_*:
/// a context, kv_heads, the bias and ALiBi's slopes as hidden page matrices, RoPE's tables, the
/// alignment's offset, the 16-bit type a typed number is rounded to); or {"why": ...} when the page
/// cannot be edited: no module in this build, a summarised page, or numbers that are not the
/// core's arithmetic, which the module computes in (`core` false). Either form
/// says the page's arithmetic ("arithmetic": "core" or "runtime"). `grads`: a case with d_output,
/// the backward's views (grad_view; its editor recomputes the gradients too). `editable`: whether
/// the page would be editable with the core's numbers (every other reason absent)
template <class T>
std::string edit_spec(const qkv::io::page& p, bool has_context, const rt::attention_weights<T>& w,
                      const rt::attention_options<T>& opt, const rt::multihead_result<T>& r,
                      std::size_t t_len, std::size_t d, bool half, const std::vector<grad_view>* grads,
                      bool core, bool* editable = nullptr, std::size_t context_cols = 0,
                      const std::string& half_type = "", const summarised_choice* sc = nullptr) {
  namespace pd = qkv::io::page_detail;
  std::string why;
  if (*qkv::io::page_attend_wasm::why_not)
    why = std::string("This page is not editable: ") + qkv::io::page_attend_wasm::why_not + ".";
  else if (p.summarised() && (sc == nullptr || sc->how == summarised_choice::mode::none))
    why = sc ? sc->why : "This page is not editable: it has too many numbers (a summarised page).";
  if (editable) *editable = why.empty();
  if (why.empty() && !core)
    why =
        "This page is not editable: it shows the runtime path's numbers (--arithmetic runtime), and its "
        "WebAssembly module computes in the core's arithmetic; without --arithmetic runtime, qkv attend "
        "writes this page in the core's arithmetic, editable.";
  std::string s = "{\"why\":";
  pd::json_string(s, why);
  s += std::string(",\"arithmetic\":\"") + (core ? "core" : "runtime") + "\"";
  if (!why.empty()) return s + "}";
  const bool projected = sc && p.summarised() && sc->how == summarised_choice::mode::projected;
  const std::size_t H = r.weights.size(), s_len = r.keys.rows(), HK = opt.kv_heads ? opt.kv_heads : H;
  const bool f32 = sizeof(T) == 4;
  s += ",\"module\":\"" + qkv::io::page_attend_wasm::text();
  s += "\",\"module_bytes\":" + std::to_string(qkv::io::page_attend_wasm::bytes);
  s += ",\"dtype\":\"" + std::string(f32 ? "float32" : "float64") + "\"";
  s += std::string(",\"out_in\":") + (w.q.layout == rt::weight_layout::out_in ? "true" : "false");
  // 16-bit inputs: a typed number is rounded to this type as stored (the module's qkv_round_*,
  // core/half.hpp, the tool's rounding), the arithmetic float32; not the queries, keys and values
  // of a projected page (float32 numbers the float32 arithmetic computed)
  s += ",\"round\":\"" + std::string(half && !projected ? half_type : "") + "\"";
  // dv: the concatenation's columns (heads dvh); the keys and values have kv_heads heads
  s += ",\"t\":" + std::to_string(t_len) + ",\"d\":" + std::to_string(d) +
       ",\"dq\":" + std::to_string(r.queries.cols()) + ",\"dv\":" + std::to_string(r.concat.cols()) +
       ",\"dout\":" + std::to_string(w.o ? w.o->out_features() : 0) + ",\"heads\":" + std::to_string(H) +
       ",\"kv_heads\":" + std::to_string(HK == H ? 0 : HK) + ",\"s\":" + std::to_string(s_len) +
       ",\"dc\":" + std::to_string(has_context ? context_cols : 0);
  s += ",\"scale\":";
  pd::json_number(s, double(r.scale), f32);
  // whether the case gave its scale: else it is 1/sqrt(d_q / heads), which the editor makes again
  // for another number of heads (T(1) / sqrt(T(d_head)), correctly rounded, as cmd_attend.hpp)
  s += std::string(",\"scale_given\":") + (opt.scale ? "true" : "false");
  // causal and window as the runtime aligns them: query i sits at position i + mask_offset
  // (lower_right with S != T: S - T), and ALiBi's query position is the same
  const auto resolved = rt::detail::options_mask(opt, t_len, s_len);
  s += std::string(",\"causal\":") + (opt.causal ? "true" : "false") +
       ",\"window\":" + std::to_string(opt.window) + ",\"mask_offset\":" + std::to_string(resolved.offset);
  // the terms added to the scaled scores (hidden page matrices, page() adds them): the bias rows
  // (bias_heads 1: every head's, else one block of T rows per head) and ALiBi's slopes
  s += ",\"bias\":\"" + std::string(opt.bias ? "scores bias" : "") +
       "\",\"bias_heads\":" + std::to_string(opt.bias ? (opt.bias->rows() == t_len ? 1 : H) : 0) +
       ",\"slopes\":\"" + (opt.alibi ? "ALiBi slopes" : "") + "\"";
  // RoPE: the page's cos and sin tables (one row per position, rotary_dim / 2 columns)
  if (opt.rope) {
    const std::size_t dk = r.queries.cols() / H;
    s += ",\"rotary_dim\":" + std::to_string(opt.rope->rotary_dim ? opt.rope->rotary_dim : dk) +
         ",\"interleaved\":" + (opt.rope->layout == rt::rope_layout::interleaved ? "true" : "false") +
         ",\"rope\":[\"cos (queries)\",\"sin (queries)\",\"cos (keys)\",\"sin (keys)\"]";
  } else {
    s += ",\"rotary_dim\":0";
  }
  // the case's own mask cells (allowed false, a padded key), without causal and window, which the
  // page's script applies from its options
  // ("" when no cell is: t x s zeros)
  std::string cells;
  bool any = false;
  for (std::size_t i = 0; i < t_len; ++i)
    for (std::size_t j = 0; j < s_len; ++j) {
      const bool off = (opt.allowed && !opt.allowed->row(i)[j]) || (opt.key_padding && (*opt.key_padding)[j]);
      cells += off ? '1' : '0';
      any = any || off;
    }
  s += ",\"masked\":\"" + (any ? cells : std::string()) + "\",\"inputs\":{\"x\":\"x\",\"context\":\"" +
       std::string(has_context ? "context (input)" : "") + "\",\"wq\":\"wq\",\"wk\":\"wk\",\"wv\":\"wv\"";
  s += std::string(",\"bq\":\"") + (w.q.bias.empty() ? "" : "bq") + "\",\"bk\":\"" +
       (w.k.bias.empty() ? "" : "bk") + "\",\"bv\":\"" + (w.v.bias.empty() ? "" : "bv") + "\",\"wo\":\"" +
       (w.o ? "wo" : "") + "\",\"bo\":\"" + (w.o && !w.o->bias.empty() ? "bo" : "") + "\"}";
  // a summarised page (summarised_choice): which way it is editable, what it says, the matrices
  // not recomputed; projected: the module's inputs are the queries, keys and values
  // (qkv_attend_projected_*), which its output does not write back, and it has no output projection
  if (sc && p.summarised()) {
    s += std::string(",\"summarised\":\"") + (projected ? "projected" : "full") + "\",\"note\":";
    pd::json_string(s, sc->why);
    s += ",\"stale\":[";
    for (std::size_t k = 0; k < sc->stale.size(); ++k) {
      s += k ? ",[" : "[";
      pd::json_string(s, sc->stale[k].first);
      s += ",";
      pd::json_string(s, sc->stale[k].second);
      s += "]";
    }
    s += "]";
    if (projected) {
      s += ",\"projected\":[";
      for (std::size_t k = 0; k < sc->inputs.size(); ++k) {
        if (k) s += ",";
        pd::json_string(s, sc->inputs[k]);
      }
      s += "]";
    }
  }
  // the module's output, in its order (wasm/qkv_wasm.cpp); "" for a part the page does not show
  // (projected: the queries, keys and values are the inputs, rotated by RoPE when it is set)
  if (projected)
    s += std::string(",\"outputs\":[\"") + (opt.rope ? "queries" : "") + "\",\"" + (opt.rope ? "keys" : "") +
         "\",\"\"";
  else
    s += std::string(",\"outputs\":[\"queries\",\"keys\",\"values\"");
  for (std::size_t h = 0; h < H; ++h) {
    const std::string hs = H > 1 ? "[" + std::to_string(h) + "]" : "";
    s += ",\"scores" + hs + "\",\"scaled" + hs + "\",\"weights" + hs + "\",\"context" + hs + "\"";
  }
  s += std::string(",\"") + (H > 1 ? "concat" : "") + "\"";
  if (w.o && !projected) s += ",\"output\"";
  if (opt.rope) s += projected ? ",\"\",\"\"" : ",\"queries before RoPE\",\"keys before RoPE\"";
  s += "]";
  // a case with d_output: the editor runs the module's backward after the forward; d_output is
  // an input, and grad_outputs says where each gradient matrix's numbers are (grad_view)
  if (grads) s += ",\"grad_input\":\"d_output\",\"grad_outputs\":" + grad_views_json(*grads);
  return s + "}";
}

/// the learner's page of an attend case; `trace` is the text qkv attend prints (its Step lines
/// are the page's steps); tokens / context_tokens label rows and keys when given; `core`: the
/// numbers are the core's arithmetic (the page says which, and only then is it editable);
/// `editable`: set to whether it would be editable in the core's arithmetic (edit_spec)
template <class T>
std::string page(const std::string& file, const std::string& trace, const rt::dynamic_matrix<T>& x,
                 const rt::dynamic_matrix<T>& context, bool has_context, const rt::attention_weights<T>& w,
                 const rt::attention_options<T>& opt, const rt::multihead_result<T>& r,
                 const std::string& scale_text, const page_data<T>& d,
                 const std::vector<std::string>& tokens = {},
                 const std::vector<std::string>& context_tokens = {}, bool core = false,
                 bool* editable = nullptr) {
  using how = qkv::io::page_how;
  const std::size_t t_len = x.rows(), s_len = has_context ? context.rows() : x.rows(), H = r.weights.size();
  // grouped-query attention: HK key/value heads, query head h reads key/value head h / (H / HK)
  const std::size_t HK = opt.kv_heads ? opt.kv_heads : H, group = H / HK;
  const std::size_t dq = r.queries.cols(), dv = r.values.cols(), dk = dq / H, dvh = dv / HK;
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
  // which arithmetic the numbers are in (docs/pages.md, "Editing a page")
  p.intro(
      intro + "\n" +
      (core ? "Every number on this page is in the core's arithmetic (include/qkv/core/flat_attention.hpp: "
              "one rounding per product and per sum, left to right, the core's exp), the one the examples "
              "prove and this page recomputes with; qkv attend prints it with --arithmetic core. Without "
              "that, qkv attend computes on the runtime path (SIMD, fma), within docs/numerics.md's bounds "
              "of these."
            : "Every number on this page is the runtime path's (include/qkv/runtime/: SIMD, fma chains, its "
              "vector exp; docs/numerics.md), as qkv attend --json gives it."));
  auto add = [&](const std::string& id, const rt::dynamic_matrix<T>& m) {
    return p.matrix(id, m.rows(), m.cols(), values_of(m)).dtype(dtype);
  };
  // a projection y = x W^T + b (out_in) or x W + b (in_out): the weights and bias as data
  auto projection = [&](const std::string& id, const rt::dynamic_matrix<T>& y, const std::string& src,
                        const rt::linear_weights<T>& l, const std::string& wname, const std::string& bname,
                        const std::vector<std::string>& rows) {
    if (!l.bias.empty())
      p.matrix(bname, 1, l.bias.size(), std::vector<double>(l.bias.begin(), l.bias.end()))
          .dtype(dtype)
          .hidden();
    const std::size_t in = l.in_features();
    auto ref = add(id, y).rows(rows);
    ref.how(out_in ? how::dot(src, wname, in, 0, 0, l.bias.empty() ? "" : bname)
                   : how::matmul(src, wname, in, 0, 0, 0, l.bias.empty() ? "" : bname));
  };
  std::istringstream in(trace);
  std::string line;
  const std::vector<bool>& mask = d.mask;
  const std::string& mask_note = d.mask_note;
  std::vector<std::string> weight_ids;
  while (std::getline(in, line)) {
    if (line.rfind("Step ", 0) != 0 && line.rfind("Output", 0) != 0) continue;
    std::string title = line;
    while (!title.empty() && (title.back() == '=' || title.back() == ' ')) title.pop_back();
    const int n = line.rfind("Step ", 0) == 0 ? std::atoi(line.c_str() + 5) : 0;
    std::size_t h = 0;
    if (const auto at = line.find("of head "); at != std::string::npos)
      h = std::strtoul(line.c_str() + at + 8, nullptr, 10);
    const std::string hs = H > 1 ? "[" + std::to_string(h) + "]" : "";
    p.step(title);
    if (n == 1) {
      add("x", x).rows(qrow);
      if (has_context) add("context (input)", context).rows(krow);
    } else if (n == 2) {
      const std::string src = has_context ? "context (input)" : "x";
      add("wq", w.q.weight);
      add("wk", w.k.weight);
      add("wv", w.v.weight);
      if (d.q_linear && d.k_linear && opt.rope) {  // the projections, then their rotation (runtime/rope.hpp)
        const auto& ro = *opt.rope;
        const std::size_t rw = ro.rotary_dim ? ro.rotary_dim : dk;
        const std::string layout = ro.layout == rt::rope_layout::half_split ? "half_split" : "interleaved";
        projection("queries before RoPE", *d.q_linear, "x", w.q, "wq", "bq", qrow);
        projection("keys before RoPE", *d.k_linear, src, w.k, "wk", "bk", krow);
        const std::size_t kp = ro.key_position_offset.value_or(ro.position_offset);
        auto positions = [](std::size_t first, std::size_t count) {
          std::vector<std::string> l;
          for (std::size_t k = 0; k < count; ++k) l.push_back("position " + std::to_string(first + k));
          return l;
        };
        const auto pq = positions(ro.position_offset, t_len), pk = positions(kp, s_len);
        std::ostringstream base;
        base << ro.base;
        p.text("Rotary position embeddings (RoPE, " + layout + "): in each head, the first " +
               std::to_string(rw) + " of " + std::to_string(dk) +
               " columns are rotated in pairs by the angle position \u00d7 base^(\u22122i/" +
               std::to_string(rw) + "), base " + base.str() + "; the queries sit at positions " +
               std::to_string(ro.position_offset) + "\u2026 and the keys at " + std::to_string(kp) +
               "\u2026. The tables are the cos and sin the runtime rotated with (angles in double, "
               "each cos and sin rounded once).");
        add("cos (queries)", *d.cos_q).rows(pq).derived();
        add("sin (queries)", *d.sin_q).rows(pq).derived();
        add("cos (keys)", *d.cos_k).rows(pk).derived();
        add("sin (keys)", *d.sin_k).rows(pk).derived();
        add("queries", r.queries)
            .rows(qrow)
            .how(how::rope("queries before RoPE", "cos (queries)", "sin (queries)", dk, rw, layout));
        add("keys", r.keys)
            .rows(krow)
            .how(how::rope("keys before RoPE", "cos (keys)", "sin (keys)", dk, rw, layout));
      } else {
        projection("queries", r.queries, "x", w.q, "wq", "bq", qrow);
        projection("keys", r.keys, src, w.k, "wk", "bk", krow);
      }
      projection("values", r.values, src, w.v, "wv", "bv", krow);
      if (HK != H)
        p.text("Grouped-query attention: " + std::to_string(H) + " query heads share " + std::to_string(HK) +
               (HK == 1 ? " key/value head" : " key/value heads") +
               " (kv_heads); query head h reads key/value head h / " + std::to_string(group) + ", columns " +
               std::to_string(dk) + " \u00d7 (h / " + std::to_string(group) +
               ") onwards of keys and values.");
    } else if (n == 3) {
      const std::size_t g = h / group;  // the key/value head of query head h
      add("scores" + hs, r.scores[h])
          .rows(qrow)
          .cols(krow)
          .how(how::dot("queries", "keys", dk, h * dk, g * dk));
      if (HK != H)
        p.text("Query head " + std::to_string(h) + " reads key/value head " + std::to_string(g) + ".");
    } else if (n == 4) {
      std::string added;
      if (!d.added.empty()) {
        if (h == 0)
          p.text(std::string("Before the softmax, each scaled score gets ") +
                 (opt.bias ? "the case's bias (a -inf there masks the key)" : "") +
                 (opt.bias && opt.alibi ? ", then " : "") +
                 (opt.alibi
                      ? "ALiBi's linear bias m_h (j \u2212 p): head h's slope m_h (2^(\u22128(h+1)/H) for H "
                        "a power of two, Press et al.) times the key's distance from the query's position "
                        "p = i" +
                            std::string(opt.alibi && resolved_offset(opt, t_len, s_len) != 0
                                            ? " + " + std::to_string(resolved_offset(opt, t_len, s_len))
                                            : "") +
                            ", rounded once each, as the runtime adds it"
                      : "") +
                 "; \"added\" shows these terms on a score of 0. On an edit they stay (they do not depend on "
                 "the inputs) and the module adds them again.");
        added = "added" + hs;
        add(added, d.added[h]).rows(qrow).cols(krow).caption(d.added_note + hs).derived();
      }
      add("scaled" + hs, d.scaled[h])
          .rows(qrow)
          .cols(krow)
          .caption("scaled, masked scores" + hs)
          .how(how::scaled("scores" + hs, double(r.scale), scale_text, mask_note, added));
      add("weights" + hs, r.weights[h]).rows(qrow).cols(krow).how(how::softmax("scaled" + hs));
      weight_ids.push_back("weights" + hs);
      if (h + 1 == H) {
        std::vector<std::string> names;
        for (std::size_t k = 0; k < H; ++k) names.push_back("head " + std::to_string(k));
        p.heatmap(
            "attention weights" + std::string(H > 1 ? " per head" : "") + " (rows: queries, columns: keys)",
            weight_ids, names);
        if (!mask.empty()) p.heatmap_mask(mask);
      }
    } else if (n == 5) {
      add("context" + hs, r.context[h])
          .rows(qrow)
          .caption("context" + hs)
          .how(how::matmul("weights" + hs, "values", s_len, 0, 0, h / group * dvh));
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
  std::vector<grad_view> grads;
  if (d.backward)
    backward_steps(p, x, w, r, *d.backward, scale_text, mask_note, qrow, krow, dtype, core,
                   has_context ? nullptr : &grads);
  // the terms the module adds to the scaled scores, as the page's data (edit_spec names them)
  if (opt.bias)
    p.matrix("scores bias", opt.bias->rows(), opt.bias->cols(), values_of(*opt.bias)).dtype(dtype).hidden();
  if (opt.alibi) {
    std::vector<double> m;
    for (const double slope : rt::alibi_slopes(H)) m.push_back(double(static_cast<T>(slope)));
    p.matrix("ALiBi slopes", 1, H, m).dtype(dtype).hidden();
  }
  // a summarised page: editable in full, or from its queries, keys and values, or not
  // (summarised_choice); what the module reads is embedded whole, packed as bits
  std::optional<summarised_choice> sc;
  if (p.summarised()) {
    sc = choose_summarised(p, has_context, w, opt, d.backward != nullptr);
    if (sc->how != summarised_choice::mode::none && core && !*qkv::io::page_attend_wasm::why_not) {
      for (auto& m : p.entries())
        if (std::find(sc->whole.begin(), sc->whole.end(), m.id) != sc->whole.end()) m.whole = true;
      p.pack_numbers(true, true);
    }
  }
  p.edit(edit_spec(p, has_context, w, opt, r, t_len, x.cols(), d.half_inputs, d.backward ? &grads : nullptr,
                   core, editable, context.cols(), d.half_type, sc ? &*sc : nullptr));
  return p.str();
}

/// the --svg heatmap: every head as a panel, masked entries hatched (`mask`: page_data's); above svg_full_cells
/// cells in all, each head downsampled to at most svg_side x svg_side blocks (their mean), and
/// the title says so
template <class T>
std::string svg(const std::string& file, const rt::multihead_result<T>& r, std::vector<bool> mask,
                std::size_t t_len, std::size_t s_len, const std::vector<std::string>& tokens = {},
                const std::vector<std::string>& context_tokens = {}, bool has_context = false) {
  const std::size_t H = r.weights.size();
  auto rows = labels_or(tokens, "q", t_len);
  auto cols = labels_or(has_context ? context_tokens : tokens, "k", s_len);
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
          for (std::size_t j = bj * fc; j < std::min(s_len, (bj + 1) * fc); ++j, ++n)
            sum += double(r.weights[h](i, j));
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
    o.title += " (downsampled: each cell the mean of " + std::to_string(fr) + " x " + std::to_string(fc) +
               " weights)";
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
