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

/// the moments of one row from its sums: mean = s / d, r = 1 / sqrt(q / d + eps)
template <class T>
[[nodiscard]] inline layer_norm_moments<T> layer_norm_moments_from(T mean, T q, std::size_t d, T eps) {
  const T variance = q / T(d);
  return {mean, T(1) / std::sqrt(T(variance + eps))};  // correctly rounded, as qkv::sqrt
}

/// the moments of every row of x into out (x.rows entries, x.cols >= 1). Four rows at a time,
/// their sums interleaved in four named accumulators: each row's sums keep their index order
/// (the same bits as one row at a time), but the four chains are independent, so they overlap
/// instead of each add waiting on the one before it; the last rows one at a time.
template <class T>
void layer_norm_moments_of(matrix_view<const T> x, T eps, layer_norm_moments<T>* out) {
  const std::size_t d = x.cols, cs = x.col_stride;
  if (d == 0) return;
  std::size_t i = 0;
  for (; i + 4 <= x.rows; i += 4) {
    const T* r0 = x.data + i * x.row_stride;
    const T *r1 = r0 + x.row_stride, *r2 = r1 + x.row_stride, *r3 = r2 + x.row_stride;
    T s0 = r0[0], s1 = r1[0], s2 = r2[0], s3 = r3[0];
    for (std::size_t j = 1; j < d; ++j) {
      s0 += r0[j * cs];
      s1 += r1[j * cs];
      s2 += r2[j * cs];
      s3 += r3[j * cs];
    }
    const T m0 = s0 / T(d), m1 = s1 / T(d), m2 = s2 / T(d), m3 = s3 / T(d);
    T q0 = T(0), q1 = T(0), q2 = T(0), q3 = T(0);
    for (std::size_t j = 0; j < d; ++j) {
      const T c0 = r0[j * cs] - m0, c1 = r1[j * cs] - m1, c2 = r2[j * cs] - m2, c3 = r3[j * cs] - m3;
      q0 += c0 * c0;
      q1 += c1 * c1;
      q2 += c2 * c2;
      q3 += c3 * c3;
    }
    out[i] = layer_norm_moments_from(m0, q0, d, eps);
    out[i + 1] = layer_norm_moments_from(m1, q1, d, eps);
    out[i + 2] = layer_norm_moments_from(m2, q2, d, eps);
    out[i + 3] = layer_norm_moments_from(m3, q3, d, eps);
  }
  for (; i < x.rows; ++i) {
    const T* r0 = x.data + i * x.row_stride;
    T s0 = r0[0];
    for (std::size_t j = 1; j < d; ++j) s0 += r0[j * cs];
    const T m0 = s0 / T(d);
    T q0 = T(0);
    for (std::size_t j = 0; j < d; ++j) {
      const T c0 = r0[j * cs] - m0;
      q0 += c0 * c0;
    }
    out[i] = layer_norm_moments_from(m0, q0, d, eps);
  }
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
      (r * ((g - mgv) - V(xhat.data() + j, stdx::element_aligned) * mgxv))
          .copy_to(dxr + j, stdx::element_aligned);
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
