// core_half_batch_test.cpp: core/half.hpp's conversions over every 16-bit pattern and a sweep of
// floats (ties, subnormals, overflow, NaN), checked against a reference written from the
// definition (the nearest representable value, ties to the even pattern) and against the
// runtime's names (runtime/half.hpp); and core/batch.hpp's edges: lengths over N, a fully
// padded sequence, padded query rows, a NaN in a padded value, causal with padding, and the 16-bit
// path against the float path on the converted values; PyTorch's .to(torch.bfloat16) and
// .to(torch.float16) bits for example 14's q, k, v (scripts/fixtures/torch_chapter2.py). Example 14
// proves the main results.
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <qkv/core/batch.hpp>
#include <qkv/core/half.hpp>
#include <qkv/runtime/half.hpp>

#include "../data/chapter2/torch_chapter2.hpp"

namespace {

// ---------------------------------------------------------------------------------------------
// the reference: 16-bit values from their fields with std::ldexp (not the bit operations under
// test), and rounding as "the nearest value, ties to the even pattern" by search

/// (sign, exponent, fraction) -> value, for a format of E exponent and F fraction bits
double reference_value(std::uint16_t h, int E, int F) {
  const int bias = (1 << (E - 1)) - 1;
  const int e = (h >> F) & ((1 << E) - 1);
  const int m = h & ((1 << F) - 1);
  const double sign = (h >> 15) ? -1.0 : 1.0;
  if (e == (1 << E) - 1)
    return m ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  if (e == 0) return sign * std::ldexp(double(m), 1 - bias - F);
  return sign * std::ldexp(double(m + (1 << F)), e - bias - F);
}

/// float -> 16-bit pattern by definition: the largest non-negative pattern whose value is <= |f|
/// (values grow with the pattern), then the nearer of it and the next one up, ties to the even
/// pattern; past the largest finite value the next one up is inf (at max + half a step, IEEE's
/// overflow threshold, a tie that goes to the even pattern: inf)
std::uint16_t reference_round(float f, int E, int F) {
  const std::uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  const std::uint16_t inf = static_cast<std::uint16_t>(((1u << E) - 1) << F);
  if (std::isnan(f)) return 0;  // not used: NaN is checked separately
  const double a = std::fabs(double(f));
  if (std::isinf(a)) return sign | inf;
  std::uint16_t lo = 0, hi = static_cast<std::uint16_t>(inf - 1);  // largest finite
  if (a >= reference_value(hi, E, F)) {
    const double next =
        reference_value(hi, E, F) + (reference_value(hi, E, F) - reference_value(hi - 1, E, F));
    const double mid = (reference_value(hi, E, F) + next) / 2;
    return sign | (a >= mid ? inf : hi);  // the tie goes to inf's pattern, the even one
  }
  while (hi - lo > 1) {  // invariant: value(lo) <= a < value(hi)
    const auto m = static_cast<std::uint16_t>((lo + hi) / 2);
    (reference_value(m, E, F) <= a ? lo : hi) = m;
  }
  const double dl = a - reference_value(lo, E, F), dh = reference_value(hi, E, F) - a;
  const std::uint16_t r = dl < dh ? lo : dh < dl ? hi : ((lo & 1u) ? hi : lo);
  return sign | r;
}

/// the floats to round: every 16-bit value of the format, the midpoints to its neighbours (exact
/// ties), one float either side of them, and one float either side of the value
std::vector<float> sweep(float (*to_float)(std::uint16_t)) {
  std::vector<float> out;
  for (std::uint32_t h = 0; h < 0x7FFFu; ++h) {
    const float a = to_float(static_cast<std::uint16_t>(h)), b = to_float(static_cast<std::uint16_t>(h + 1));
    if (std::isnan(a) || std::isnan(b)) continue;
    const float mid = std::isinf(b) ? a + (a - to_float(static_cast<std::uint16_t>(h - 1))) / 2 : (a + b) / 2;
    for (float x : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), std::nextafter(a, 0.0f),
                    std::nextafter(a, 1e30f)}) {
      out.push_back(x);
      out.push_back(-x);
    }
  }
  // float's own extremes: its smallest subnormal, largest finite, infinities
  for (float x : {std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()}) {
    out.push_back(x);
    out.push_back(-x);
  }
  return out;
}

}  // namespace

// compile time: the conversions are constexpr on both compilers
static_assert(qkv::float_to_bfloat16_bits(1.0f) == 0x3F80 && qkv::bfloat16_bits_to_float(0x3F80) == 1.0f);
static_assert(qkv::float_to_half_bits(65504.0f) == 0x7BFF && qkv::float_to_half_bits(65520.0f) == 0x7C00);
static_assert(qkv::half_bits_to_float(0x0001) == 0x1p-24f);  // float16's smallest subnormal
// 1 + 2^-8 is half-way between bfloat16's 1 and 1 + 2^-7: the tie goes to the even pattern, 1;
// 1 + 3 2^-8 is half-way between 1 + 2^-7 (odd) and 1 + 2^-6: up
static_assert(qkv::float_to_bfloat16_bits(1.0f + 0x1p-8f) == 0x3F80 &&
              qkv::float_to_bfloat16_bits(1.0f + 0x3p-8f) == 0x3F82);
static_assert(qkv::bfloat16(0.1f).bits == 0x3DCD &&
              static_cast<float>(qkv::float16(0.1f)) == 0.0999755859375f);
// the runtime's types and conversions are the core's (one definition)
static_assert(std::is_same_v<qkv::runtime::bfloat16, qkv::bfloat16> &&
              std::is_same_v<qkv::runtime::float16, qkv::float16>);

TEST_CASE(
    "every bfloat16 and float16 pattern converts to float exactly as its fields say, as the runtime's") {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<std::uint16_t>(h);
    const float f16 = qkv::half_bits_to_float(b), bf = qkv::bfloat16_bits_to_float(b);
    const double r16 = reference_value(b, 5, 10), rbf = reference_value(b, 8, 7);
    if (std::isnan(r16)) {
      REQUIRE(std::isnan(f16));
      REQUIRE(std::signbit(f16) == bool(h >> 15));
    } else {
      REQUIRE(double(f16) == r16);
      REQUIRE(std::signbit(f16) == bool(h >> 15));  // -0 stays -0
    }
    if (std::isnan(rbf))
      REQUIRE(std::isnan(bf));
    else
      REQUIRE(double(bf) == rbf);
    REQUIRE(std::bit_cast<std::uint32_t>(qkv::runtime::half_bits_to_float(b)) ==
            std::bit_cast<std::uint32_t>(f16));
    REQUIRE(std::bit_cast<std::uint32_t>(qkv::runtime::bfloat16_bits_to_float(b)) ==
            std::bit_cast<std::uint32_t>(bf));
    // and back: every non-NaN 16-bit value is a float, which rounds to itself
    if (!std::isnan(r16)) REQUIRE(qkv::float_to_half_bits(f16) == b);
    if (!std::isnan(rbf)) REQUIRE(qkv::float_to_bfloat16_bits(bf) == b);
  }
}

TEST_CASE("float rounds to the nearest float16, ties to even, over ties, subnormals and overflow") {
  const auto xs = sweep(qkv::half_bits_to_float);
  CHECK(xs.size() > 300000);
  std::size_t ties = 0, subnormal = 0, overflow = 0;
  for (float x : xs) {
    const std::uint16_t want = reference_round(x, 5, 10), got = qkv::float_to_half_bits(x);
    if (got != want) FAIL("float16(" << x << "): got " << got << ", want " << want);
    REQUIRE(qkv::runtime::float_to_half_bits(x) == got);
    REQUIRE(qkv::float16(x).bits == got);
    ties += x == (double(qkv::half_bits_to_float(got)) +
                  double(qkv::half_bits_to_float(static_cast<std::uint16_t>(got ^ 1u)))) /
                     2;
    subnormal += std::fabs(x) < 0x1p-14f && x != 0;
    overflow += std::isinf(qkv::half_bits_to_float(got)) && !std::isinf(x);
  }
  CHECK(ties > 10000);
  CHECK(subnormal > 5000);
  CHECK(overflow >= 4);  // 65520 and above, both signs
  // the stated edges
  CHECK(qkv::float_to_half_bits(65519.996f) == 0x7BFF);
  CHECK(qkv::float_to_half_bits(-65520.0f) == 0xFC00);
  CHECK(qkv::float_to_half_bits(0x1p-25f) == 0x0000);  // a tie with 0 and 2^-24: even, 0
  CHECK(qkv::float_to_half_bits(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);  // just above: 2^-24
  CHECK(qkv::float_to_half_bits(-0x1p-26f) == 0x8000);                       // -0, sign kept
  CHECK(qkv::float_to_half_bits(0x1.8p-24f) == 0x0002);                      // 1.5 2^-24: a tie, to 2 (even)
}

TEST_CASE("float rounds to the nearest bfloat16, ties to even, over ties, subnormals and overflow") {
  const auto xs = sweep(qkv::bfloat16_bits_to_float);
  CHECK(xs.size() > 300000);
  for (float x : xs) {
    const std::uint16_t want = reference_round(x, 8, 7), got = qkv::float_to_bfloat16_bits(x);
    if (got != want) FAIL("bfloat16(" << x << "): got " << got << ", want " << want);
    REQUIRE(qkv::runtime::float_to_bfloat16_bits(x) == got);
    REQUIRE(qkv::bfloat16(x).bits == got);
  }
  // past the largest finite bfloat16 (0x1.fep127) by half a step (2^119) or more: inf; a float below that: 0x1.fep127
  CHECK(qkv::float_to_bfloat16_bits(std::numeric_limits<float>::max()) == 0x7F80);
  CHECK(qkv::float_to_bfloat16_bits(0x1.fefffep127f) == 0x7F7F);
  CHECK(qkv::float_to_bfloat16_bits(std::numeric_limits<float>::denorm_min()) ==
        0x0000);                                            // 2^-149: far below half of 2^-133
  CHECK(qkv::float_to_bfloat16_bits(0x1p-133f) == 0x0001);  // bfloat16's smallest subnormal
}

TEST_CASE("a NaN stays a quiet NaN with its sign, an infinity stays an infinity") {
  for (std::uint32_t bits : {0x7F800001u, 0x7FC00000u, 0x7FBFFFFFu, 0xFF800001u, 0xFFFFFFFFu, 0x7F80FFFFu}) {
    const float nan = std::bit_cast<float>(bits);
    const std::uint16_t b = qkv::float_to_bfloat16_bits(nan), h = qkv::float_to_half_bits(nan);
    CHECK(std::isnan(qkv::bfloat16_bits_to_float(b)));
    CHECK((b & 0x0040u) != 0);  // quiet bit
    CHECK(bool(b >> 15) == bool(bits >> 31));
    CHECK(b == static_cast<std::uint16_t>((bits >> 16) | 0x40u));  // top bits kept
    CHECK(h == ((bits >> 31) ? 0xFE00 : 0x7E00));
    CHECK(qkv::runtime::float_to_bfloat16_bits(nan) == b);
    CHECK(qkv::runtime::float_to_half_bits(nan) == h);
  }
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(qkv::float_to_bfloat16_bits(inf) == 0x7F80);
  CHECK(qkv::float_to_bfloat16_bits(-inf) == 0xFF80);
  CHECK(qkv::float_to_half_bits(inf) == 0x7C00);
  CHECK(qkv::float_to_half_bits(-inf) == 0xFC00);
}

// ---------------------------------------------------------------------------------------------
// core/batch.hpp

namespace {
using qkv::matrix;
using qkv::stack;
using lengths3 = std::array<std::size_t, 3>;

constexpr stack<double, 3, 4, 2> small_batch() {
  stack<double, 3, 4, 2> x{};
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t i = 0; i < 4; ++i) {
      x(b, i, 0) = double(i) - 1.5 + 0.25 * double(b);
      x(b, i, 1) = 0.5 * double(i * i) - double(b);
    }
  return x;
}
}  // namespace

// the key padding mask is PyTorch's: true = padding
static_assert(qkv::key_padding_mask<3, 4>(lengths3{4, 2, 0}) ==
              matrix<bool, 3, 4>{
                  {{false, false, false, false}, {false, false, true, true}, {true, true, true, true}}});
static_assert(qkv::padded<4>(matrix<double, 2, 2>{{{1, 2}, {3, 4}}}) ==
              matrix<double, 4, 2>{{{1, 2}, {3, 4}, {0, 0}, {0, 0}}});

TEST_CASE("a length over the padded size throws length_error naming the sequence and both sizes") {
  const auto x = small_batch();
  try {
    (void)qkv::batch_attend_projected(x, x, x, lengths3{4, 5, 1});
    FAIL("no exception");
  } catch (const std::length_error& e) {
    CHECK(std::string(e.what()) == "qkv::batch: sequence 1 has length 5 but the batch is padded to 4 tokens");
  }
}

TEST_CASE("a fully padded sequence gets weights 0 and context 0 in every row, the others are untouched") {
  const auto x = small_batch();
  const auto r = qkv::batch_attend_projected(x, x, x, lengths3{4, 2, 0});
  CHECK(r.sequence[2].weights == matrix<double, 4, 4>{});
  CHECK(r.sequence[2].context == matrix<double, 4, 2>{});
  // sequence 0 has no padding: attend_projected's result
  CHECK(r.sequence[0].context ==
        qkv::attend_projected(x[0], x[0], x[0], qkv::attention_options<double>{}).context);
}

TEST_CASE(
    "padded query rows attend to the real keys; padded keys get weight 0 and a NaN there is never read") {
  auto x = small_batch();
  auto v = x;
  v(1, 3, 0) = std::numeric_limits<double>::quiet_NaN();  // a padded key's value (length 2)
  v(1, 2, 1) = std::numeric_limits<double>::infinity();
  const auto r = qkv::batch_attend_projected(x, x, v, lengths3{4, 2, 1});
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(r.sequence[1].weights(i, 2) == 0.0);
    CHECK(r.sequence[1].weights(i, 3) == 0.0);
    CHECK(r.sequence[1].weights(i, 0) + r.sequence[1].weights(i, 1) == doctest::Approx(1.0).epsilon(1e-15));
    CHECK(!std::isnan(r.sequence[1].context(i, 0)));
    CHECK(std::isfinite(r.sequence[1].context(i, 1)));
    // length 1: every row, padded or not, is the one real key's value
    CHECK(r.sequence[2].weights(i, 0) == 1.0);
    CHECK(r.sequence[2].context(i, 0) == x(2, 0, 0));
  }
  // the padded query rows (2, 3) of sequence 1 are computed from their own queries
  CHECK(r.sequence[1].weights(2, 0) != r.sequence[1].weights(0, 0));
}

TEST_CASE("causal with padding: query i sees keys j <= i and j < length; padded rows see every real key") {
  const auto x = small_batch();
  qkv::attention_options<double> causal{};
  causal.causal = true;
  const auto r = qkv::batch_attend_projected(x, x, x, lengths3{4, 2, 3}, causal);
  CHECK(r.sequence[1].weights(0, 1) == 0.0);  // causal
  CHECK(r.sequence[1].weights(1, 1) > 0.0);
  CHECK(r.sequence[1].weights(3, 2) == 0.0);  // padding
  CHECK(r.sequence[1].weights(3, 3) == 0.0);
  CHECK(r.sequence[1].weights(3, 0) + r.sequence[1].weights(3, 1) == doctest::Approx(1.0).epsilon(1e-15));
  // a sequence alone (its length rows), causal: the same rows bit for bit
  const auto alone = qkv::attend_projected(qkv::block<3, 2>(x[2], 0, 0), qkv::block<3, 2>(x[2], 0, 0),
                                           qkv::block<3, 2>(x[2], 0, 0), causal);
  CHECK(qkv::block<3, 2>(r.sequence[2].context, 0, 0) == alone.context);
  CHECK(qkv::block<3, 3>(r.sequence[2].weights, 0, 0) == alone.weights);
}

TEST_CASE("16-bit inputs: the float path on the converted values, bit for bit, in batches and alone") {
  stack<float, 2, 3, 2> x{};
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t c = 0; c < 2; ++c)
        x(b, i, c) = 0.3f * float(i + 1) - 0.7f * float(c) + 0.11f * float(b);
  const std::array<std::size_t, 2> lengths{3, 2};
  const auto h = qkv::rounded_to<qkv::float16>(x);
  const auto bf = qkv::rounded_to<qkv::bfloat16>(x);
  const auto rh = qkv::batch_attend_projected(h, h, h, lengths);
  const auto rb = qkv::batch_attend_projected(bf, bf, bf, lengths);
  const auto fh = qkv::as_float(h), fb = qkv::as_float(bf);
  const auto eh = qkv::batch_attend_projected(fh, fh, fh, lengths);
  const auto eb = qkv::batch_attend_projected(fb, fb, fb, lengths);
  for (std::size_t b = 0; b < 2; ++b) {
    CHECK(rh.sequence[b].context == eh.sequence[b].context);
    CHECK(rb.sequence[b].context == eb.sequence[b].context);
  }
  CHECK(qkv::attend_projected(h[0], h[0], h[0]).context == eh.sequence[0].context);
  // rounding changed the inputs (0.3f is not a bfloat16), each within u = 2^-8 relative
  CHECK(!(fb[0] == x[0]));
  for (std::size_t k = 0; k < 6; ++k)
    CHECK(std::fabs(fb[0].v[k] - x[0].v[k]) <= 0x1p-8 * std::fabs(x[0].v[k]));
}

namespace {
template <std::size_t R, std::size_t C>
std::size_t check_torch_bits(const double (&values)[R][C], const unsigned short (&bf16)[R][C],
                             const unsigned short (&fp16)[R][C]) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) {
      const auto f = static_cast<float>(values[i][j]);
      REQUIRE(double(f) == values[i][j]);  // the fixture's float32 values are exact
      CHECK(qkv::float_to_bfloat16_bits(f) == bf16[i][j]);
      CHECK(qkv::float_to_half_bits(f) == fp16[i][j]);
      ++n;
    }
  return n;
}
}  // namespace

TEST_CASE(
    "qkv rounds example 14's float32 q, k, v to the bits PyTorch's .to(bfloat16) and .to(float16) give") {
  namespace t = qkv_test::torch_chapter2::batch;
  std::size_t n = 0;
  n += check_torch_bits(t::q32_0, t::q_bf16_0, t::q_fp16_0);
  n += check_torch_bits(t::k32_0, t::k_bf16_0, t::k_fp16_0);
  n += check_torch_bits(t::v32_0, t::v_bf16_0, t::v_fp16_0);
  n += check_torch_bits(t::q32_1, t::q_bf16_1, t::q_fp16_1);
  n += check_torch_bits(t::k32_1, t::k_bf16_1, t::k_fp16_1);
  n += check_torch_bits(t::v32_1, t::v_bf16_1, t::v_fp16_1);
  CHECK(n == 2 * (6 * 24 + 6 * 24 + 6 * 28));
}
