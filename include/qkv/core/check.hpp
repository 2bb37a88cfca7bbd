// check.hpp: compile-time checks whose failure makes the compiler print the actual value.
//
// static_assert(x == 7.8) fails with "static assertion failed" and nothing else. These checks
// return true when they hold; when one fails it calls a function that is not constexpr, so
// the compiler stops there and prints the call with its arguments (stdBLAS/mdspan's
// "but_actual_value_was_" idea), e.g. with g++:
//   error: call to non-'constexpr' function 'void qkv::check::failed_actual_expected_tolerance(...)
//   in 'constexpr' expansion of 'qkv::check::near<double>(7.7999999523162842e+0, 7.8e+0, 0.0)'
// and with clang: "in call to 'near(7.799999952316284, 7.8, 0)'".
#pragma once

#include <cstddef>

#include "matrix.hpp"

namespace qkv::check {

// deliberately not constexpr: reaching one of these in a constant expression is the failure,
// and the compiler's message shows the arguments
template <class T>
void failed_actual_expected_tolerance(const T&, const T&, const T&) {}
template <class T>
void failed_actual_expected(const T&, const T&) {}
template <class T>
void failed_at_row_col_actual_expected(std::size_t, std::size_t, const T&, const T&) {}
template <class T>
void failed_at_row_col_actual_expected_bound(std::size_t, std::size_t, const T&, const T&, const T&) {}
template <class T>
void failed_at_depth_row_col_actual_expected(std::size_t, std::size_t, std::size_t, const T&, const T&) {}

/// |actual - expected| <= tolerance
template <class T>
constexpr bool near(const T& actual, const T& expected, const T& tolerance) {
  const T d = actual < expected ? T(expected - actual) : T(actual - expected);
  if (!(d <= tolerance)) failed_actual_expected_tolerance(actual, expected, tolerance);
  return true;
}

/// actual == expected, exactly
template <class T>
constexpr bool equal(const T& actual, const T& expected) {
  if (!(actual == expected)) failed_actual_expected(actual, expected);
  return true;
}

/// every element within tolerance; a failure names the first element's row, column and values
template <class T, std::size_t R, std::size_t C>
constexpr bool near(const matrix<T, R, C>& actual, const matrix<T, R, C>& expected,
                    const T& tolerance) {
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) {
      const T a = actual(i, j), e = expected(i, j);
      const T d = a < e ? T(e - a) : T(a - e);
      if (!(d <= tolerance)) failed_at_row_col_actual_expected(i, j, a, e);
    }
  return true;
}

/// every element exactly equal; a failure names the first element's row, column and values
template <class T, std::size_t R, std::size_t C>
constexpr bool equal(const matrix<T, R, C>& actual, const matrix<T, R, C>& expected) {
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j)
      if (!(actual(i, j) == expected(i, j)))
        failed_at_row_col_actual_expected(i, j, actual(i, j), expected(i, j));
  return true;
}

/// |actual(i, j) - expected(i, j)| <= bound(i, j) for every element: a tolerance per element,
/// e.g. a derived rounding-error bound (core/bounds.hpp); compared in double
template <class T, class E, std::size_t R, std::size_t C>
constexpr bool within(const matrix<T, R, C>& actual, const matrix<E, R, C>& expected,
                      const matrix<double, R, C>& bound) {
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) {
      const double a = static_cast<double>(actual(i, j)), e = static_cast<double>(expected(i, j));
      const double d = a < e ? e - a : a - e;
      if (!(d <= bound(i, j))) failed_at_row_col_actual_expected_bound(i, j, a, e, bound(i, j));
    }
  return true;
}

template <class T, std::size_t N, std::size_t R, std::size_t C>
constexpr bool near(const stack<T, N, R, C>& actual, const stack<T, N, R, C>& expected,
                    const T& tolerance) {
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t i = 0; i < R; ++i)
      for (std::size_t j = 0; j < C; ++j) {
        const T a = actual(n, i, j), e = expected(n, i, j);
        const T d = a < e ? T(e - a) : T(a - e);
        if (!(d <= tolerance)) failed_at_depth_row_col_actual_expected(n, i, j, a, e);
      }
  return true;
}

template <class T, std::size_t N, std::size_t R, std::size_t C>
constexpr bool equal(const stack<T, N, R, C>& actual, const stack<T, N, R, C>& expected) {
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t i = 0; i < R; ++i)
      for (std::size_t j = 0; j < C; ++j)
        if (!(actual(n, i, j) == expected(n, i, j)))
          failed_at_depth_row_col_actual_expected(n, i, j, actual(n, i, j), expected(n, i, j));
  return true;
}

}  // namespace qkv::check
