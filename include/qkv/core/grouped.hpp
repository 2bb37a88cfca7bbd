// grouped.hpp: grouped-query attention (GQA) and multi-query attention (MQA).
//
// Multi-head attention gives each of its H heads its own keys and values. A decoder's KV cache
// then holds H keys and values per token; grouped-query attention (Ainslie et al. 2023) keeps
// only Hkv of them and lets G = H / Hkv query heads share each one:
//
//   queries (T, H * d_k)     head h: columns h*d_k .. (h+1)*d_k - 1
//   keys    (S, Hkv * d_k)   values (S, Hkv * d_v)
//   query head h uses key/value head h / G              (G = H / Hkv consecutive query heads per group)
//   Hkv = H: multi-head attention;  Hkv = 1: multi-query attention (Shazeer 2019)
// The arithmetic of each head is attend_projected's. It is multi-head attention with each K/V head
// repeated G times (repeat_kv, as LLaMA's repeat_kv / torch.repeat_interleave on the head axis),
// bit for bit: each head meets the same numbers in the same order (example 11 proves it).
#pragma once

#include <cstddef>

#include "attention.hpp"
#include "matrix.hpp"
#include "multihead.hpp"

namespace qkv {

/// H query heads share Hkv key/value heads: Hkv > 0 and H a multiple of Hkv
template <std::size_t H, std::size_t Hkv>
concept query_heads_divide_into_kv_groups = (Hkv > 0 && H % Hkv == 0);

/// @brief (S, Hkv * d) -> (S, Hkv * G * d): each of the Hkv heads' blocks of d columns repeated G
/// times in place (head g of the result is head g / G of the input): the keys or values that
/// multi-head attention with H = Hkv G heads would need
template <std::size_t Hkv, std::size_t G, class T, std::size_t S, std::size_t HkvD>
  requires(G > 0 && divisible_into_heads<HkvD, Hkv>)
[[nodiscard]] constexpr matrix<T, S, HkvD * G> repeat_kv(const matrix<T, S, HkvD>& m) {
  constexpr std::size_t d = HkvD / Hkv;
  matrix<T, S, HkvD * G> out;
  for (std::size_t s = 0; s < S; ++s)
    for (std::size_t h = 0; h < Hkv; ++h)
      for (std::size_t g = 0; g < G; ++g)
        for (std::size_t c = 0; c < d; ++c)
          out.v[s * HkvD * G + (h * G + g) * d + c] = m.v[s * HkvD + h * d + c];
  return out;
}

/// @brief every intermediate of grouped-query attention; H query heads, Hkv key/value heads
template <class T, std::size_t H, std::size_t Hkv, std::size_t Tq, std::size_t S, std::size_t Dq,
          std::size_t DkvK, std::size_t DkvV>
struct grouped_result {
  matrix<T, Tq, Dq> queries;             // all H query heads side by side
  matrix<T, S, DkvK> keys;               // the Hkv key heads side by side
  matrix<T, S, DkvV> values;             // the Hkv value heads side by side
  stack<T, H, Tq, S> scores;             // per query head: q·k, raw
  stack<T, H, Tq, S> scaled_scores;      // per query head: scaled and masked
  stack<T, H, Tq, S> weights;            // per query head: softmax of each row
  stack<T, H, Tq, DkvV / Hkv> context;   // per query head: weights V of its group
  matrix<T, Tq, H*(DkvV / Hkv)> concat;  // the heads' contexts side by side
};

/// @brief grouped-query attention over projected q (T, H d_k), k (S, Hkv d_k), v (S, Hkv d_v):
/// query head h attends with key/value head h / (H / Hkv); the scale from d_k
template <std::size_t H, std::size_t Hkv, class T, std::size_t Tq, std::size_t S, std::size_t Dq,
          std::size_t DkvK, std::size_t DkvV>
  requires(query_heads_divide_into_kv_groups<H, Hkv> && divisible_into_heads<Dq, H> &&
           divisible_into_heads<DkvK, Hkv> && divisible_into_heads<DkvV, Hkv> && Dq / H == DkvK / Hkv)
[[nodiscard]] constexpr grouped_result<T, H, Hkv, Tq, S, Dq, DkvK, DkvV> grouped_query_attend_projected(
    const matrix<T, Tq, Dq>& q, const matrix<T, S, DkvK>& k, const matrix<T, S, DkvV>& v,
    const attention_options<T>& options = {}) {
  grouped_result<T, H, Hkv, Tq, S, Dq, DkvK, DkvV> r;
  r.queries = q;
  r.keys = k;
  r.values = v;
  const auto qh = split_heads<H>(q);    // (H, T, d_k)
  const auto kh = split_heads<Hkv>(k);  // (Hkv, S, d_k)
  const auto vh = split_heads<Hkv>(v);  // (Hkv, S, d_v)
  constexpr std::size_t G = H / Hkv;
  for (std::size_t h = 0; h < H; ++h) {
    const auto a = attend_projected(qh[h], kh[h / G], vh[h / G], options);
    r.scores[h] = a.scores;
    r.scaled_scores[h] = a.scaled_scores;
    r.weights[h] = a.weights;
    r.context[h] = a.context;
  }
  r.concat = hconcat(r.context);
  return r;
}

}  // namespace qkv
