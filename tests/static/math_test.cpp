// static proofs of core/math.hpp: special values and known values, at compile time, on both
// compilers. If this file compiles, they hold. The accuracy sweep (10^6 points per function and
// type against Boost cpp_bin_float_50) is tests/core/math_accuracy_test.cpp.
#include <qkv/core/check.hpp>
#include <qkv/core/math.hpp>

#include <bit>
#include <cstdint>
#include <limits>

namespace {

namespace check = qkv::check;
using dlim = std::numeric_limits<double>;
using flim = std::numeric_limits<float>;

constexpr double inf = dlim::infinity();
constexpr float inff = flim::infinity();
constexpr double nan = dlim::quiet_NaN();
constexpr float nanf = flim::quiet_NaN();

constexpr bool is_nan(double x) { return x != x; }  // only NaN compares unequal to itself
constexpr bool is_nan(float x) { return x != x; }
constexpr bool negative_zero(double x) { return x == 0.0 && std::bit_cast<std::uint64_t>(x) >> 63; }
constexpr bool negative_zero(float x) { return x == 0.0f && std::bit_cast<std::uint32_t>(x) >> 31; }

// --- exp ---
// exp(0): |0| < 2^-28, so exp returns 1 + 0 = 1 exactly
static_assert(qkv::exp(0.0) == 1.0 && qkv::exp(0.0f) == 1.0f && qkv::exp(-0.0) == 1.0);
// exp(1) = e = 2.718281828459045235..., nearest double 0x1.5bf0a8b145769p+1; 1 ulp in [2, 4) is 2^-51
static_assert(qkv::proven<check::near(qkv::exp(1.0), 0x1.5bf0a8b145769p+1, 0x1p-51)>);
// e as a float is 0x1.5bf0a8p+1 (2.71828174...); float rounds e's double once: 1 ulp = 2^-22
static_assert(qkv::proven<check::near(qkv::exp(1.0f), 0x1.5bf0a8p+1f, 0x1p-22f)>);
// e^-1 = 0.36787944117144233..., 1 ulp in [0.25, 0.5) is 2^-54
static_assert(qkv::proven<check::near(qkv::exp(-1.0), 0.36787944117144233, 0x1p-54)>);
// ln 2 ~ 0.6931 reduces to k = 1, r = ln2 - ln2_hi - ln2_lo ~ 0: e^(ln 2) = 2 to within 1 ulp (2^-51)
static_assert(qkv::proven<check::near(qkv::exp(0.6931471805599453), 2.0, 0x1p-51)>);
// overflow: ln(DBL_MAX) = 709.78..., so exp(710) = +inf; ln(FLT_MAX) = 88.72..., exp(89f) = +inf
static_assert(qkv::exp(710.0) == inf && qkv::exp(89.0f) == inff && qkv::exp(inf) == inf);
// underflow: e^-745 = 10^(-745 log10 e) = 10^-323.55 = 2.8e-324 lies above half the smallest
// subnormal (4.94e-324 / 2), so it rounds to the smallest subnormal; e^-746 = 1.04e-324 to 0
static_assert(qkv::exp(-745.0) == dlim::denorm_min() && qkv::exp(-746.0) == 0.0);
// float: e^-103 = 10^-44.73 = 1.86e-45, above half of 1.4e-45: the smallest float subnormal
static_assert(qkv::exp(-103.0f) == flim::denorm_min() && qkv::exp(-104.0f) == 0.0f);
static_assert(qkv::exp(-inf) == 0.0 && qkv::exp(-inff) == 0.0f);
// NaN in, NaN out
static_assert(is_nan(qkv::exp(nan)) && is_nan(qkv::exp(nanf)));

// --- log ---
// log(1): f = 0 and k = 0, so log returns 0 exactly; log(2): k = 1, f = 0: ln2_hi + ln2_lo
static_assert(qkv::log(1.0) == 0.0 && qkv::log(1.0f) == 0.0f);
static_assert(qkv::log(2.0) == 0x1.62e42fefa39efp-1);  // ln 2 correctly rounded
// log(e) = 1: the double e is 1.4e-16 below the true e, so log(e) = 1 - 5e-17; 1 ulp below 1 is 2^-53
static_assert(qkv::proven<check::near(qkv::log(0x1.5bf0a8b145769p+1), 1.0, 0x1p-53)>);
// exp(log(2)) within 1 ulp of 2 (log(2) is correctly rounded, e^x has relative slope 1)
static_assert(qkv::proven<check::near(qkv::exp(qkv::log(2.0)), 2.0, 0x1p-51)>);
static_assert(qkv::proven<check::near(qkv::exp(qkv::log(2.0f)), 2.0f, 0x1p-22f)>);
// log of the smallest subnormal: -1074 ln 2 = -744.44007192138126...; 1 ulp in [512, 1024) = 2^-43
static_assert(qkv::proven<check::near(qkv::log(dlim::denorm_min()), -744.44007192138126, 0x1p-43)>);
// float: -149 ln 2 = -103.27892990343185; 1 ulp in [64, 128) = 2^-17
static_assert(qkv::proven<check::near(qkv::log(flim::denorm_min()), -103.27892990343185f, 0x1p-17f)>);
// log(+-0) = -inf, log(negative) = NaN, log(+inf) = +inf, log(NaN) = NaN
static_assert(qkv::log(0.0) == -inf && qkv::log(-0.0) == -inf && qkv::log(0.0f) == -inff);
static_assert(is_nan(qkv::log(-1.0)) && is_nan(qkv::log(-inff)) && is_nan(qkv::log(nan)));
static_assert(qkv::log(inf) == inf && qkv::log(inff) == inff);

// --- sqrt: correctly rounded, so exact squares come out exact ---
static_assert(qkv::sqrt(4.0) == 2.0 && qkv::sqrt(4.0f) == 2.0f && qkv::sqrt(1.0) == 1.0);
static_assert(qkv::sqrt(0.25) == 0.5 && qkv::sqrt(9.0) == 3.0 && qkv::sqrt(0x1p-1022) == 0x1p-511);
// sqrt(2) = 1.41421356237309504880..., correctly rounded double 0x1.6a09e667f3bcdp+0,
// float 0x1.6a09e6p+0 (1.41421353816986083984375)
static_assert(qkv::sqrt(2.0) == 0x1.6a09e667f3bcdp+0 && qkv::sqrt(2.0f) == 0x1.6a09e6p+0f);
// subnormals: sqrt(2^-1074) = 2^-537 exactly; sqrt(2^-148) = 2^-74
static_assert(qkv::sqrt(dlim::denorm_min()) == 0x1p-537 && qkv::sqrt(0x1p-148f) == 0x1p-74f);
// the largest double: sqrt(DBL_MAX) = 1.3407807929942596e154
static_assert(qkv::sqrt(dlim::max()) == 0x1.fffffffffffffp+511);
static_assert(negative_zero(qkv::sqrt(-0.0)) && negative_zero(qkv::sqrt(-0.0f)));  // sqrt(-0) = -0
static_assert(is_nan(qkv::sqrt(-1.0)) && is_nan(qkv::sqrt(-1e-45f)) && is_nan(qkv::sqrt(nan)));
static_assert(qkv::sqrt(inf) == inf && is_nan(qkv::sqrt(-inf)));

// --- sin and cos ---
// |x| < 2^-26: sin(x) = x (x^3/6 is below half an ulp), and cos(x) = 1
static_assert(qkv::sin(0.0) == 0.0 && qkv::cos(0.0) == 1.0 && qkv::cos(0.0f) == 1.0f);
static_assert(negative_zero(qkv::sin(-0.0)) && negative_zero(qkv::sin(-0.0f)));  // sign kept
static_assert(qkv::sin(1e-30) == 1e-30 && qkv::sin(dlim::denorm_min()) == dlim::denorm_min());
// sin(pi/6) = 1/2: the double nearest pi/6 is within 2^-54 of it and cos(pi/6) = 0.87, so the
// true sine is within 0.87 * 2^-54 of 0.5; plus 1 ulp (2^-53 at 0.5): tolerance 2^-52
static_assert(qkv::proven<check::near(qkv::sin(0.52359877559829887), 0.5, 0x1p-52)>);
// cos(pi) = -1: the double pi is 1.2e-16 below pi, cos'(pi) = 0: within 1 ulp (2^-53) of -1
static_assert(qkv::proven<check::near(qkv::cos(3.141592653589793), -1.0, 0x1p-53)>);
// sin(pi) = the error of the double pi: pi - 0x1.921fb54442d18p+1 = 1.2246467991473532e-16
static_assert(qkv::proven<check::near(qkv::sin(3.141592653589793), 1.2246467991473532e-16, 0x1p-105)>);
// a large argument: sin(10000) = -0.30561438888825215 (10000 = 6366 pi/2 + 0.43...)
static_assert(qkv::proven<check::near(qkv::sin(10000.0), -0.30561438888825215, 0x1p-54)>);
static_assert(qkv::proven<check::near(qkv::cos(10000.0f), -0.95215536825901481f, 0x1p-24f)>);
// sin^2 + cos^2 = 1 within a few ulp
static_assert(qkv::proven<check::near(qkv::sin(0.7) * qkv::sin(0.7) + qkv::cos(0.7) * qkv::cos(0.7), 1.0, 4e-16)>);
static_assert(is_nan(qkv::sin(inf)) && is_nan(qkv::cos(-inf)) && is_nan(qkv::sin(nanf)));

// --- fma: one rounding ---
// (1 + 2^-23)(1 - 2^-23) - 1 = -2^-46 exactly; a*b rounded first gives 1 - 1 = 0
static_assert(qkv::fma(1.0f + 0x1p-23f, 1.0f - 0x1p-23f, -1.0f) == -0x1p-46f);
static_assert((1.0f + 0x1p-23f) * (1.0f - 0x1p-23f) - 1.0f == 0.0f);
// double: (1 + 2^-52)(1 - 2^-52) - 1 = -2^-104
static_assert(qkv::fma(1.0 + 0x1p-52, 1.0 - 0x1p-52, -1.0) == -0x1p-104);
// a tie: (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24, exactly half an ulp (2^-23) above 1 + 2^-11,
// whose last bit is even: it rounds down. Add 2^-60 and it is above the tie: it rounds up.
// Evaluating in double first would round 1 + 2^-11 + 2^-24 + 2^-60 to 1 + 2^-11 + 2^-24 (a
// tie again) and then down: the double rounding that the emulation avoids.
static_assert(qkv::fma(1.0f + 0x1p-12f, 1.0f + 0x1p-12f, 0.0f) == 1.0f + 0x1p-11f);
static_assert(qkv::fma(1.0f + 0x1p-12f, 1.0f + 0x1p-12f, 0x1p-60f) == 1.0f + 0x1p-11f + 0x1p-23f);
// subnormal results: 2^-1000 * 2^-74 = 2^-1074 (the smallest subnormal), 2^-1075 ties to 0
static_assert(qkv::fma(0x1p-1000, 0x1p-74, 0.0) == dlim::denorm_min());
static_assert(qkv::fma(0x1p-1000, 0x1p-75, 0.0) == 0.0);
static_assert(qkv::fma(0x1p-1000, 0x1.8p-75, 0.0) == dlim::denorm_min());  // 1.5 * 2^-1075: up
// overflow of the product, brought back by c: DBL_MAX * 2 - DBL_MAX = DBL_MAX
static_assert(qkv::fma(dlim::max(), 2.0, -dlim::max()) == dlim::max());
static_assert(qkv::fma(dlim::max(), 2.0, 0.0) == inf);
// exact cancellation gives +0; signed zeros follow IEEE: (-0)(1) + (-0) = -0
static_assert(!negative_zero(qkv::fma(2.0, 3.0, -6.0)) && qkv::fma(2.0, 3.0, -6.0) == 0.0);
static_assert(negative_zero(qkv::fma(-0.0, 1.0, -0.0)) && negative_zero(qkv::fma(-0.0f, 1.0f, -0.0f)));
// inf * 0 and inf - inf are NaN; NaN in, NaN out
static_assert(is_nan(qkv::fma(inf, 0.0, 1.0)) && is_nan(qkv::fma(inf, 1.0, -inf)));
static_assert(qkv::fma(inf, -2.0, -inf) == -inf && qkv::fma(1.0f, 2.0f, inff) == inff);
static_assert(is_nan(qkv::fma(nan, 1.0, 1.0)) && is_nan(qkv::fma(1.0f, 1.0f, nanf)));

// --- tanh and erf ---
// odd functions through 0: tanh(+-0) = +-0, erf(+-0) = +-0; below 2^-28 tanh(x) = x
static_assert(qkv::tanh(0.0) == 0.0 && negative_zero(qkv::tanh(-0.0)) && negative_zero(qkv::erf(-0.0f)));
static_assert(qkv::tanh(1e-10) == 1e-10 && qkv::tanh(dlim::denorm_min()) == dlim::denorm_min());
// tanh(1) = 0.76159415595576488812, nearest double 0x1.85efab514f394p-1; 1 ulp in [0.5, 1) is 2^-53
static_assert(qkv::proven<check::near(qkv::tanh(1.0), 0x1.85efab514f394p-1, 0x1p-53)>);
// tanh(1/2) = 0.46211715726000975850 (0x1.d9353d7568af3p-2); 1 ulp in [0.25, 0.5) is 2^-54
static_assert(qkv::proven<check::near(qkv::tanh(0.5), 0x1.d9353d7568af3p-2, 0x1p-54)>);
static_assert(qkv::proven<check::near(qkv::tanh(-2.0f), -0.96402758f, 0x1p-24f)>);
// 1 - tanh(22) = 2 e^-44 = 1.6e-19, below half an ulp of 1 (1.1e-16): tanh(x >= 22) = 1
static_assert(qkv::tanh(22.0) == 1.0 && qkv::tanh(-1e300) == -1.0 && qkv::tanh(inf) == 1.0);
static_assert(qkv::tanh(-inff) == -1.0f && is_nan(qkv::tanh(nan)) && is_nan(qkv::tanh(nanf)));
// erf(1) = 0.84270079294971486934 (0x1.af767a741088bp-1), erf(1/2) = 0.52049987781304653768
// (0x1.0a7ef5c18edd2p-1): the series; erf(3) = 0.99997790950300141456 (0x1.fffd1ac4135f9p-1):
// the continued fraction. 1 ulp in [0.5, 1) is 2^-53
static_assert(qkv::proven<check::near(qkv::erf(1.0), 0x1.af767a741088bp-1, 0x1p-53)>);
static_assert(qkv::proven<check::near(qkv::erf(0.5), 0x1.0a7ef5c18edd2p-1, 0x1p-53)>);
static_assert(qkv::proven<check::near(qkv::erf(3.0), 0x1.fffd1ac4135f9p-1, 0x1p-53)>);
static_assert(qkv::proven<check::near(qkv::erf(-2.0f), -0.99532227f, 0x1p-24f)>);
// small x: erf(x) = 2x/sqrt(pi); erf(10^-4) = 1.1283791633342487e-4 (0x1.d946ca4401e6ep-14)
static_assert(qkv::proven<check::near(qkv::erf(1e-4), 0x1.d946ca4401e6ep-14, 0x1p-66)>);
// the smallest subnormal: 2/sqrt(pi) 2^-1074 = 1.13 2^-1074 rounds to 2^-1074
static_assert(qkv::erf(dlim::denorm_min()) == dlim::denorm_min());
// erfc(6) = 2.2e-17 is below half an ulp of 1: erf(6) = 1
static_assert(qkv::erf(6.0) == 1.0 && qkv::erf(-inf) == -1.0 && qkv::erf(inff) == 1.0f);
static_assert(is_nan(qkv::erf(nan)) && is_nan(qkv::erf(nanf)));

// --- correctly rounded log, sin and cos in double (issue 18) ---
// Each value below was computed to 400 bits (mpmath); "then" lists the bits of |f(x)| after its
// first 53. Round to nearest keeps the 53 bits when the next bit is 0, adds one when it is 1
// (and more bits follow). These sit so close to a rounding boundary that only the accurate path
// (288-bit fixed point) can decide them.
// Lefevre and Muller's worst case for log: x = 0x1.62a88613629b6p+678, log x = 470.27976575414419357...
// = 0x1.d6479eba7c971p+8, then 0 and 64 more zeros: 0x1.d6479eba7c971p+8
static_assert(qkv::log(0x1.62a88613629b6p+678) == 0x1.d6479eba7c971p+8);
// sin(0x1.005023d32fee5p+1) = 0.90827694772294070846... = 0x1.d109ad145c88ep-1, then 1 and 46 zeros
// (just above the midpoint): rounds up to 0x1.d109ad145c88fp-1
static_assert(qkv::sin(0x1.005023d32fee5p+1) == 0x1.d109ad145c88fp-1);
// cos(0x1.1e3779b97f4a2p-24) = 1 - 2.2e-15 = 0x1.fffffffffffecp-1, then 0 and 43 zeros
static_assert(qkv::cos(0x1.1e3779b97f4a2p-24) == 0x1.fffffffffffecp-1);
// three of the calls where glibc 2.36 is not correctly rounded in PyTorch's randn(200000) after
// manual_seed(0) (tests/data/torch_f64_draws.json):
// log(0x1.c58f61a101275p-1) = -0.12119687594885978494... = -0x1.f06c22a93e592p-4, then 1000000000111...:
// rounds to ...593p-4 (glibc returns ...592p-4, 0.5009 ulp away)
static_assert(qkv::log(0x1.c58f61a101275p-1) == -0x1.f06c22a93e593p-4);
// sin(0x1.854468663edeep+2) = -0.19953663708177195354... = -0x1.98a6aa14f5d30p-3, then 10000011111...:
// rounds to ...d31p-3 (glibc: ...d30p-3, 0.515 ulp away)
static_assert(qkv::sin(0x1.854468663edeep+2) == -0x1.98a6aa14f5d31p-3);
// cos(0x1.07d54d0e4c97p+0) = 0.51430568940383442059... = 0x1.0753134845bc5p-1, then 0111111111101...:
// stays ...bc5p-1 (glibc: ...bc6p-1, 0.5007 ulp away)
static_assert(qkv::cos(0x1.07d54d0e4c97p+0) == 0x1.0753134845bc5p-1);

// integer arguments are computed in double, as <cmath> does
static_assert(qkv::exp(0) == 1.0 && qkv::sqrt(9) == 3.0 && qkv::log(1) == 0.0 && qkv::tanh(0) == 0.0);

}  // namespace
