// must not compile: a 2 x 3 matrix plus a 3 x 2 matrix
#include <qkv/core/matrix.hpp>

constexpr qkv::matrix<float, 2, 3> a{};
constexpr qkv::matrix<float, 3, 2> b{};
constexpr auto c = a + b;
