// RoPE applied by the runtime KV cache (kv_cache::set_rope, rope_queries): decoding through the
// cache against attention() with the same `rope` option, bit for bit (float32 storage) or
// against full attention of the rounded rotated keys (16-bit storage); the API's edges.
// PyTorch: the fixture case of rope_attention.json (scripts/fixtures/torch_rope_batch_fixtures.py),
// decoded through the cache, gives attention()'s concat bit for bit, which rope_batch_test.cpp
// checks against PyTorch float64 within its chain of bounds.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <qkv/core/rope.hpp>
#include <qkv/io/json.hpp>
#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::random_matrix;
using qkv::testing::same_bits;
using rt::dynamic_matrix;

namespace {

/// decode x's tokens through a rope cache: first `prefill` tokens in one call, then one by one.
/// Projections are attention()'s own (a run without rope: the same GEMMs, rope comes after);
/// returns the concatenated heads (T, H * dvh) and the cache's keys of head g in `keys`
template <rt::storage_type S>
dynamic_matrix<float> decode(const rt::multihead_result<float>& plain, std::size_t H, std::size_t HK,
                             const rt::rope_options& o, std::size_t prefill, rt::kv_cache<S>& cache) {
  const std::size_t T = plain.queries.rows(), dh = plain.queries.cols() / H, dvh = plain.values.cols() / HK;
  cache.set_rope(o);
  rt::cache_attention_options opt;
  opt.heads = H;
  dynamic_matrix<float> out(T, H * dvh);
  for (std::size_t t = 0; t < T;) {
    const std::size_t n = t == 0 && prefill > 0 ? prefill : 1;
    cache.append(0, rt::row_block(plain.keys.view(), t, n), rt::row_block(plain.values.view(), t, n));
    dynamic_matrix<float> q(n, H * dh);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < H * dh; ++c) q(i, c) = plain.queries(t + i, c);
    rt::rope_queries(cache, 0, q.view());  // positions first + t .. first + t + n - 1
    rt::attend(cache, 0, q.view(), rt::row_block(out.view(), t, n), opt);
    t += n;
  }
  return out;
}

struct layer {
  rt::attention_weights<float> w;
  dynamic_matrix<float> x;
};
layer random_layer(std::size_t T, std::size_t H, std::size_t HK, std::size_t dh, std::size_t dm) {
  layer l;
  l.x = random_matrix<float>(T, dm, 71);
  l.w.q = {random_matrix<float>(H * dh, dm, 72, 0.3), std::vector<float>(H * dh, 0.125f)};
  l.w.k = {random_matrix<float>(HK * dh, dm, 73, 0.3), std::vector<float>(HK * dh, -0.25f)};
  l.w.v = {random_matrix<float>(HK * dh, dm, 74, 0.3), {}};
  return l;
}

}  // namespace

TEST_CASE("decoding with RoPE through the KV cache gives the rows of attention() with rope, bit for bit") {
  // Why bit for bit: the cache rotates key row j with apply_rope at position first + j, the same
  // table entry (double angle (first + j) theta_i, rounded once to float) and the same two
  // products and sum per element as attention()'s apply_rope of all S keys at first; the queries
  // likewise (rope_queries). With the same rotated rows, decoder_cache_test.cpp's argument holds:
  // each output row depends on its query, the keys up to its position and key blocks starting at
  // 0 in both runs; later keys are -inf (e^-inf = 0 adds nothing). T = 300 crosses the few-keys
  // kernel and two key blocks; a prefill of 37 rows then single tokens; H = 4 on 2 KV heads.
  const std::size_t H = 4, HK = 2, dh = 16, dm = 24;
  struct rope_case {
    rt::rope_layout layout;
    double base;
    std::size_t rotary_dim, first;
  };
  for (const std::size_t T : {std::size_t(9), std::size_t(300)})
    for (const rope_case rc : {rope_case{rt::rope_layout::half_split, 10000, 0, 0},
                               rope_case{rt::rope_layout::interleaved, 500000, 8, 0},
                               rope_case{rt::rope_layout::half_split, 10000, 0, 4093}})
      for (const std::size_t prefill : {std::size_t(0), std::size_t(T < 37 ? 5 : 37)}) {
        CAPTURE(T);
        CAPTURE(rc.rotary_dim);
        CAPTURE(rc.first);
        CAPTURE(prefill);
        const auto l = random_layer(T, H, HK, dh, dm);
        rt::attention_options<float> opt;
        opt.heads = H;
        opt.kv_heads = HK;
        opt.causal = true;
        opt.alignment = rt::causal_alignment::lower_right;
        opt.keep_weights = false;
        const auto plain = rt::self_attention(l.x, l.w, opt);  // projections, no rope
        rt::rope_options o;
        o.layout = rc.layout;
        o.base = rc.base;
        o.rotary_dim = rc.rotary_dim;
        o.position_offset = rc.first;  // queries and keys both from `first` (key_position_offset unset)
        opt.rope = o;
        const auto full = rt::self_attention(l.x, l.w, opt);
        rt::kv_cache<float> cache(1, HK, dh, dh, T);
        const auto decoded = decode(plain, H, HK, o, prefill, cache);
        CHECK(same_bits(decoded, full.concat));
        // the cache holds attention()'s rotated keys, bit for bit
        for (std::size_t g = 0; g < HK; ++g) {
          const auto kc = cache.keys(0, g);
          bool same = true;
          for (std::size_t j = 0; j < T; ++j)
            for (std::size_t c = 0; c < dh; ++c) same = same && kc(j, c) == full.keys(j, g * dh + c);
          CHECK(same);
        }
      }
}

TEST_CASE(
    "a 16-bit RoPE cache rotates in float and rounds once: full attention of the rounded rotated keys") {
  // bfloat16 and float16 storage: key = S(rot(k)) (the float rotation of attention(), rounded to
  // nearest once), value = S(v); the queries stay float. Against scaled_dot_product_attention of
  // those numbers per head (lower_right = causal here, T = S), bit for bit, as for a cache without rope.
  const std::size_t T = 40, H = 4, HK = 2, dh = 16, dm = 24;
  const auto l = random_layer(T, H, HK, dh, dm);
  rt::attention_options<float> opt;
  opt.heads = H;
  opt.kv_heads = HK;
  opt.keep_weights = false;
  const auto plain = rt::self_attention(l.x, l.w, opt);
  rt::rope_options o;
  opt.rope = o;
  const auto rotated = rt::self_attention(l.x, l.w, opt);  // rotated queries and keys
  auto check_storage = [&](auto tag) {
    using S = decltype(tag);
    rt::kv_cache<S> cache(1, HK, dh, dh, T);
    const auto decoded = decode(plain, H, HK, o, 0, cache);
    bool same = true;
    for (std::size_t h = 0; h < H; ++h) {
      const std::size_t g = h / (H / HK);
      dynamic_matrix<float> qh(T, dh), kg(T, dh), vg(T, dh), out(T, dh);
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t c = 0; c < dh; ++c) {
          qh(i, c) = rotated.queries(i, h * dh + c);
          kg(i, c) = float(S(rotated.keys(i, g * dh + c)));
          vg(i, c) = float(S(plain.values(i, g * dh + c)));
        }
      rt::scaled_dot_product_attention<float>(qh.view(), kg.view(), vg.view(), out.view(),
                                              rt::default_scale<float>(dh),
                                              rt::attention_mask{true, nullptr});
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t c = 0; c < dh; ++c)
          same = same && std::bit_cast<std::uint32_t>(out(i, c)) ==
                             std::bit_cast<std::uint32_t>(decoded(i, h * dh + c));
    }
    return same;
  };
  CHECK(check_storage(rt::bfloat16{}));
  CHECK(check_storage(rt::float16{}));
}

TEST_CASE(
    "decoding the PyTorch RoPE layer (rope_attention.json) through the cache: attention()'s bits, PyTorch's "
    "output within the bound") {
  // the fixture's layer: 6 tokens, 2 heads of 4, LLaMA's order (project, rotate, attend) from
  // position 3, PyTorch float64 (scripts/fixtures/torch_rope_batch_fixtures.py). Decoding through the
  // cache == streaming attention() to the bit; its output (concat Woᵀ + bo) vs PyTorch within
  // the chain of bounds rope_batch_test.cpp derives for attention(): projections
  // (reference_linear), the rotation (kappa, plus p 2^-51 for the double angle, |c|, |s| <= 1),
  // attention (reference_attention: any summation order), the output projection.
  const auto doc =
      qkv::io::json_document::load(std::string(QKV_TEST_DATA) + "/rope_batch/rope_attention.json");
  const auto& j = doc.json();
  const auto mat = [&](const char* f) { return qkv::io::read_matrix<float>(doc, f, j.at(f)); };
  const auto vec = [&](const char* f) { return qkv::io::read_tensor<float>(doc, f, j.at(f)).data; };
  const auto x = mat("x");
  rt::attention_weights<float> w;
  w.q = {mat("wq"), vec("bq")};
  w.k = {mat("wk"), vec("bk")};
  w.v = {mat("wv"), vec("bv")};
  const rt::linear_weights<float> wo{mat("wo"), vec("bo")};
  rt::attention_options<float> opt;
  opt.heads = j.at("heads").get<std::size_t>();
  opt.causal = true;
  opt.keep_weights = false;
  const auto plain = rt::self_attention(x, w, opt);
  rt::rope_options o;
  o.position_offset = j.at("position_offset").get<std::size_t>();
  opt.rope = o;
  const auto full = rt::self_attention(x, w, opt);
  const std::size_t T = x.rows(), d = x.cols(), H = opt.heads, hd = d / H;
  rt::kv_cache<float> cache(1, H, hd, hd, T);
  const auto decoded = decode(plain, H, H, o, 0, cache);
  CHECK(same_bits(decoded, full.concat));
  CHECK(cache.first_position() == 3);
  const auto output = rt::linear(decoded, wo);
  // the bound chain (as rope_batch_test.cpp, for this float run)
  const double u32 = qkv::testing::unit<float>, g = qkv::testing::gamma_n<float>(d);
  const double kappa =
      (1 + 1.001 * u32) * (1 + u32) * (1 + u32) - 1;  // the rotation's relative error per pair
  const auto to_d = [](const std::vector<float>& b) { return std::vector<double>(b.begin(), b.end()); };
  dynamic_matrix<double> qd, dq, kd, dk, vd, dv;
  qkv::testing::reference_linear(qkv::testing::to_double(x), qkv::testing::to_double(w.q.weight),
                                 to_d(w.q.bias), g, u32, qd, dq);
  qkv::testing::reference_linear(qkv::testing::to_double(x), qkv::testing::to_double(w.k.weight),
                                 to_d(w.k.bias), g, u32, kd, dk);
  qkv::testing::reference_linear(qkv::testing::to_double(x), qkv::testing::to_double(w.v.weight),
                                 to_d(w.v.bias), g, u32, vd, dv);
  const auto rotate = [&](dynamic_matrix<double>& m,
                          dynamic_matrix<double>& dm) {  // exact rotation of m, its bound
    const auto m0 = m, dm0 = dm;
    for (std::size_t i = 0; i < T; ++i) {
      const double p = double(o.position_offset + i);
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t k = 0; k < hd / 2; ++k) {
          const std::size_t a = h * hd + k, b = a + hd / 2;  // half_split pairs
          const double angle = p / std::pow(10000.0, double(2 * k) / double(hd));
          m(i, a) = m0(i, a) * std::cos(angle) - m0(i, b) * std::sin(angle);
          m(i, b) = m0(i, b) * std::cos(angle) + m0(i, a) * std::sin(angle);
          const double mag = std::abs(m0(i, a)) + dm0(i, a) + std::abs(m0(i, b)) + dm0(i, b);
          dm(i, a) = dm(i, b) = dm0(i, a) + dm0(i, b) + (kappa + p * std::ldexp(1.0, -51)) * mag;
        }
    }
  };
  rotate(qd, dq);
  rotate(kd, dk);
  dynamic_matrix<double> concat(T, d), dconcat(T, d);
  for (std::size_t h = 0; h < H; ++h) {
    const auto cols = [&](const dynamic_matrix<double>& m) {
      dynamic_matrix<double> c(T, hd);
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t k = 0; k < hd; ++k) c(i, k) = m(i, h * hd + k);
      return c;
    };
    const auto a = qkv::testing::reference_attention::compute<float>(
        cols(qd), cols(dq), cols(kd), cols(dk), cols(vd), cols(dv), 1 / std::sqrt(double(hd)), true, nullptr);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t k = 0; k < hd; ++k) {
        concat(i, h * hd + k) = a.out(i, k);
        dconcat(i, h * hd + k) = a.out_bound(i, k);
      }
  }
  const auto wod = qkv::testing::to_double(wo.weight);
  dynamic_matrix<double> dout(T, d);
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t c = 0; c < d; ++c) {
      double acc = 0, mag = 0, prop = 0;
      for (std::size_t k = 0; k < d; ++k) {
        acc += concat(i, k) * wod(c, k);
        mag += (std::abs(concat(i, k)) + dconcat(i, k)) * std::abs(wod(c, k));
        prop += dconcat(i, k) * std::abs(wod(c, k));
      }
      dout(i, c) = g * mag + prop + 2 * u32 * (std::abs(acc) + std::abs(double(wo.bias[c])) + prop);
    }
  qkv::testing::expect_within(output, qkv::io::read_matrix<double>(doc, "output", j.at("output")), dout,
                              "decoded through the RoPE cache, output vs PyTorch float64");
}

TEST_CASE("set_rope checks rotary_dim and refuses a cache that holds keys; rope_queries checks its rows") {
  rt::kv_cache<float> cache(2, 2, 8, 4, 16);
  rt::rope_options o;
  o.rotary_dim = 10;  // wider than d_key = 8
  CHECK_THROWS_WITH_AS(cache.set_rope(o), "rope: rotary_dim 10 must be even and at most the head's 8 columns",
                       rt::shape_error);
  o.rotary_dim = 3;
  CHECK_THROWS_AS(cache.set_rope(o), rt::shape_error);
  CHECK_FALSE(cache.rope().has_value());
  o.rotary_dim = 4;
  cache.set_rope(o);
  CHECK(cache.rope()->rotary_dim == 4);
  const auto k = random_matrix<float>(3, 16, 81), v = random_matrix<float>(3, 8, 82);
  cache.append(1, k.view(), v.view());
  CHECK_THROWS_WITH_AS(
      cache.set_rope(std::nullopt),
      "kv_cache::set_rope: layer 1 holds 3 keys stored without this rotation (clear() first)",
      std::logic_error);
  // columns past rotary_dim (4 .. 7 of each head) are stored as given; position 0 is the identity
  const auto kc = cache.keys(1, 1);
  for (std::size_t c = 0; c < 8; ++c) CHECK(kc(0, c) == k(0, 8 + c));
  for (std::size_t c = 4; c < 8; ++c) CHECK(kc(2, c) == k(2, 8 + c));
  CHECK(kc(2, 0) != k(2, 8));
  auto q = random_matrix<float>(4, 3 * 8, 83);
  CHECK_THROWS_WITH_AS(
      rt::rope_queries(cache, 1, q.view()),
      "kv_cache rope_queries: q is 4x24 but layer 1 holds only 3 positions (append the queries' keys first)",
      rt::shape_error);
  cache.clear();
  cache.set_rope(std::nullopt);  // empty again: allowed
  const auto before = q;
  rt::rope_queries(cache, 1, q.view());  // no rope: q unchanged
  CHECK(same_bits(q, before));
}

// --- core/rope.hpp's rotary_dim against the runtime's rope and PyTorch's formula ---------------

namespace {

/// core rope (constexpr code, run here at run time) of one head's (N, D) block of m at positions
/// first.., rotary_dim r; written back into `out`
template <std::size_t N, std::size_t D>
void core_rope_head(const dynamic_matrix<float>& m, std::size_t h, qkv::rope_layout layout, std::size_t first,
                    double base, std::size_t r, dynamic_matrix<float>& out) {
  qkv::matrix<float, N, D> x;
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t c = 0; c < D; ++c) x(i, c) = m(i, h * D + c);
  const auto y = qkv::rope(x, layout, first, base, r);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t c = 0; c < D; ++c) out(i, h * D + c) = y(i, c);
}

}  // namespace

TEST_CASE("core rope with rotary_dim equals the runtime's and PyTorch's rotation within the derived bound") {
  // rope.json (scripts/fixtures/torch_rope_batch_fixtures.py): PyTorch's formula with float64 angles, c
  // and s rounded to float, q c + rotate(q) s in float32; partial rotary 4 of 8 and 8 of 16
  // among the five cases. The runtime's apply_rope gives these bits exactly (rope_batch_test.cpp);
  // the core's angles take another road (theta = exp(-(2i ln base)/r) with qkv's exp and log,
  // fdlibm's cos and sin), so c and s may differ in their last float bit. Bound per element of a
  // pair (a, b) (u = 2^-53, u_f = 2^-24):
  //   theta: core (log correctly rounded, a product, a division, exp < 1 ulp) within
  //   (3.01 ln base + 2) u relative; PyTorch (2i/r rounded: u ln base through the power; pow and
  //   the division) within (ln base + 3) u: |theta_1 - theta_2| <= (4.02 ln base + 5.01) u theta
  //   angles p theta rounded once each: delta_angle <= p theta (4.02 ln base + 7.02) u, theta <= 1
  //   cos, sin in double within 1 ulp each (2u): |C_1 - C_2| <= delta = delta_angle + 4u
  //   rounded to float: |c_1 - c_2| <= delta + 2 u_f (|C| <= 1)
  //   y = fl(fl(a c) - fl(b s)) within (2 u_f + u_f^2)(|a| + |b|) of a c - b s, each side
  //   => |y_1 - y_2| <= (|a| + |b|) (delta + 6.0001 u_f)
  // Columns past rotary_dim are copied: bit for bit.
  const auto doc = qkv::io::json_document::load(std::string(QKV_TEST_DATA) + "/rope_batch/rope.json");
  const double u = std::ldexp(1.0, -53), uf = std::ldexp(1.0, -24);
  std::size_t elements = 0, differing = 0;
  for (const auto& c : doc.json().at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    INFO(name);
    const auto x = qkv::io::read_matrix<float>(doc, "x", c.at("x"));
    const auto want = qkv::io::read_matrix<float>(doc, "rotated", c.at("rotated"));
    const bool inter = c.at("layout").get<std::string>() == "interleaved";
    const auto layout = inter ? qkv::rope_layout::interleaved : qkv::rope_layout::half_split;
    rt::rope_options o;
    o.layout = inter ? rt::rope_layout::interleaved : rt::rope_layout::half_split;
    o.base = c.at("base").get<double>();
    o.rotary_dim = c.at("rotary_dim").get<std::size_t>();
    o.position_offset = c.at("position_offset").get<std::size_t>();
    const std::size_t H = c.at("heads").get<std::size_t>(), hd = c.at("head_dim").get<std::size_t>();
    const std::size_t r = o.rotary_dim, first = o.position_offset;
    auto runtime = x;
    rt::apply_rope<float>(runtime.view(), hd, o, first, nullptr);
    CHECK(same_bits(runtime, want));  // the runtime is PyTorch's formula to the bit
    dynamic_matrix<float> core(x.rows(), x.cols());
    for (std::size_t h = 0; h < H; ++h) {
      if (x.rows() == 6 && hd == 8)
        core_rope_head<6, 8>(x, h, layout, first, o.base, r, core);
      else if (x.rows() == 8 && hd == 8)
        core_rope_head<8, 8>(x, h, layout, first, o.base, r, core);
      else if (x.rows() == 4 && hd == 16)
        core_rope_head<4, 16>(x, h, layout, first, o.base, r, core);
      else if (x.rows() == 3 && hd == 64)
        core_rope_head<3, 64>(x, h, layout, first, o.base, r, core);
      else
        FAIL("a fixture shape this test does not instantiate: " << x.rows() << " rows, heads of " << hd);
    }
    bool within = true, tail_exact = true;
    for (std::size_t i = 0; i < x.rows(); ++i) {
      const double delta = double(first + i) * (4.02 * std::log(o.base) + 7.02) * u + 4 * u;
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t k = 0; k < r / 2; ++k) {
          const std::size_t a = h * hd + (inter ? 2 * k : k), b = inter ? a + 1 : a + r / 2;
          const double bound =
              (std::abs(double(x(i, a))) + std::abs(double(x(i, b)))) * (delta + 6.0001 * uf);
          for (const std::size_t col : {a, b}) {
            ++elements;
            differing += core(i, col) != want(i, col);
            within = within && std::abs(double(core(i, col)) - double(want(i, col))) <= bound &&
                     std::abs(double(core(i, col)) - double(runtime(i, col))) <= bound;
          }
        }
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t col = r; col < hd; ++col)
          tail_exact = tail_exact && core(i, h * hd + col) == x(i, h * hd + col);
    }
    CHECK(within);
    CHECK(tail_exact);
  }
  MESSAGE("core vs PyTorch/runtime rotated elements differing in any bit: " << differing << " of "
                                                                            << elements);
}
