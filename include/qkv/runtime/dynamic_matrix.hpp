// dynamic_matrix.hpp: qkv::runtime::dynamic_matrix<T>, an aligned row-major matrix sized at run time.
//
// The runtime path works on these: sizes the compiler cannot evaluate (a BERT layer, 2048
// tokens). Storage is 64-byte aligned (one cache line, two AVX2 registers) so that kernels may
// use aligned loads on row 0. Views (matrix_view) carry a row stride and a column stride, so
// a head's columns or a transposed operand are views, never copies.
//
// A shape mismatch is a qkv::runtime::shape_error whose message names both shapes. A matrix
// larger than max_matrix_bytes (or whose size overflows) is a size_limit_error, thrown before
// anything is allocated.
// Checked element access: with QKV_CHECKED or _GLIBCXX_ASSERTIONS defined (the sanitizer builds
// of scripts/test.sh define the latter), m(i, j) and view(i, j) throw std::out_of_range naming
// the index and the shape when i >= rows or j >= cols. Without them access is unchecked.
#pragma once

// C++20 or nothing: without -std=c++20 a learner would get pages of errors (1,879 lines from
// g++ 12 in C++17 mode); this stops at once with one line. A missing header is a fatal error on
// both compilers (nothing after it is compiled), and its name says what to do.
#if (defined(_MSVC_LANG) ? _MSVC_LANG : __cplusplus) < 202002L
#include <qkv_needs_cxx20__compile_with_std_cxx20__for_example_g++_-std=c++20>
#endif

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/matrix.hpp"

namespace qkv::runtime {

/// "3x4": how every runtime error message spells a shape
[[nodiscard]] inline std::string shape_string(std::size_t rows, std::size_t cols) {
  return std::to_string(rows) + "x" + std::to_string(cols);
}

/// a shape mismatch at run time; what() names both shapes, e.g.
/// "matrix_product: a is 3x4 but b is 5x2 (a's columns must equal b's rows)"
struct shape_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// a size past a stated limit, refused before allocating; what() names the size and the limit
struct size_limit_error : std::length_error {
  using std::length_error::length_error;
};

/// the largest dynamic_matrix, in bytes: 2^40 (1 TiB), beyond any machine qkv runs on and the
/// largest block AddressSanitizer hands out on x86-64, so a size past it (or one whose
/// rows x cols overflows) is this exception in every build, never an abort or a wrapped size
inline constexpr std::size_t max_matrix_bytes = std::size_t(1) << 40;

/// a byte count for a message: the integer below 2^64, else "about 1.84e+19" (three significant
/// digits: past 2^64 the product was computed in long double, and its printed digits would only
/// pretend to a precision it does not have)
[[nodiscard]] inline std::string bytes_string(long double n) {
  if (n < 18446744073709551616.0L) return std::to_string(static_cast<unsigned long long>(n));
  char buf[32];
  std::snprintf(buf, sizeof buf, "about %.3Lg", n);
  return buf;
}

/// the size_limit_error of checked_elements (out of line: the check itself stays a few
/// instructions)
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_size_limit(std::size_t rows, std::size_t cols,
                                                                    std::size_t bytes) {
  const long double total = static_cast<long double>(rows) * static_cast<long double>(cols) * bytes;
  throw size_limit_error("dynamic_matrix: " + shape_string(rows, cols) + " elements of " +
                         std::to_string(bytes) + " bytes need " + bytes_string(total) +
                         " bytes, over the limit of " + std::to_string(max_matrix_bytes) +
                         " (runtime::max_matrix_bytes)");
}

/// rows x cols elements of `bytes` bytes each, checked against max_matrix_bytes (overflow included)
inline std::size_t checked_elements(std::size_t rows, std::size_t cols, std::size_t bytes) {
  std::size_t n = 0, total_bytes = 0;
  if (__builtin_mul_overflow(rows, cols, &n) || __builtin_mul_overflow(n, bytes, &total_bytes) ||
      total_bytes > max_matrix_bytes) [[unlikely]]
    throw_size_limit(rows, cols, bytes);
  return n;
}

/// true when element access is bounds-checked (QKV_CHECKED or _GLIBCXX_ASSERTIONS)
#if defined(QKV_CHECKED) || defined(_GLIBCXX_ASSERTIONS)
inline constexpr bool checked_access = true;
#else
inline constexpr bool checked_access = false;
#endif

/// the std::out_of_range of check_index (out of line)
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_index(std::size_t i, std::size_t j, std::size_t rows,
                                                               std::size_t cols, const char* what) {
  throw std::out_of_range(std::string(what) + ": element (" + std::to_string(i) + ", " + std::to_string(j) +
                          ") of a " + shape_string(rows, cols) + " matrix");
}

/// (i, j) against rows x cols when checked_access; `what` names the matrix kind
inline void check_index(std::size_t i, std::size_t j, std::size_t rows, std::size_t cols, const char* what) {
  if constexpr (checked_access)
    if (i >= rows || j >= cols) [[unlikely]]
      throw_index(i, j, rows, cols, what);
}

/// the alignment of every dynamic_matrix and packing buffer: one cache line
inline constexpr std::size_t alignment = 64;

/// std::allocator with 64-byte alignment
template <class T>
struct aligned_allocator {
  using value_type = T;
  aligned_allocator() noexcept = default;
  template <class U>
  aligned_allocator(const aligned_allocator<U>&) noexcept {}
  [[nodiscard]] T* allocate(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{alignment}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{alignment}); }
  template <class U>
  bool operator==(const aligned_allocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using aligned_vector = std::vector<T, aligned_allocator<T>>;

/// @brief a rows x cols window on memory: element (i, j) is data[i * row_stride + j * col_stride].
/// T may be const. A view never owns; it is cheap to copy.
template <class T>
struct matrix_view {
  T* data = nullptr;
  std::size_t rows = 0, cols = 0;
  std::size_t row_stride = 0, col_stride = 1;

  [[nodiscard]] T& operator()(std::size_t i, std::size_t j) const {
    check_index(i, j, rows, cols, "matrix_view");
    return data[i * row_stride + j * col_stride];
  }
  /// a view of the same memory as const
  operator matrix_view<const T>() const
    requires(!std::is_const_v<T>)
  {
    return {data, rows, cols, row_stride, col_stride};
  }
  [[nodiscard]] std::string shape() const { return shape_string(rows, cols); }
};

/// the transposed view: (R, C) -> (C, R), no copy
template <class T>
[[nodiscard]] matrix_view<T> transposed(const matrix_view<T>& a) {
  return {a.data, a.cols, a.rows, a.col_stride, a.row_stride};
}

/// columns [c0, c0 + n) of a: a head's slice of Q, K or V
template <class T>
[[nodiscard]] matrix_view<T> column_block(const matrix_view<T>& a, std::size_t c0, std::size_t n) {
  if (c0 + n > a.cols)
    throw shape_error("column_block: columns " + std::to_string(c0) + ".." + std::to_string(c0 + n) +
                      " asked of a " + a.shape() + " matrix");
  return {a.data + c0 * a.col_stride, a.rows, n, a.row_stride, a.col_stride};
}

/// rows [r0, r0 + n) of a
template <class T>
[[nodiscard]] matrix_view<T> row_block(const matrix_view<T>& a, std::size_t r0, std::size_t n) {
  if (r0 + n > a.rows)
    throw shape_error("row_block: rows " + std::to_string(r0) + ".." + std::to_string(r0 + n) +
                      " asked of a " + a.shape() + " matrix");
  return {a.data + r0 * a.row_stride, n, a.cols, a.row_stride, a.col_stride};
}

/// @brief a rows x cols matrix of T, row-major, contiguous, 64-byte aligned, zero-initialised.
/// @tparam T  float or double for the kernels; any trivially copyable type for storage
///            (masks are dynamic_matrix<unsigned char>)
template <class T>
class dynamic_matrix {
 public:
  using value_type = T;

  dynamic_matrix() = default;
  dynamic_matrix(std::size_t rows, std::size_t cols, const T& value = T{})
      : rows_(rows), cols_(cols), data_(checked_elements(rows, cols, sizeof(T)), value) {}

  /// nested braces, one per row: dynamic_matrix<float> m{{1, 2, 3}, {4, 5, 6}};
  dynamic_matrix(std::initializer_list<std::initializer_list<T>> init)
      : rows_(init.size()), cols_(init.size() ? init.begin()->size() : 0) {
    data_.reserve(rows_ * cols_);
    std::size_t i = 0;
    for (const auto& r : init) {
      if (r.size() != cols_)
        throw shape_error("dynamic_matrix: row " + std::to_string(i) + " has " + std::to_string(r.size()) +
                          " elements but row 0 has " + std::to_string(cols_));
      data_.insert(data_.end(), r.begin(), r.end());
      ++i;
    }
  }

  /// from the constexpr path's fixed-size matrix (same element type, same order)
  template <std::size_t R, std::size_t C>
  explicit dynamic_matrix(const qkv::matrix<T, R, C>& m) : rows_(R), cols_(C), data_(m.v, m.v + R * C) {}

  [[nodiscard]] std::size_t rows() const { return rows_; }
  [[nodiscard]] std::size_t cols() const { return cols_; }
  [[nodiscard]] std::size_t size() const { return data_.size(); }
  [[nodiscard]] bool empty() const { return data_.empty(); }
  [[nodiscard]] std::string shape() const { return shape_string(rows_, cols_); }

  /// make this rows x cols; keeps the allocation when it is big enough (for reuse across
  /// calls), and leaves the elements unspecified unless the shape is unchanged
  void resize(std::size_t rows, std::size_t cols) {
    const std::size_t n = checked_elements(rows, cols, sizeof(T));
    data_.resize(n);
    rows_ = rows;
    cols_ = cols;
  }

  [[nodiscard]] T* data() { return data_.data(); }
  [[nodiscard]] const T* data() const { return data_.data(); }
  [[nodiscard]] T* row(std::size_t i) { return data_.data() + i * cols_; }
  [[nodiscard]] const T* row(std::size_t i) const { return data_.data() + i * cols_; }
  [[nodiscard]] T& operator()(std::size_t i, std::size_t j) {
    check_index(i, j, rows_, cols_, "dynamic_matrix");
    return data_[i * cols_ + j];
  }
  [[nodiscard]] const T& operator()(std::size_t i, std::size_t j) const {
    check_index(i, j, rows_, cols_, "dynamic_matrix");
    return data_[i * cols_ + j];
  }

  [[nodiscard]] matrix_view<T> view() { return {data_.data(), rows_, cols_, cols_, 1}; }
  [[nodiscard]] matrix_view<const T> view() const { return {data_.data(), rows_, cols_, cols_, 1}; }
  operator matrix_view<T>() { return view(); }
  operator matrix_view<const T>() const { return view(); }

  /// @brief back to the constexpr path's type; throws shape_error naming both shapes
  template <std::size_t R, std::size_t C>
  [[nodiscard]] qkv::matrix<T, R, C> to_fixed() const {
    if (rows_ != R || cols_ != C)
      throw shape_error("to_fixed: the matrix is " + shape() + " but the target is " + shape_string(R, C));
    qkv::matrix<T, R, C> out;
    for (std::size_t k = 0; k < R * C; ++k) out.v[k] = data_[k];
    return out;
  }

  [[nodiscard]] bool operator==(const dynamic_matrix& o) const {
    return rows_ == o.rows_ && cols_ == o.cols_ && data_ == o.data_;
  }

 private:
  std::size_t rows_ = 0, cols_ = 0;
  aligned_vector<T> data_;
};

/// dynamic_matrix from a qkv::matrix, deducing T
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] dynamic_matrix<T> to_dynamic(const qkv::matrix<T, R, C>& m) {
  return dynamic_matrix<T>(m);
}

/// a copy of any view as a contiguous matrix
template <class T>
[[nodiscard]] dynamic_matrix<std::remove_const_t<T>> copy_of(const matrix_view<T>& a) {
  dynamic_matrix<std::remove_const_t<T>> out(a.rows, a.cols);
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < a.cols; ++j) out(i, j) = a(i, j);
  return out;
}

/// the largest |a - b| over all elements; throws shape_error when the shapes differ
template <class T>
[[nodiscard]] T max_abs_difference(matrix_view<const T> a, matrix_view<const T> b) {
  if (a.rows != b.rows || a.cols != b.cols)
    throw shape_error("max_abs_difference: a is " + a.shape() + " but b is " + b.shape());
  T worst = 0;
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < a.cols; ++j) {
      const T d = a(i, j) > b(i, j) ? T(a(i, j) - b(i, j)) : T(b(i, j) - a(i, j));
      if (!(d <= worst)) worst = d;  // NaN propagates
    }
  return worst;
}

using matrixf = dynamic_matrix<float>;
using matrixd = dynamic_matrix<double>;
/// true = this query may attend to this key
using mask_matrix = dynamic_matrix<unsigned char>;

}  // namespace qkv::runtime
