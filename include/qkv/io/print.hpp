// print.hpp: matrices printed the way PyTorch and NumPy/TensorFlow print tensors.
//
// The examples print the tutorials' traces, so the numbers must look the same:
//   torch_str: `tensor([[0., 1., 1.], ...])`, PyTorch's rules (torch/_tensor_str.py): integer
//              mode when every value is a whole number; otherwise 4 decimals, or scientific
//              `6.3379e-02` when the largest |value| is over 1e8, or the largest over the
//              smallest nonzero exceeds 1000, or the smallest is under 1e-4; right-aligned to a
//              common width; lines wrapped at 80 columns.
//   numpy_str: `[[ 1.0629584]\n [-1.5088519]]`, NumPy's rule for float32 arrays (what
//              TensorFlow prints): each value in the fewest digits that read back to the same
//              float, decimal points aligned.
// Run time only (iostream, strings); core/ never includes this.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "../core/matrix.hpp"

namespace qkv::io {

namespace detail {

/// PyTorch's _Formatter: one format for all the values of a tensor
class torch_formatter {
 public:
  explicit torch_formatter(const std::vector<double>& values) {
    std::vector<double> finite;
    for (double x : values)
      if (std::isfinite(x)) finite.push_back(x);
    int_mode_ = std::all_of(finite.begin(), finite.end(), [](double x) { return x == std::ceil(x); });
    if (!int_mode_) {
      double mx = 0, mn = INFINITY;
      for (double x : finite)
        if (x != 0) {
          mx = std::max(mx, std::fabs(x));
          mn = std::min(mn, std::fabs(x));
        }
      if (mn == INFINITY) mn = 0;
      sci_mode_ = mx > 0 && (mx / mn > 1000.0 || mx > 1e8 || mn < 1e-4);
    } else if (!finite.empty()) {
      double mx = 0;
      for (double x : finite) mx = std::max(mx, std::fabs(x));
      sci_mode_ = mx > 1e8;
    }
    for (double x : values) width_ = std::max(width_, raw(x).size());
  }

  [[nodiscard]] std::string format(double x) const {
    std::string s = raw(x);
    return std::string(width_ - s.size(), ' ') + s;
  }
  [[nodiscard]] std::size_t width() const { return width_; }

 private:
  [[nodiscard]] std::string raw(double x) const {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    char buf[64];
    if (sci_mode_)
      std::snprintf(buf, sizeof buf, "%.4e", x);
    else if (int_mode_)
      std::snprintf(buf, sizeof buf, "%.0f.", x);
    else
      std::snprintf(buf, sizeof buf, "%.4f", x);
    return buf;
  }
  bool int_mode_ = true;
  bool sci_mode_ = false;
  std::size_t width_ = 1;
};

/// the values of a vector of `n` starting at `first`, wrapped as PyTorch wraps them
inline std::string torch_vector(const std::vector<double>& all, std::size_t first, std::size_t n,
                                std::size_t indent, const torch_formatter& f) {
  const std::size_t per_line = std::max<std::size_t>(1, (80 - indent) / (f.width() + 2));
  std::string s = "[";
  for (std::size_t k = 0; k < n; ++k) {
    if (k > 0) s += (k % per_line == 0) ? ",\n" + std::string(indent + 1, ' ') : ", ";
    s += f.format(all[first + k]);
  }
  return s + "]";
}

/// NumPy's positional float32 format: shortest round-trip digits
inline std::string shortest(float x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::fixed);
  std::string s(buf, r.ptr);
  if (s.find('.') == std::string::npos) s += ".";
  return s;
}

}  // namespace detail

namespace detail {

/// torch_str's body for every shape: rows x cols values as doubles (one copy of this code in a
/// program, whatever the shapes printed; the templates below only convert)
inline std::string torch_matrix(const std::vector<double>& all, std::size_t rows, std::size_t cols,
                                bool as_vector) {
  const torch_formatter f(all);
  if (as_vector) return "tensor(" + torch_vector(all, 0, rows * cols, 7, f) + ")";
  std::string s = "tensor([";
  for (std::size_t i = 0; i < rows; ++i) {
    if (i > 0) s += ",\n        ";
    s += torch_vector(all, i * cols, cols, 8, f);
  }
  return s + "])";
}

}  // namespace detail

/// @brief a tensor as PyTorch prints it: torch_str(m) == "tensor([[0., 1., 1.],\n        [...]])"
/// A (1, n) or (n, 1) matrix is printed as 2-d; pass as_vector = true for a 1-d tensor.
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] std::string torch_str(const matrix<T, R, C>& m, bool as_vector = false) {
  std::vector<double> all(R * C);
  for (std::size_t k = 0; k < R * C; ++k) all[k] = static_cast<double>(m.v[k]);
  return detail::torch_matrix(all, R, C, as_vector);
}

/// @brief a 3-d tensor as PyTorch prints it (blocks separated by a blank line)
template <class T, std::size_t N, std::size_t R, std::size_t C>
[[nodiscard]] std::string torch_str(const stack<T, N, R, C>& s) {
  std::vector<double> all;
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t k = 0; k < R * C; ++k) all.push_back(static_cast<double>(s.m[n].v[k]));
  const detail::torch_formatter f(all);
  std::string out = "tensor([";
  for (std::size_t n = 0; n < N; ++n) {
    if (n > 0) out += ",\n\n        ";
    out += "[";
    for (std::size_t i = 0; i < R; ++i) {
      if (i > 0) out += ",\n         ";
      out += detail::torch_vector(all, (n * R + i) * C, C, 9, f);
    }
    out += "]";
  }
  return out + "])";
}

/// @brief a float matrix as NumPy (and so TensorFlow) prints it: "[[ 1.0629584]\n [-1.5088519]]"
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] std::string numpy_str(const matrix<T, R, C>& m) {
  std::vector<std::string> cells;
  std::size_t int_w = 0, frac_w = 0;
  bool any_negative = false;
  for (std::size_t k = 0; k < R * C; ++k) {
    const float x = static_cast<float>(m.v[k]);
    any_negative = any_negative || std::signbit(x);
    std::string s = detail::shortest(x);
    if (s[0] == '-') s.erase(0, 1);
    cells.push_back(s);
    const auto dot = s.find('.');
    int_w = std::max(int_w, dot);
    frac_w = std::max(frac_w, s.size() - dot - 1);
  }
  std::string out = "[";
  for (std::size_t i = 0; i < R; ++i) {
    if (i > 0) out += "\n ";
    out += "[";
    for (std::size_t j = 0; j < C; ++j) {
      const std::string& s = cells[i * C + j];
      const float x = static_cast<float>(m.v[i * C + j]);
      const auto dot = s.find('.');
      // padding, then the sign right before the digits (a space for a positive value when
      // any value is negative), then padding after, so that the decimal points line up
      const std::string sign = std::signbit(x) ? "-" : (any_negative ? " " : "");
      const std::string cell =
          std::string(int_w - dot, ' ') + sign + s + std::string(frac_w - (s.size() - dot - 1), ' ');
      out += (j > 0 ? " " : "") + cell;
    }
    out += "]";
  }
  return out + "]";
}

}  // namespace qkv::io
