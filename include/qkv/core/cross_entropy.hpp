// cross_entropy.hpp: the cross-entropy loss of a model's logits against target ids, and its backward.
//
// A language model's last layer gives each position a row of logits z (one per word of the
// vocabulary, V). softmax(z) is the model's belief about the next token; the loss of position
// i is -log p_i(target_i), and the loss of a sequence is the mean over its N positions
// (PyTorch's F.cross_entropy(logits, targets), reduction 'mean'):
//   m_i  = max_j z_ij
//   s_i  = sum_j e^(z_ij - m_i)                   (left to right; s_i >= 1, the maximum gives e^0)
//   l_i  = log s_i - (z_i,t - m_i)                = -log softmax(z_i)_t
//   loss = (sum_i l_i) / N
// Its gradient with respect to the logits is the model's belief minus the truth, averaged:
//   d_logits(i, j) = (p_ij - [j == t_i]) / N       (N, V)
// (p = softmax(z): d/dz_j of log sum_k e^z_k is p_j, and of -z_t is -1 at j = t). Each row of
// d_logits sums to 0 (the p's sum to 1, the one-hot row to 1), so the loss cannot be lowered by
// raising every logit of a row together. PyTorch computes the same through log_softmax's and
// nll_loss's backwards (grad - exp(log p) sum(grad), with -1/N at the target).
//
// Edges: a target outside [0, V) throws std::out_of_range (does not compile in a constant
// expression); a NaN logit makes its row's loss and gradient NaN; a -inf logit has p = 0 (and
// an infinite loss when it is the target's); N = 0 does not compile (a matrix has no 0 rows).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <type_traits>

#include "math.hpp"
#include "matrix.hpp"
#include "softmax.hpp"

namespace qkv {

/// @brief the forward of cross_entropy: the probabilities softmax(z) (N, V), each position's
/// loss l_i = -log p_i(t_i) (N, 1), and their mean
template <class T, std::size_t N, std::size_t V>
struct cross_entropy_result {
  matrix<T, N, V> probabilities;
  matrix<T, N, 1> losses;
  T loss = T(0);
};

namespace detail {
template <std::size_t V, class Id>
constexpr std::size_t target_index(const Id& t) {
  bool negative = false;
  if constexpr (std::is_signed_v<Id>) negative = t < Id(0);
  if (negative || static_cast<std::size_t>(t) >= V)
    throw std::out_of_range("cross_entropy: a target id is outside the vocabulary (the logits' columns)");
  return static_cast<std::size_t>(t);
}
}  // namespace detail

/// @brief F.cross_entropy(logits, targets): logits (N, V), targets (1, N) ids in [0, V)
template <class T, std::size_t N, std::size_t V, class Id>
[[nodiscard]] constexpr cross_entropy_result<T, N, V> cross_entropy(const matrix<T, N, V>& logits,
                                                                    const matrix<Id, 1, N>& targets) {
  cross_entropy_result<T, N, V> r;
  r.probabilities = softmax_rows(logits);
  T total = T(0);
  for (std::size_t i = 0; i < N; ++i) {
    const std::size_t t = detail::target_index<V>(targets.v[i]);
    T m = logits.v[i * V];
    for (std::size_t j = 1; j < V; ++j) m = logits.v[i * V + j] > m ? logits.v[i * V + j] : m;
    T s = T(0);
    for (std::size_t j = 0; j < V; ++j) s += qkv::exp(T(logits.v[i * V + j] - m));
    r.losses.v[i] = T(qkv::log(s) - T(logits.v[i * V + t] - m));
    total += r.losses.v[i];
  }
  r.loss = total / T(N);
  return r;
}

/// @brief the backward of cross_entropy: d_logits = (p - onehot(t)) / N, computed as
/// fl(fl(p_ij - [j == t_i]) / N). probabilities (N, V) as the forward gave them, targets (1, N).
/// The upstream gradient of the loss is 1 (loss.backward()); scale the result for another.
template <class T, std::size_t N, std::size_t V, class Id>
[[nodiscard]] constexpr matrix<T, N, V> cross_entropy_backward(const matrix<T, N, V>& probabilities,
                                                               const matrix<Id, 1, N>& targets) {
  matrix<T, N, V> d;
  for (std::size_t i = 0; i < N; ++i) {
    const std::size_t t = detail::target_index<V>(targets.v[i]);
    for (std::size_t j = 0; j < V; ++j) {
      const T p = probabilities.v[i * V + j];
      d.v[i * V + j] = T(j == t ? p - T(1) : p) / T(N);
    }
  }
  return d;
}

}  // namespace qkv
