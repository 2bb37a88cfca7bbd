// kv_cache.hpp: a key/value cache for causal decoding, one token (or a few) at a time.
//
// A decoder language model generates token t after tokens 0..t-1. Its causal attention for the
// new token needs the keys and values of every earlier token, which do not change: a KV cache
// keeps them, and each step appends the new token's key and value and attends with the new
// query only (Tq = 1), instead of recomputing the whole (t+1, t+1) attention.
//
//   kv_cache<T, Capacity, Dk, Dv> c;       keys (Capacity, Dk), values (Capacity, Dv); c.length rows used
//   c.append(k, v)                         k (N, Dk), v (N, Dv): rows length .. length + N - 1
//   attend_cache(q, c, options, align)     q (Tq, Dk) against the cache -> attention_result (Tq, Capacity)
// Keys at length .. Capacity - 1 are not there yet: their scores are -inf (weight exactly 0,
// never read by the context). With options.causal the new queries are the LAST Tq positions of
// the cache, the lower-right alignment (masks.hpp's causal_alignment): query i sees keys
// j <= i + length - Tq. One cache is one head of one layer: a model keeps one per layer and per
// key/value head (an array of them).
//
// Decoding token by token gives the rows of the full causal attention bit for bit: the scores
// are the same dot products summed in the same order, the masked keys add e^-inf = 0 to the
// softmax's sum (s + 0 = s, exactly) and are skipped by the context (example 10 proves it).
//
// Rotary embeddings (opt-in): with `rope` set (before the first append), append rotates each key
// at its position, the row it is stored in (rope.hpp: rope(k, *rope, length)), and stores the
// rotated key; rope_queries(q, cache) rotates the Tq new queries at theirs, the cache's last Tq
// positions length - Tq .. length - 1 (the new tokens, appended just before; whatever the mask's
// alignment). The caller rotates the queries (attend_cache takes them as given). Row p of a rope()
// of the whole sequence is rope() of that row alone at first_position p, the same operations on
// the same numbers: decoding with RoPE through the cache gives the rows of full causal attention
// of rope(Q), rope(K) bit for bit, as without RoPE (tests/core/rope_cache_test.cpp).
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "fail.hpp"
#include "attention.hpp"
#include "masks.hpp"
#include "matrix.hpp"
#include "rope.hpp"

namespace qkv {

/// @brief the keys and values of the tokens seen so far, for one head of one layer.
/// Capacity: the most tokens it holds (a compile-time size, like every qkv::matrix); length: how
/// many it holds now.
template <class T, std::size_t Capacity, std::size_t Dk, std::size_t Dv>
struct kv_cache {
  static_assert(Capacity > 0, "qkv::kv_cache needs a capacity of at least one token");
  matrix<T, Capacity, Dk> keys{};    // rows 0 .. length - 1 hold the tokens' keys
  matrix<T, Capacity, Dv> values{};  // rows 0 .. length - 1 hold the tokens' values
  std::size_t length = 0;
  // set (before the first append): append rotates each key at its position (its row); unset: keys
  // are stored as given
  std::optional<rope_options> rope = std::nullopt;

  [[nodiscard]] static constexpr std::size_t capacity() { return Capacity; }

  /// @brief append N tokens' keys (N, Dk) and values (N, Dv) after the ones held. A cache that
  /// would overflow throws std::length_error naming both sizes (at compile time: no constant).
  /// With `rope` set, key t is stored rotated at position length + t (an odd Dk cannot be
  /// rotated: std::invalid_argument)
  template <std::size_t N>
  constexpr void append(const matrix<T, N, Dk>& k_given, const matrix<T, N, Dv>& v) {
    if (N > Capacity - length)
      ::qkv::detail::fail<std::length_error>("qkv::kv_cache::append: " + std::to_string(N) +
                                             " tokens do not fit: " + std::to_string(length) +
                                             " held, capacity " + std::to_string(Capacity));
    matrix<T, N, Dk> k = k_given;
    if (rope) {
      if constexpr (rope_width_is_even<Dk>)
        k = qkv::rope(k_given, *rope, length);  // (N, Dk): row t at position length + t
      else
        ::qkv::detail::fail<std::invalid_argument>(
            "qkv::kv_cache::append: RoPE needs an even key width, Dk is " + std::to_string(Dk));
    }
    for (std::size_t t = 0; t < N; ++t) {
      for (std::size_t c = 0; c < Dk; ++c) keys.v[(length + t) * Dk + c] = k.v[t * Dk + c];
      for (std::size_t c = 0; c < Dv; ++c) values.v[(length + t) * Dv + c] = v.v[t * Dv + c];
    }
    length += N;
  }
};

/// @brief the Tq new queries (Tq, Dk) rotated as the cache rotated their keys: query i at position
/// length - Tq + i (the last Tq tokens appended); q itself when the cache has no `rope`.
/// @throws std::length_error when the cache holds fewer than Tq positions (their keys are not in yet)
template <class T, std::size_t Tq, std::size_t Capacity, std::size_t Dk, std::size_t Dv>
[[nodiscard]] constexpr matrix<T, Tq, Dk> rope_queries(const matrix<T, Tq, Dk>& q,
                                                       const kv_cache<T, Capacity, Dk, Dv>& cache) {
  if (!cache.rope) return q;
  if (Tq > cache.length)
    ::qkv::detail::fail<std::length_error>("qkv::rope_queries: " + std::to_string(Tq) + " queries but only " +
                                           std::to_string(cache.length) +
                                           " positions cached (append their keys first)");
  if constexpr (rope_width_is_even<Dk>)
    return qkv::rope(q, *cache.rope, cache.length - Tq);
  else
    ::qkv::detail::fail<std::invalid_argument>("qkv::rope_queries: RoPE needs an even key width, Dk is " +
                                               std::to_string(Dk));
}

/// @brief attention of Tq new queries (Tq, Dk) against the cache: scores (Tq, Capacity), keys
/// at or after `length` masked. With options.causal the queries sit at the `alignment` of the
/// cache's length (lower_right, the default: the new tokens are the last Tq positions; query i
/// sees keys j <= i + length - Tq); a window > 0 keeps only the `window` most recent keys of
/// each query (masks.hpp's sliding_window_mask). The same steps as attend_projected: scores,
/// scaling (d_k = Dk), -inf where masked, softmax of each row, context over the unmasked keys.
template <class T, std::size_t Tq, std::size_t Capacity, std::size_t Dk, std::size_t Dv>
  requires std::numeric_limits<T>::has_infinity
[[nodiscard]] constexpr attention_result<T, Tq, Capacity, Dk, Dv> attend_cache(
    const matrix<T, Tq, Dk>& q, const kv_cache<T, Capacity, Dk, Dv>& cache,
    const attention_options<T>& options = {}, causal_alignment alignment = causal_alignment::lower_right,
    std::size_t window = 0) {
  attention_result<T, Tq, Capacity, Dk, Dv> r;
  r.queries = q;
  r.keys = cache.keys;
  r.values = cache.values;
  r.scores = scores(q, cache.keys);                      // (Tq, Capacity)
  r.scaled_scores = scale(r.scores, options.scale, Dk);  // (Tq, Capacity)
  for (std::size_t i = 0; i < Tq; ++i)
    for (std::size_t j = 0; j < Capacity; ++j) {
      const bool held = j < cache.length;
      const bool seen = !options.causal || causally_allowed(i, j, Tq, cache.length, alignment, window);
      if (!held || !seen) r.scaled_scores.v[i * Capacity + j] = -std::numeric_limits<T>::infinity();
    }
  r.weights = softmax_rows(r.scaled_scores);                           // (Tq, Capacity)
  r.context = attended_context(r.scaled_scores, r.weights, r.values);  // (Tq, Dv)
  return r;
}

}  // namespace qkv
