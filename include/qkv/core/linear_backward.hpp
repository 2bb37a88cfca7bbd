// linear_backward.hpp: the backward of the projections (x W, nn.Linear's x Wᵀ + b, tokens as columns).
//
// A product Y = A B with an upstream gradient dY = dL/dY has
//   dA = dY Bᵀ        dB = Aᵀ dY
// (PyTorch's MmBackward0: grad.mm(mat2.t()) and mat1.t().mm(grad)). For the three weight
// layouts of core/attention.hpp:
//   qkv::in_out   Y = X W            d_x = dY Wᵀ     d_w = Xᵀ dY           (tutorial 000)
//   qkv::out_in   Y = X Wᵀ (+ b)     d_x = dY W      d_w = dYᵀ X    d_b = column sums of dY
//                 (nn.Linear: TBackward0/MmBackward0 and AddmmBackward0; tutorials 003, 004)
//   qkv::columns  Y = (W X)ᵀ, X (d_in, T)   d_x = (dY W)ᵀ   d_w = dYᵀ Xᵀ   (tutorials 001, 002)
// Shapes: X (T, d_in) (columns: (d_in, T)), W as in the forward, dY (T, d_out); each gradient
// has the shape of what it is the gradient of. Every sum runs left to right (matrix.hpp).
#pragma once

#include <cstddef>

#include "attention.hpp"
#include "matrix.hpp"

namespace qkv {

/// @brief the gradients of a product Y = A B: d_left = dY Bᵀ (shape of A), d_right = Aᵀ dY (shape of B)
template <class T, std::size_t R, std::size_t K, std::size_t C>
struct product_gradients {
  matrix<T, R, K> d_left;
  matrix<T, K, C> d_right;
};

/// @brief the backward of matrix_product(a, b): (R, K) x (K, C) with dY (R, C)
template <class T, std::size_t R, std::size_t K, std::size_t BK, std::size_t C, std::size_t DR,
          std::size_t DC>
  requires(product_shapes<R, K, BK, C> && same_shapes<R, C, DR, DC>)
[[nodiscard]] constexpr product_gradients<T, R, K, C> matrix_product_backward(
    const matrix<T, R, K>& a, const matrix<T, BK, C>& b, const matrix<T, DR, DC>& d_out) {
  return {matrix_product_transposed(d_out, b), matrix_product(transposed(a), d_out)};
}

/// @brief the gradients of a projection: d_x has the shape of x, d_w the shape of w
template <class T, std::size_t XR, std::size_t XC, std::size_t WR, std::size_t WC>
struct projection_gradients {
  matrix<T, XR, XC> d_x;
  matrix<T, WR, WC> d_w;
};

/// @brief and of nn.Linear with a bias: d_b = the column sums of dY, (1, d_out)
template <class T, std::size_t XR, std::size_t XC, std::size_t WR, std::size_t WC>
struct linear_gradients {
  matrix<T, XR, XC> d_x;
  matrix<T, WR, WC> d_w;
  matrix<T, 1, WR> d_b;
};

/// @brief backward of project(x, w, in_out), Y = X W: d_x = dY Wᵀ (T, d_in), d_w = Xᵀ dY (d_in, d_out)
template <class T, std::size_t N, std::size_t Din, std::size_t WDin, std::size_t Dout, std::size_t DN,
          std::size_t DD>
  requires(product_shapes<N, Din, WDin, Dout> && same_shapes<N, Dout, DN, DD>)
[[nodiscard]] constexpr projection_gradients<T, N, Din, WDin, Dout> project_backward(
    const matrix<T, N, Din>& x, const matrix<T, WDin, Dout>& w, const matrix<T, DN, DD>& d_out, in_out_t) {
  return {matrix_product_transposed(d_out, w), matrix_product(transposed(x), d_out)};
}

/// @brief backward of project(x, w, out_in), Y = X Wᵀ: d_x = dY W (T, d_in), d_w = dYᵀ X (d_out, d_in)
template <class T, std::size_t N, std::size_t Din, std::size_t Dout, std::size_t WDin, std::size_t DN,
          std::size_t DD>
  requires(product_shapes<N, Din, WDin, Dout> && same_shapes<N, Dout, DN, DD>)
[[nodiscard]] constexpr projection_gradients<T, N, Din, Dout, WDin> project_backward(
    const matrix<T, N, Din>& x, const matrix<T, Dout, WDin>& w, const matrix<T, DN, DD>& d_out, out_in_t) {
  return {matrix_product(d_out, w), matrix_product(transposed(d_out), x)};
}

/// @brief backward of project(x, w, columns), X (d_in, T), Y = (W X)ᵀ (T, d_out):
/// d_x = (dY W)ᵀ (d_in, T), d_w = dYᵀ Xᵀ (d_out, d_in)
template <class T, std::size_t Din, std::size_t N, std::size_t Dout, std::size_t WDin, std::size_t DN,
          std::size_t DD>
  requires(product_shapes<Dout, WDin, Din, N> && same_shapes<N, Dout, DN, DD>)
[[nodiscard]] constexpr projection_gradients<T, Din, N, Dout, WDin> project_backward(
    const matrix<T, Din, N>& x, const matrix<T, Dout, WDin>& w, const matrix<T, DN, DD>& d_out, columns_t) {
  return {transposed(matrix_product(d_out, w)), matrix_product_transposed(transposed(d_out), x)};
}

/// @brief backward of project(x, w, b, out_in), nn.Linear Y = X Wᵀ + b: d_b = column sums of dY
template <class T, std::size_t N, std::size_t Din, std::size_t Dout, std::size_t WDin, std::size_t DN,
          std::size_t DD>
  requires(product_shapes<N, Din, WDin, Dout> && same_shapes<N, Dout, DN, DD>)
[[nodiscard]] constexpr linear_gradients<T, N, Din, Dout, WDin> project_backward(
    const matrix<T, N, Din>& x, const matrix<T, Dout, WDin>& w, const matrix<T, 1, Dout>&,
    const matrix<T, DN, DD>& d_out, out_in_t) {
  const auto g = project_backward(x, w, d_out, out_in);
  return {g.d_x, g.d_w, column_sums(d_out)};
}

}  // namespace qkv
