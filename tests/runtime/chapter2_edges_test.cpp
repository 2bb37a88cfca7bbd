// Chapter two's edges between the core and the runtime: ALiBi's slopes two ways (the runtime's
// alibi_slopes(H), std::exp2, and the core's alibi_slopes<H>(), constexpr: exact powers of two,
// otherwise exp(x ln 2) with qkv's own exp, for H = 1 .. 64), and what `window` means without
// `causal` on each path.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <cstddef>
#include <utility>
#include <vector>

#include <qkv/core/alibi.hpp>
#include <qkv/core/kv_cache.hpp>
#include <qkv/runtime/multihead.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;

namespace {

constexpr std::size_t most = 64;

/// the core's slopes for H = 1 .. 64, computed at compile time, row H - 1 (H values used)
constexpr auto core_table = []<std::size_t... I>(std::index_sequence<I...>) {
  std::array<std::array<double, most>, most> t{};
  ((std::copy_n(qkv::alibi_slopes<I + 1>().begin(), I + 1, t[I].begin())), ...);
  return t;
}(std::make_index_sequence<most>{});

}  // namespace

TEST_CASE(
    "ALiBi slopes: the runtime's std::exp2 and the core's exp(x ln 2) agree, exactly where 2^x is exact") {
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

// --- `window` without `causal`: one-sided, as documented (docs/numerics.md) --------------------

namespace {

/// one head through a runtime mask, both paths: the streaming output and the kept weights
struct head_run {
  rt::dynamic_matrix<float> out, mat, weights;
};
head_run run_head(const rt::dynamic_matrix<float>& q, const rt::dynamic_matrix<float>& k,
                  const rt::dynamic_matrix<float>& v, const rt::attention_mask& mask) {
  head_run r{rt::dynamic_matrix<float>(q.rows(), v.cols()), rt::dynamic_matrix<float>(q.rows(), v.cols()),
             rt::dynamic_matrix<float>(q.rows(), k.rows())};
  rt::dynamic_matrix<float> scores(q.rows(), k.rows());
  auto sv = scores.view();
  auto wv = r.weights.view();
  const float scale = rt::default_scale<float>(q.cols());
  rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), r.mat.view(), scale, mask, &sv, &wv);
  rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), r.out.view(), scale, mask);
  return r;
}

bool same(const rt::dynamic_matrix<float>& a, const rt::dynamic_matrix<float>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE(
    "runtime: window without causal bounds keys from below only (p - window < j), every later key stays") {
  // The decision (docs/numerics.md, "window without causal"): kept one-sided, flash-attn's
  // window_size = (window - 1, -1); a symmetric band (Longformer) is `allowed` or a -inf bias.
  // Against the allowed matrix it stands for, bit for bit; S = 40 (few-keys kernel) and 300 (tiled).
  for (const std::size_t S : {std::size_t(40), std::size_t(300)})
    for (const std::size_t window : {std::size_t(1), std::size_t(5), std::size_t(129)}) {
      CAPTURE(S);
      CAPTURE(window);
      const auto q = qkv::testing::random_matrix<float>(S, 8, 31, 0.7),
                 k = qkv::testing::random_matrix<float>(S, 8, 32, 0.7),
                 v = qkv::testing::random_matrix<float>(S, 8, 33);
      rt::mask_matrix allowed(S, S);
      for (std::size_t i = 0; i < S; ++i)
        for (std::size_t j = 0; j < S; ++j) allowed(i, j) = i < window + j;  // i - window < j
      rt::attention_mask windowed{false, nullptr};
      windowed.window = window;
      const auto a = run_head(q, k, v, windowed), b = run_head(q, k, v, rt::attention_mask{false, &allowed});
      CHECK(same(a.out, b.out));
      CHECK(same(a.mat, b.mat));
      CHECK(same(a.weights, b.weights));
      // later keys are seen (not a band): query 0 weighs the last key; an early key past the window is 0
      CHECK(a.weights(0, S - 1) > 0);
      if (window < S) CHECK(a.weights(S - 1, S - 1 - window) == 0);
    }
}

TEST_CASE("core: attend_cache's window belongs to the causal mask; without causal it is not applied") {
  // core/kv_cache.hpp: "with options.causal ... and, with a window, only the window most recent"
  qkv::kv_cache<double, 4, 2, 1> cache;
  cache.append(qkv::matrix<double, 4, 2>{{{1, 0}, {0, 1}, {1, 1}, {-1, 2}}},
               qkv::matrix<double, 4, 1>{{{1}, {2}, {3}, {4}}});
  const qkv::matrix<double, 1, 2> q{{{0.5, -0.25}}};
  qkv::attention_options<double> free{}, causal{};
  causal.causal = true;
  const auto none = qkv::attend_cache(q, cache, free, qkv::causal_alignment::lower_right, 0);
  const auto w2 = qkv::attend_cache(q, cache, free, qkv::causal_alignment::lower_right, 2);
  CHECK(none.weights == w2.weights);
  CHECK(none.context == w2.context);
  // with causal the window keeps the 2 most recent keys (positions 2, 3) of the query at 3
  const auto cw2 = qkv::attend_cache(q, cache, causal, qkv::causal_alignment::lower_right, 2);
  CHECK(cw2.weights(0, 0) == 0);
  CHECK(cw2.weights(0, 1) == 0);
  CHECK(cw2.weights(0, 2) > 0);
}
