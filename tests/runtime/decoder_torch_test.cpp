// The decoder pieces of the runtime path against PyTorch (tests/data/decoder/decoder_torch.json,
// made by scripts/fixtures/torch_decoder_fixtures.py with PyTorch 1.13 in float64 from float32 inputs):
// lower-right and upper-left causal masks, sliding windows, ALiBi, additive per-head biases and
// grouped-query attention through attention(), and token-by-token decoding through the KV cache
// with float32, bfloat16 and float16 storage; PyTorch's bfloat16/float16 rounding bit for bit.
//
// Tolerance, derived (the standard model, as tests/support/runtime.hpp's reference_attention,
// with the additive terms): for one row, z_j = scale q.k_j + bias + m (j - p); the float run's
// error in z_j is |scale| gamma(d) sum|q||k| (the dot product), 3u|s_j| (the scale 1/sqrt(d)
// rounded twice, then the multiply), and 2u(|s_j| + |b| + |a|) (two additions; ALiBi's product
// m (j - p) is exact here: the slopes are powers of two and j - p a small integer). The softmax
// and the weighted sum of v then add what reference_attention adds (core/bounds.hpp's softmax
// bound with exp within 2 ulp, one rescale step per key block, gamma(S + 2) for the sum).
// PyTorch's float64 result has the same kind of error with u = 2^-53, so a run in F must be
// within bound(F) + bound(double) of it.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <qkv/io/json.hpp>
#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::gamma_n;
using rt::dynamic_matrix;

namespace {

const nlohmann::json& fixture() {
  static const auto doc =
      qkv::io::json_document::load(std::string(QKV_TEST_DATA) + "/decoder/decoder_torch.json");
  return doc.json();
}

double number(const nlohmann::json& x) {
  if (x.is_string()) {
    REQUIRE(x.get<std::string>() == "-inf");
    return -std::numeric_limits<double>::infinity();
  }
  return x.get<double>();
}

template <class F>
dynamic_matrix<F> matrix(const nlohmann::json& rows) {
  dynamic_matrix<F> m(rows.size(), rows.at(0).size());
  for (std::size_t i = 0; i < m.rows(); ++i)
    for (std::size_t j = 0; j < m.cols(); ++j) m(i, j) = static_cast<F>(number(rows.at(i).at(j)));
  return m;
}

/// the bound on |a run in F - the exact result| for each output of head h (see the header)
struct case_spec {
  std::size_t H, HK, d;
  bool causal, lower_right, alibi;
  std::size_t window;
  const dynamic_matrix<double>* bias;  // (H T, S) or nullptr
};

template <class F>
dynamic_matrix<double> bound(const case_spec& c, const dynamic_matrix<double>& q,
                             const dynamic_matrix<double>& k, const dynamic_matrix<double>& v) {
  const std::size_t T = q.rows(), S = k.rows(), d = c.d, D = v.cols() / c.HK, group = c.H / c.HK;
  const double u = qkv::testing::unit<F>, scale = 1 / std::sqrt(double(d));
  const auto slopes = rt::alibi_slopes(c.H);
  const std::size_t blocks = (S + rt::key_block - 1) / rt::key_block;
  dynamic_matrix<double> out(T, c.H * D);
  for (std::size_t h = 0; h < c.H; ++h) {
    const std::size_t g = h / group;
    for (std::size_t i = 0; i < T; ++i) {
      const long p = long(i) + (c.lower_right ? long(S) - long(T) : 0);
      std::vector<double> z(S), w(S);
      std::vector<bool> ok(S);
      double m = -std::numeric_limits<double>::infinity(), lo = -m, worst_ds = 0, sum = 0;
      std::size_t n = 0;
      for (std::size_t j = 0; j < S; ++j) {
        double acc = 0, mag = 0;
        for (std::size_t x = 0; x < d; ++x) {
          acc += q(i, h * d + x) * k(j, g * d + x);
          mag += std::abs(q(i, h * d + x) * k(j, g * d + x));
        }
        const double s = acc * scale, b = c.bias ? (*c.bias)(h * T + i, j) : 0.0,
                     a = c.alibi ? slopes[h] * double(long(j) - p) : 0.0;
        ok[j] =
            (!c.causal || long(j) <= p) && (c.window == 0 || long(j) > p - long(c.window)) && b > -INFINITY;
        if (!ok[j]) continue;
        z[j] = s + b + a;
        const double ds = scale * gamma_n<F>(d) * mag + 3 * u * std::abs(s) +
                          2 * u * (std::abs(s) + std::abs(b) + std::abs(a));
        worst_ds = std::max(worst_ds, ds);
        m = std::max(m, z[j]);
        lo = std::min(lo, z[j]);
        ++n;
      }
      REQUIRE(n > 0);
      for (std::size_t j = 0; j < S; ++j) sum += ok[j] ? std::exp(z[j] - m) : 0.0;
      const double rel = 1.01 * (2 * worst_ds + (2 * (4 + (m - lo)) + double(n) + 5.0 * double(blocks)) * u);
      for (std::size_t j = 0; j < S; ++j) w[j] = ok[j] ? std::exp(z[j] - m) / sum : 0.0;
      for (std::size_t col = 0; col < D; ++col) {
        double mag = 0, prop = 0;
        for (std::size_t j = 0; j < S; ++j) {
          const double vv = std::abs(v(j, g * D + col));
          mag += w[j] * (1 + rel) * vv;
          prop += w[j] * rel * vv;
        }
        out(i, h * D + col) = gamma_n<F>(S + 2) * mag + prop;
      }
    }
  }
  return out;
}

/// bound(F) + bound(double): a run in F against PyTorch's float64
template <class F>
dynamic_matrix<double> tolerance(const case_spec& c, const dynamic_matrix<double>& q,
                                 const dynamic_matrix<double>& k, const dynamic_matrix<double>& v) {
  auto t = bound<F>(c, q, k, v);
  const auto t64 = bound<double>(c, q, k, v);
  for (std::size_t x = 0; x < t.size(); ++x) t.data()[x] += t64.data()[x];
  return t;
}

/// n x n identity at rows/columns offset: the exact projection that picks columns of the context
template <class F>
rt::linear_weights<F> pick(std::size_t n, std::size_t total, std::size_t first) {
  rt::linear_weights<F> w;
  w.weight = dynamic_matrix<F>(n, total);
  for (std::size_t r = 0; r < n; ++r) w.weight(r, first + r) = F(1);
  return w;
}

template <class F>
void run_case(const nlohmann::json& c) {
  const std::string name = c.at("name");
  CAPTURE(name);
  const std::size_t H = c.at("heads"), HK = c.at("kv_heads"), d = c.at("d_head");
  const auto q = matrix<F>(c.at("q")), k = matrix<F>(c.at("k")), v = matrix<F>(c.at("v"));
  const auto expected = matrix<double>(c.at("output"));
  const std::size_t S = k.rows();
  std::optional<dynamic_matrix<double>> bias;
  if (c.contains("bias")) bias = matrix<double>(c.at("bias"));
  case_spec spec{H,
                 HK,
                 d,
                 c.at("causal"),
                 c.at("alignment") == "lower_right",
                 c.at("alibi"),
                 c.at("window"),
                 bias ? &*bias : nullptr};
  const auto tol =
      tolerance<F>(spec, qkv::testing::to_double(q), qkv::testing::to_double(k), qkv::testing::to_double(v));
  // attention() with exact projections: Q = x, K and V the two halves of the context [k | v]
  dynamic_matrix<F> context(S, 2 * HK * d);
  for (std::size_t j = 0; j < S; ++j)
    for (std::size_t x = 0; x < HK * d; ++x) {
      context(j, x) = k(j, x);
      context(j, HK * d + x) = v(j, x);
    }
  rt::attention_weights<F> w;
  w.q = pick<F>(H * d, H * d, 0);
  w.k = pick<F>(HK * d, 2 * HK * d, 0);
  w.v = pick<F>(HK * d, 2 * HK * d, HK * d);
  rt::attention_options<F> opt;
  opt.heads = H;
  opt.kv_heads = HK;
  opt.causal = spec.causal;
  opt.alignment = spec.lower_right ? rt::causal_alignment::lower_right : rt::causal_alignment::upper_left;
  opt.window = spec.window;
  opt.alibi = spec.alibi;
  if (bias) opt.bias = matrix<F>(c.at("bias"));
  for (const bool keep : {true, false}) {
    opt.keep_weights = keep;
    const auto r = rt::attention(q, context, w, opt);
    qkv::testing::expect_within(r.output, expected, tol, name + (keep ? " (materialised)" : " (streaming)"));
  }
}

template <rt::storage_type S>
void decode_against(const char* key) {
  const auto& c = fixture().at("decode");
  CAPTURE(key);
  const std::size_t H = c.at("heads"), HK = c.at("kv_heads"), d = c.at("d_head");
  const auto q = matrix<float>(c.at("q")), k = matrix<float>(c.at("k")), v = matrix<float>(c.at("v"));
  const auto expected = matrix<double>(c.at(key));
  const std::size_t T = q.rows();
  rt::kv_cache<S> cache(1, HK, d, d, T);
  rt::cache_attention_options opt;
  opt.heads = H;
  dynamic_matrix<float> out(T, H * d), fast(T, H * d);
  for (std::size_t t = 0; t < T; ++t) {
    cache.append(0, rt::row_block(k.view(), t, 1), rt::row_block(v.view(), t, 1));
    rt::attend(cache, 0, rt::row_block(q.view(), t, 1), rt::row_block(out.view(), t, 1), opt);
    rt::decode_attend(cache, 0, rt::row_block(q.view(), t, 1), rt::row_block(fast.view(), t, 1), opt);
  }
  // the bound on the rounded keys and values PyTorch used (its .to(bfloat16) = ours: checked below)
  dynamic_matrix<double> kr(T, HK * d), vr(T, HK * d);
  for (std::size_t x = 0; x < kr.size(); ++x) {
    kr.data()[x] = double(float(S(k.data()[x])));
    vr.data()[x] = double(float(S(v.data()[x])));
  }
  const case_spec spec{H, HK, d, true, false, false, 0, nullptr};
  const auto tol = tolerance<float>(spec, qkv::testing::to_double(q), kr, vr);
  qkv::testing::expect_within(out, expected, tol, std::string("decoded with storage ") + key);
  // decode_attend sums in another order: the bound holds for any order
  qkv::testing::expect_within(fast, expected, tol, std::string("decode_attend with storage ") + key);
}

}  // namespace

TEST_CASE(
    "lower-right and upper-left causal masks, windows, ALiBi, biases and GQA agree with PyTorch, float and "
    "double") {
  for (const auto& c : fixture().at("cases")) {
    run_case<float>(c);
    run_case<double>(c);
  }
}

TEST_CASE(
    "decoding through the KV cache agrees with PyTorch's causal attention, float32, bfloat16 and float16 "
    "storage") {
  decode_against<float>("output");
  decode_against<rt::bfloat16>("output_bfloat16");
  decode_against<rt::float16>("output_float16");
}

TEST_CASE("bfloat16 and float16 round as PyTorch's .to(torch.bfloat16) and .to(torch.float16), bit for bit") {
  const auto& c = fixture().at("conversions");
  const auto& x = c.at("float32");
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float f = x.at(i).get<float>();
    wrong += rt::bfloat16(f).bits != c.at("bfloat16_bits").at(i).get<unsigned>();
    wrong += rt::float16(f).bits != c.at("float16_bits").at(i).get<unsigned>();
  }
  CHECK(x.size() >= 200);
  CHECK(wrong == 0);
}

TEST_CASE(
    "decode_attend agrees with attend within twice the bound, with a window and ALiBi, 8 query heads on 2") {
  // both are within bound(float) of the exact result, so within twice that of each other
  const std::size_t H = 8, HK = 2, d = 16, T = 300;
  const auto q = qkv::testing::random_matrix<float>(1, H * d, 81, 0.7),
             k = qkv::testing::random_matrix<float>(T, HK * d, 82, 0.7),
             v = qkv::testing::random_matrix<float>(T, HK * d, 83);
  for (const std::size_t window : {std::size_t(0), std::size_t(37)}) {
    CAPTURE(window);
    rt::kv_cache<rt::bfloat16> cache(1, HK, d, d, T);
    cache.append(0, k.view(), v.view());
    rt::cache_attention_options opt;
    opt.heads = H;
    opt.window = window;
    opt.alibi = true;
    const auto slopes = rt::alibi_slopes(H);
    dynamic_matrix<float> a(1, H * d), b(1, H * d);
    rt::attend(cache, 0, q.view(), a.view(), opt, slopes);
    rt::decode_attend(cache, 0, q.view(), b.view(), opt, slopes);
    dynamic_matrix<double> kr(T, HK * d), vr(T, HK * d);
    for (std::size_t x = 0; x < kr.size(); ++x) {
      kr.data()[x] = double(float(rt::bfloat16(k.data()[x])));
      vr.data()[x] = double(float(rt::bfloat16(v.data()[x])));
    }
    // the query is the last of T positions: lower_right with one query
    const case_spec spec{H, HK, d, true, true, true, window, nullptr};
    auto tol = bound<float>(spec, qkv::testing::to_double(q), kr, vr);
    for (std::size_t x = 0; x < tol.size(); ++x) tol.data()[x] *= 2;
    qkv::testing::expect_within(b, qkv::testing::to_double(a), tol, "decode_attend vs attend");
  }
}

TEST_CASE(
    "decode_attend gives attend's answer when a value is NaN or infinite (the policy of docs/numerics.md)") {
  const std::size_t H = 4, HK = 2, d = 8, T = 50;
  const auto q = qkv::testing::random_matrix<float>(1, H * d, 91),
             k = qkv::testing::random_matrix<float>(T, HK * d, 92);
  auto v = qkv::testing::random_matrix<float>(T, HK * d, 93);
  v(7, 3) = std::numeric_limits<float>::infinity();       // key/value head 0, column 3
  v(9, d + 1) = std::numeric_limits<float>::quiet_NaN();  // head 1, column 1
  rt::kv_cache<float> cache(1, HK, d, d, T);
  cache.append(0, k.view(), v.view());
  rt::cache_attention_options opt;
  opt.heads = H;
  dynamic_matrix<float> a(1, H * d), b(1, H * d);
  rt::attend(cache, 0, q.view(), a.view(), opt);
  rt::decode_attend(cache, 0, q.view(), b.view(), opt);
  CHECK(a(0, 3) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(a(0, 2 * d + 1)));
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

TEST_CASE(
    "decode_attend gives the same bits on 1 and 2 threads, float32 and bfloat16 caches, with and without a "
    "window") {
  // each key/value head is one task and its summation order depends on the number of keys only
  // (include/qkv/runtime/decode.hpp), so the thread count cannot change a bit
  const std::size_t H = 8, HK = 4, d = 32, T = 333;  // 21 score blocks, 11 value blocks: both tails
  const auto q = qkv::testing::random_matrix<float>(1, H * d, 101, 0.7),
             k = qkv::testing::random_matrix<float>(T, HK * d, 102, 0.7),
             v = qkv::testing::random_matrix<float>(T, HK * d, 103);
  const auto run = [&](auto tag, std::size_t window, std::size_t threads) {
    rt::kv_cache<decltype(tag)> cache(1, HK, d, d, T);
    cache.append(0, k.view(), v.view());
    rt::cache_attention_options opt;
    opt.heads = H;
    opt.window = window;
    rt::thread_pool pool(threads);
    dynamic_matrix<float> out(1, H * d);
    rt::decode_attend(cache, 0, q.view(), out.view(), opt, {}, &pool);
    return out;
  };
  for (const std::size_t window : {std::size_t(0), std::size_t(70)}) {
    CAPTURE(window);
    const auto a = run(float{}, window, 1), b = run(float{}, window, 2);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    const auto c = run(rt::bfloat16{}, window, 1), e = run(rt::bfloat16{}, window, 2);
    CHECK(std::memcmp(c.data(), e.data(), c.size() * sizeof(float)) == 0);
  }
}

TEST_CASE(
    "decode_attend's kernels for widths of 32 agree with attend within twice the bound, 1 to 8 query heads "
    "per key/value head, float32 and bfloat16") {
  // d = 96: AVX-512 builds take decode_score_group / decode_value_pairs (rows read 32 values at
  // a time, bfloat16 as even and odd values, the output put back in column order); 150 keys
  // leave tails in the score blocks (16), in their groups of 16 / G keys and in the value
  // blocks (32); 96 columns are one chunk of 64 and one of 32. Other builds check the generic
  // kernels. Both results are within bound(float) of the exact one, so within twice of each other.
  const std::size_t HK = 2, d = 96, T = 150;
  const auto k = qkv::testing::random_matrix<float>(T, HK * d, 112, 0.7),
             v = qkv::testing::random_matrix<float>(T, HK * d, 113);
  const auto check = [&](auto tag, std::size_t H, bool alibi) {
    using S = decltype(tag);
    CAPTURE(H);
    CAPTURE(alibi);
    CAPTURE(sizeof(S));
    const auto q = qkv::testing::random_matrix<float>(1, H * d, 111 + H, 0.7);
    rt::kv_cache<S> cache(1, HK, d, d, T);
    cache.append(0, k.view(), v.view());
    rt::cache_attention_options opt;
    opt.heads = H;
    opt.alibi = alibi;
    const auto slopes = alibi ? rt::alibi_slopes(H) : std::vector<double>{};
    dynamic_matrix<float> a(1, H * d), b(1, H * d);
    rt::attend(cache, 0, q.view(), a.view(), opt, slopes);
    rt::decode_attend(cache, 0, q.view(), b.view(), opt, slopes);
    dynamic_matrix<double> kr(T, HK * d), vr(T, HK * d);
    for (std::size_t x = 0; x < kr.size(); ++x) {
      kr.data()[x] = double(float(S(k.data()[x])));
      vr.data()[x] = double(float(S(v.data()[x])));
    }
    const case_spec spec{H, HK, d, true, true, alibi, 0, nullptr};
    auto tol = bound<float>(spec, qkv::testing::to_double(q), kr, vr);
    for (std::size_t x = 0; x < tol.size(); ++x) tol.data()[x] *= 2;
    qkv::testing::expect_within(b, qkv::testing::to_double(a), tol, "decode_attend vs attend, d = 96");
  };
  for (const std::size_t H : {2, 4, 6, 8, 16})
    for (const bool alibi : {false, true}) {
      check(float{}, H, alibi);
      check(rt::bfloat16{}, H, alibi);
    }
}
