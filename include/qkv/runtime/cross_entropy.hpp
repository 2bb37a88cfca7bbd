// cross_entropy.hpp: the loss of a language model and its gradient, PyTorch's
// F.cross_entropy(logits, targets, ignore_index=-1, reduction="mean") at run time.
//
//   logits (N, V), targets (N): a class in [0, V) or -1 (ignored: no loss, no gradient)
//   loss   = (1 / n) sum over counted rows i of  lse_i - logits(i, t_i)
//            lse_i = m_i + log sum_j e^(logits(i, j) - m_i),  m_i = max_j logits(i, j)
//   d_logits(i, j) = (softmax_i(j) - [j == t_i]) / n      (0 on ignored rows)
// n is the number of counted rows of the whole batch (`count`): a batch split into chunks
// passes the same n to every chunk, so the chunks' gradients add up to the batch's.
// Each row is computed in float with std::exp and std::log (not the SIMD exp: the loss is N
// values, not N x V scores), the row's sum in index order; the loss is summed in double.
// NaN: a row with a NaN or infinite logit gives a NaN loss (as PyTorch: the log-sum-exp of
// a row holding NaN is NaN) and NaN gradients on that row; the trainer refuses to apply such a
// step (trainer.hpp). A target outside [0, V) other than -1 is a shape_error naming it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dynamic_matrix.hpp"

namespace qkv::runtime {

/// the target that is not counted (PyTorch's ignore_index as qkv's tasks use it)
inline constexpr std::int32_t ignored_target = -1;

/// @brief the summed (not yet averaged) cross-entropy of the counted rows of logits, and
/// d_logits = (softmax - one_hot) / count on every row (0 on ignored ones).
/// @param logits   (N, V)
/// @param targets  N classes, or ignored_target
/// @param count    the number the mean divides by (the batch's counted rows); > 0
/// @param d_logits resized to (N, V)
/// @returns the sum over counted rows of -log softmax(logits_i)[t_i], in double
/// @throws shape_error when targets.size() != N or a target is outside [0, V)
template <class T>
double cross_entropy_sum(matrix_view<const T> logits, const std::vector<std::int32_t>& targets,
                         std::size_t count, dynamic_matrix<T>& d_logits) {
  const std::size_t n = logits.rows, v = logits.cols;
  if (targets.size() != n)
    throw shape_error("cross_entropy: logits are " + logits.shape() + " but there are " +
                      std::to_string(targets.size()) + " targets (one per row)");
  if (count == 0) throw shape_error("cross_entropy: no counted target (every target is ignored)");
  for (std::size_t i = 0; i < n; ++i)
    if (targets[i] != ignored_target && (targets[i] < 0 || std::size_t(targets[i]) >= v))
      throw shape_error("cross_entropy: target " + std::to_string(targets[i]) + " of row " +
                        std::to_string(i) + " is not a class of the " + shape_string(n, v) +
                        " logits (0 .. " + std::to_string(v == 0 ? 0 : v - 1) + ")");
  d_logits.resize(n, v);
  const T inv = T(1) / T(count);
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    T* d = d_logits.row(i);
    if (targets[i] == ignored_target) {
      std::fill_n(d, v, T(0));
      continue;
    }
    T m = -std::numeric_limits<T>::infinity();
    bool nan = false;
    for (std::size_t j = 0; j < v; ++j) {
      const T x = logits(i, j);
      if (x != x || std::isinf(x)) nan = true;
      m = std::max(m, x);
    }
    if (nan) {
      std::fill_n(d, v, std::numeric_limits<T>::quiet_NaN());
      total += std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    T s = T(0);
    for (std::size_t j = 0; j < v; ++j) {
      d[j] = std::exp(logits(i, j) - m);
      s += d[j];
    }
    const T lse = m + std::log(s);
    total += double(lse - logits(i, std::size_t(targets[i])));
    for (std::size_t j = 0; j < v; ++j) d[j] = (d[j] / s) * inv;
    d[targets[i]] -= inv;
  }
  return total;
}

}  // namespace qkv::runtime
