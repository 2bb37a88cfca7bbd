// runtime tests of core/matrix.hpp: the same operations evaluated by the running program.
#include <doctest/doctest.h>

#include <limits>

#include <qkv/core/matrix.hpp>

TEST_CASE("a matrix product computed at run time equals the one the compiler computed") {
  // volatile: keep the compiler from folding the run-time side
  volatile double one = 1.0;
  const qkv::matrix<double, 3, 4> x{{{one, 0, one, 0}, {0, 2 * one, 0, 2 * one}, {one, one, one, one}}};
  constexpr qkv::matrix<double, 4, 3> w_key{{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}, {1, 1, 0}}};
  constexpr qkv::matrix<double, 3, 4> x_c{{{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}}};
  constexpr auto keys_c = qkv::matrix_product(x_c, w_key);
  const auto keys = qkv::matrix_product(x, w_key);
  CHECK(keys == keys_c);
  CHECK(keys(1, 0) == 4.0);
}

TEST_CASE("approx_equal is false when an element is NaN") {
  qkv::matrix<float, 1, 2> a{{{1.0f, 2.0f}}};
  auto b = a;
  CHECK(qkv::approx_equal(a, b, 0.0f));
  b(0, 1) = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(qkv::approx_equal(a, b, 1.0f));
}

TEST_CASE("stacks concatenate their matrices side by side in order") {
  qkv::stack<int, 3, 1, 2> s{
      {qkv::matrix<int, 1, 2>{{{1, 2}}}, qkv::matrix<int, 1, 2>{{{3, 4}}}, qkv::matrix<int, 1, 2>{{{5, 6}}}}};
  CHECK(qkv::hconcat(s) == qkv::matrix<int, 1, 6>{{{1, 2, 3, 4, 5, 6}}});
}
