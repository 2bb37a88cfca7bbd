// ALiBi's slopes two ways: the runtime's alibi_slopes(H) (multihead.hpp, std::exp2) and the
// core's alibi_slopes<H>() (core/alibi.hpp, constexpr: exact powers of two, otherwise
// exp(x ln 2) with qkv's own exp), for H = 1 .. 64.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include <qkv/core/alibi.hpp>
#include <qkv/runtime/multihead.hpp>

namespace {

constexpr std::size_t most = 64;

/// the core's slopes for H = 1 .. 64, computed at compile time, row H - 1 (H values used)
constexpr auto core_table = []<std::size_t... I>(std::index_sequence<I...>) {
  std::array<std::array<double, most>, most> t{};
  ((std::copy_n(qkv::alibi_slopes<I + 1>().begin(), I + 1, t[I].begin())), ...);
  return t;
}(std::make_index_sequence<most>{});

}  // namespace

TEST_CASE("ALiBi slopes: the runtime's std::exp2 and the core's exp(x ln 2) agree, exactly where 2^x is exact") {
  // Both follow the paper's get_slopes: slope 2^x, x = -8k/n (k, n from the head index and the
  // power of two n below or at 2H). Where x is an integer the slope is a power of two: the core
  // halves 1.0 |x| times (exact), std::exp2 of an integer returns it exactly: equal bits.
  // Otherwise (u = 2^-53, m the exact slope, |x| <= 8):
  //   core: x = 8k / n rounded (u), times ln 2 rounded (u) and the product rounded (u): the
  //     argument y = x ln 2 is within 3.01 u |y| <= 3.01 u * 8 ln 2 = 16.7 u of its value, which
  //     moves e^y by 16.7 u relative (plus second order); qkv::exp below 1 ulp (2u): 18.8 u
  //   runtime: x rounded (u |x| <= 8u absolute: 2^x moves by 8 u ln 2 = 5.55 u relative);
  //     std::exp2 below 1 ulp (2u): 7.6 u
  //   => |core - runtime| <= 26.5 u m; 27 u m is asserted.
  const double u = std::ldexp(1.0, -53);
  std::size_t slopes = 0, exact = 0, equal_bits = 0;
  double worst = 0;  // in units of u m
  for (std::size_t H = 1; H <= most; ++H) {
    CAPTURE(H);
    const std::vector<double> rt = qkv::runtime::alibi_slopes(H);
    REQUIRE(rt.size() == H);
    for (std::size_t h = 0; h < H; ++h) {
      CAPTURE(h);
      const double c = core_table[H - 1][h], r = rt[h];
      int e = 0;
      const bool power_of_two = std::frexp(c, &e) == 0.5;  // c = 2^(e - 1)
      ++slopes;
      if (power_of_two) {
        ++exact;
        CHECK(r == c);
      } else {
        CHECK(std::abs(c - r) <= 27 * u * r);
        worst = std::max(worst, std::abs(c - r) / (u * r));
      }
      equal_bits += c == r;
    }
  }
  MESSAGE(slopes << " slopes for H = 1..64: " << exact << " exact powers of two (equal), " << equal_bits
                 << " equal in every bit in all; the largest difference " << worst << " u m");
  // a spot check of the rule itself: 6 heads are 4's slopes then 8's slopes 0, 2 (0-based)
  CHECK(core_table[5][0] == 0.25);
  CHECK(core_table[5][4] == 0.5);
  CHECK(core_table[5][5] == 0.125);
}
