// The decoder pieces of the runtime path, exact properties (bit for bit where the arithmetic is
// the same): the mask generalisation (lower_right causal, window, ALiBi, additive bias) against
// the allowed matrix or bias it stands for, grouped-query attention against multi-head attention
// with repeated K/V heads, the KV cache's token-by-token decoding against full causal attention,
// and half.hpp's conversions. PyTorch's numbers: decoder_torch_test.cpp.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::random_matrix;
using qkv::testing::same_bits;
using rt::dynamic_matrix;

namespace {

/// one head through both paths; the streaming output, and the materialised one in `mat`
template <class T>
dynamic_matrix<T> run(const dynamic_matrix<T>& q, const dynamic_matrix<T>& k, const dynamic_matrix<T>& v,
                      const rt::attention_mask& mask, dynamic_matrix<T>& mat) {
  const T scale = rt::default_scale<T>(q.cols());
  dynamic_matrix<T> out(q.rows(), v.cols()), scores(q.rows(), k.rows()), weights(q.rows(), k.rows());
  mat = dynamic_matrix<T>(q.rows(), v.cols());
  auto sv = scores.view();
  auto wv = weights.view();
  rt::scaled_dot_product_attention<T>(q.view(), k.view(), v.view(), mat.view(), scale, mask, &sv, &wv);
  rt::scaled_dot_product_attention<T>(q.view(), k.view(), v.view(), out.view(), scale, mask);
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE(
    "causal lower_right, a window and a -inf bias equal the allowed mask they stand for, bit for bit", F,
    float, double) {
  // T < S (decoding several new tokens), T = S, T > S (the first T - S rows see no key: 0);
  // S = 20 takes the few-keys kernel, 300 the tiled one (three key blocks)
  for (const auto& [T, S] :
       {std::pair<std::size_t, std::size_t>{5, 20}, {20, 20}, {24, 20}, {70, 300}, {300, 300}}) {
    for (const std::size_t window : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(129)}) {
      CAPTURE(T);
      CAPTURE(S);
      CAPTURE(window);
      const auto q = random_matrix<F>(T, 16, 11, 0.7), k = random_matrix<F>(S, 16, 12, 0.7),
                 v = random_matrix<F>(S, 8, 13);
      // query i sits at p = i + S - T: keys p - window < j <= p
      rt::mask_matrix allowed(T, S);
      dynamic_matrix<F> bias(T, S);
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t j = 0; j < S; ++j) {
          const long p = long(i) + long(S) - long(T);
          const bool ok = long(j) <= p && (window == 0 || p - long(window) < long(j));
          allowed(i, j) = ok;
          bias(i, j) = ok ? F(0) : -std::numeric_limits<F>::infinity();
        }
      rt::attention_mask lower{true, nullptr};
      lower.alignment = rt::causal_alignment::lower_right;
      lower.window = window;
      const rt::attention_mask by_flags{false, &allowed};
      rt::attention_mask by_bias;
      by_bias.set_bias(rt::matrix_view<const F>(bias.view()));
      dynamic_matrix<F> m1, m2, m3;
      const auto s1 = run(q, k, v, lower, m1), s2 = run(q, k, v, by_flags, m2),
                 s3 = run(q, k, v, by_bias, m3);
      CHECK(same_bits(s1, s2));
      CHECK(same_bits(m1, m2));
      CHECK(same_bits(s3, s2));  // + 0 changes no finite score; -inf masks
      CHECK(same_bits(m3, m2));
      if (T > S) CHECK(s1(0, 0) == F(0));  // a row that sees no key: 0 (docs/numerics.md)
    }
  }
}

TEST_CASE_TEMPLATE("ALiBi equals the bias m (j - p) it adds, and its slopes are the paper's", F, float,
                   double) {
  // Press et al.: 8 heads: 2^-1 .. 2^-8; 6 heads (not a power of two): the 4 of 4 heads
  // (2^-2, 2^-4, 2^-6, 2^-8), then slopes 0 and 2 of 8 heads (2^-1, 2^-3)
  const auto m8 = rt::alibi_slopes(8), m6 = rt::alibi_slopes(6);
  for (std::size_t h = 0; h < 8; ++h) CHECK(m8[h] == std::ldexp(1.0, -int(h) - 1));
  const std::vector<double> want6 = {0x1p-2, 0x1p-4, 0x1p-6, 0x1p-8, 0x1p-1, 0x1p-3};
  CHECK(m6 == want6);
  CHECK(rt::alibi_slopes(1) == std::vector<double>{0x1p-8});
  for (const auto& [T, S] : {std::pair<std::size_t, std::size_t>{3, 20}, {260, 260}}) {
    const auto q = random_matrix<F>(T, 16, 21, 0.7), k = random_matrix<F>(S, 16, 22, 0.7),
               v = random_matrix<F>(S, 8, 23);
    const double slope = m6[5];
    rt::attention_mask alibi{true, nullptr};
    alibi.alignment = rt::causal_alignment::lower_right;
    alibi.alibi_slope = slope;
    dynamic_matrix<F> bias(T, S);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < S; ++j)
        bias(i, j) = F(slope) * F(long(j) - (long(i) + long(S) - long(T)));  // the kernel's product
    rt::attention_mask by_bias{true, nullptr};
    by_bias.alignment = rt::causal_alignment::lower_right;
    by_bias.set_bias(rt::matrix_view<const F>(bias.view()));
    dynamic_matrix<F> m1, m2;
    const auto s1 = run(q, k, v, alibi, m1), s2 = run(q, k, v, by_bias, m2);
    CHECK(same_bits(s1, s2));
    CHECK(same_bits(m1, m2));
  }
}

TEST_CASE("a NaN bias entry poisons its row, +inf too; -inf only masks the key (docs/numerics.md)") {
  const auto q = random_matrix<float>(3, 8, 31), k = random_matrix<float>(5, 8, 32),
             v = random_matrix<float>(5, 4, 33);
  dynamic_matrix<float> bias(3, 5);
  bias(0, 2) = std::numeric_limits<float>::quiet_NaN();
  bias(1, 4) = std::numeric_limits<float>::infinity();
  for (std::size_t j = 0; j < 5; ++j) bias(2, j) = -std::numeric_limits<float>::infinity();
  rt::attention_mask mask;
  mask.set_bias(rt::matrix_view<const float>(bias.view()));
  dynamic_matrix<float> mat;
  const auto s = run(q, k, v, mask, mat);
  for (std::size_t c = 0; c < 4; ++c) {
    CHECK(std::isnan(s(0, c)));
    CHECK(std::isnan(mat(0, c)));
    CHECK(std::isnan(s(1, c)));
    CHECK(std::isnan(mat(1, c)));
    CHECK(s(2, c) == 0.0f);  // every key masked: 0
    CHECK(mat(2, c) == 0.0f);
  }
  rt::attention_mask wrong;
  const dynamic_matrix<float> small(2, 5);
  wrong.set_bias(rt::matrix_view<const float>(small.view()));
  dynamic_matrix<float> out(3, 4);
  CHECK_THROWS_WITH_AS(
      rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), out.view(), 1.0f, wrong),
      "attention: the bias is 2x5 but must be 3x5 (queries by keys)", rt::shape_error);
}

TEST_CASE("grouped-query attention equals multi-head attention with each K/V head repeated, bit for bit") {
  // 8 query heads of 8, 2 key/value heads (GQA) and 1 (MQA); d_model 24, T 40, cross S 33
  const std::size_t H = 8, dh = 8, dm = 24;
  const auto x = random_matrix<float>(40, dm, 41), c = random_matrix<float>(33, dm, 42);
  for (const std::size_t HK : {std::size_t(2), std::size_t(1)}) {
    CAPTURE(HK);
    rt::attention_weights<float> g, full;
    g.q = {random_matrix<float>(H * dh, dm, 43, 0.3), {}};
    g.k = {random_matrix<float>(HK * dh, dm, 44, 0.3), std::vector<float>(HK * dh, 0.25f)};
    g.v = {random_matrix<float>(HK * dh, dm, 45, 0.3), {}};
    g.o = rt::linear_weights<float>{random_matrix<float>(dm, H * dh, 46, 0.3), {}};
    // the multi-head weights: K/V head g's rows repeated for query heads g * H/HK .. (as
    // torch.repeat_interleave(k, H / HK, dim=head) does to the projected heads)
    full = g;
    full.k.weight = dynamic_matrix<float>(H * dh, dm);
    full.v.weight = dynamic_matrix<float>(H * dh, dm);
    full.k.bias.assign(H * dh, 0.25f);
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t r = 0; r < dh; ++r)
        for (std::size_t col = 0; col < dm; ++col) {
          full.k.weight(h * dh + r, col) = g.k.weight((h / (H / HK)) * dh + r, col);
          full.v.weight(h * dh + r, col) = g.v.weight((h / (H / HK)) * dh + r, col);
        }
    for (const bool keep : {true, false})
      for (const bool causal : {true, false}) {
        rt::attention_options<float> og;
        og.heads = H;
        og.kv_heads = HK;
        og.keep_weights = keep;
        og.causal = causal;
        og.alignment = rt::causal_alignment::lower_right;
        og.alibi = true;
        og.window = 9;
        auto of = og;
        of.kv_heads = 0;
        const auto rg = rt::attention(x, c, g, og), rf = rt::attention(x, c, full, of);
        CHECK(same_bits(rg.output, rf.output));
        CHECK(same_bits(rg.concat, rf.concat));
        for (std::size_t h = 0; keep && h < H; ++h) CHECK(same_bits(rg.weights[h], rf.weights[h]));
      }
  }
  rt::attention_options<float> bad;
  bad.keep_weights = true;
  bad.heads = 8;
  bad.kv_heads = 3;
  rt::attention_weights<float> w;
  w.q = {random_matrix<float>(64, dm, 1), {}};
  w.k = {random_matrix<float>(24, dm, 2), {}};
  w.v = {random_matrix<float>(24, dm, 3), {}};
  CHECK_THROWS_WITH_AS((void)rt::attention(x, x, w, bad),
                       "attention: 8 query heads cannot share 3 key/value heads (kv_heads must divide heads)",
                       rt::shape_error);
  bad.kv_heads = 2;  // K has 24 columns, 2 heads of 8 need 16
  CHECK_THROWS_WITH_AS(
      (void)rt::attention(x, x, w, bad),
      "attention: wq is 64x24 and wk is 24x24 but keys need 2 heads of d_q / heads = 8 columns (16 vs 24)",
      rt::shape_error);
}

TEST_CASE("the per-head bias (heads * T, S) reaches each head, and a (T, S) bias every head") {
  const std::size_t H = 2, dm = 8;
  const auto x = random_matrix<float>(6, dm, 51);
  rt::attention_weights<float> w;
  w.q = {random_matrix<float>(8, dm, 52), {}};
  w.k = {random_matrix<float>(8, dm, 53), {}};
  w.v = {random_matrix<float>(8, dm, 54), {}};
  rt::attention_options<float> per, shared;
  per.keep_weights = shared.keep_weights = true;
  per.heads = shared.heads = H;
  dynamic_matrix<float> b2(2 * 6, 6), b1(6, 6);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 6; ++j) {
      b1(i, j) = 0.125f * float(j) - 0.5f;
      b2(i, j) = b2(6 + i, j) = b1(i, j);
    }
  per.bias = b2;
  shared.bias = b1;
  const auto a = rt::attention(x, x, w, per), b = rt::attention(x, x, w, shared);
  CHECK(same_bits(a.output, b.output));
  b2(6 + 2, 3) = -std::numeric_limits<float>::infinity();  // head 1, query 2, key 3 masked
  per.bias = b2;
  const auto c = rt::attention(x, x, w, per);
  CHECK(c.weights[1](2, 3) == 0.0f);
  CHECK(c.weights[0](2, 3) == b.weights[0](2, 3));
  CHECK(same_bits(c.weights[0], b.weights[0]));
  shared.bias = dynamic_matrix<float>(5, 6);
  CHECK_THROWS_WITH_AS((void)rt::attention(x, x, w, shared),
                       "attention: the bias is 5x6 but must be 6x6 or 12x6 (heads x queries by keys)",
                       rt::shape_error);
}

namespace {

/// decode a sequence token by token through a cache of storage S and compare with full causal
/// attention on the same (rounded) keys and values, every head; returns whether all bits agree
template <rt::storage_type S>
bool decode_equals_full(std::size_t T, std::size_t H, std::size_t HK, std::size_t d, std::size_t window,
                        bool alibi) {
  const auto q = random_matrix<float>(T, H * d, 61, 0.7), k = random_matrix<float>(T, HK * d, 62, 0.7),
             v = random_matrix<float>(T, HK * d, 63);
  rt::kv_cache<S> cache(2, HK, d, d, T);
  rt::cache_attention_options opt;
  opt.heads = H;
  opt.window = window;
  opt.alibi = alibi;
  const auto slopes = rt::alibi_slopes(H);
  dynamic_matrix<float> decoded(T, H * d);
  for (std::size_t t = 0; t < T; ++t) {  // token t: append its key and value, attend with its query
    cache.append(1, rt::row_block(k.view(), t, 1), rt::row_block(v.view(), t, 1));
    rt::attend(cache, 1, rt::row_block(q.view(), t, 1), rt::row_block(decoded.view(), t, 1), opt, slopes);
  }
  // the full computation: every query at once, causal (T = S: both alignments agree)
  bool same = true;
  for (std::size_t h = 0; h < H; ++h) {
    const std::size_t g = h / (H / HK);
    dynamic_matrix<float> kg(T, d), vg(T, d), qh(T, d), out(T, d);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t c = 0; c < d; ++c) {
        qh(i, c) = q(i, h * d + c);
        kg(i, c) = float(S(k(i, g * d + c)));  // S = float: the value itself
        vg(i, c) = float(S(v(i, g * d + c)));
      }
    rt::attention_mask mask{true, nullptr};
    mask.window = window;
    if (alibi) mask.alibi_slope = slopes[h];
    rt::scaled_dot_product_attention<float>(qh.view(), kg.view(), vg.view(), out.view(),
                                            rt::default_scale<float>(d), mask);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t c = 0; c < d; ++c)
        same = same &&
               std::bit_cast<std::uint32_t>(out(i, c)) == std::bit_cast<std::uint32_t>(decoded(i, h * d + c));
  }
  CHECK(cache.length(1) == T);
  CHECK(cache.length(0) == 0);
  return same;
}

}  // namespace

TEST_CASE(
    "decoding token by token through the KV cache gives the rows of full causal attention, bit for bit") {
  // why bit for bit: each output row is computed from its own query row, the keys 0..p and the
  // same key blocks (starting at 0, key_block wide) in either run; the keys past p that the full
  // run also visits are -inf for that row, add e^-inf = 0 to its sums and 0 * v to its output
  // chain, and leave its maximum alone (attention.hpp). T = 300 crosses the few-keys kernel
  // (32 keys) and two key blocks.
  for (const std::size_t T : {std::size_t(9), std::size_t(300)}) {
    CAPTURE(T);
    CHECK(decode_equals_full<float>(T, 4, 2, 16, 0, false));
    CHECK(decode_equals_full<float>(T, 4, 1, 16, 40, true));
    // 16-bit storage: the same, against full attention on the rounded keys and values
    CHECK(decode_equals_full<rt::bfloat16>(T, 4, 2, 16, 0, false));
    CHECK(decode_equals_full<rt::float16>(T, 4, 4, 8, 0, true));
  }
}

TEST_CASE("the KV cache checks its size before allocating and its capacity before growing") {
  // 32 layers x 8 heads x 4096 positions x (128 + 128) x 4 bytes = 1 GiB: over a 1 MiB limit
  CHECK_THROWS_WITH_AS(
      rt::kv_cache<float>(32, 8, 128, 128, 4096, std::size_t(1) << 20),
      "kv_cache: 32 layers x 8 heads x 4096 positions x (128 + 128) x 4 bytes need 1073741824 bytes, "
      "over the limit of 1048576 (kv_cache's max_bytes)",
      rt::size_limit_error);
  // past 2^64 bytes: no wrap-around
  // 2^20 layers x 2^20 heads x 2^20 positions x 2^20 x 4 bytes = 2^82 = 4.8357e24 bytes, printed
  // to three digits (runtime::bytes_string), not as 24 digits of a double's rounding
  CHECK_THROWS_WITH_AS(rt::kv_cache<float>(1 << 20, 1 << 20, 1 << 20, 0, std::size_t(1) << 20),
                       doctest::Contains("(1048576 + 0) x 4 bytes need about 4.84e+24 bytes, over the limit"),
                       rt::size_limit_error);
  // exactly 2^64 bytes (2^62 floats of one layer's key): "about 1.84e+19", the first past an integer
  CHECK_THROWS_WITH_AS(rt::kv_cache<float>(1, 1, std::size_t(1) << 31, 0, std::size_t(1) << 31),
                       doctest::Contains("need about 1.84e+19 bytes"), rt::size_limit_error);
  // 2^64 - 1 is exact in long double (64 significant bits on x86-64): the largest integer form
  CHECK(rt::bytes_string(18446744073709551615.0L) == "18446744073709551615");
  rt::kv_cache<rt::bfloat16> cache(1, 2, 4, 4, 3);
  const auto k = random_matrix<float>(2, 8, 71), v = random_matrix<float>(2, 8, 72);
  cache.append(0, k.view(), v.view());
  CHECK_THROWS_WITH_AS(cache.append(0, k.view(), v.view()),
                       "kv_cache: appending 2 positions to the 2 of layer 0 passes the capacity of 3",
                       rt::size_limit_error);
  CHECK(cache.length(0) == 2);  // unchanged
  CHECK(cache.keys(0, 1)(1, 2).bits == rt::bfloat16(k(1, 6)).bits);
  const auto narrow = random_matrix<float>(1, 6, 73);
  CHECK_THROWS_WITH_AS(
      cache.append(0, narrow.view(), narrow.view()),
      "kv_cache: k is 1x6 and v is 1x6 but must be 1x8 and 1x8 (kv_heads x d_key, kv_heads x d_value)",
      rt::shape_error);
  dynamic_matrix<float> q(3, 8), out(3, 8);
  rt::cache_attention_options opt;
  opt.heads = 2;
  CHECK_THROWS_WITH_AS(
      rt::attend(cache, 0, q.view(), out.view(), opt),
      "kv_cache attend: q has 3 queries but layer 0 of the cache holds 2 positions: append the new "
      "tokens' keys and values first (each query is one of the last cached positions)",
      rt::shape_error);
  {  // an empty cache: the same message, not "at most 0 rows" under two equal shapes
    rt::kv_cache<float> empty(1, 1, 4, 4, 4);  // 1 layer, 1 key/value head of 4 and 4, capacity 4
    dynamic_matrix<float> q1(1, 8), out1(1, 8);
    CHECK_THROWS_WITH_AS(
        rt::decode_attend(empty, 0, q1.view(), out1.view(), opt),
        "kv_cache attend: q has 1 query but layer 0 of the cache holds 0 positions: append the new "
        "tokens' keys and values first (each query is one of the last cached positions)",
        rt::shape_error);
  }
  cache.clear();
  CHECK(cache.length(0) == 0);
}

TEST_CASE("bfloat16 and float16 round to nearest, ties to even, keep NaN, and convert back exactly") {
  // bfloat16 keeps 8 significant bits: 1 + 2^-8 is half-way between 1 and 1 + 2^-7: ties to
  // even gives 1; 1 + 3 * 2^-8 is half-way between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6
  CHECK(float(rt::bfloat16(1.0f + 0x1p-8f)) == 1.0f);
  CHECK(float(rt::bfloat16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
  CHECK(float(rt::bfloat16(1.0f + 0x1p-8f + 0x1p-20f)) == 1.0f + 0x1p-7f);  // past half-way: up
  CHECK(rt::bfloat16(1.0f).bits == 0x3F80);
  CHECK(rt::bfloat16(-2.0f).bits == 0xC000);
  CHECK(std::isnan(float(rt::bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  // a NaN whose payload sits in the low 16 bits only: still a NaN (not inf)
  CHECK(std::isnan(float(rt::bfloat16(std::bit_cast<float>(0x7F800001u)))));
  CHECK(float(rt::bfloat16(std::numeric_limits<float>::max())) == std::numeric_limits<float>::infinity());
  CHECK(float(rt::bfloat16(-std::numeric_limits<float>::infinity())) ==
        -std::numeric_limits<float>::infinity());
  // float16 keeps 11: 1 + 2^-11 ties to 1; 65504 is the largest; 65520 (half-way to 2^16) is inf
  CHECK(float(rt::float16(1.0f + 0x1p-11f)) == 1.0f);
  CHECK(float(rt::float16(1.0f + 3 * 0x1p-11f)) == 1.0f + 0x1p-9f);
  CHECK(float(rt::float16(65519.0f)) == 65504.0f);
  CHECK(float(rt::float16(65520.0f)) == std::numeric_limits<float>::infinity());
  CHECK(float(rt::float16(0x1p-24f)) == 0x1p-24f);  // the smallest subnormal
  CHECK(float(rt::float16(0x1p-25f)) == 0.0f);      // half of it: ties to even (0)
  CHECK(float(rt::float16(0x1.8p-25f)) == 0x1p-24f);
  CHECK(std::isnan(float(rt::float16(std::numeric_limits<float>::quiet_NaN()))));
  // every 16-bit pattern converts to float and back to itself (NaN: to a NaN)
  std::size_t wrong = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto x = static_cast<std::uint16_t>(b);
    const float fb = float(rt::bfloat16::from_bits(x)), fh = float(rt::float16::from_bits(x));
    wrong += fb == fb ? rt::bfloat16(fb).bits != x : !std::isnan(float(rt::bfloat16(fb)));
    wrong += fh == fh ? rt::float16(fh).bits != x : !std::isnan(float(rt::float16(fh)));
  }
  CHECK(wrong == 0);
}

TEST_CASE(
    "attention of bfloat16 and float16 inputs is float attention of their values, accumulated in float") {
  const auto q = random_matrix<float>(7, 16, 101), k = random_matrix<float>(40, 16, 102),
             v = random_matrix<float>(40, 8, 103);
  const auto check = [&](auto tag) {
    using S = decltype(tag);
    dynamic_matrix<S> qs(7, 16), ks(40, 16), vs(40, 8);
    dynamic_matrix<float> qf(7, 16), kf(40, 16), vf(40, 8);
    for (std::size_t x = 0; x < q.size(); ++x) qf.data()[x] = float(qs.data()[x] = S(q.data()[x]));
    for (std::size_t x = 0; x < k.size(); ++x) kf.data()[x] = float(ks.data()[x] = S(k.data()[x]));
    for (std::size_t x = 0; x < v.size(); ++x) vf.data()[x] = float(vs.data()[x] = S(v.data()[x]));
    rt::attention_mask mask{true, nullptr};
    mask.alignment = rt::causal_alignment::lower_right;
    dynamic_matrix<float> a(7, 8), b(7, 8);
    rt::scaled_dot_product_attention<S>(rt::matrix_view<const S>(qs.view()),
                                        rt::matrix_view<const S>(ks.view()),
                                        rt::matrix_view<const S>(vs.view()), a.view(), 0.25f, mask);
    rt::scaled_dot_product_attention<float>(qf.view(), kf.view(), vf.view(), b.view(), 0.25f, mask);
    CHECK(same_bits(a, b));
    // the rounding really happened: 16-bit q differs from the float q
    CHECK(qf(0, 0) != q(0, 0));
  };
  check(rt::bfloat16{});
  check(rt::float16{});
}
