// layer_norm_backward.hpp: the gradient of nn.LayerNorm over the last dimension (PyTorch's
// NativeLayerNormBackward0) at run time, for the forward of runtime/encoder.hpp's layer_norm.
//
//   forward, row by row:  mean, var (biased), r = 1 / sqrt(var + eps), x̂ = (x - mean) r,
//                         y = x̂ w + b
//   given dy (N, d):      g = dy ∘ w
//                         dx = r (g - mean(g) - x̂ mean(g ∘ x̂))        (N, d)
//                         dw += colsum(dy ∘ x̂),  db += colsum(dy)     (d)
// mean and r are recomputed from x with the forward's own arithmetic (the same bits); the row
// means of g and g ∘ x̂ are sums in index order. dw and db are accumulated (+=), rows ascending,
// so a caller can add several calls' gradients in a fixed order.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "dynamic_matrix.hpp"

namespace qkv::runtime {

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
  std::vector<T> xhat(d);
  for (std::size_t i = 0; i < n; ++i) {
    T s = x(i, 0);
    for (std::size_t j = 1; j < d; ++j) s += x(i, j);
    const T mean = s / T(d);
    T q = T(0);
    for (std::size_t j = 0; j < d; ++j) {
      const T c = x(i, j) - mean;
      q += c * c;
    }
    const T variance = q / T(d);
    const T r = T(1) / std::sqrt(T(variance + eps));
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
}

}  // namespace qkv::runtime
