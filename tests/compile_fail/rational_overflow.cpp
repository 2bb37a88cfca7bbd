// must not compile: exact arithmetic that overflows its integer type is an error, not a wrap.
// The compiler names the check that failed.
#include <qkv/exact/fixed_width.hpp>

// 2^127 * 4 = 2^129 does not fit int128_t (largest magnitude 2^128 - 1)
constexpr qkv::exact::q128 two_127(boost::multiprecision::int128_t(1) << 127);
constexpr auto product = two_127 * 4;
// 1/3 divided by zero
constexpr auto quotient = qkv::exact::rational<long long>(1, 3) / 0;
