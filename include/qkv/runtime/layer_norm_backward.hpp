// layer_norm_backward.hpp: the gradient of nn.LayerNorm over the last dimension (PyTorch's
// NativeLayerNormBackward0) at run time, for the forward of runtime/encoder.hpp's layer_norm.
//
//   forward, row by row:  mean, var (biased), r = 1 / sqrt(var + eps), x̂ = (x - mean) r,
//                         y = x̂ w + b
//   given dy (N, d):      g = dy ∘ w
//                         dx = r (g - mean(g) - x̂ mean(g ∘ x̂))        (N, d)
//                         dw += colsum(dy ∘ x̂),  db += colsum(dy)     (d)
// mean and r are the forward's (encoder.hpp's layer_norm: sums in index order, the same bits),
// recomputed from x or given by a forward that kept them (transformer.hpp). The rows of dx are
// computed on simd: x̂, g and dx element by element (the scalar formulas, so the same bits), the
// row means of g and g ∘ x̂ as lane sums added in a fixed order (simd.hpp's horizontal_sum), so
// the bits do not depend on anything but the values (not on threads). dw and db are
// accumulated (+=), rows ascending, element by element, so a caller can add several calls'
// gradients in a fixed order.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "dynamic_matrix.hpp"
#include "simd.hpp"

namespace qkv::runtime {

namespace detail {

/// the mean and r = 1 / sqrt(var + eps) of one LayerNorm row, as encoder.hpp's layer_norm
/// computes them (sums in index order: the same bits)
template <class T>
struct layer_norm_moments {
  T mean, r;
};

/// the moments of rows i0 .. i0 + 3 of x (d = x.cols >= 1), the four rows' sums interleaved:
/// each row's sums keep their index order (the same bits as one row at a time), but the four
/// chains are independent, so they overlap instead of waiting on each add's latency
template <class T, std::size_t R>
void layer_norm_moments_of_rows(matrix_view<const T> x, std::size_t i0, T eps, layer_norm_moments<T>* out) {
  const std::size_t d = x.cols;
  const T* row[R];
  for (std::size_t k = 0; k < R; ++k) row[k] = x.data + (i0 + k) * x.row_stride;
  const std::size_t cs = x.col_stride;
  T s[R], q[R], mean[R];
  for (std::size_t k = 0; k < R; ++k) s[k] = row[k][0];
  for (std::size_t j = 1; j < d; ++j)
    for (std::size_t k = 0; k < R; ++k) s[k] += row[k][j * cs];
  for (std::size_t k = 0; k < R; ++k) {
    mean[k] = s[k] / T(d);
    q[k] = T(0);
  }
  for (std::size_t j = 0; j < d; ++j)
    for (std::size_t k = 0; k < R; ++k) {
      const T c = row[k][j * cs] - mean[k];
      q[k] += c * c;
    }
  for (std::size_t k = 0; k < R; ++k) {
    const T variance = q[k] / T(d);
    out[k] = {mean[k], T(1) / std::sqrt(T(variance + eps))};  // correctly rounded, as qkv::sqrt
  }
}

/// the moments of every row of x into out (x.rows entries): four rows at a time, then one
template <class T>
void layer_norm_moments_of(matrix_view<const T> x, T eps, layer_norm_moments<T>* out) {
  if (x.cols == 0) return;
  std::size_t i = 0;
  for (; i + 4 <= x.rows; i += 4) layer_norm_moments_of_rows<T, 4>(x, i, eps, out + i);
  for (; i < x.rows; ++i) layer_norm_moments_of_rows<T, 1>(x, i, eps, out + i);
}

/// layer_norm_backward with the forward's moments given (one per row of x)
template <class T>
void layer_norm_backward_rows(matrix_view<const T> x, const layer_norm_moments<T>* moments, const T* weight,
                              matrix_view<const T> dy, matrix_view<T> dx, T* d_weight, T* d_bias) {
  const std::size_t n = x.rows, d = x.cols;
  if (x.col_stride != 1 || dy.col_stride != 1 || dx.col_stride != 1) {
    // strided columns (no caller in the repo): the scalar formulas, the same order
    std::vector<T> xhat(d);
    for (std::size_t i = 0; i < n; ++i) {
      const T mean = moments[i].mean, r = moments[i].r;
      T mg = T(0), mgx = T(0);
      for (std::size_t j = 0; j < d; ++j) {
        xhat[j] = (x(i, j) - mean) * r;
        const T g = dy(i, j) * weight[j];
        mg += g;
        mgx += g * xhat[j];
        d_weight[j] += dy(i, j) * xhat[j];
        d_bias[j] += dy(i, j);
      }
      mg /= T(d);
      mgx /= T(d);
      for (std::size_t j = 0; j < d; ++j) dx(i, j) = r * ((dy(i, j) * weight[j] - mg) - xhat[j] * mgx);
    }
    return;
  }
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  std::vector<T> xhat(d);
  for (std::size_t i = 0; i < n; ++i) {
    const T* xr = x.data + i * x.row_stride;
    const T* dyr = dy.data + i * dy.row_stride;
    T* dxr = dx.data + i * dx.row_stride;
    const V mean(moments[i].mean), r(moments[i].r);
    V mg(T(0)), mgx(T(0));
    std::size_t j = 0;
    for (; j + W <= d; j += W) {
      const V xh = (V(xr + j, stdx::element_aligned) - mean) * r;
      const V dyv(dyr + j, stdx::element_aligned);
      const V g = dyv * V(weight + j, stdx::element_aligned);
      mg += g;
      mgx += g * xh;
      xh.copy_to(xhat.data() + j, stdx::element_aligned);
      (V(d_weight + j, stdx::element_aligned) + dyv * xh).copy_to(d_weight + j, stdx::element_aligned);
      (V(d_bias + j, stdx::element_aligned) + dyv).copy_to(d_bias + j, stdx::element_aligned);
    }
    if (j < d) {
      // the padded lanes: x = mean (x̂ = 0), dy = w = 0 (g = 0): they add 0 to every sum
      const std::size_t m = d - j;
      const V xh = (load_partial(xr + j, m, moments[i].mean) - mean) * r;
      const V dyv = load_partial(dyr + j, m);
      const V g = dyv * load_partial(weight + j, m);
      mg += g;
      mgx += g * xh;
      store_partial(xh, xhat.data() + j, m);
      store_partial(load_partial(d_weight + j, m) + dyv * xh, d_weight + j, m);
      store_partial(load_partial(d_bias + j, m) + dyv, d_bias + j, m);
    }
    const V mgv(horizontal_sum(mg) / T(d)), mgxv(horizontal_sum(mgx) / T(d));
    for (j = 0; j + W <= d; j += W) {
      const V g = V(dyr + j, stdx::element_aligned) * V(weight + j, stdx::element_aligned);
      (r * ((g - mgv) - V(xhat.data() + j, stdx::element_aligned) * mgxv)).copy_to(dxr + j, stdx::element_aligned);
    }
    if (j < d) {
      const std::size_t m = d - j;
      const V g = load_partial(dyr + j, m) * load_partial(weight + j, m);
      store_partial(r * ((g - mgv) - load_partial(xhat.data() + j, m) * mgxv), dxr + j, m);
    }
  }
}

}  // namespace detail

/// @brief dx of layer_norm(x, weight, bias, eps) for dy, and weight's and bias's gradients added
/// to d_weight, d_bias (each d values).
/// @throws shape_error naming both shapes when dy is not x's shape or a vector is not d long
template <class T>
void layer_norm_backward(matrix_view<const T> x, const T* weight, T eps, matrix_view<const T> dy,
                         matrix_view<T> dx, T* d_weight, T* d_bias) {
  const std::size_t n = x.rows, d = x.cols;
  if (dy.rows != n || dy.cols != d)
    throw shape_error("layer_norm_backward: x is " + x.shape() + " but dy is " + dy.shape());
  if (dx.rows != n || dx.cols != d)
    throw shape_error("layer_norm_backward: x is " + x.shape() + " but dx is " + dx.shape());
  std::vector<detail::layer_norm_moments<T>> moments(n);
  detail::layer_norm_moments_of<T>(x, eps, moments.data());
  detail::layer_norm_backward_rows<T>(x, moments.data(), weight, dy, dx, d_weight, d_bias);
}

}  // namespace qkv::runtime
