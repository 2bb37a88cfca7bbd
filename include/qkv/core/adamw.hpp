// adamw.hpp: one step of AdamW (Loshchilov and Hutter, "Decoupled Weight Decay Regularization"), as PyTorch 1.13 computes it.
//
// torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2), its
// single-tensor path (torch/optim/adamw.py, _single_tensor_adamw; foreach is off by default in
// 1.13), for each parameter W with gradient g and state m, v (zeros before the first step):
//   step += 1
//   W  = W (1 - lr wd)                           the decoupled weight decay (param.mul_)
//   m  = beta1 m + (1 - beta1) g                 (exp_avg.mul_(beta1).add_(g, alpha=1 - beta1))
//   v  = beta2 v + (1 - beta2) g g               (exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2))
//   bc1 = 1 - beta1^step, bc2 = 1 - beta2^step   (Python floats: double)
//   denom = sqrt(v) / sqrt(bc2) + eps
//   W  = W - (lr / bc1) m / denom                (param.addcdiv_(m, denom, value=-lr / bc1))
// The scalars are computed in double, as Python computes them, and converted to the
// parameters' type where PyTorch passes them to a kernel. Each tensor operation rounds as
// written: the add_ with alpha is one fused multiply-add (as sgd.hpp's step), addcmul is
// fl(v + fl(fl(value g) g)) and addcdiv fl(W + fl(fl(value m) / denom)). On the first step
// (1 - beta1) / bc1 = 1 and sqrt((1 - beta2) g^2) / sqrt(bc2) = |g| in real numbers, so every
// weight moves by lr g / (|g| + eps): about lr against the sign of its gradient, whatever the
// gradient's size (a gradient of exactly 0 moves it by nothing but the decay).
// beta^step is a product of step factors (exact for step 1, within a few ulps of Python's pow
// after that).
//
// Edges: a NaN gradient makes the weight and its state NaN; a weight with g = 0 forever only
// decays; lr = 0 leaves W unchanged.
#pragma once

#include <cstddef>

#include "math.hpp"
#include "matrix.hpp"

namespace qkv {

/// @brief AdamW's hyperparameters, PyTorch's defaults (Python floats: double)
struct adamw_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

/// @brief one parameter under AdamW: its value, its moments m (exp_avg) and v (exp_avg_sq), and
/// how many steps it has taken
template <class T, std::size_t R, std::size_t C>
struct adamw_parameter {
  matrix<T, R, C> w;
  matrix<T, R, C> m{};
  matrix<T, R, C> v{};
  std::size_t step = 0;
};

namespace detail {
constexpr double power(double b, std::size_t n) {
  double r = 1;
  for (std::size_t k = 0; k < n; ++k) r *= b;
  return r;
}
}  // namespace detail

/// @brief the scalars one step passes to its kernels, in the parameters' type T: computed from
/// the options in double (Python's floats) for step number `step` (1 on the first step), then
/// converted, as _single_tensor_adamw passes them (the top of this file)
template <class T>
struct adamw_scalars {
  T decay;      // 1 - lr wd
  T beta1;      // beta1
  T alpha1;     // 1 - beta1
  T beta2;      // beta2
  T value2;     // 1 - beta2
  T step_size;  // -(lr / bc1), bc1 = 1 - beta1^step
  T bc2_sqrt;   // sqrt(bc2), bc2 = 1 - beta2^step
  T eps;        // eps
};

/// @brief the scalars of step number `step` (1, 2, ...) under options o
template <class T>
[[nodiscard]] constexpr adamw_scalars<T> adamw_step_scalars(const adamw_options& o, std::size_t step) {
  const double bc1 = 1 - detail::power(o.beta1, step);
  const double bc2 = 1 - detail::power(o.beta2, step);
  return {T(1 - o.lr * o.weight_decay),
          T(o.beta1),
          T(1 - o.beta1),
          T(o.beta2),
          T(1 - o.beta2),
          T(-(o.lr / bc1)),
          T(qkv::sqrt(bc2)),
          T(o.eps)};
}

/// @brief one element under one step: the weight w, its gradient g and its moments m, v before;
/// writes the weight and the moments after (each operation rounded as the kernels round it)
template <class T>
constexpr void adamw_element(T w, T g, T m, T v, const adamw_scalars<T>& s, T& w_out, T& m_out, T& v_out) {
  const T wd = T(w * s.decay);
  const T m1 = qkv::fma(g, s.alpha1, T(m * s.beta1));
  const T v1 = T(T(v * s.beta2) + T(T(s.value2 * g) * g));
  const T denom = T(T(qkv::sqrt(v1) / s.bc2_sqrt) + s.eps);
  w_out = T(wd + T(T(s.step_size * m1) / denom));
  m_out = m1;
  v_out = v1;
}

/// @brief optimizer.step() for one parameter p with gradient g (R, C): the parameter after it
template <class T, std::size_t R, std::size_t C, std::size_t GR, std::size_t GC>
  requires same_shapes<R, C, GR, GC>
[[nodiscard]] constexpr adamw_parameter<T, R, C> adamw_step(const adamw_parameter<T, R, C>& p,
                                                            const matrix<T, GR, GC>& g,
                                                            const adamw_options& o = {}) {
  adamw_parameter<T, R, C> out = p;
  out.step = p.step + 1;
  const adamw_scalars<T> s = adamw_step_scalars<T>(o, out.step);
  for (std::size_t k = 0; k < R * C; ++k)
    adamw_element(p.w.v[k], g.v[k], p.m.v[k], p.v.v[k], s, out.w.v[k], out.m.v[k], out.v.v[k]);
  return out;
}

}  // namespace qkv
