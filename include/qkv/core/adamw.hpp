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

/// @brief optimizer.step() for one parameter p with gradient g (R, C): the parameter after it
template <class T, std::size_t R, std::size_t C, std::size_t GR, std::size_t GC>
  requires same_shapes<R, C, GR, GC>
[[nodiscard]] constexpr adamw_parameter<T, R, C> adamw_step(const adamw_parameter<T, R, C>& p,
                                                            const matrix<T, GR, GC>& g,
                                                            const adamw_options& o = {}) {
  adamw_parameter<T, R, C> out = p;
  out.step = p.step + 1;
  const T decay = T(1 - o.lr * o.weight_decay);
  const T beta1 = T(o.beta1), alpha1 = T(1 - o.beta1);
  const T beta2 = T(o.beta2), value2 = T(1 - o.beta2);
  const double bc1 = 1 - detail::power(o.beta1, out.step);
  const double bc2 = 1 - detail::power(o.beta2, out.step);
  const T step_size = T(-(o.lr / bc1));
  const T bc2_sqrt = T(qkv::sqrt(bc2));
  const T eps = T(o.eps);
  for (std::size_t k = 0; k < R * C; ++k) {
    const T w = T(p.w.v[k] * decay);
    const T m = qkv::fma(g.v[k], alpha1, T(p.m.v[k] * beta1));
    const T v = T(T(p.v.v[k] * beta2) + T(T(value2 * g.v[k]) * g.v[k]));
    const T denom = T(T(qkv::sqrt(v) / bc2_sqrt) + eps);
    out.w.v[k] = T(w + T(T(step_size * m) / denom));
    out.m.v[k] = m;
    out.v.v[k] = v;
  }
  return out;
}

}  // namespace qkv
