// rope.hpp: rotary position embeddings (RoPE; Su et al. 2021, "RoFormer") at run time.
//
//   pair i of a head (i < r/2, r = rotary_dim), at position p:
//     theta_i = 1 / base^(2i / r),  angle = p * theta_i,  c = cos(angle), s = sin(angle)
//     (x0, x1) -> (x0 c - x1 s,  x1 c + x0 s)
//   half_split (LLaMA, GPT-NeoX; Hugging Face's rotate_half): x0 = x[i], x1 = x[i + r/2]
//   interleaved (RoFormer, GPT-J; rotate_every_two):          x0 = x[2i], x1 = x[2i + 1]
//   the columns r .. head_dim - 1 are left as they are (GPT-NeoX's rotary_pct < 1)
//
// Angles: theta_i, p * theta_i, cos and sin are computed in double and only c and s are
// rounded to T (docs/numerics.md, "Rotary position embeddings"). Hugging Face's LLaMA computes
// theta_i and p * theta_i in float32, whose rounding of the angle grows with p (up to about
// p * 2^-23 rad); in double the angle is within about p * 2^-52 rad, so for float c and s are
// the cosine and sine rounded once, to within half an ulp (plus that tiny angle error). The rotation itself is then as PyTorch's
// q * cos + rotate_half(q) * sin rounds it: two products, one sum, in T (-ffp-contract=off), so
// given the same c and s the bits are PyTorch's (tests/runtime/rope_batch_test.cpp).
//
// In attention() (multihead.hpp), `attention_options::rope` rotates every head of the projected
// queries and keys: query row i at position position_offset + i, key row j at
// key_position_offset + j (unset: position_offset + j). The scores then depend only on the
// positions' differences (q_m . k_n is a function of m - n); the multihead_result's queries and
// keys are the rotated ones, as the kernels used them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "../core/rope.hpp"
#include "dynamic_matrix.hpp"
#include "thread_pool.hpp"

namespace qkv::runtime {

/// which columns of a head form a rotated pair: core/rope.hpp's enum, the same type
/// (half_split (i, i + r/2): LLaMA, GPT-NeoX; interleaved (2i, 2i + 1): RoFormer, GPT-J)
using qkv::rope_layout;

/// how to rotate
struct rope_options {
  rope_layout layout = rope_layout::half_split;
  double base = 10000;              // theta_i = base^(-2i / rotary_dim)
  std::size_t rotary_dim = 0;       // columns rotated per head, even; 0 = the whole head
  std::size_t position_offset = 0;  // the position of the first query (x's row 0)
  // the position of the first key (context's row 0); unset = position_offset (self-attention
  // continuing a sequence). T new queries against a context of S keys from position 0 (the
  // causal_alignment::lower_right case): position_offset = S - T, key_position_offset = 0.
  // The positions are this struct's only: they do not follow attention_options::alignment.
  std::optional<std::size_t> key_position_offset = std::nullopt;
};

/// the cosines and sines of `count` consecutive positions from `first`, pairs of one head:
/// cos(p) and sin(p) hold r/2 values per position, rounded to T from double
template <class T>
struct rope_table {
  std::size_t pairs = 0;
  std::vector<T> cos, sin;  // count x pairs

  rope_table(const rope_options& o, std::size_t rotary_dim, std::size_t first, std::size_t count)
      : pairs(rotary_dim / 2), cos(count * pairs), sin(count * pairs) {
    std::vector<double> theta(pairs);
    for (std::size_t i = 0; i < pairs; ++i)  // Hugging Face's 1 / base^(arange(0, r, 2) / r), in double
      theta[i] = 1.0 / std::pow(o.base, double(2 * i) / double(rotary_dim));
    for (std::size_t p = 0; p < count; ++p)
      for (std::size_t i = 0; i < pairs; ++i) {
        const double angle = double(first + p) * theta[i];
        cos[p * pairs + i] = static_cast<T>(std::cos(angle));
        sin[p * pairs + i] = static_cast<T>(std::sin(angle));
      }
  }
};

namespace detail {

/// the rotary width of a head of `head_dim` columns, checked: even and at most head_dim
inline std::size_t rotary_width(const rope_options& o, std::size_t head_dim) {
  const std::size_t r = o.rotary_dim == 0 ? head_dim : o.rotary_dim;
  if (r % 2 != 0 || r > head_dim)
    throw shape_error("rope: rotary_dim " + std::to_string(r) +
                      (o.rotary_dim == 0 ? " (the whole head)" : "") +
                      " must be even and at most the head's " + std::to_string(head_dim) + " columns");
  if (!(o.base > 0) || !std::isfinite(o.base))
    throw shape_error("rope: base must be a positive finite number, got " + std::to_string(o.base));
  return r;
}

}  // namespace detail

/// @brief rotate row p of m's heads (head_dim columns each, heads side by side) by the table's
/// row p, in place. Each element: x0 c - x1 s and x1 c + x0 s, rounded as written.
template <class T>
void apply_rope(const matrix_view<T>& m, std::size_t head_dim, rope_layout layout, const rope_table<T>& t,
                std::size_t r0, std::size_t r1) {
  const std::size_t pairs = t.pairs, heads = head_dim == 0 ? 0 : m.cols / head_dim;
  for (std::size_t p = r0; p < r1; ++p) {
    const T* c = t.cos.data() + p * pairs;
    const T* s = t.sin.data() + p * pairs;
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t i = 0; i < pairs; ++i) {
        const std::size_t a = h * head_dim + (layout == rope_layout::half_split ? i : 2 * i);
        const std::size_t b = layout == rope_layout::half_split ? a + pairs : a + 1;
        const T x0 = m(p, a), x1 = m(p, b);
        m(p, a) = x0 * c[i] - x1 * s[i];
        m(p, b) = x1 * c[i] + x0 * s[i];
      }
  }
}

/// @brief rotary embeddings of every head of m (rows: positions first, first + 1, ...; columns:
/// heads of head_dim side by side), in place. Rows are split over the pool in blocks; each row's
/// arithmetic is the same on any thread, so any thread count gives the same bits.
/// @throws shape_error when head_dim does not divide m's columns or rotary_dim is odd or too wide
template <class T>
void apply_rope(const matrix_view<T>& m, std::size_t head_dim, const rope_options& o, std::size_t first,
                thread_pool* pool = &default_pool()) {
  if (head_dim == 0 || m.cols % head_dim != 0)
    throw shape_error("rope: heads of " + std::to_string(head_dim) + " columns do not divide a " +
                      shape_string(m.rows, m.cols) + " matrix");
  const std::size_t r = detail::rotary_width(o, head_dim);
  if (r == 0 || m.rows == 0) return;
  const rope_table<T> t(o, r, first, m.rows);
  constexpr std::size_t block = 64;
  const std::size_t blocks = (m.rows + block - 1) / block;
  auto run = [&](std::size_t b) {
    apply_rope<T>(m, head_dim, o.layout, t, b * block, std::min(m.rows, (b + 1) * block));
  };
  if (pool && blocks > 1)
    pool->parallel_for(blocks, run);
  else
    for (std::size_t b = 0; b < blocks; ++b) run(b);
}

}  // namespace qkv::runtime
