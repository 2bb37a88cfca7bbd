// attend_backward.hpp: `qkv attend`'s backward (docs/cli.md, "The backward"): the case field
// d_output (a T x d_out tensor, or "sum": the gradient of output.sum(), all ones), the layer's
// gradients on the runtime path (runtime/multihead_backward.hpp), their --json tensors and
// their trace, each step named by the grad_fn PyTorch records for it (docs/gradients.md).
//
// What the runtime backward does not do is refused naming the field: cross-attention (context),
// rope, and the batch form. The runtime's backward streams and keeps no T x S matrix; the trace,
// --json and the page show every head's d_weights (dP), D and d_scaled_scores (dS) too, so the
// tool computes those from the forward's kept weights, values and context, in T, materialised
// (dP(i, j) = sum_c dO(i, c) V(j, c), c ascending; D(i) = sum_c dO(i, c) O(i, c); dS = P ∘ (dP
// − D), exactly 0 where masked). d_queries, d_keys, d_values, d_concat, the weights', biases' and
// d_x are the runtime's (attention_backward), bit for bit.
//
// With --arithmetic core (and on an editable page) every gradient is the core's instead:
// qkv::flat::attend_backward (core/flat_attention_backward.hpp, what the page's WebAssembly
// module runs), on the forward steps of qkv::flat::attend; there D = rowsum(dP ∘ P) over the
// keys whose weight is not 0, as core/softmax_backward.hpp sums it (run_core_backward).
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/core/flat_attention_backward.hpp>
#include <qkv/io/json.hpp>
#include <qkv/runtime/multihead_backward.hpp>

#include "cli.hpp"

namespace qkv::cli::attend_detail {

/// the backward of one case: the upstream gradient, the runtime's gradients, and every head's
/// materialised dP, D and dS (heads x T x S, heads x T)
template <class T>
struct backward_result {
  bool sum = false;  // d_output was "sum"
  runtime::dynamic_matrix<T> d_output;
  runtime::attention_gradients<T> g;
  std::vector<runtime::dynamic_matrix<T>> d_weights, d_scaled_scores;
  runtime::dynamic_matrix<T> row_dots;  // D, heads x T
};

/// @brief the case's d_output: "sum" (all ones) or a tensor of the output's shape (t x d_out),
/// else an input_error naming the file, the field and both shapes. Refuses what the runtime
/// backward does not do (context, rope), naming the field.
template <class T>
runtime::dynamic_matrix<T> read_d_output(const qkv::io::json_document& doc, bool has_context, bool has_rope,
                                         std::size_t t_len, std::size_t d_out, bool& sum) {
  auto err = [&](const std::string& field, const std::string& msg) {
    return input_error(doc.error(field, msg).what());
  };
  if (has_context)
    throw err("d_output",
              "the backward (runtime/multihead_backward.hpp) is self-attention's: this case has a context "
              "(cross-attention), whose backward qkv does not compute yet; drop context or d_output");
  if (has_rope)
    throw err("d_output",
              "the backward of rotary embeddings (rope) is not implemented yet "
              "(runtime/multihead_backward.hpp refuses attention_options::rope); drop rope or d_output");
  const auto& j = doc.json().at("d_output");
  const std::string shape = runtime::shape_string(t_len, d_out);
  if (j.is_string()) {
    if (j.get<std::string>() != "sum")
      throw err("d_output", "expected \"sum\" (the gradient of output.sum(): all ones) or a " + shape +
                                " tensor (T x d_out, the output's shape), got " + j.dump());
    sum = true;
    return runtime::dynamic_matrix<T>(t_len, d_out, T(1));
  }
  auto m = qkv::io::read_matrix_field<T>(doc, "d_output", shape + " (T x d_out, the output's shape)");
  if (m.rows() != t_len || m.cols() != d_out)
    throw err("d_output",
              "expected " + shape + " (T x d_out: one gradient per element of the output), got " + m.shape());
  return m;
}

/// @brief the layer's backward for `bw.d_output`: attention_forward_for_backward then
/// attention_backward (the runtime's), and every head's dP, D, dS from `r` (attention()'s result
/// with keep_weights: its weights, values and context), masked entries of dS exactly 0
template <class T>
void run_backward(const runtime::dynamic_matrix<T>& x, const runtime::attention_weights<T>& w,
                  const runtime::attention_options<T>& opt, const runtime::multihead_result<T>& r,
                  backward_result<T>& bw) {
  namespace rt = qkv::runtime;
  rt::multihead_result<T> saved;
  rt::attention_statistics<T> stats;
  rt::attention_forward_for_backward<T>(x.view(), w, opt, saved, stats);
  rt::attention_backward<T>(x.view(), w, opt, saved, stats, bw.d_output.view(), bw.g);
  const std::size_t H = opt.heads, HK = opt.kv_heads ? opt.kv_heads : H, group = H / HK;
  const std::size_t t_len = x.rows(), dvh = r.values.cols() / HK;
  bw.row_dots.resize(H, t_len);
  bw.d_weights.clear();
  bw.d_scaled_scores.clear();
  for (std::size_t h = 0; h < H; ++h) {
    const std::size_t g = h / group;
    const auto& p = r.weights[h];
    const auto mask = rt::detail::head_mask(opt, h, H, t_len, p.cols());
    auto& dp = bw.d_weights.emplace_back(t_len, p.cols());
    auto& ds = bw.d_scaled_scores.emplace_back(t_len, p.cols());
    for (std::size_t i = 0; i < t_len; ++i) {
      T d = T(0);
      for (std::size_t c = 0; c < dvh; ++c) d = d + bw.g.d_concat(i, h * dvh + c) * r.context[h](i, c);
      bw.row_dots(h, i) = d;
      for (std::size_t j = 0; j < p.cols(); ++j) {
        T s = T(0);
        for (std::size_t c = 0; c < dvh; ++c)
          s = s + bw.g.d_concat(i, h * dvh + c) * r.values(j, g * dvh + c);
        dp(i, j) = s;
        const bool masked =
            rt::detail::masked_score<T>(mask, i, j, p.cols(), T(0)) == -std::numeric_limits<T>::infinity();
        ds(i, j) = masked ? T(0) : p(i, j) * (s - d);
      }
    }
  }
}

/// @brief the layer's backward for `bw.d_output` in the core's arithmetic: qkv::flat::attend_backward
/// on `steps`, the output of qkv::flat::attend for the same x, weights, heads and `scale`
/// (cmd_attend.hpp's core_attention); every gradient in bw as run_backward puts it (a bias's only
/// when the layer has that bias)
template <class T>
void run_core_backward(const runtime::dynamic_matrix<T>& x, const runtime::attention_weights<T>& w,
                       std::size_t heads, T scale, const std::vector<T>& steps, backward_result<T>& bw,
                       std::size_t kv_heads = 0) {
  const bool out_in = w.q.layout == runtime::weight_layout::out_in;
  const std::size_t hk = kv_heads ? kv_heads : heads;
  const std::size_t t = x.rows(), d = x.cols(), dq = w.q.out_features(), dkv = w.k.out_features(),
                    dvkv = w.v.out_features(), dv = dvkv / hk * heads, dout = w.o ? w.o->out_features() : 0;
  const qkv::flat::gradients_layout at{t, d, dq, dv, heads, dout, kv_heads == heads ? 0 : kv_heads};
  std::vector<T> out(at.size());
  qkv::flat::attend_args<T> a;  // the second form: grouped-query heads too (the bias and ALiBi are in steps)
  a.x = x.data(), a.t = t, a.d = d, a.wq = w.q.weight.data(), a.wk = w.k.weight.data(),
  a.wv = w.v.weight.data();
  a.wo = w.o ? w.o->weight.data() : nullptr, a.dq = dq, a.dv = dv, a.heads = heads;
  a.kv_heads = at.kv_heads, a.dout = dout, a.out_in = out_in, a.scale = scale;
  const int rc = qkv::flat::attend_backward<T>(a, steps.data(), bw.d_output.data(), out.data());
  if (rc != 0)  // read_fields checked that the heads divide d_q and d_v
    throw std::logic_error("qkv attend: qkv::flat::attend_backward refused the sizes read_fields accepted");
  auto take = [&](std::size_t first, std::size_t rows, std::size_t cols) {
    runtime::dynamic_matrix<T> m(rows, cols);
    for (std::size_t n = 0; n < rows * cols; ++n) m.data()[n] = out[first + n];
    return m;
  };
  auto take_bias = [&](std::size_t first, std::size_t n, bool has) {
    return has ? std::vector<T>(out.begin() + std::ptrdiff_t(first), out.begin() + std::ptrdiff_t(first + n))
               : std::vector<T>{};
  };
  auto& g = bw.g;
  g.d_concat = take(at.d_concat(), t, dv);
  if (w.o) {
    g.d_w_output = take(at.d_wo(), w.o->weight.rows(), w.o->weight.cols());
    g.d_b_output = take_bias(at.d_bo(), dout, !w.o->bias.empty());
  }
  bw.row_dots.resize(heads, t);
  bw.d_weights.clear();
  bw.d_scaled_scores.clear();
  for (std::size_t h = 0; h < heads; ++h) {
    bw.d_weights.push_back(take(at.d_weights(h), t, t));
    bw.d_scaled_scores.push_back(take(at.d_scaled_scores(h), t, t));
    for (std::size_t i = 0; i < t; ++i) bw.row_dots(h, i) = out[at.row_dots(h) + i];
  }
  g.d_queries = take(at.d_queries(), t, dq);
  g.d_keys = take(at.d_keys(), t, dkv);
  g.d_values = take(at.d_values(), t, dvkv);
  g.d_w_query = take(at.d_wq(), w.q.weight.rows(), w.q.weight.cols());
  g.d_b_query = take_bias(at.d_bq(), dq, !w.q.bias.empty());
  g.d_w_key = take(at.d_wk(), w.k.weight.rows(), w.k.weight.cols());
  g.d_b_key = take_bias(at.d_bk(), dkv, !w.k.bias.empty());
  g.d_w_value = take(at.d_wv(), w.v.weight.rows(), w.v.weight.cols());
  g.d_b_value = take_bias(at.d_bv(), dvkv, !w.v.bias.empty());
  g.d_x = take(at.d_x(), t, d);
}

/// the gradients' --json members (docs/cli.md): ",\n \"d_output\": ..." and the rest, to be
/// placed before the object's closing brace
template <class T>
std::string json_gradients(const backward_result<T>& bw, bool has_wo) {
  std::string s;
  auto put = [&](const char* name, const auto& t) {
    s += ",\n \"";
    s += name;
    s += "\": ";
    qkv::io::write_tensor(s, t);
  };
  const auto& g = bw.g;
  put("d_output", bw.d_output);
  if (has_wo) {
    put("d_wo", g.d_w_output);
    if (!g.d_b_output.empty()) put("d_bo", g.d_b_output);
  }
  put("d_concat", g.d_concat);
  put("d_weights", bw.d_weights);
  put("D", bw.row_dots);
  put("d_scaled_scores", bw.d_scaled_scores);
  put("d_queries", g.d_queries);
  put("d_keys", g.d_keys);
  put("d_values", g.d_values);
  put("d_wq", g.d_w_query);
  if (!g.d_b_query.empty()) put("d_bq", g.d_b_query);
  put("d_wk", g.d_w_key);
  if (!g.d_b_key.empty()) put("d_bk", g.d_b_key);
  put("d_wv", g.d_w_value);
  if (!g.d_b_value.empty()) put("d_bv", g.d_b_value);
  put("d_x", g.d_x);
  return s;
}

/// a vector as a 1 x n matrix, for torch_str
template <class T>
runtime::dynamic_matrix<T> as_row(const std::vector<T>& v) {
  runtime::dynamic_matrix<T> m(1, v.size());
  for (std::size_t k = 0; k < v.size(); ++k) m(0, k) = v[k];
  return m;
}

/// row h of m as a 1 x n matrix
template <class T>
runtime::dynamic_matrix<T> row_of(const runtime::dynamic_matrix<T>& m, std::size_t h) {
  runtime::dynamic_matrix<T> d(1, m.cols());
  for (std::size_t i = 0; i < m.cols(); ++i) d(0, i) = m(h, i);
  return d;
}

/// columns c0 .. c0 + n of m
template <class T>
runtime::dynamic_matrix<T> columns(const runtime::dynamic_matrix<T>& m, std::size_t c0, std::size_t n) {
  runtime::dynamic_matrix<T> b(m.rows(), n);
  for (std::size_t i = 0; i < m.rows(); ++i)
    for (std::size_t c = 0; c < n; ++c) b(i, c) = m(i, c0 + c);
  return b;
}

/// @brief the backward's trace: every step in reverse order, named by its grad_fn
/// (docs/gradients.md), each gradient printed as PyTorch prints a tensor. `str` prints a matrix
/// (the forward trace's torch_str).
template <class T, class Str>
std::string backward_trace(bool out_in, const runtime::attention_weights<T>& w,
                           const runtime::attention_options<T>& opt, const runtime::multihead_result<T>& r,
                           const backward_result<T>& bw, Str str, bool core = false) {
  const auto& g = bw.g;
  const std::size_t H = opt.heads, HK = opt.kv_heads ? opt.kv_heads : H, group = H / HK;
  const std::size_t dh = r.queries.cols() / H, dvh = r.values.cols() / HK;
  std::ostringstream o;
  o << "\nThe backward ("
    << (core ? "core/flat_attention_backward.hpp, in the core's arithmetic"
             : "runtime/multihead_backward.hpp")
    << "), for the upstream gradient d_output "
    << (bw.sum ? "= \"sum\" (the gradient of output.sum(): all ones), " : "(the case's), ")
    << bw.d_output.shape() << " =\n"
    << str(bw.d_output) << "\n"
    << "Each step gives the gradient of the loss with respect to a forward step's input from the one "
       "with respect to its output, in reverse order; PyTorch's autograd names it by the grad_fn shown "
       "(docs/gradients.md).\n";
  const char* mm = "MmBackward0";
  if (w.o) {
    const bool b = !w.o->bias.empty();
    o << "\n"
      << (b ? "AddmmBackward0" : mm) << ": the output projection output = concat" << (out_in ? " Woᵀ" : " Wo")
      << (b ? " + bo" : "") << "\n";
    o << "d_wo = " << (out_in ? "d_outputᵀ · concat" : "concatᵀ · d_output") << ", " << g.d_w_output.shape()
      << " =\n"
      << str(g.d_w_output) << "\n";
    if (b) o << "d_bo = the column sums of d_output =\n" << str(as_row(g.d_b_output)) << "\n";
    o << "d_concat = d_output · Wo" << (out_in ? "" : "ᵀ") << ", " << g.d_concat.shape() << " =\n"
      << str(g.d_concat) << "\n";
  } else {
    o << "\n(no output projection: d_concat = d_output)\n";
  }
  if (H > 1)
    o << "\nCatBackward0: the heads side by side: head h's d_context is columns "
      << "h·" << dvh << " .. h·" << dvh << " + " << dvh - 1 << " of d_concat\n";
  for (std::size_t h = 0; h < H; ++h) {
    const std::size_t kvh = h / group;
    const std::string head = H > 1 ? " of head " + std::to_string(h) : "";
    const auto d_context = columns(g.d_concat, h * dvh, dvh);
    o << "\n"
      << mm << ": context" << head << " = weights · values (d_context" << head << " " << d_context.shape()
      << ")\n";
    o << "d_weights" << head << " (dP) = d_context · valuesᵀ =\n" << str(bw.d_weights[h]) << "\n";
    o << "d_values" << head << " = weightsᵀ · d_context";
    if (group > 1)
      o << " (key/value head " << kvh << " is shared by query heads " << kvh * group << " .. "
        << kvh * group + group - 1 << ": its d_values is the sum of theirs, printed once per key/value head)";
    if (h % group == 0)
      o << " =\n" << str(columns(g.d_values, kvh * dvh, dvh)) << "\n";
    else
      o << ": printed under head " << kvh * group << "\n";
    o << "D" << head << " = rowsum(d_context ∘ context) = rowsum(d_weights ∘ weights), one per query =\n"
      << str(row_of(bw.row_dots, h)) << "\n";
    o << "SoftmaxBackward0: d_scaled_scores" << head
      << " (dS) = weights ∘ (d_weights − D), 0 where masked =\n"
      << str(bw.d_scaled_scores[h]) << "\n";
    o << "MulBackward0 (the scale " << double(r.scale)
      << "; tutorial 004 divides by sqrt(d_k) instead: DivBackward0, the same number): d_scores = scale · "
         "d_scaled_scores\n";
    o << mm << " and TransposeBackward0: scores = queries · keysᵀ\n";
    o << "d_queries" << head << " = scale · d_scaled_scores · keys =\n"
      << str(columns(g.d_queries, h * dh, dh)) << "\n";
    o << "d_keys" << head
      << " = scale · d_scaled_scoresᵀ · queries (the transpose's gradient transposed back)";
    if (h % group == 0)
      o << (group > 1 ? ", summed over the query heads sharing it" : "") << " =\n"
        << str(columns(g.d_keys, kvh * dh, dh)) << "\n";
    else
      o << ": printed under head " << kvh * group << "\n";
  }
  const char* p = out_in ? "ᵀ · x" : "";
  auto proj = [&](const char* name, const char* d, const runtime::linear_weights<T>& l,
                  const runtime::dynamic_matrix<T>& dw, const std::vector<T>& db, const char* b) {
    o << "\n"
      << (l.bias.empty() ? mm : "AddmmBackward0") << ": " << name << " = x W" << name[0]
      << (out_in ? "ᵀ" : "") << (l.bias.empty() ? "" : std::string(" + b") + name[0]) << "\n";
    o << "d_w" << name[0] << " = " << (out_in ? std::string(d) + p : std::string("xᵀ · ") + d) << ", "
      << dw.shape() << " =\n"
      << str(dw) << "\n";
    if (!db.empty()) o << b << " = the column sums of " << d << " =\n" << str(as_row(db)) << "\n";
  };
  proj("queries", "d_queries", w.q, g.d_w_query, g.d_b_query, "d_bq");
  proj("keys", "d_keys", w.k, g.d_w_key, g.d_b_key, "d_bk");
  proj("values", "d_values", w.v, g.d_w_value, g.d_b_value, "d_bv");
  o << "\nAddBackward0: x feeds all three projections, so d_x = d_queries · Wq" << (out_in ? "" : "ᵀ")
    << " + d_keys · Wk" << (out_in ? "" : "ᵀ") << " + d_values · Wv" << (out_in ? "" : "ᵀ") << ", "
    << g.d_x.shape() << " =\n"
    << str(g.d_x) << "\n";
  return o.str();
}

}  // namespace qkv::cli::attend_detail
