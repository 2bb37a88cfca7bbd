// softmax.hpp: the stable row softmax on simd, plain and with scale and mask (attention's).
//
//   softmax(x)_j = e^(x_j - m) / sum_k e^(x_k - m),  m = max_k x_k
// Subtracting the row maximum keeps every e^(...) in (0, 1], so rows of any finite size stay
// finite (docs/design.md, "Semantics"). A row whose entries are all -inf (every key masked)
// gives 0 everywhere, not NaN: documented, and the same as the streaming path. A row with a NaN
// or a +inf gives NaN everywhere (softmax has no value there; PyTorch gives NaN too), whatever
// the max instruction does with the NaN (row_max; docs/numerics.md, "NaN and infinity in
// attention").
// The sum is accumulated lane by lane and the lanes added in a fixed order (simd.hpp), so a
// row's result depends only on the row. Each weight is a division e / sum, as in PyTorch,
// not a multiplication by 1/sum.
#pragma once

#include <cstddef>
#include <limits>

#include "dynamic_matrix.hpp"
#include "exp.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"

namespace qkv::runtime {

namespace detail {

/// the largest of x[0..n), -inf for n == 0. With a NaN among them the result is unspecified
/// (vmaxps keeps or drops a NaN depending on the operand order): NaN, -inf or some element.
/// Callers handle that without a test in the loop: a NaN or +inf result poisons the row; a
/// finite one makes e^(x - m) NaN, so the sum and the whole row NaN; -inf means "every key
/// masked" only after any_nan() says there is no NaN (rare: fully masked rows only).
template <class T>
[[nodiscard]] inline T row_max(const T* x, std::size_t n) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  const T ninf = -std::numeric_limits<T>::infinity();
  V m(ninf);
  std::size_t j = 0;
  for (; j + W <= n; j += W) m = stdx::max(m, V(x + j, stdx::element_aligned));
  if (j < n) m = stdx::max(m, load_partial(x + j, n - j, ninf));
  return horizontal_max(m);
}

/// true when some x[j] is NaN (a scan for the rare cases: row_max gave -inf)
template <class T>
[[nodiscard]] inline bool any_nan(const T* x, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j)
    if (x[j] != x[j]) return true;
  return false;
}

/// a row maximum that poisons its row: NaN (some score is NaN) or +inf (softmax undefined)
template <class T>
[[nodiscard]] inline bool poisons_row(T m) {
  return m != m || m == std::numeric_limits<T>::infinity();
}

/// x[j] = e^(x[j] - m) in place; returns the sum (lane sums, then lanes in a fixed order)
template <class T>
inline T exp_shifted_sum(T* x, std::size_t n, T m) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  const V vm(m);
  V s(T(0));
  std::size_t j = 0;
  for (; j + W <= n; j += W) {
    const V e = vexp(V(x + j, stdx::element_aligned) - vm);
    e.copy_to(x + j, stdx::element_aligned);
    s += e;
  }
  if (j < n) {
    // the padded lanes hold m: e^0 = 1 keeps vexp on its fast path (e^(-inf) would not);
    // they are set to 0 before the sum, so they add nothing
    const auto real = first_lanes<T>(n - j);
    const V e = select(real, vexp(load_partial(x + j, n - j, m) - vm), V(T(0)));
    store_partial(e, x + j, n - j);
    s += e;
  }
  return horizontal_sum(s);
}

/// x[j] /= d
template <class T>
inline void divide_row(T* x, std::size_t n, T d) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  const V vd(d);
  std::size_t j = 0;
  for (; j + W <= n; j += W) (V(x + j, stdx::element_aligned) / vd).copy_to(x + j, stdx::element_aligned);
  for (; j < n; ++j) x[j] = x[j] / d;
}

/// x[j] *= f (the online softmax's rescale of an output row)
template <class T>
inline void multiply_row(T* x, std::size_t n, T f) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  const V vf(f);
  std::size_t j = 0;
  for (; j + W <= n; j += W) (V(x + j, stdx::element_aligned) * vf).copy_to(x + j, stdx::element_aligned);
  for (; j < n; ++j) x[j] = x[j] * f;
}

}  // namespace detail

/// @brief softmax of x[0..n) in place (see the header comment; all -inf gives all 0; a NaN or
/// a +inf gives all NaN)
template <class T>
inline void softmax_row(T* x, std::size_t n) {
  const T m = detail::row_max(x, n);
  const bool masked = m == -std::numeric_limits<T>::infinity();
  if (detail::poisons_row(m) || (masked && detail::any_nan(x, n))) [[unlikely]] {
    for (std::size_t j = 0; j < n; ++j) x[j] = std::numeric_limits<T>::quiet_NaN();
    return;
  }
  if (masked) {
    for (std::size_t j = 0; j < n; ++j) x[j] = T(0);
    return;
  }
  // a NaN with a finite m: e^(NaN - m) is NaN, so is the sum, so is every weight
  const T sum = detail::exp_shifted_sum(x, n, m);
  detail::divide_row(x, n, sum);
}

/// @brief out[j] = softmax(scale * raw + mask)_j for one row of attention scores.
/// allowed: n flags (nonzero = may attend) or nullptr; padding: n flags (nonzero = padding,
/// masked: a key_padding row, shared by every query) or nullptr; keys j >= key_limit are masked
/// too (causal: key_limit = query index + 1). raw and out may be the same array.
template <class T>
inline void masked_softmax_row(const T* raw, T* out, std::size_t n, T scale, const unsigned char* allowed,
                               std::size_t key_limit, const unsigned char* padding = nullptr) {
  const T ninf = -std::numeric_limits<T>::infinity();
  for (std::size_t j = 0; j < n; ++j) {
    const bool ok = j < key_limit && (!allowed || allowed[j]) && (!padding || !padding[j]);
    out[j] = ok ? T(raw[j] * scale) : ninf;
  }
  softmax_row(out, n);
}

/// @brief softmax of each row of m, in place; rows are split over the pool
template <class T>
void softmax_rows(matrix_view<T> m, thread_pool* pool = &default_pool()) {
  if (m.col_stride != 1 && m.cols > 1) {
    auto c = copy_of(matrix_view<const T>(m));
    softmax_rows(c.view(), nullptr);
    for (std::size_t i = 0; i < m.rows; ++i)
      for (std::size_t j = 0; j < m.cols; ++j) m(i, j) = c(i, j);
    return;
  }
  constexpr std::size_t rows_per_task = 64;
  const std::size_t tasks = (m.rows + rows_per_task - 1) / rows_per_task;
  auto run = [&](std::size_t t) {
    for (std::size_t i = t * rows_per_task; i < std::min(m.rows, (t + 1) * rows_per_task); ++i)
      softmax_row(m.data + i * m.row_stride, m.cols);
  };
  if (pool && m.rows * m.cols >= (1u << 15))
    pool->parallel_for(tasks, run);
  else
    for (std::size_t t = 0; t < tasks; ++t) run(t);
}

/// @brief the row softmax of m as a new matrix
template <class T>
[[nodiscard]] dynamic_matrix<T> softmax_rows(const dynamic_matrix<T>& m,
                                             thread_pool* pool = &default_pool()) {
  dynamic_matrix<T> out = m;
  softmax_rows(out.view(), pool);
  return out;
}

}  // namespace qkv::runtime
