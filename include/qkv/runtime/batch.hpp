// batch.hpp: a batch of sequences of different lengths through one attention layer, in one
// call, each with its own key padding (nn.MultiheadAttention's key_padding_mask).
//
//   sequence b: x_b (T_b, d), context_b (S_b, d_c) or x_b, key_padding_b (S_b flags or none)
//   result b = attention(x_b, context_b, w, opt with key_padding_b)    (multihead.hpp)
//   the same bits as allowed_b(i, j) = not key_padding_b[j]           (T_b, S_b; never built)
//
// Every sequence gets the same options (heads, scale, causal, rope, ...): positions, causal
// masks and rotary angles count from each sequence's own row 0. A (T, S) `allowed` mask or an
// (S) key_padding cannot be shared by sequences of different lengths: opt.allowed and
// opt.key_padding must be unset (batch_sequence::key_padding is the per-sequence mask).
//
// Padding (docs/numerics.md, "Padded batches"): a padded key is skipped by every query of its
// sequence (weight 0, its value never read). A query row is computed whatever the padding of its
// own position, as nn.MultiheadAttention computes it (PyTorch masks keys, not queries); a query
// whose every key is padded (or masked) gets weights 0, context 0 and so output bo (or 0), qkv's
// policy for fully masked rows, where PyTorch 1.13 gives NaN.
//
// Bits: result b is exactly what attention() gives for that sequence alone with its key_padding
// (or allowed_b), on
// any thread count (each sequence is one attention() call; attention() is thread-count
// independent). Threads: with at least two sequences per thread, the sequences are spread over
// the pool, each computed on one thread; otherwise they run one after another, each over the
// whole pool (heads x query blocks).
//
// Limits, checked for the whole batch before anything is allocated: the scores and weights kept
// (keep_weights: 2 x heads x T_b x S_b x sizeof(T), summed over the batch, since every result
// is kept) at most opt.max_weights_bytes, else size_limit_error; the padding is S_b flags per
// sequence, passed as attention_options::key_padding, and does not count (with keep_weights =
// false the batch streams in O(T_b + S_b) per sequence whatever the limit); every shape (x's and context's widths, the
// padding's length, a shared bias's shape) before any arithmetic, else shape_error naming the sequence and both shapes;
// the weights' widths (wq against wk and wo, heads dividing them) as attention() checks them, in
// the first call it makes (after that sequence's projections, before its scores).
#pragma once

#include <cstddef>
#include <type_traits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dynamic_matrix.hpp"
#include "multihead.hpp"
#include "thread_pool.hpp"

namespace qkv::runtime {

/// one sequence of a batch
template <class T>
struct batch_sequence {
  matrix_view<const T> x;  // (T_b, d): the queries' tokens
  std::optional<matrix_view<const T>> context =
      std::nullopt;                             // (S_b, d_c): keys' and values' tokens; unset = x
  std::vector<unsigned char> key_padding = {};  // empty, or S_b flags: nonzero = padding, ignored
};

namespace detail {

template <class T, class W>
void check_batch(std::span<const batch_sequence<T>> batch, const W& w, const attention_options<T>& opt) {
  if (opt.allowed)
    throw shape_error(
        "batch attention: attention_options::allowed is " + opt.allowed->shape() +
        " but sequences of different lengths cannot share one mask; give each sequence its key_padding");
  if (opt.key_padding)
    throw shape_error("batch attention: attention_options::key_padding has " +
                      std::to_string(opt.key_padding->size()) +
                      " flags but sequences of different lengths cannot share one padding; give each "
                      "sequence its key_padding");
  const std::size_t H = opt.heads;
  if (H == 0) throw shape_error("batch attention: heads must be at least 1");
  // the weights' own widths (wq against wk, heads, wo; kv_heads when there are several) are
  // attention()'s to check: it refuses them on the first sequence it runs, before its scores
  if (opt.rope && w.q.out_features() % H == 0) (void)rotary_width(*opt.rope, w.q.out_features() / H);
  long double bytes = 0;
  for (std::size_t b = 0; b < batch.size(); ++b) {
    const auto& s = batch[b];
    const auto c = s.context ? *s.context : s.x;
    const std::string seq = "batch attention: sequence " + std::to_string(b) + ": ";
    if (s.x.cols != w.q.in_features())
      throw shape_error(seq + "x is " + shape_string(s.x.rows, s.x.cols) + " but wq takes " +
                        std::to_string(w.q.in_features()) + " features");
    if (c.cols != w.k.in_features() || c.cols != w.v.in_features())
      throw shape_error(seq + (s.context ? "context" : "x") + std::string(" is ") +
                        shape_string(c.rows, c.cols) + " but wk takes " + std::to_string(w.k.in_features()) +
                        " and wv " + std::to_string(w.v.in_features()) + " features");
    if (!s.key_padding.empty() && s.key_padding.size() != c.rows)
      throw shape_error(seq + "key_padding has " + std::to_string(s.key_padding.size()) +
                        " flags but there are " + std::to_string(c.rows) + " keys (" +
                        (s.context ? "context" : "x") + " is " + shape_string(c.rows, c.cols) + ")");
    // one (T, S) or (heads T, S) bias serves the batch only when every sequence has that shape:
    // refused here, before any sequence is computed (attention() would refuse it only when it
    // reached the first sequence it does not fit, after the ones before it)
    if (!detail::bias_fits(opt, H, s.x.rows, c.rows))
      throw shape_error(
          seq + "the bias is " + opt.bias->shape() + " but this sequence needs " +
          shape_string(s.x.rows, c.rows) + " or " + shape_string(H * s.x.rows, c.rows) +
          " (heads x queries by keys); one bias serves a batch only when every sequence has that shape");
    const long double ts = static_cast<long double>(s.x.rows) * static_cast<long double>(c.rows);
    if (opt.keep_weights) bytes += 2.0L * static_cast<long double>(opt.heads) * ts * sizeof(T);
  }
  if (bytes > static_cast<long double>(opt.max_weights_bytes))
    throw size_limit_error(
        "batch attention: " + std::to_string(batch.size()) + " sequences keep scores and weights of " +
        bytes_string(bytes) + " bytes in all, over the limit of " + std::to_string(opt.max_weights_bytes) +
        " (attention_options::max_weights_bytes; keep_weights = false streams in O(T + S))");
}

}  // namespace detail

/// @brief attention of every sequence of `batch` into results[b] (resized to the batch; its
/// buffers are reused when the shapes repeat). w: attention_weights<T> or
/// packed_attention_weights<T>.
/// @throws shape_error or size_limit_error (see the header comment) before any arithmetic
template <class T, template <class> class Weights>
  requires std::is_same_v<Weights<T>, attention_weights<T>> ||
           std::is_same_v<Weights<T>, packed_attention_weights<T>>
void batch_attention(std::span<const batch_sequence<T>> batch, const Weights<T>& w,
                     const attention_options<T>& opt, std::vector<multihead_result<T>>& results,
                     thread_pool* pool = &default_pool()) {
  detail::check_batch(batch, w, opt);
  results.resize(batch.size());
  auto one = [&](std::size_t b, thread_pool* inner) {
    const auto& s = batch[b];
    const auto c = s.context ? *s.context : s.x;
    if (s.key_padding.empty()) return attention<T>(s.x, c, w, opt, results[b], inner);
    attention_options<T> o = opt;  // the padding as key_padding: S_b flags, no (T_b, S_b) mask
    o.key_padding = s.key_padding;
    attention<T>(s.x, c, w, o, results[b], inner);
  };
  const std::size_t threads = pool ? pool->size() : 1;
  if (threads > 1 && batch.size() >= 2 * threads)
    pool->parallel_for(batch.size(), [&](std::size_t b) { one(b, nullptr); });
  else
    for (std::size_t b = 0; b < batch.size(); ++b) one(b, pool);
}

/// @brief the same, returning the results
template <class T, template <class> class Weights>
  requires std::is_same_v<Weights<T>, attention_weights<T>> ||
           std::is_same_v<Weights<T>, packed_attention_weights<T>>
[[nodiscard]] std::vector<multihead_result<T>> batch_attention(std::span<const batch_sequence<T>> batch,
                                                               const Weights<T>& w,
                                                               const attention_options<T>& opt = {},
                                                               thread_pool* pool = &default_pool()) {
  std::vector<multihead_result<T>> r;
  batch_attention<T>(batch, w, opt, r, pool);
  return r;
}

}  // namespace qkv::runtime
