// optimizer.hpp: torch.optim.AdamW and torch.optim.SGD of PyTorch 1.13, element by element on a
// flat buffer of parameters and their gradients (the single-tensor path, foreach=False, which
// 1.13 takes by default on the CPU).
//
// AdamW (torch/optim/adamw.py, _single_tensor_adamw), step t = 1, 2, ...:
//   p  = p * fl(1 - lr wd)                         the decay, a float scalar
//   m  = m β1 + g fl(1 - β1)                       exp_avg.mul_(β1).add_(g, alpha=1-β1)
//   v  = v β2 + (fl(1 - β2) g) g                     exp_avg_sq.mul_(β2).addcmul_(g, g, value=1-β2)
//   bc1 = 1 - β1^t,  bc2 = 1 - β2^t                in double (Python floats)
//   step_size = lr / bc1                           double
//   denom = sqrt(v) / fl(sqrt(bc2)) + fl(eps)      float
//   p  = p - fl(step_size) m / denom               addcdiv_(m, denom, value=-step_size)
// SGD (torch/optim/sgd.py, _single_tensor_sgd):
//   g = g + wd p (when wd != 0);  momentum μ: b = g (first step) else b = μ b + (1 - dampening) g;
//   g = g + μ b (nesterov) or b;  p = p - lr g
// The Python scalars are doubles; PyTorch rounds each to float where it meets a float tensor,
// and so does this code (fl(...) above). PyTorch's vectorised kernels fuse some of these
// multiply-adds (add_ with alpha uses vec::fmadd), this code rounds each operation
// (-ffp-contract=off): the last bit can differ, which train_torch_test.cpp's bounds cover.
// Every element is independent, so the threads never change a bit.
#pragma once

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace qkv::runtime {

/// @brief torch.optim.AdamW's settings (its defaults except betas, which the caller chooses)
struct adamw_options {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

/// @brief torch.optim.SGD's settings
struct sgd_options {
  double lr = 1e-2;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

/// @brief AdamW's state: exp_avg and exp_avg_sq of every parameter, and the step count
template <class T>
class adamw {
 public:
  adamw(std::size_t parameters, adamw_options o) : o_(o), m_(parameters, T(0)), v_(parameters, T(0)) {
    if (!(o.lr >= 0) || !(o.eps >= 0) || !(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1) ||
        !(o.weight_decay >= 0))
      throw std::invalid_argument("adamw: lr, eps and weight_decay must be >= 0 and the betas in [0, 1)");
  }
  [[nodiscard]] const adamw_options& options() const { return o_; }
  [[nodiscard]] std::size_t steps() const { return step_; }

  /// one step on p (n values) with gradients g; n must be the size given at construction
  void step(T* p, const T* g, std::size_t n) {
    if (n != m_.size())
      throw std::invalid_argument("adamw: " + std::to_string(n) + " parameters but the state has " +
                                  std::to_string(m_.size()));
    ++step_;
    const double t = double(step_);
    const T decay = T(1.0 - o_.lr * o_.weight_decay);
    const T b1 = T(o_.beta1), b2 = T(o_.beta2), one_b1 = T(1.0 - o_.beta1), one_b2 = T(1.0 - o_.beta2);
    const double bc1 = 1.0 - std::pow(o_.beta1, t), bc2 = 1.0 - std::pow(o_.beta2, t);
    const T step_size = T(o_.lr / bc1);
    const T bc2_sqrt = T(std::sqrt(bc2));
    const T eps = T(o_.eps);
    for (std::size_t i = 0; i < n; ++i) {
      p[i] = p[i] * decay;
      m_[i] = m_[i] * b1 + g[i] * one_b1;
      v_[i] = v_[i] * b2 + (one_b2 * g[i]) * g[i];
      const T denom = std::sqrt(v_[i]) / bc2_sqrt + eps;
      p[i] = p[i] + (-step_size) * (m_[i] / denom);
    }
  }

 private:
  adamw_options o_;
  std::vector<T> m_, v_;
  std::size_t step_ = 0;
};

/// @brief SGD's state: the momentum buffer (used when momentum != 0)
template <class T>
class sgd {
 public:
  sgd(std::size_t parameters, sgd_options o) : o_(o), n_(parameters) {
    if (!(o.lr >= 0) || !(o.momentum >= 0) || !(o.weight_decay >= 0))
      throw std::invalid_argument("sgd: lr, momentum and weight_decay must be >= 0");
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
      throw std::invalid_argument("sgd: Nesterov momentum requires a momentum and zero dampening");
  }
  [[nodiscard]] const sgd_options& options() const { return o_; }
  [[nodiscard]] std::size_t steps() const { return step_; }

  void step(T* p, const T* g, std::size_t n) {
    if (n != n_)
      throw std::invalid_argument("sgd: " + std::to_string(n) + " parameters but the state has " +
                                  std::to_string(n_));
    const T lr = T(o_.lr), wd = T(o_.weight_decay), mu = T(o_.momentum), damp = T(1.0 - o_.dampening);
    if (o_.momentum != 0 && b_.empty()) b_.assign(n, T(0));
    for (std::size_t i = 0; i < n; ++i) {
      T d = g[i];
      if (o_.weight_decay != 0) d = d + wd * p[i];
      if (o_.momentum != 0) {
        b_[i] = step_ == 0 ? d : b_[i] * mu + damp * d;
        d = o_.nesterov ? d + mu * b_[i] : b_[i];
      }
      p[i] = p[i] + (-lr) * d;
    }
    ++step_;
  }

 private:
  sgd_options o_;
  std::size_t n_;
  std::vector<T> b_;
  std::size_t step_ = 0;
};

}  // namespace qkv::runtime
