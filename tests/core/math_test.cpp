// core/math.hpp at run time: the same bits as at compile time, agreement with the C library
// (libm) within 1 ulp on many random arguments, and fma bit-identical to std::fma.
// The accuracy proof against Boost.Multiprecision is math_accuracy_test.cpp.
#include <qkv/core/math.hpp>

#include "../support/math_hard_cases.hpp"
#include "../support/math_samples.hpp"

#include <doctest/doctest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <utility>

namespace {

using qkv::test::bits_of;
using qkv::test::splitmix64;

template <class T>
constexpr const char* type_name() {
  return std::is_same_v<T, float> ? "float" : "double";
}

// distance in units in the last place between two results: the number of representable
// numbers between them (0: the same number; NaN and NaN: 0; a NaN against a number: "infinite")
template <class T>
std::uint64_t ulp_distance(T a, T b) {
  if (a != a || b != b) return (a != a && b != b) ? 0 : std::numeric_limits<std::uint64_t>::max();
  using B = bits_of<T>;
  constexpr B sign = B{1} << (sizeof(T) * 8 - 1);
  // map the bits to a line on which neighbours differ by 1 (and +0 and -0 coincide)
  const auto key = [](T x) {
    const B b = std::bit_cast<B>(x);
    return (b & sign) != 0 ? -static_cast<std::int64_t>(b & ~sign) : static_cast<std::int64_t>(b);
  };
  const std::int64_t d = key(a) - key(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

// ---------------------------------------------------------------------------------------------
// compile time == run time
//
// A table of (argument, result) pairs computed by the compiler, and the same results computed
// at run time from arguments read through a volatile (so the optimiser cannot fold them): the
// bits must match, for every function and type, special values included.

template <class T>
struct pair {
  T x, y;
};

template <class T>
constexpr std::array<T, 16> special_arguments() {
  using lim = std::numeric_limits<T>;
  return {T(0),
          -T(0),
          lim::denorm_min(),
          -lim::denorm_min(),
          lim::min(),
          lim::max(),
          -lim::max(),
          lim::infinity(),
          -lim::infinity(),
          lim::quiet_NaN(),
          T(1),
          T(-1),
          T(0.5),
          T(88.7),
          T(-103.9),
          T(1e4)};
}

constexpr std::size_t table_size = 256;

template <class T, std::size_t N = table_size, class F, class Arg>
constexpr std::array<pair<T>, N> table(F f, Arg argument, std::uint64_t seed) {
  std::array<pair<T>, N> out{};
  const auto specials = special_arguments<T>();
  splitmix64 g{seed};
  for (std::size_t i = 0; i < N; ++i) {
    const T x = i < specials.size() ? specials[i] : argument(g, i);
    out[i] = {x, f(x)};
  }
  return out;
}

template <class T, std::size_t N, class F>
void check_same_bits(const char* name, const std::array<pair<T>, N>& at_compile_time, F f) {
  int mismatches = 0;
  for (const auto& [x, y] : at_compile_time) {
    volatile T vx = x;
    const T at_run_time = f(vx);
    if (std::bit_cast<bits_of<T>>(at_run_time) != std::bit_cast<bits_of<T>>(y)) {
      if (++mismatches <= 5)
        std::printf("%s<%s>(%a): compile time %a, run time %a\n", name, type_name<T>(),
                    static_cast<double>(x), static_cast<double>(y), static_cast<double>(at_run_time));
    }
  }
  CHECK_MESSAGE(mismatches == 0, name, "<", type_name<T>(), ">: ", mismatches, " of ", N, " differ");
}

// the functions as objects, so that one template instantiates each at both times
struct exp_fn {
  template <class T>
  constexpr T operator()(T x) const {
    return qkv::exp(x);
  }
};
struct log_fn {
  template <class T>
  constexpr T operator()(T x) const {
    return qkv::log(x);
  }
};
struct sqrt_fn {
  template <class T>
  constexpr T operator()(T x) const {
    return qkv::sqrt(x);
  }
};
struct sin_fn {
  template <class T>
  constexpr T operator()(T x) const {
    return qkv::sin(x);
  }
};
struct cos_fn {
  template <class T>
  constexpr T operator()(T x) const {
    return qkv::cos(x);
  }
};
struct tanh_fn {
  template <class T>
  constexpr T operator()(T x) const {
    return qkv::tanh(x);
  }
};
struct erf_fn {
  template <class T>
  constexpr T operator()(T x) const {
    return qkv::erf(x);
  }
};

template <class T>
struct arguments {
  static constexpr auto exp = [](splitmix64& g, std::uint64_t i) { return qkv::test::exp_argument<T>(g, i); };
  static constexpr auto log = [](splitmix64& g, std::uint64_t i) { return qkv::test::log_argument<T>(g, i); };
  static constexpr auto sqrt = [](splitmix64& g, std::uint64_t i) {
    return qkv::test::sqrt_argument<T>(g, i);
  };
  static constexpr auto tanh = [](splitmix64& g, std::uint64_t i) {
    return qkv::test::tanh_argument<T>(g, i);
  };
  static constexpr auto erf = [](splitmix64& g, std::uint64_t i) { return qkv::test::erf_argument<T>(g, i); };
  // one argument in four anywhere in the finite range, to cover the Payne-Hanek reduction
  static constexpr auto trig = [](splitmix64& g, std::uint64_t i) {
    return i % 4 == 0 ? qkv::test::any_finite<T>(g) : qkv::test::trig_argument<T>(g, i);
  };
};

template <class T>
void check_all_same_bits() {
  // each table is one constant expression: 256 calls stay well inside clang's 1M-step limit
  static constexpr auto exp_table = table<T>(exp_fn{}, arguments<T>::exp, 1);
  static constexpr auto log_table = table<T>(log_fn{}, arguments<T>::log, 2);
  static constexpr auto sqrt_table = table<T>(sqrt_fn{}, arguments<T>::sqrt, 3);
  static constexpr auto sin_table = table<T>(sin_fn{}, arguments<T>::trig, 4);
  static constexpr auto cos_table = table<T>(cos_fn{}, arguments<T>::trig, 5);
  // tanh and erf work in double-double (~1600 and ~2800 clang steps a call): 128 per table
  static constexpr auto tanh_table = table<T, 128>(tanh_fn{}, arguments<T>::tanh, 7);
  static constexpr auto erf_table = table<T, 128>(erf_fn{}, arguments<T>::erf, 8);
  check_same_bits("exp", exp_table, exp_fn{});
  check_same_bits("log", log_table, log_fn{});
  check_same_bits("sqrt", sqrt_table, sqrt_fn{});
  check_same_bits("sin", sin_table, sin_fn{});
  check_same_bits("cos", cos_table, cos_fn{});
  check_same_bits("tanh", tanh_table, tanh_fn{});
  check_same_bits("erf", erf_table, erf_fn{});
}

TEST_CASE("math functions give the same bits at compile time and at run time") {
  check_all_same_bits<double>();
  check_all_same_bits<float>();
}

// the hard-to-round cases (math_hard_cases.hpp) take the accurate path (288-bit fixed point,
// ~16 000 clang steps each): computed at compile time in slices of 16 arguments, so that each
// constant expression stays well inside clang's default 1 048 576 steps
template <int F>
constexpr const auto& hard_arguments() {
  if constexpr (F == 0)
    return qkv_test::log_hard_cases;
  else
    return qkv_test::sin_cos_hard_cases;
}

template <int F, std::size_t Begin>
constexpr std::array<double, 16> hard_slice() {
  const auto& args = hard_arguments<F>();
  std::array<double, 16> out{};
  for (std::size_t i = Begin; i < Begin + 16 && i < std::size(args); ++i)
    out[i - Begin] = F == 0 ? qkv::log(args[i]) : F == 1 ? qkv::sin(args[i]) : qkv::cos(args[i]);
  return out;
}

// a variable template: its initialiser is a constant expression, evaluated by the compiler
template <int F, std::size_t Begin>
inline constexpr std::array<double, 16> hard_table = hard_slice<F, Begin>();

template <int F, std::size_t... S>
void check_hard_slices(std::index_sequence<S...>, int& mismatches) {
  const auto& args = hard_arguments<F>();
  const auto one = [&](std::size_t begin, const std::array<double, 16>& compiled) {
    for (std::size_t i = begin; i < begin + 16 && i < std::size(args); ++i) {
      volatile double x = args[i];
      const double r = F == 0 ? qkv::log(x) : F == 1 ? qkv::sin(x) : qkv::cos(x);
      if (std::bit_cast<std::uint64_t>(r) != std::bit_cast<std::uint64_t>(compiled[i - begin])) ++mismatches;
    }
  };
  (one(16 * S, hard_table<F, 16 * S>), ...);
}

TEST_CASE("log, sin and cos of the hard cases give the same bits at compile time and at run time") {
  int mismatches = 0;
  constexpr std::size_t nl = std::size(qkv_test::log_hard_cases),
                        nt = std::size(qkv_test::sin_cos_hard_cases);
  check_hard_slices<0>(std::make_index_sequence<(nl + 15) / 16>{}, mismatches);
  check_hard_slices<1>(std::make_index_sequence<(nt + 15) / 16>{}, mismatches);
  check_hard_slices<2>(std::make_index_sequence<(nt + 15) / 16>{}, mismatches);
  MESSAGE((nl + 2 * nt) << " hard-case results compared, " << mismatches << " differ");
  CHECK(mismatches == 0);
}

template <class T>
constexpr auto fma_table() {
  std::array<std::array<T, 4>, table_size> out{};
  splitmix64 g{6};
  const auto specials = special_arguments<T>();
  for (std::size_t i = 0; i < table_size; ++i) {
    T a = qkv::test::any_finite<T>(g), b = qkv::test::any_finite<T>(g), c = qkv::test::any_finite<T>(g);
    if (i % 3 == 0) {  // near cancellation, with bits from the generator
      a = qkv::test::trig_argument<T>(g, i);
      b = qkv::test::trig_argument<T>(g, i + 1);
      const T ab = a * b, magnitude = ab < 0 ? -ab : ab;
      const T near_ab = magnitude > T(1e-30)  // clear of 0, so that the bits stay a number
                            ? qkv::test::ulps_away(magnitude, static_cast<std::int64_t>(g.next() % 5) - 2)
                            : T(1);
      c = ab < 0 ? near_ab : -near_ab;
    }
    if (i < specials.size()) a = specials[i], b = specials[(i * 7) % specials.size()];
    out[i] = {a, b, c, qkv::fma(a, b, c)};
  }
  return out;
}

TEST_CASE("fma gives the same bits at compile time and at run time") {
  const auto check = [](const auto& compiled) {
    int mismatches = 0;
    for (const auto& [a, b, c, r] : compiled) {
      using T = std::remove_cvref_t<decltype(a)>;
      volatile T va = a, vb = b, vc = c;
      if (std::bit_cast<bits_of<T>>(qkv::fma(va, vb, vc)) != std::bit_cast<bits_of<T>>(r)) ++mismatches;
    }
    CHECK(mismatches == 0);
  };
  static constexpr auto d = fma_table<double>();
  static constexpr auto f = fma_table<float>();
  check(d);
  check(f);
}

// ---------------------------------------------------------------------------------------------
// agreement with libm: std::exp etc. from glibc are themselves within 1 ulp, so the two results
// are neighbours or equal; sqrt is correctly rounded on both sides, so it is bit-identical.

// 10^6 points, 10^5 with QKV_TEST_SAMPLE=small (the sanitizer builds: double log, sin and cos
// cost a double-double evaluation each since issue 18, and the sweep runs ~10x slower there)
const std::uint64_t libm_points = qkv::test::sample_points(1'000'000);

template <class T, class Ours, class Theirs, class Arg>
std::uint64_t worst_against_libm(const char* name, Ours ours, Theirs theirs, Arg argument,
                                 std::uint64_t seed) {
  splitmix64 g{seed};
  std::uint64_t worst = 0;
  T worst_x = 0;
  for (std::uint64_t i = 0; i < libm_points; ++i) {
    const T x = argument(g, i);
    const std::uint64_t d = ulp_distance(ours(x), theirs(x));
    if (d > worst) worst = d, worst_x = x;
  }
  std::printf("%-4s %-6s against libm, %llu points: worst %llu ulp apart (at %a)\n", name, type_name<T>(),
              static_cast<unsigned long long>(libm_points), static_cast<unsigned long long>(worst),
              static_cast<double>(worst_x));
  return worst;
}

template <class T>
void check_against_libm() {
  const auto std_exp = [](T x) -> T { return std::exp(x); };
  const auto std_log = [](T x) -> T { return std::log(x); };
  const auto std_sqrt = [](T x) -> T { return std::sqrt(x); };
  const auto std_sin = [](T x) -> T { return std::sin(x); };
  const auto std_cos = [](T x) -> T { return std::cos(x); };
  const auto anywhere = [](splitmix64& g, std::uint64_t) { return qkv::test::any_finite<T>(g); };
  CHECK(worst_against_libm<T>("exp", exp_fn{}, std_exp, arguments<T>::exp, 11) <= 1);
  CHECK(worst_against_libm<T>("log", log_fn{}, std_log, arguments<T>::log, 12) <= 1);
  CHECK(worst_against_libm<T>("sqrt", sqrt_fn{}, std_sqrt, arguments<T>::sqrt, 13) == 0);
  CHECK(worst_against_libm<T>("sin", sin_fn{}, std_sin, arguments<T>::trig, 14) <= 1);
  CHECK(worst_against_libm<T>("cos", cos_fn{}, std_cos, arguments<T>::trig, 15) <= 1);
  // glibc's tanh and erf are within 2 ulp (its libm-test-ulps; tanh reaches 2 near 0.53),
  // ours within 1 (math_tanh_erf_accuracy_test.cpp): at most 3 apart
  CHECK(worst_against_libm<T>(
            "tanh", tanh_fn{}, [](T x) -> T { return std::tanh(x); }, arguments<T>::tanh, 18) <= 3);
  CHECK(worst_against_libm<T>(
            "erf", erf_fn{}, [](T x) -> T { return std::erf(x); }, arguments<T>::erf, 19) <= 3);
  // beyond 10^4: every binade up to the largest finite number (Payne-Hanek reduction)
  CHECK(worst_against_libm<T>("sin", sin_fn{}, std_sin, anywhere, 16) <= 1);
  CHECK(worst_against_libm<T>("cos", cos_fn{}, std_cos, anywhere, 17) <= 1);
}

TEST_CASE("math functions agree with libm within 1 ulp on random arguments") {
  check_against_libm<double>();
  check_against_libm<float>();
}

TEST_CASE("special values at run time follow C's Annex F, as libm does") {
  // NaN against NaN counts as equal (libm's NaN sign is not specified; ours passes the NaN on)
  const auto check_specials = [](auto zero) {
    using T = decltype(zero);
    for (const T x : special_arguments<T>()) {
      volatile T v = x;
      CAPTURE(x);
      CHECK(ulp_distance(qkv::sqrt(v), std::sqrt(v)) == 0);
      CHECK(ulp_distance(qkv::exp(v), std::exp(v)) <= 1);
      CHECK(ulp_distance(qkv::log(v), std::log(v)) <= 1);
      CHECK(ulp_distance(qkv::sin(v), std::sin(v)) <= 1);
      CHECK(ulp_distance(qkv::cos(v), std::cos(v)) <= 1);
      if (x == 0) {  // the signs of zero results
        CHECK(std::signbit(qkv::sqrt(v)) == std::signbit(x));
        CHECK(std::signbit(qkv::sin(v)) == std::signbit(x));
      }
    }
    volatile T nan = std::numeric_limits<T>::quiet_NaN();
    CHECK((std::isnan(qkv::exp(nan)) && std::isnan(qkv::log(nan)) && std::isnan(qkv::sqrt(nan)) &&
           std::isnan(qkv::sin(nan)) && std::isnan(qkv::cos(nan)) && std::isnan(qkv::fma(nan, T(1), T(1)))));
  };
  check_specials(0.0);
  check_specials(0.0f);
}

// ---------------------------------------------------------------------------------------------
// fma against the C library's fma (correctly rounded by the standard; glibc uses the hardware
// instruction where there is one): bit-identical, signed zeros included

template <class T>
void check_fma_against_std() {
  splitmix64 g{21};
  std::uint64_t mismatches = 0;
  for (std::uint64_t i = 0; i < libm_points; ++i) {
    const auto [a, b, c] = qkv::test::fma_arguments<T>(g, i);
    const T ours = qkv::fma(a, b, c), theirs = std::fma(a, b, c);
    if (std::bit_cast<bits_of<T>>(ours) != std::bit_cast<bits_of<T>>(theirs) &&
        !(ours != ours && theirs != theirs)) {
      if (++mismatches <= 5)
        std::printf("fma<%s>(%a, %a, %a) = %a, std::fma says %a\n", type_name<T>(), static_cast<double>(a),
                    static_cast<double>(b), static_cast<double>(c), static_cast<double>(ours),
                    static_cast<double>(theirs));
    }
  }
  // every combination of special values
  const auto specials = special_arguments<T>();
  for (const T a : specials)
    for (const T b : specials)
      for (const T c : specials) {
        const T ours = qkv::fma(a, b, c), theirs = std::fma(a, b, c);
        if (std::bit_cast<bits_of<T>>(ours) != std::bit_cast<bits_of<T>>(theirs) &&
            !(ours != ours && theirs != theirs))
          ++mismatches;
      }
  std::printf("fma  %-6s against std::fma, %llu triples + %zu special: %llu differ\n", type_name<T>(),
              static_cast<unsigned long long>(libm_points),
              specials.size() * specials.size() * specials.size(),
              static_cast<unsigned long long>(mismatches));
  CHECK(mismatches == 0);
}

TEST_CASE("fma is bit-identical to std::fma, special values included") {
  check_fma_against_std<double>();
  check_fma_against_std<float>();
}

}  // namespace
