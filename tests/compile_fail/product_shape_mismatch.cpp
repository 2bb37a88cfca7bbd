// must not compile: (3 x 4) times (2 x 5); a's 4 columns do not meet b's 2 rows
#include <qkv/core/matrix.hpp>

constexpr qkv::matrix<double, 3, 4> a{};
constexpr qkv::matrix<double, 2, 5> b{};
constexpr auto c = qkv::matrix_product(a, b);
