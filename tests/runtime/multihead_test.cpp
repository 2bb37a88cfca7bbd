// runtime::multihead_attention: attention of already-projected queries, keys and values, heads
// side by side, with every option of chapter two. Its two forms (the attention_result one that
// keeps every step, the streaming one that writes out only) against attention() on the
// projections that give the same q, k, v, bit for bit, on 1 and 2 threads; the shapes it
// refuses, named; and the calls an engineer writes first compiling without <float>.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::random_matrix;
using qkv::testing::same_bits;
using rt::dynamic_matrix;

namespace {

/// the options of one case: kind 0 none, 1 causal, 2 causal lower_right with a window and
/// key_padding, 3 ALiBi and a per-head bias with causal, 4 rope (half_split) with causal, 5 an
/// allowed matrix with rope interleaved
template <class F>
rt::attention_options<F> options_of(int kind, std::size_t H, std::size_t HK, std::size_t T, std::size_t S,
                                    unsigned seed) {
  rt::attention_options<F> o;
  o.keep_weights = true;
  o.heads = H;
  o.kv_heads = HK == H ? 0 : HK;
  o.causal = kind >= 1 && kind <= 4;
  if (kind == 2) {
    o.alignment = rt::causal_alignment::lower_right;
    o.window = 150;
    std::vector<unsigned char> pad(S, 0);
    for (std::size_t j = 1; j < S; j += 5) pad[j] = 1;
    o.key_padding = pad;
  }
  if (kind == 3) {
    o.alibi = true;
    o.bias = random_matrix<F>(H * T, S, seed, 0.3);
  }
  if (kind == 4) o.rope = rt::rope_options{};
  if (kind == 5) {
    rt::rope_options r;
    r.layout = rt::rope_layout::interleaved;
    r.position_offset = 7;
    o.rope = r;
    rt::mask_matrix a(T, S, 1);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < S; ++j) a(i, j) = (3 * i + j) % 5 != 0;
    o.allowed = a;
  }
  return o;
}

}  // namespace

TEST_CASE_TEMPLATE(
    "multihead_attention on the projections gives attention()'s bits, both forms, GQA and every option", F,
    float, double) {
  // attention(x, c, w) projects and then attends; multihead_attention(q, k, v) attends to the
  // projections runtime::linear gives (the same products, the same bits). Both must agree bit
  // for bit: kept weights, streamed (the attention_result form with keep_weights = false, and
  // the out-only form on 1 and 2 threads). Sizes: 300 queries over 300 keys (self) and 200
  // over 520 (cross: several key blocks, the diagonal inside them); heads 4 with kv_heads 4
  // (MHA), 2 (GQA) and 1 (MQA).
  rt::thread_pool one(1), two(2);
  const std::size_t d_model = 32, H = 4, dh = 8, dvh = 6;
  unsigned seed = 5200;
  int cases = 0;
  for (const auto& [T, S] : {std::pair<std::size_t, std::size_t>{300, 300}, {200, 520}})
    for (std::size_t HK : {std::size_t(4), std::size_t(2), std::size_t(1)})
      for (int kind = 0; kind < 6; ++kind) {
        CAPTURE(T);
        CAPTURE(S);
        CAPTURE(HK);
        CAPTURE(kind);
        const auto x = random_matrix<F>(T, d_model, seed), c = random_matrix<F>(S, d_model, seed + 1);
        rt::attention_weights<F> w;
        w.q.weight = random_matrix<F>(H * dh, d_model, seed + 2, 0.3);
        w.k.weight = random_matrix<F>(HK * dh, d_model, seed + 3, 0.3);
        w.v.weight = random_matrix<F>(HK * dvh, d_model, seed + 4, 0.3);
        w.q.bias = std::vector<F>(H * dh, F(0.125));
        auto opt = options_of<F>(kind, H, HK, T, S, seed + 5);
        seed += 6;
        const auto q = rt::linear(x, w.q), k = rt::linear(c, w.k), v = rt::linear(c, w.v);
        for (bool keep : {true, false}) {
          opt.keep_weights = keep;
          const auto want = rt::attention(x, c, w, opt, &one);
          const auto got = rt::multihead_attention(q, k, v, opt, &two);
          CHECK(same_bits(got.concat, want.concat));
          CHECK(same_bits(got.output, want.concat));
          CHECK(same_bits(got.queries, want.queries));  // rotated alike under rope
          for (std::size_t h = 0; keep && h < H; ++h) CHECK(same_bits(got.weights[h], want.weights[h]));
          if (keep) continue;
          for (rt::thread_pool* pool : {&one, &two}) {
            dynamic_matrix<F> out(T, H * dvh);
            rt::multihead_attention(q.view(), k.view(), v.view(), out.view(), opt, pool);
            CHECK(same_bits(out, want.concat));
          }
        }
        ++cases;
      }
  CHECK(cases == 36);
}

TEST_CASE(
    "multihead_attention's heads are scaled_dot_product_attention on their columns, and the caller's q and k "
    "stay as given") {
  // 12 heads of 16 over 700 causal tokens: head h of the out-only form is the one-head call on
  // columns h*16.. of q, k, v (one mask for all, no ALiBi or bias), bit for bit; with rope the
  // caller's q and k are not rotated in place (copies are)
  const std::size_t T = 700, H = 12, d = 16;
  const auto q = random_matrix<float>(T, H * d, 61, 0.6), k = random_matrix<float>(T, H * d, 62, 0.6),
             v = random_matrix<float>(T, H * d, 63);
  rt::attention_options<float> opt;
  opt.keep_weights = true;
  opt.heads = H;
  opt.causal = true;
  dynamic_matrix<float> out(T, H * d), head(T, d);
  rt::multihead_attention(q.view(), k.view(), v.view(), out.view(), opt);
  for (std::size_t h = 0; h < H; ++h) {
    CAPTURE(h);
    rt::scaled_dot_product_attention(
        rt::column_block(q.view(), h * d, d), rt::column_block(k.view(), h * d, d),
        rt::column_block(v.view(), h * d, d), head.view(), 0.25, rt::attention_mask{true});
    CHECK(same_bits(head, rt::copy_of(rt::column_block(rt::matrix_view<const float>(out.view()), h * d, d))));
  }
  const auto q0 = q, k0 = k;
  opt.rope = rt::rope_options{};
  rt::multihead_attention(q.view(), k.view(), v.view(), out.view(), opt);
  CHECK(same_bits(q, q0));
  CHECK(same_bits(k, k0));
}

TEST_CASE("multihead_attention: a NaN in v reaches exactly the rows that attend to it, as attention() does") {
  const std::size_t T = 260, H = 2, d = 8;
  const auto x = random_matrix<float>(T, 16, 71);
  rt::attention_weights<float> w;
  w.q.weight = random_matrix<float>(H * d, 16, 72, 0.3);
  w.k.weight = random_matrix<float>(H * d, 16, 73, 0.3);
  w.v.weight = random_matrix<float>(H * d, 16, 74, 0.3);
  auto q = rt::linear(x, w.q), k = rt::linear(x, w.k), v = rt::linear(x, w.v);
  v(100, 3) = std::numeric_limits<float>::quiet_NaN();  // key 100, head 0's column 3
  rt::attention_options<float> opt;
  opt.heads = H;
  opt.causal = true;
  opt.keep_weights = false;
  dynamic_matrix<float> out(T, H * d);
  rt::multihead_attention(q.view(), k.view(), v.view(), out.view(), opt);
  for (std::size_t i = 0; i < T; ++i) {
    CAPTURE(i);
    CHECK(std::isnan(out(i, 3)) == (i >= 100));  // causal: queries from 100 on see key 100
    CHECK(!std::isnan(out(i, 2)));
    CHECK(!std::isnan(out(i, d + 3)));  // head 1 does not read column 3
  }
  const auto ref = rt::multihead_attention(q, k, v, opt);
  CHECK(same_bits(out, ref.concat));
}

TEST_CASE("multihead_attention names the shapes that do not fit") {
  dynamic_matrix<float> q(5, 8), k(7, 8), v(7, 6), out(5, 6), narrow_k(7, 6), short_v(6, 6), bad_out(5, 4);
  rt::attention_options<float> opt;
  opt.keep_weights = true;
  opt.heads = 2;
  CHECK_THROWS_WITH_AS(
      rt::multihead_attention(q.view(), narrow_k.view(), v.view(), out.view(), opt),
      "attention: q is 5x8 and k is 7x6 but k needs 2 key/value heads of q's 4 columns per head (8 columns)",
      rt::shape_error);
  CHECK_THROWS_WITH_AS(rt::multihead_attention(q.view(), k.view(), short_v.view(), out.view(), opt),
                       "attention: k is 7x8 but v is 6x6 (one value row per key)", rt::shape_error);
  CHECK_THROWS_WITH_AS(
      rt::multihead_attention(q.view(), k.view(), v.view(), bad_out.view(), opt),
      "attention: out is 5x4 but must be 5x6 (q's 5 rows by 2 heads of v's 3 columns per key/value head)",
      rt::shape_error);
  opt.heads = 3;
  CHECK_THROWS_WITH_AS(
      (void)rt::multihead_attention(q, k, v, opt),
      "attention: 3 heads do not divide d_q = 8 or 3 key/value heads do not divide d_v = 6 evenly",
      rt::shape_error);
  opt.heads = 2;
  opt.key_padding = std::vector<unsigned char>(5, 0);
  CHECK_THROWS_WITH_AS(rt::multihead_attention(q.view(), k.view(), v.view(), out.view(), opt),
                       "attention: key_padding has 5 flags but there are 7 keys (k is 7x8)", rt::shape_error);
}

TEST_CASE("the first calls an engineer writes compile without <float> and give the spelled-out call's bits") {
  // docs/reference.md's signatures as written: views of non-const matrices, a double scale,
  // whole matrices (no views)
  const auto q = random_matrix<float>(40, 16, 81), k = random_matrix<float>(50, 16, 82),
             v = random_matrix<float>(50, 8, 83);
  dynamic_matrix<float> spelled(40, 8), plain(40, 8), whole;
  rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), spelled.view(), 0.25f);
  auto qm = q;  // non-const: view() gives matrix_view<float>
  rt::scaled_dot_product_attention(qm.view(), k.view(), v.view(), plain.view(), 0.25);
  rt::scaled_dot_product_attention(q, k, v, whole, 0.25);
  CHECK(same_bits(plain, spelled));
  CHECK(same_bits(whole, spelled));
  rt::attention_weights<float> w;
  w.q.weight = random_matrix<float>(16, 16, 84, 0.3);
  w.k.weight = random_matrix<float>(16, 16, 85, 0.3);
  w.v.weight = random_matrix<float>(8, 16, 86, 0.3);
  rt::multihead_result<float> r;
  rt::attention(qm.view(), k.view(), w, rt::attention_options<float>{}, r);  // non-const views, no <float>
  CHECK(same_bits(r.concat, rt::attention(q, k, w).concat));
  dynamic_matrix<float> y, y_view;
  rt::linear(q, w.q, y);  // a whole matrix as x
  rt::linear(qm.view(), w.q, y_view);
  CHECK(same_bits(y, rt::linear(q, w.q)));
  CHECK(same_bits(y_view, y));
}
