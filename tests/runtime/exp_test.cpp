// The vector exp (runtime/exp.hpp): at most 2 ulp from the exact e^x for EVERY float in
// [-87.3, 88.7], and the special values.
//
// How the sweep stays quick (about 2.2e9 floats): Boost's cpp_bin_float_50 costs ~12 us per
// exp (docs/design.md, "Toolchain facts"), 7 hours for the sweep. So the sweep compares against the
// double-precision std::exp, evaluated at the float x (exact as a double): glibc's exp is
// correctly rounded in double up to < 1 double ulp, i.e. its error is below 2^-52 relative,
// about 2^-29 of a float ulp: a float-ulp measurement against it is off by < 1e-8 ulp.
// A second test checks that claim, not trusts it: on >= 10^5 floats spread over the whole
// range, std::exp(double) is compared with cpp_bin_float_50 (50 decimal digits) and must be
// within 1e-6 float ulp of it, and the vector exp is measured against Boost directly too.
// Four floats in five have |x| < 2^-20 (the binades near 0); there the reference is the
// Taylor sum 1 + x + x^2/2 + x^3/6 in double, whose truncation error x^4/24 < 2^-84 and whose
// three roundings (< 2^-52 relative) are again far below a float ulp; it is what keeps the
// sweep to a few seconds. The Boost test below covers those binades too.
// The ulp of a result y is 2^(e - 23) for y in [2^e, 2^(e+1)): the spacing of floats there.
#include <doctest/doctest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include <qkv/runtime/exp.hpp>
#include <qkv/runtime/thread_pool.hpp>

#include "../support/math_samples.hpp"

namespace rt = qkv::runtime;

namespace {

/// the float ulp at y (y > 0, normal float range): 2^(exponent of y - 23), from y's bits
double float_ulp(double y) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(y);
  // 2^(e - 23): the exponent field of y minus 23, with a zero mantissa
  return std::bit_cast<double>((((bits >> 52) & 0x7ff) - 23) << 52);
}

struct sweep_result {
  double worst_ulp = 0;
  float worst_x = 0;
  std::uint64_t count = 0;
};

/// every float whose bit pattern lies in [first, last] (one sign), 8 at a time
sweep_result sweep(std::uint32_t first, std::uint32_t last) {
  sweep_result r;
  using V = rt::simd<float>;
  using I = rt::stdx::rebind_simd_t<std::int32_t, V>;
  constexpr std::size_t W = rt::lanes<float>;
  const I iota([](auto i) { return std::int32_t(i); });
  alignas(64) float in[W], out[W];
  for (std::uint64_t b = first; b <= last; b += W) {
    // W consecutive bit patterns (the last batch repeats `last`: a repeat changes no maximum)
    const I bits = rt::stdx::min(I(std::int32_t(b)) + iota, I(std::int32_t(last)));
    const V x = rt::stdx::__proposed::simd_bit_cast<V>(bits);
    x.copy_to(in, rt::stdx::element_aligned);
    rt::vexp(x).copy_to(out, rt::stdx::element_aligned);
    const bool tiny = std::abs(in[0]) < 0x1p-20f && std::abs(in[W - 1]) < 0x1p-20f;  // one side: monotonic
    double worst = 0;
    for (std::size_t k = 0; k < W; ++k) {
      const double xd = in[k];
      const double ref = tiny ? 1 + (xd + xd * xd * (0.5 + xd * (1.0 / 6))) : std::exp(xd);
      // 1 / ulp = 2^(23 - e): exponent field 1023 + 23 - (E - 1023) = 2069 - E, E = ref's field
      const std::uint64_t e = (std::bit_cast<std::uint64_t>(ref) >> 52) & 0x7ff;
      const double err = std::abs(double(out[k]) - ref) * std::bit_cast<double>((2069 - e) << 52);
      worst = !(err <= worst) ? err : worst;  // NaN wins
    }
    if (!(worst <= r.worst_ulp)) {
      r.worst_ulp = worst;
      r.worst_x = in[0];  // the batch's first x: where to look
    }
    r.count += std::min<std::uint64_t>(W, std::uint64_t(last) - b + 1);
  }
  return r;
}

}  // namespace

TEST_CASE("the vector exp is within 2 ulp of the exact value for every float in [-87.3, 88.7]") {
  // the bit patterns: non-negative floats 0 .. 88.7f, negative floats -0 .. -87.3f (bits grow
  // with magnitude on each side); 64 chunks per side spread over the pool's threads. With
  // QKV_TEST_SAMPLE=small (the sanitizer builds) 6 chunks per side, spread over the range: the
  // same code on a tenth of the floats (the plain builds sweep every float)
  const std::uint32_t pos_last = std::bit_cast<std::uint32_t>(88.7f);
  const std::uint32_t neg_first = std::bit_cast<std::uint32_t>(-0.0f);
  const std::uint32_t neg_last = std::bit_cast<std::uint32_t>(-87.3f);
  constexpr std::uint32_t chunks = 64;
  const auto swept = std::uint32_t(qkv::test::sample_points(chunks));  // chunks per side
  std::mutex m;
  sweep_result total;
  std::uint64_t expected = 0;  // the floats of the swept chunks, counted apart from the sweep
  rt::thread_pool pool(2);
  pool.parallel_for(2 * swept, [&](std::size_t t) {
    const bool neg = t >= swept;
    const std::uint32_t lo = neg ? neg_first : 0u, hi = neg ? neg_last : pos_last;
    const std::uint64_t span = std::uint64_t(hi) - lo + 1, c = (t % swept) * chunks / swept;
    const auto a = std::uint32_t(lo + span * c / chunks);
    const auto b = std::uint32_t(lo + span * (c + 1) / chunks - 1);
    const auto r = sweep(a, b);
    std::lock_guard lock(m);
    total.count += r.count;
    expected += std::uint64_t(b) - a + 1;
    if (r.worst_ulp > total.worst_ulp) {
      total.worst_ulp = r.worst_ulp;
      total.worst_x = r.worst_x;
    }
  });
  CHECK(total.count == expected);
  // the full sweep: every float of both sides, (pos_last + 1) + (neg_last - neg_first + 1)
  if (swept == chunks)
    CHECK(total.count == std::uint64_t(pos_last) + 1 + (std::uint64_t(neg_last) - neg_first + 1));
  MESSAGE("vexp over " << total.count << " floats: worst " << total.worst_ulp
                       << " ulp, in the 8 floats from x = " << total.worst_x);
  CHECK(total.worst_ulp <= 2.0);
}

TEST_CASE("std::exp in double is a valid reference: within 1e-6 float ulp of 50-digit Boost on 10^5 floats") {
  using big = boost::multiprecision::cpp_bin_float_50;
  // 10^5 floats evenly spaced in bit pattern over each side, so every binade is visited
  const std::uint32_t pos_last = std::bit_cast<std::uint32_t>(88.7f);
  const std::uint32_t neg_first = std::bit_cast<std::uint32_t>(-0.0f);
  const std::uint32_t neg_last = std::bit_cast<std::uint32_t>(-87.3f);
  constexpr std::uint32_t per_side = 50000;
  double worst_ref = 0, worst_vexp = 0;
  std::size_t n = 0;
  for (int side = 0; side < 2; ++side) {
    const std::uint64_t lo = side ? neg_first : 0u, hi = side ? neg_last : pos_last;
    for (std::uint32_t s = 0; s < per_side; ++s) {
      const float x = std::bit_cast<float>(std::uint32_t(lo + (hi - lo) * s / (per_side - 1)));
      const big exact = boost::multiprecision::exp(big(x));
      const double ulp = float_ulp(double(exact));
      worst_ref = std::max(worst_ref, double(abs(big(std::exp(double(x))) - exact)) / ulp);
      worst_vexp = std::max(worst_vexp, double(abs(big(rt::vexp(x)) - exact)) / ulp);
      ++n;
    }
  }
  CHECK(n >= 100000);
  MESSAGE("over " << n << " floats: std::exp(double) off by at most " << worst_ref << " float ulp, vexp by "
                  << worst_vexp << " ulp (against cpp_bin_float_50)");
  CHECK(worst_ref <= 1e-6);
  CHECK(worst_vexp <= 2.0);
}

TEST_CASE_TEMPLATE("the vector exp handles zero, infinities, NaN, overflow and underflow", T, float, double) {
  const T inf = std::numeric_limits<T>::infinity();
  CHECK(rt::vexp(T(0)) == T(1));
  CHECK(rt::vexp(-inf) == T(0));
  CHECK(rt::vexp(inf) == inf);
  CHECK(std::isnan(rt::vexp(std::numeric_limits<T>::quiet_NaN())));
  CHECK(rt::vexp(T(1000)) == inf);
  CHECK(rt::vexp(T(-1000)) == T(0));
  // e^1 within 2 ulp in both types
  const T e = rt::vexp(T(1));
  CHECK(std::abs(double(e) - 2.718281828459045) <= 2 * double(std::numeric_limits<T>::epsilon()) * 2.72);
}

TEST_CASE("the array exp gives each element the bits of the vector exp, tails included") {
  float in[13], out[13];
  for (int k = 0; k < 13; ++k) in[k] = -3.0f + 0.37f * float(k);
  rt::vexp(in, out, 13);
  for (int k = 0; k < 13; ++k) CHECK(out[k] == rt::vexp(in[k]));
  // and double, in [-700, 700]
  double din[7] = {-700, -1, -1e-10, 0, 1e-10, 1, 700}, dout[7];
  rt::vexp(din, dout, 7);
  for (int k = 0; k < 7; ++k) CHECK(std::abs(dout[k] - std::exp(din[k])) <= 4e-16 * std::exp(din[k]));
}
