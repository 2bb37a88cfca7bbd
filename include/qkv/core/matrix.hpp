// matrix.hpp: qkv::matrix<T, Rows, Cols>, a fixed-size row-major matrix the compiler can evaluate.
//
// Everything here is constexpr and includes only standard headers. Storage is a raw array
// indexed directly (not std::array): at compile time every std::array::operator[] call is a
// counted evaluation step, and raw indexing makes a 64x64 product fit the default limits of
// both g++ and clang (docs/numerics.md, "compile-time cost").
//
// Shapes are part of the type. An operation on shapes that do not fit does not compile, and
// the compiler's message names both shapes (see tests/compile_fail/).
#pragma once

// C++20 or nothing: without -std=c++20 a learner would get pages of errors (1,879 lines from
// g++ 12 in C++17 mode); this stops at once with one line. A missing header is a fatal error on
// both compilers (nothing after it is compiled), and its name says what to do.
#if (defined(_MSVC_LANG) ? _MSVC_LANG : __cplusplus) < 202002L
#include <qkv_needs_cxx20__compile_with_std_cxx20__for_example_g++_-std=c++20>
#endif

#include <cstddef>
#include <type_traits>

namespace qkv {

/// @brief A Rows x Cols matrix of T, row-major, usable in constant expressions.
/// @tparam T     the number type (float, double, or an exact type such as a rational)
/// @tparam Rows  number of rows, at least 1
/// @tparam Cols  number of columns, at least 1
template <class T, std::size_t Rows, std::size_t Cols>
struct matrix {
  static_assert(Rows > 0 && Cols > 0, "qkv::matrix needs at least one row and one column");

  using value_type = T;

  /// the elements, row after row: element (i, j) is v[i * Cols + j]
  T v[Rows * Cols]{};

  constexpr matrix() = default;

  /// from nested braces, one brace per row: matrix<double, 2, 3> m{{{1, 2, 3}, {4, 5, 6}}};
  constexpr matrix(const T (&rows)[Rows][Cols]) {
    for (std::size_t i = 0; i < Rows; ++i)
      for (std::size_t j = 0; j < Cols; ++j) v[i * Cols + j] = rows[i][j];
  }

  [[nodiscard]] static constexpr std::size_t rows() { return Rows; }
  [[nodiscard]] static constexpr std::size_t cols() { return Cols; }
  [[nodiscard]] static constexpr std::size_t size() { return Rows * Cols; }

  [[nodiscard]] constexpr T& operator()(std::size_t i, std::size_t j) { return v[i * Cols + j]; }
  [[nodiscard]] constexpr const T& operator()(std::size_t i, std::size_t j) const { return v[i * Cols + j]; }

  /// element k of a row or column vector (k counts along the vector)
  [[nodiscard]] constexpr T& operator[](std::size_t k)
    requires(Rows == 1 || Cols == 1)
  {
    return v[k];
  }
  [[nodiscard]] constexpr const T& operator[](std::size_t k) const
    requires(Rows == 1 || Cols == 1)
  {
    return v[k];
  }

  [[nodiscard]] constexpr bool operator==(const matrix& other) const {
    for (std::size_t k = 0; k < Rows * Cols; ++k)
      if (!(v[k] == other.v[k])) return false;
    return true;
  }
};

/// a 1 x N row vector and an N x 1 column vector
template <class T, std::size_t N>
using row_vector = matrix<T, 1, N>;
template <class T, std::size_t N>
using column_vector = matrix<T, N, 1>;

/// @brief N matrices of the same shape: a 3-d tensor (N, Rows, Cols), e.g. one score matrix per head.
template <class T, std::size_t N, std::size_t Rows, std::size_t Cols>
struct stack {
  static_assert(N > 0, "qkv::stack needs at least one matrix");
  using value_type = T;
  using matrix_type = matrix<T, Rows, Cols>;

  matrix_type m[N]{};

  [[nodiscard]] static constexpr std::size_t depth() { return N; }
  [[nodiscard]] static constexpr std::size_t rows() { return Rows; }
  [[nodiscard]] static constexpr std::size_t cols() { return Cols; }

  [[nodiscard]] constexpr matrix_type& operator[](std::size_t n) { return m[n]; }
  [[nodiscard]] constexpr const matrix_type& operator[](std::size_t n) const { return m[n]; }
  [[nodiscard]] constexpr T& operator()(std::size_t n, std::size_t i, std::size_t j) {
    return m[n].v[i * Cols + j];
  }
  [[nodiscard]] constexpr const T& operator()(std::size_t n, std::size_t i, std::size_t j) const {
    return m[n].v[i * Cols + j];
  }
  [[nodiscard]] constexpr bool operator==(const stack& other) const {
    for (std::size_t n = 0; n < N; ++n)
      if (!(m[n] == other.m[n])) return false;
    return true;
  }
};

// ---------------------------------------------------------------------------------------------
// shape rules. Each is a named concept, so a mismatch reads as, e.g. (g++):
//   "required for the satisfaction of 'product_shapes<ARows, ACols, BRows, BCols>'
//    [with ARows = 3; ACols = 4; BRows = 3; BCols = 4]"
// which names both shapes: a is 3 x 4, b is 3 x 4.

/// a (ARows x ACols) times b (BRows x BCols) is defined when ACols == BRows
template <std::size_t ARows, std::size_t ACols, std::size_t BRows, std::size_t BCols>
concept product_shapes = (ACols == BRows);

/// element-wise operations need a (ARows x ACols) and b (BRows x BCols) to be the same shape
template <std::size_t ARows, std::size_t ACols, std::size_t BRows, std::size_t BCols>
concept same_shapes = (ARows == BRows && ACols == BCols);

/// side-by-side concatenation needs the same number of rows
template <std::size_t ARows, std::size_t ACols, std::size_t BRows, std::size_t BCols>
concept same_rows = (ARows == BRows);

/// top-to-bottom concatenation needs the same number of columns
template <std::size_t ARows, std::size_t ACols, std::size_t BRows, std::size_t BCols>
concept same_cols = (ACols == BCols);

// ---------------------------------------------------------------------------------------------
// building matrices

/// a matrix with every element equal to value
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> filled(const T& value) {
  matrix<T, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) out.v[k] = value;
  return out;
}

/// the N x N identity
template <class T, std::size_t N>
[[nodiscard]] constexpr matrix<T, N, N> identity() {
  matrix<T, N, N> out;
  for (std::size_t i = 0; i < N; ++i) out.v[i * N + i] = T(1);
  return out;
}

/// element-wise conversion to another number type: matrix_cast<float>(m)
template <class U, class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<U, R, C> matrix_cast(const matrix<T, R, C>& a) {
  matrix<U, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) out.v[k] = static_cast<U>(a.v[k]);
  return out;
}

/// (R, C) -> (C, R)
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, C, R> transposed(const matrix<T, R, C>& a) {
  matrix<T, C, R> out;
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) out.v[j * R + i] = a.v[i * C + j];
  return out;
}

// ---------------------------------------------------------------------------------------------
// products

/// @brief a b, the matrix product: (R, K) x (K, C) -> (R, C).
/// Each element is summed left to right, k = 0 .. K-1, starting from the first product
/// (so a 1-term sum is exact and the order is the same at compile time and at run time).
template <class T, std::size_t ARows, std::size_t ACols, std::size_t BRows, std::size_t BCols>
  requires product_shapes<ARows, ACols, BRows, BCols>
[[nodiscard]] constexpr matrix<T, ARows, BCols> matrix_product(const matrix<T, ARows, ACols>& a,
                                                               const matrix<T, BRows, BCols>& b) {
  matrix<T, ARows, BCols> out;
  for (std::size_t i = 0; i < ARows; ++i)
    for (std::size_t j = 0; j < BCols; ++j) {
      T s = a.v[i * ACols] * b.v[j];
      for (std::size_t k = 1; k < ACols; ++k) s += a.v[i * ACols + k] * b.v[k * BCols + j];
      out.v[i * BCols + j] = s;
    }
  return out;
}

/// @brief a bᵀ without forming bᵀ: (R, K) x (C, K)ᵀ -> (R, C). This is nn.Linear's x Wᵀ and
/// attention's Q Kᵀ; same summation order as matrix_product(a, transposed(b)).
template <class T, std::size_t ARows, std::size_t ACols, std::size_t BRows, std::size_t BCols>
  requires product_shapes<ARows, ACols, BCols, BRows>
[[nodiscard]] constexpr matrix<T, ARows, BRows> matrix_product_transposed(const matrix<T, ARows, ACols>& a,
                                                                          const matrix<T, BRows, BCols>& b) {
  matrix<T, ARows, BRows> out;
  for (std::size_t i = 0; i < ARows; ++i)
    for (std::size_t j = 0; j < BRows; ++j) {
      T s = a.v[i * ACols] * b.v[j * BCols];
      for (std::size_t k = 1; k < ACols; ++k) s += a.v[i * ACols + k] * b.v[j * BCols + k];
      out.v[i * BRows + j] = s;
    }
  return out;
}

/// the dot product of two vectors of N elements (row or column), summed left to right
template <class T, std::size_t AR, std::size_t AC, std::size_t BR, std::size_t BC>
  requires((AR == 1 || AC == 1) && (BR == 1 || BC == 1) && AR * AC == BR * BC)
[[nodiscard]] constexpr T dot(const matrix<T, AR, AC>& a, const matrix<T, BR, BC>& b) {
  T s = a.v[0] * b.v[0];
  for (std::size_t k = 1; k < AR * AC; ++k) s += a.v[k] * b.v[k];
  return s;
}

// ---------------------------------------------------------------------------------------------
// element-wise arithmetic and scaling

/// apply f to every element: map(m, f) -> matrix of f's result type
template <class T, std::size_t R, std::size_t C, class F>
[[nodiscard]] constexpr auto map(const matrix<T, R, C>& a, F f) {
  using U = std::remove_cvref_t<decltype(f(a.v[0]))>;
  matrix<U, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) out.v[k] = f(a.v[k]);
  return out;
}

/// combine two same-shaped matrices element by element: zip_with(a, b, f)
template <class T, std::size_t AR, std::size_t AC, std::size_t BR, std::size_t BC, class F>
  requires same_shapes<AR, AC, BR, BC>
[[nodiscard]] constexpr auto zip_with(const matrix<T, AR, AC>& a, const matrix<T, BR, BC>& b, F f) {
  using U = std::remove_cvref_t<decltype(f(a.v[0], b.v[0]))>;
  matrix<U, AR, AC> out;
  for (std::size_t k = 0; k < AR * AC; ++k) out.v[k] = f(a.v[k], b.v[k]);
  return out;
}

template <class T, std::size_t AR, std::size_t AC, std::size_t BR, std::size_t BC>
  requires same_shapes<AR, AC, BR, BC>
[[nodiscard]] constexpr matrix<T, AR, AC> operator+(const matrix<T, AR, AC>& a, const matrix<T, BR, BC>& b) {
  return zip_with(a, b, [](const T& x, const T& y) { return T(x + y); });
}

template <class T, std::size_t AR, std::size_t AC, std::size_t BR, std::size_t BC>
  requires same_shapes<AR, AC, BR, BC>
[[nodiscard]] constexpr matrix<T, AR, AC> operator-(const matrix<T, AR, AC>& a, const matrix<T, BR, BC>& b) {
  return zip_with(a, b, [](const T& x, const T& y) { return T(x - y); });
}

template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> operator-(const matrix<T, R, C>& a) {
  return map(a, [](const T& x) { return T(-x); });
}

/// the element-wise (Hadamard) product; matrix_product is the other one
template <class T, std::size_t AR, std::size_t AC, std::size_t BR, std::size_t BC>
  requires same_shapes<AR, AC, BR, BC>
[[nodiscard]] constexpr matrix<T, AR, AC> hadamard(const matrix<T, AR, AC>& a, const matrix<T, BR, BC>& b) {
  return zip_with(a, b, [](const T& x, const T& y) { return T(x * y); });
}

/// s a: every element times the scalar s
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> scaled(const std::type_identity_t<T>& s, const matrix<T, R, C>& a) {
  return map(a, [&s](const T& x) { return T(s * x); });
}

/// a / s: every element divided by the scalar s (a division, not a multiplication by 1/s:
/// PyTorch's `scores / d_k**0.5` divides, and the two round differently)
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> divided(const matrix<T, R, C>& a, const std::type_identity_t<T>& s) {
  return map(a, [&s](const T& x) { return T(x / s); });
}

template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> operator*(const std::type_identity_t<T>& s,
                                                  const matrix<T, R, C>& a) {
  return scaled(s, a);
}

template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> operator/(const matrix<T, R, C>& a,
                                                  const std::type_identity_t<T>& s) {
  return divided(a, s);
}

/// add a row vector to every row: x Wᵀ + b
template <class T, std::size_t R, std::size_t C, std::size_t BR, std::size_t BC>
  requires same_shapes<1, C, BR, BC>
[[nodiscard]] constexpr matrix<T, R, C> add_row_vector(const matrix<T, R, C>& a, const matrix<T, BR, BC>& b) {
  matrix<T, R, C> out = a;
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) out.v[i * C + j] += b.v[j];
  return out;
}

// ---------------------------------------------------------------------------------------------
// rows, columns, blocks

/// row i as a (1, C) row vector
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, 1, C> row(const matrix<T, R, C>& a, std::size_t i) {
  matrix<T, 1, C> out;
  for (std::size_t j = 0; j < C; ++j) out.v[j] = a.v[i * C + j];
  return out;
}

/// column j as an (R, 1) column vector
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, 1> column(const matrix<T, R, C>& a, std::size_t j) {
  matrix<T, R, 1> out;
  for (std::size_t i = 0; i < R; ++i) out.v[i] = a.v[i * C + j];
  return out;
}

/// the (BlockRows, BlockCols) block whose top-left element is (i0, j0)
template <std::size_t BlockRows, std::size_t BlockCols, class T, std::size_t R, std::size_t C>
  requires(BlockRows <= R && BlockCols <= C)
[[nodiscard]] constexpr matrix<T, BlockRows, BlockCols> block(const matrix<T, R, C>& a, std::size_t i0,
                                                              std::size_t j0) {
  matrix<T, BlockRows, BlockCols> out;
  for (std::size_t i = 0; i < BlockRows; ++i)
    for (std::size_t j = 0; j < BlockCols; ++j) out.v[i * BlockCols + j] = a.v[(i0 + i) * C + j0 + j];
  return out;
}

/// [a b]: side by side, (R, C1) and (R, C2) -> (R, C1 + C2)
template <class T, std::size_t AR, std::size_t AC, std::size_t BR, std::size_t BC>
  requires same_rows<AR, AC, BR, BC>
[[nodiscard]] constexpr matrix<T, AR, AC + BC> hconcat(const matrix<T, AR, AC>& a,
                                                       const matrix<T, BR, BC>& b) {
  matrix<T, AR, AC + BC> out;
  for (std::size_t i = 0; i < AR; ++i) {
    for (std::size_t j = 0; j < AC; ++j) out.v[i * (AC + BC) + j] = a.v[i * AC + j];
    for (std::size_t j = 0; j < BC; ++j) out.v[i * (AC + BC) + AC + j] = b.v[i * BC + j];
  }
  return out;
}

/// [a; b]: one above the other, (R1, C) and (R2, C) -> (R1 + R2, C)
template <class T, std::size_t AR, std::size_t AC, std::size_t BR, std::size_t BC>
  requires same_cols<AR, AC, BR, BC>
[[nodiscard]] constexpr matrix<T, AR + BR, AC> vconcat(const matrix<T, AR, AC>& a,
                                                       const matrix<T, BR, BC>& b) {
  matrix<T, AR + BR, AC> out;
  for (std::size_t k = 0; k < AR * AC; ++k) out.v[k] = a.v[k];
  for (std::size_t k = 0; k < BR * BC; ++k) out.v[AR * AC + k] = b.v[k];
  return out;
}

/// the N matrices of a stack side by side: (N, R, C) -> (R, N * C); heads are concatenated so
template <class T, std::size_t N, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, N * C> hconcat(const stack<T, N, R, C>& s) {
  matrix<T, R, N * C> out;
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t i = 0; i < R; ++i)
      for (std::size_t j = 0; j < C; ++j) out.v[i * (N * C) + n * C + j] = s.m[n].v[i * C + j];
  return out;
}

// ---------------------------------------------------------------------------------------------
// sums, left to right

/// the sum of each column: (R, C) -> (1, C), "sum over the rows", numpy's sum(axis=0)
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, 1, C> column_sums(const matrix<T, R, C>& a) {
  matrix<T, 1, C> out = row(a, 0);
  for (std::size_t i = 1; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) out.v[j] += a.v[i * C + j];
  return out;
}

/// the sum of each row: (R, C) -> (R, 1), numpy's sum(axis=1)
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, 1> row_sums(const matrix<T, R, C>& a) {
  matrix<T, R, 1> out;
  for (std::size_t i = 0; i < R; ++i) {
    T s = a.v[i * C];
    for (std::size_t j = 1; j < C; ++j) s += a.v[i * C + j];
    out.v[i] = s;
  }
  return out;
}

/// the sum of every element, row after row
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr T sum(const matrix<T, R, C>& a) {
  T s = a.v[0];
  for (std::size_t k = 1; k < R * C; ++k) s += a.v[k];
  return s;
}

/// the sum of the N matrices of a stack: (N, R, C) -> (R, C), torch's sum(dim=0)
template <class T, std::size_t N, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> sum(const stack<T, N, R, C>& s) {
  matrix<T, R, C> out = s.m[0];
  for (std::size_t n = 1; n < N; ++n) out = out + s.m[n];
  return out;
}

// ---------------------------------------------------------------------------------------------
// comparisons for proofs

/// |x| for any ordered number type (std::abs is not constexpr for every type in C++20)
template <class T>
[[nodiscard]] constexpr T magnitude(const T& x) {
  return x < T(0) ? T(-x) : x;
}

/// @brief true when |a - b| <= tolerance element by element. NaN anywhere gives false.
template <class T, std::size_t AR, std::size_t AC, std::size_t BR, std::size_t BC>
  requires same_shapes<AR, AC, BR, BC>
[[nodiscard]] constexpr bool approx_equal(const matrix<T, AR, AC>& a, const matrix<T, BR, BC>& b,
                                          const std::type_identity_t<T>& tolerance) {
  for (std::size_t k = 0; k < AR * AC; ++k)
    if (!(magnitude(T(a.v[k] - b.v[k])) <= tolerance)) return false;
  return true;
}

template <class T, std::size_t N, std::size_t R, std::size_t C>
[[nodiscard]] constexpr bool approx_equal(const stack<T, N, R, C>& a, const stack<T, N, R, C>& b,
                                          const std::type_identity_t<T>& tolerance) {
  for (std::size_t n = 0; n < N; ++n)
    if (!approx_equal(a.m[n], b.m[n], tolerance)) return false;
  return true;
}

/// the largest |a - b| over all elements (for reports: "max difference 2.4e-07")
template <class T, std::size_t AR, std::size_t AC, std::size_t BR, std::size_t BC>
  requires same_shapes<AR, AC, BR, BC>
[[nodiscard]] constexpr T max_abs_difference(const matrix<T, AR, AC>& a, const matrix<T, BR, BC>& b) {
  T worst = magnitude(T(a.v[0] - b.v[0]));
  for (std::size_t k = 1; k < AR * AC; ++k) {
    const T d = magnitude(T(a.v[k] - b.v[k]));
    if (d > worst) worst = d;
  }
  return worst;
}

}  // namespace qkv
