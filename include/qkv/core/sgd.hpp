// sgd.hpp: one step of stochastic gradient descent, W <- W - lr dW, rounded once as PyTorch 1.13 rounds it.
//
// torch.optim.SGD(params, lr) without momentum or weight decay does, for each parameter,
// param.add_(grad, alpha=-lr); PyTorch 1.13's CPU kernel computes that as one fused
// multiply-add, W + (-lr) g with a single rounding (Vectorized<float>::fmadd; example 15 found
// that a multiply then an add, two roundings, differs from PyTorch at one weight of tutorial
// 004's module). qkv::fma (math.hpp) is exactly rounded, so sgd_step gives PyTorch's updated
// weights bit for bit from the same weights and gradients: fl(W - lr g), every element.
// lr is in the parameters' type (0.1 in float32 is 0.1f, 1.49e-9 above 0.1, as PyTorch's
// Scalar alpha is converted to float).
//
// Edges: a NaN gradient gives a NaN weight; lr = 0 leaves W unchanged (fma(-0, g, w) = w for
// finite g); an infinite gradient gives an infinite weight (or NaN with lr = 0).
#pragma once

#include <cstddef>

#include "math.hpp"
#include "matrix.hpp"

namespace qkv {

/// @brief torch.optim.SGD(lr).step() for one parameter: fl(w - lr g) elementwise, (R, C) -> (R, C)
template <class T, std::size_t R, std::size_t C, std::size_t GR, std::size_t GC>
  requires same_shapes<R, C, GR, GC>
[[nodiscard]] constexpr matrix<T, R, C> sgd_step(const matrix<T, R, C>& w, const matrix<T, GR, GC>& g,
                                                 const T& lr) {
  matrix<T, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) out.v[k] = qkv::fma(T(-lr), g.v[k], w.v[k]);
  return out;
}

}  // namespace qkv
