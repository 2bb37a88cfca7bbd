// Runtime attention: masks, cross-attention, multi-head, the streaming path against the
// materialised one, threads bit for bit, and PyTorch's numbers for tutorials 001 and 003.
// Tolerances are derived from the standard model of rounding (tests/support/runtime.hpp):
// a float run must be within the bound of a double computation of the same formula.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <qkv/io/json.hpp>
#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::expect_within;
using qkv::testing::random_matrix;
using qkv::testing::reference_attention;
using qkv::testing::same_bits;
using qkv::testing::to_double;
using rt::dynamic_matrix;

namespace {

dynamic_matrix<double> zeros_like(const dynamic_matrix<double>& m) {
  return dynamic_matrix<double>(m.rows(), m.cols());
}

/// run one head through both runtime paths in F and check both against the double reference
template <class F>
void check_one_head(std::size_t T, std::size_t S, std::size_t d, std::size_t dv, bool causal,
                    const rt::mask_matrix* allowed, unsigned seed) {
  const auto q = random_matrix<F>(T, d, seed, 0.6), k = random_matrix<F>(S, d, seed + 1, 0.6),
             v = random_matrix<F>(S, dv, seed + 2);
  const F scale = rt::default_scale<F>(d);
  const std::size_t blocks = (S + rt::key_block - 1) / rt::key_block;
  const auto qd = to_double(q), kd = to_double(k), vd = to_double(v);
  const auto ref = reference_attention::compute<F>(qd, zeros_like(qd), kd, zeros_like(kd), vd, zeros_like(vd),
                                                   double(scale), causal, allowed, blocks);
  const rt::attention_mask mask{causal, allowed};
  dynamic_matrix<F> out_m(T, dv), out_s(T, dv), scores(T, S), weights(T, S);
  auto sv = scores.view();
  auto wv = weights.view();
  rt::scaled_dot_product_attention<F>(q.view(), k.view(), v.view(), out_m.view(), scale, mask, &sv, &wv);
  rt::scaled_dot_product_attention<F>(q.view(), k.view(), v.view(), out_s.view(), scale, mask);
  expect_within(scores, ref.scores, ref.scores_bound, "raw scores");
  expect_within(weights, ref.weights, ref.weights_bound, "weights");
  expect_within(out_m, ref.out, ref.out_bound, "materialised output");
  expect_within(out_s, ref.out, ref.out_bound, "streaming output");
  // streaming == materialised: each is within out_bound of the exact result, so they are within
  // twice that of each other (they round differently: running maxima, rescaling, one division)
  dynamic_matrix<double> twice = ref.out_bound;
  for (std::size_t x = 0; x < twice.size(); ++x) twice.data()[x] *= 2;
  expect_within(out_s, to_double(out_m), twice, "streaming vs materialised");
}

}  // namespace

TEST_CASE_TEMPLATE("single-head attention agrees with a double-precision reference, both paths", F, float,
                   double) {
  SUBCASE("self, 3 x 4") { check_one_head<F>(3, 3, 4, 4, false, nullptr, 1); }
  SUBCASE("cross, T = 7 queries over S = 300 keys (three key blocks)") {
    check_one_head<F>(7, 300, 24, 28, false, nullptr, 2);
  }
  SUBCASE("causal, 200 tokens (two query blocks of the streaming path)") {
    check_one_head<F>(200, 200, 64, 64, true, nullptr, 3);
  }
  SUBCASE("an allowed mask with a fully masked row") {
    rt::mask_matrix allowed(70, 130, 1);
    for (std::size_t i = 0; i < 70; ++i)
      for (std::size_t j = 0; j < 130; ++j) allowed(i, j) = (i * 7 + j * 3) % 5 != 0;
    for (std::size_t j = 0; j < 130; ++j) allowed(13, j) = 0;
    check_one_head<F>(70, 130, 16, 8, false, &allowed, 4);
  }
}

TEST_CASE("a query with every key masked gets weights 0 and output 0 on both paths") {
  const auto q = random_matrix<float>(4, 8, 5), k = random_matrix<float>(6, 8, 6),
             v = random_matrix<float>(6, 3, 7);
  rt::mask_matrix allowed(4, 6, 1);
  for (std::size_t j = 0; j < 6; ++j) allowed(2, j) = 0;
  const rt::attention_mask mask{false, &allowed};
  dynamic_matrix<float> out_m(4, 3), out_s(4, 3), scores(4, 6), weights(4, 6);
  auto sv = scores.view();
  auto wv = weights.view();
  rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), out_m.view(), 0.5f, mask, &sv, &wv);
  rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), out_s.view(), 0.5f, mask);
  for (std::size_t j = 0; j < 6; ++j) CHECK(weights(2, j) == 0.0f);
  for (std::size_t c = 0; c < 3; ++c) {
    CHECK(out_m(2, c) == 0.0f);
    CHECK(out_s(2, c) == 0.0f);
    CHECK(!std::isnan(out_m(1, c)));
  }
}

TEST_CASE("causal equals the allowed mask of its lower triangle, bit for bit") {
  const auto x = random_matrix<float>(90, 32, 8);
  rt::attention_weights<float> w;
  w.q.weight = random_matrix<float>(32, 32, 9, 0.2);
  w.k.weight = random_matrix<float>(32, 32, 10, 0.2);
  w.v.weight = random_matrix<float>(32, 32, 11, 0.2);
  rt::attention_options<float> causal;
  causal.causal = true;
  causal.heads = 2;
  rt::attention_options<float> lower = causal;
  lower.causal = false;
  lower.allowed = rt::mask_matrix(90, 90);
  for (std::size_t i = 0; i < 90; ++i)
    for (std::size_t j = 0; j <= i; ++j) (*lower.allowed)(i, j) = 1;
  for (bool keep : {true, false}) {
    causal.keep_weights = lower.keep_weights = keep;
    const auto a = rt::self_attention(x, w, causal);
    const auto b = rt::self_attention(x, w, lower);
    CHECK(a.output == b.output);
    if (keep) CHECK(a.weights == b.weights);
  }
}

TEST_CASE_TEMPLATE(
    "causal streaming skips the masked key blocks and exps with the bits of its allowed matrix", F, float,
    double) {
  // The streaming path skips, per key block, the rows that see none of its keys, and spends no
  // exp on a row's causal tail (attend_rows_tiled). An allowed matrix with the same cells goes
  // through none of that (every row, every key, e^-inf): the two must agree bit for bit. Sizes:
  // T = S = 700 (a 512-row block and a 188-row one, the diagonal inside key blocks), T < S and
  // T > S (both alignments: lower_right with T > S leaves the first rows with no key), a
  // window, key_padding, ALiBi and a bias (mask_scores' path), and 1 and 2 threads
  // (attend_heads_streaming's parts, scaled_dot_product_attention's panels).
  rt::thread_pool one(1), two(2);
  const std::size_t d = 24, dv = 16;
  const std::pair<std::size_t, std::size_t> sizes[] = {
      {700, 700}, {300, 700}, {700, 300}, {129, 129}, {1100, 1100}};
  unsigned seed = 4100;
  int cases = 0;
  for (const auto& [T, S] : sizes)
    for (auto align : {rt::causal_alignment::upper_left, rt::causal_alignment::lower_right})
      for (std::size_t window : {std::size_t(0), std::size_t(200)})
        for (int extra = 0; extra < 3; ++extra) {  // 0: none, 1: key_padding, 2: ALiBi and a bias
          CAPTURE(T);
          CAPTURE(S);
          CAPTURE(int(align));
          CAPTURE(window);
          CAPTURE(extra);
          const auto q = random_matrix<F>(T, d, seed, 0.8), k = random_matrix<F>(S, d, seed + 1, 0.8),
                     v = random_matrix<F>(S, dv, seed + 2);
          const auto bias = random_matrix<F>(T, S, seed + 3, 0.5);
          seed += 4;
          std::vector<unsigned char> padding(S, 0);
          for (std::size_t j = 0; j < S; j += 7) padding[j] = 1;
          rt::attention_mask causal{true, nullptr};
          causal.alignment = align;
          causal.window = window;
          if (extra == 1) causal.set_key_padding(padding);
          if (extra == 2) {
            causal.alibi_slope = 0.0625;
            causal.set_bias(rt::matrix_view<const F>(bias.view()));
          }
          // the same cells as an allowed matrix: key j visible for query i when j <= p, p = i +
          // offset, and p - window < j
          const std::ptrdiff_t offset = align == rt::causal_alignment::lower_right
                                            ? static_cast<std::ptrdiff_t>(S) - static_cast<std::ptrdiff_t>(T)
                                            : 0;
          rt::mask_matrix allowed(T, S);
          for (std::size_t i = 0; i < T; ++i)
            for (std::size_t j = 0; j < S; ++j) {
              const std::ptrdiff_t p = static_cast<std::ptrdiff_t>(i) + offset,
                                   jj = static_cast<std::ptrdiff_t>(j);
              allowed(i, j) = jj <= p && (window == 0 || p - static_cast<std::ptrdiff_t>(window) < jj);
            }
          rt::attention_mask explicit_mask = causal;
          explicit_mask.causal = false;
          explicit_mask.window = 0;
          explicit_mask.allowed = &allowed;
          // ALiBi's term depends on p, which the alignment sets even without causal
          dynamic_matrix<F> want(T, dv);
          rt::scaled_dot_product_attention<F>(q.view(), k.view(), v.view(), want.view(), F(0.2),
                                              explicit_mask, nullptr, nullptr, &one);
          for (rt::thread_pool* pool : {&one, &two}) {
            dynamic_matrix<F> got(T, dv);
            rt::scaled_dot_product_attention<F>(q.view(), k.view(), v.view(), got.view(), F(0.2), causal,
                                                nullptr, nullptr, pool);
            CHECK(qkv::testing::same_bits(got, want));
            // per-block packing too (no panels): attend_rows_streaming over stream_split's blocks
            dynamic_matrix<F> blocks(T, dv);
            const rt::attention_mask resolved = causal.resolved(T, S);
            for (std::size_t i0 = 0; i0 < T; i0 += 384)
              rt::detail::attend_rows_streaming<F>(q.view(), k.view(), v.view(), blocks.view(), F(0.2),
                                                   resolved, i0, std::min(T, i0 + 384));
            CHECK(qkv::testing::same_bits(blocks, want));
          }
          ++cases;
        }
  CHECK(cases == 60);
}

TEST_CASE("multi-head attention is each head's attention on its columns, concatenated, then projected") {
  const std::size_t T = 10, S = 13, d = 12, H = 3;
  const auto x = random_matrix<double>(T, d, 20), c = random_matrix<double>(S, 8, 21);
  rt::attention_weights<double> w;
  w.q.weight = random_matrix<double>(12, d, 22, 0.3);
  w.k.weight = random_matrix<double>(12, 8, 23, 0.3);
  w.v.weight = random_matrix<double>(9, 8, 24, 0.3);
  w.q.bias = {0.1, -0.2, 0.3, 0, 0, 0, 0.5, 0.5, 0.5, -1, 1, 0};
  w.o = rt::linear_weights<double>{random_matrix<double>(5, 9, 25, 0.3), {1, 2, 3, 4, 5}};
  rt::attention_options<double> opt;
  opt.keep_weights = true;
  opt.heads = H;
  const auto r = rt::attention(x, c, w, opt);
  REQUIRE(r.scores.size() == H);
  CHECK(r.queries.rows() == T);
  CHECK(r.keys.rows() == S);
  CHECK(r.concat.cols() == 9);
  CHECK(r.output.cols() == 5);
  CHECK(r.scale == 1 / std::sqrt(4.0));
  for (std::size_t h = 0; h < H; ++h) {
    // head h alone: columns 4h .. 4h+3 of Q and K, 3h .. 3h+2 of V
    const auto q = copy_of(rt::column_block(r.queries.view(), 4 * h, 4));
    const auto k = copy_of(rt::column_block(r.keys.view(), 4 * h, 4));
    const auto v = copy_of(rt::column_block(r.values.view(), 3 * h, 3));
    dynamic_matrix<double> out(T, 3), s(T, S), wts(T, S);
    auto sv = s.view();
    auto wv = wts.view();
    rt::scaled_dot_product_attention<double>(q.view(), k.view(), v.view(), out.view(), r.scale, {}, &sv, &wv);
    CHECK(s == r.scores[h]);
    CHECK(wts == r.weights[h]);
    CHECK(out == r.context[h]);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < 3; ++j) CHECK(r.concat(i, 3 * h + j) == out(i, j));
  }
  CHECK(r.output == rt::linear(r.concat, *w.o));
}

TEST_CASE("attention with 1 and 2 threads is identical bit for bit, both paths") {
  const auto x = random_matrix<float>(300, 96, 30);
  rt::attention_weights<float> w;
  for (auto* l : {&w.q, &w.k, &w.v}) {
    l->weight = random_matrix<float>(96, 96, 31, 0.1);
    l->bias.assign(96, 0.01f);
  }
  w.o = rt::linear_weights<float>{random_matrix<float>(96, 96, 32, 0.1), {}};
  rt::thread_pool one(1), two(2);
  for (bool keep : {true, false}) {
    rt::attention_options<float> opt;
    opt.heads = 6;
    opt.keep_weights = keep;
    const auto a = rt::attention(x, x, w, opt, &one);
    const auto b = rt::attention(x, x, w, opt, &two);
    CHECK(a.output == b.output);
    CHECK(a.weights == b.weights);
    CHECK(a.concat == b.concat);
  }
}

TEST_CASE("the streaming path never allocates a T x S matrix") {
  // its per-thread space is one stream_query_block x key_block tile, whatever T and S
  const auto q = random_matrix<float>(2000, 16, 40), k = random_matrix<float>(3000, 16, 41),
             v = random_matrix<float>(3000, 16, 42);
  dynamic_matrix<float> out(2000, 16);
  rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), out.view(), 0.25f, {}, nullptr,
                                          nullptr, nullptr);
  CHECK(rt::detail::streaming_space<float>::get().tile.size() == rt::stream_query_block * rt::key_block);
  CHECK(rt::stream_query_block * rt::key_block < 2000u * 3000u / 50);
}

TEST_CASE("the streaming split covers every query row once, in even blocks shared out over the threads") {
  struct want {
    std::size_t rows, heads, threads, blocks;
  };
  // W4 (2048 rows, one head): 4 blocks of 512 on 1, 2 and 4 threads (was 6 of 384, the last
  // 128 rows: on 2 threads 1152 rows against 896); 8 threads: 8 of 256; W5 (1024 rows, 12 heads):
  // 2 blocks per head; 1500 rows on 2 threads: 3 blocks would leave one thread two of them, so
  // 4 of 375; 100 rows on 8 threads: blocks of at least 128 rows, so one; 5000 rows of 3 heads
  // on 2 threads: 10 blocks per head (30 tasks)
  for (const want& w : {want{2048, 1, 1, 4}, want{2048, 1, 2, 4}, want{2048, 1, 4, 4}, want{2048, 1, 8, 8},
                        want{1024, 12, 2, 2}, want{1500, 1, 2, 4}, want{1500, 1, 1, 3}, want{100, 1, 8, 1},
                        want{1, 1, 2, 1}, want{5000, 3, 2, 10}}) {
    CAPTURE(w.rows);
    CAPTURE(w.threads);
    const rt::stream_split split(w.rows, w.heads, w.threads);
    CHECK(split.blocks == w.blocks);
    CHECK(split.begin(0) == 0);
    CHECK(split.end(split.blocks - 1) == w.rows);
    for (std::size_t b = 0; b < split.blocks; ++b) {
      CHECK(split.end(b) - split.begin(b) <= rt::stream_query_block);
      CHECK(split.end(b) - split.begin(b) + 1 >=
            (w.rows + split.blocks - 1) / split.blocks);  // within one row
      if (b + 1 < split.blocks) CHECK(split.end(b) == split.begin(b + 1));
    }
  }
  CHECK(rt::stream_split(0, 1, 2).blocks == 0);
}

TEST_CASE_TEMPLATE("a streaming row's result does not depend on the query block it is computed in", F, float,
                   double) {
  // the thread-count bit-identity rests on this: the split (above) changes with the threads.
  // 700 queries, 300 keys (3 key blocks, the last partial), causal and not: one block of 512
  // and one of 188 against blocks of 384, 100, 13 (partial micro-kernel tiles) and 5 rows (the
  // few-rows product): the same bits
  const auto q = random_matrix<F>(700, 24, 60, 0.6), k = random_matrix<F>(300, 24, 61, 0.6),
             v = random_matrix<F>(300, 20, 62);
  for (bool causal : {false, true}) {
    const rt::attention_mask mask{causal, nullptr};
    dynamic_matrix<F> whole(700, 20);
    for (std::size_t i0 = 0; i0 < 700; i0 += 512)
      rt::detail::attend_rows_streaming<F>(q.view(), k.view(), v.view(), whole.view(), F(0.2), mask, i0,
                                           std::min<std::size_t>(700, i0 + 512));
    for (std::size_t rows : {384u, 100u, 13u, 5u}) {
      CAPTURE(rows);
      dynamic_matrix<F> parts(700, 20);
      for (std::size_t i0 = 0; i0 < 700; i0 += rows)
        rt::detail::attend_rows_streaming<F>(q.view(), k.view(), v.view(), parts.view(), F(0.2), mask, i0,
                                             std::min<std::size_t>(700, i0 + rows));
      CHECK(parts == whole);
    }
  }
}

TEST_CASE_TEMPLATE(
    "keys and values packed once per head give the bits of packing them per query block, any threads", F,
    float, double) {
  // attend_heads_streaming packs each head's k and v once per task (kv_panels) and shares them
  // between the task's query blocks: one task per head (1 thread; 3 heads on 3 threads), two per
  // head (3 heads on 2 threads: 300 rows each), or no panels at all (a panel limit of 0). Each must give the bits of
  // attend_rows_streaming on every head alone with k and v packed per query block. 600 queries
  // (two blocks), 300 keys (three key blocks, the last partial); depth 24, and 300 (deeper than
  // one packed depth block, kc = 256); causal, a window, and no mask
  for (const std::size_t d : {24u, 300u}) {
    const std::size_t H = 3, T = 600, S = 300, dv = 20;
    const auto q = random_matrix<F>(T, H * d, 70, 0.6), k = random_matrix<F>(S, H * d, 71, 0.6),
               v = random_matrix<F>(S, H * dv, 72);
    const F scale = rt::default_scale<F>(d);
    for (int m = 0; m < 3; ++m) {
      CAPTURE(d);
      CAPTURE(m);
      rt::attention_mask mask{m == 1, nullptr};
      if (m == 2) mask.window = 150;
      dynamic_matrix<F> want(T, H * dv);
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t i0 = 0; i0 < T; i0 += rt::stream_query_block)
          rt::detail::attend_rows_streaming<F>(
              rt::column_block(q.view(), h * d, d), rt::column_block(k.view(), h * d, d),
              rt::column_block(v.view(), h * dv, dv), rt::column_block(want.view(), h * dv, dv), scale, mask,
              i0, std::min(T, i0 + rt::stream_query_block));
      for (const std::size_t threads : {1u, 2u, 3u})
        for (const std::size_t limit : {rt::detail::kv_panel_limit, std::size_t(0)}) {
          CAPTURE(threads);
          CAPTURE(limit);
          rt::thread_pool pool(threads);
          dynamic_matrix<F> got(T, H * dv);
          std::vector<int> rows(H * T, 0);  // after() sees every row of every head once
          std::mutex seen;
          rt::detail::attend_heads_streaming<F>(
              q.view(), k.view(), v.view(), got.view(), H, scale, mask, &pool,
              [&](std::size_t h, std::size_t i0, std::size_t i1) {
                const std::lock_guard lock(seen);
                for (std::size_t i = i0; i < i1; ++i) ++rows[h * T + i];
              },
              limit);
          CHECK(got == want);
          CHECK(std::count(rows.begin(), rows.end(), 1) == std::ptrdiff_t(H * T));
        }
    }
  }
}

TEST_CASE_TEMPLATE("the streaming path writes every output element: what the output held before never shows",
                   F, float, double) {
  // attend_rows_tiled does not zero its output rows first: the first visited key block's
  // product writes them (its chains from 0, the bits of accumulating onto zeros) and that
  // block's rescale is skipped. So an output filled with NaN, +inf or a number beforehand must
  // end with the bits of one filled with zeros. 300 queries, 300 keys (three key blocks, the
  // last partial), depth 24: no mask; causal; lower_right with 500 queries on 300 keys (the
  // first 200 rows see no key: output 0); a window of 150 (whole key blocks skipped); a row
  // allowed no key; and query blocks that visit no key block at all (rows 0..100 of the
  // lower_right case). Panels (attend_heads_streaming) and per-block packing, 1 and 2 threads
  // (2 threads: two parts of 150 rows, whose causal key range stops inside key block 1)
  for (int m = 0; m < 5; ++m) {
    CAPTURE(m);
    const std::size_t T = m == 2 ? 500 : 300, S = 300, d = 24, dv = 40;
    const auto q = random_matrix<F>(T, d, 80, 0.6), k = random_matrix<F>(S, d, 81, 0.6),
               v = random_matrix<F>(S, dv, 82);
    rt::mask_matrix allowed(T, S);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < S; ++j) allowed(i, j) = i == 7 ? 0 : 1;
    rt::attention_mask mask{m == 1 || m == 2, m == 4 ? &allowed : nullptr};
    if (m == 2) mask.alignment = rt::causal_alignment::lower_right;
    if (m == 3) mask.window = 150;
    mask = mask.resolved(T, S);
    const F scale = rt::default_scale<F>(d);
    const auto run = [&](F fill, std::size_t threads, std::size_t limit, std::size_t rows) {
      dynamic_matrix<F> out(T, dv);
      std::fill(out.data(), out.data() + out.size(), fill);
      if (rows == 0) {
        rt::thread_pool pool(threads);
        rt::detail::attend_heads_streaming<F>(
            q.view(), k.view(), v.view(), out.view(), 1, scale, mask, &pool,
            [](std::size_t, std::size_t, std::size_t) {}, limit);
      } else {
        for (std::size_t i0 = 0; i0 < T; i0 += rows)
          rt::detail::attend_rows_streaming<F>(q.view(), k.view(), v.view(), out.view(), scale, mask, i0,
                                               std::min(T, i0 + rows));
      }
      return out;
    };
    const auto want = run(F(0), 1, rt::detail::kv_panel_limit, 0);
    if (m == 2)  // rows before position 0 see no key: 0
      for (std::size_t c = 0; c < dv; ++c) CHECK(want(0, c) == F(0));
    if (m == 4)
      for (std::size_t c = 0; c < dv; ++c) CHECK(want(7, c) == F(0));
    for (const F fill : {std::numeric_limits<F>::quiet_NaN(), std::numeric_limits<F>::infinity(), F(-3)})
      for (const std::size_t threads : {1u, 2u})
        for (const std::size_t limit : {rt::detail::kv_panel_limit, std::size_t(0)})
          for (const std::size_t rows : {0u, 100u}) {
            CAPTURE(fill);
            CAPTURE(threads);
            CAPTURE(limit);
            CAPTURE(rows);
            CHECK(run(fill, threads, limit, rows) == want);
          }
  }
}

TEST_CASE_TEMPLATE(
    "a causal query block that stops inside a key block reads that block's packed panels right", F, float,
    double) {
  // attend_heads_streaming packs whole key blocks (pack_kv_block: min(key_block, S - j0) keys)
  // while a causal query block visits keys only up to its last row's limit, which may stop
  // inside a block (rows 0..150: keys 0..150, block 1 is keys 128..256). Until this case was
  // tested, the product read such a block's panels as if they held only the visited keys: v's
  // second panel of NR columns and kᵀ's second depth block (d > kc = 256) from the wrong
  // offsets (errors of 0.2-3 in the output; W4/W5 are not causal). d = 300, d_v = 40 (two
  // panels with NR = 16 or 32): panels against per-block packing, bit for bit
  const std::size_t T = 300, S = 300, d = 300, dv = 40;
  const auto q = random_matrix<F>(T, d, 90, 0.6), k = random_matrix<F>(S, d, 91, 0.6),
             v = random_matrix<F>(S, dv, 92);
  const rt::attention_mask mask{true, nullptr};
  const rt::detail::kv_panel_layout<F> lay(S, d, dv);
  rt::aligned_vector<F> space(lay.size());
  for (std::size_t b = 0; b < lay.blocks; ++b)
    rt::detail::pack_kv_block<F>(k.view(), v.view(), b, lay, space.data());
  const auto panels = lay.at(space.data());
  for (const std::size_t i1 : {150u, 200u, 300u}) {
    CAPTURE(i1);
    dynamic_matrix<F> got(T, dv), want(T, dv);
    rt::detail::attend_rows_streaming<F>(q.view(), k.view(), v.view(), got.view(), F(0.05), mask, 0, i1,
                                         &panels);
    rt::detail::attend_rows_streaming<F>(q.view(), k.view(), v.view(), want.view(), F(0.05), mask, 0, i1);
    CHECK(got == want);
  }
}

TEST_CASE_TEMPLATE(
    "causal streaming attention over two query blocks agrees with a double-precision reference", F, float,
    double) {
  // 600 queries on 600 keys: the streaming path's two query blocks of 300 rows; the first
  // stops inside key block 2 (keys 256..384), the case the test above pins; d_v = 40 spans
  // two panels. Both paths against the double reference, within its derived bound
  check_one_head<F>(600, 600, 24, 40, true, nullptr, 95);
}

TEST_CASE("attention names both shapes when they do not fit") {
  const auto x = random_matrix<float>(3, 4, 50);
  rt::attention_weights<float> w;
  w.q.weight = random_matrix<float>(3, 5, 51);
  w.k.weight = random_matrix<float>(3, 4, 52);
  w.v.weight = random_matrix<float>(3, 4, 53);
  CHECK_THROWS_WITH_AS((void)rt::self_attention(x, w), doctest::Contains("x is 3x4 but wq is 3x5"),
                       rt::shape_error);
  w.q.weight = random_matrix<float>(3, 4, 51);
  rt::attention_options<float> opt;
  opt.keep_weights = true;
  opt.heads = 2;
  CHECK_THROWS_WITH_AS((void)rt::self_attention(x, w, opt),
                       doctest::Contains("2 heads do not divide d_q = 3"), rt::shape_error);
  opt.heads = 1;
  opt.allowed = rt::mask_matrix(3, 2, 1);
  CHECK_THROWS_WITH_AS((void)rt::self_attention(x, w, opt),
                       doctest::Contains("allowed is 3x2 but must be 3x3"), rt::shape_error);
}

// ---------------------------------------------------------------------------------------------
// key_padding: S flags standing for the (T, S) allowed matrix allowed(i, j) = !key_padding[j]

namespace {

/// s flags: key j padded when (3 j + seed) % 4 == 0, and the first `lead` keys padded
std::vector<unsigned char> padding_pattern(std::size_t s, std::size_t lead, unsigned seed) {
  std::vector<unsigned char> pad(s);
  for (std::size_t j = 0; j < s; ++j) pad[j] = j < lead || (3 * j + seed) % 4 == 0;
  return pad;
}

/// the (t, s) allowed matrix key_padding stands for, and'ed into `base` when given
rt::mask_matrix allowed_of(const std::vector<unsigned char>& pad, std::size_t t,
                           const rt::mask_matrix* base = nullptr) {
  rt::mask_matrix m = base ? *base : rt::mask_matrix(t, pad.size(), 1);
  for (std::size_t i = 0; i < t; ++i)
    for (std::size_t j = 0; j < pad.size(); ++j)
      if (pad[j]) m(i, j) = 0;
  return m;
}

}  // namespace

TEST_CASE_TEMPLATE(
    "key_padding gives the bits of the equivalent allowed matrix on both paths, every mask and 1 and 2 "
    "threads",
    F, float, double) {
  // sizes: the few-keys streaming case (S <= 32), just above it, one key block, several key
  // blocks with two streaming query blocks of 300 rows that end inside key block 2 (keys
  // 256..383) when causal, and cross-attention. Masks: none, causal, causal with a window,
  // ALiBi, causal aligned lower_right, and an allowed matrix beside the padding. Paddings: a
  // pattern whose first two keys are padded (causal rows 0 and 1 then see no key), and every key.
  // Values: finite, or a NaN in column 0 of the last unpadded key and +inf in column 1 of key 0,
  // padded (repair_rows).
  const F nan = std::numeric_limits<F>::quiet_NaN(), inf = std::numeric_limits<F>::infinity();
  const std::size_t d = 16, dv = 8;
  rt::thread_pool one(1), two(2);
  int cases = 0, differ = 0;
  unsigned seed = 900;
  const std::pair<std::size_t, std::size_t> sizes[] = {{1, 1},     {5, 7},     {17, 32}, {40, 33},
                                                       {130, 128}, {600, 700}, {7, 300}};
  for (const auto& size : sizes)
    for (int kind = 0; kind < 6; ++kind)
      for (bool all_padded : {false, true})
        for (bool nonfinite : {false, true}) {
          const std::size_t T = size.first, S = size.second;
          CAPTURE(T);
          CAPTURE(S);
          CAPTURE(kind);
          CAPTURE(all_padded);
          CAPTURE(nonfinite);
          const auto q = random_matrix<F>(T, d, seed, 0.8), k = random_matrix<F>(S, d, seed + 1, 0.8);
          auto v = random_matrix<F>(S, dv, seed + 2);
          seed += 3;
          const auto pad = all_padded ? std::vector<unsigned char>(S, 1)
                                      : padding_pattern(S, std::min<std::size_t>(2, S), seed);
          // the NaN on the last unpadded key (if any), +inf on key 0 (padded)
          std::size_t unpadded = 0;
          for (std::size_t j = 0; j < S; ++j) unpadded += !pad[j];
          REQUIRE(pad[0]);
          if (nonfinite) {
            for (std::size_t j = S; j-- > 0;)
              if (!pad[j]) {
                v(j, 0) = nan;
                break;
              }
            v(0, 1) = inf;
          }
          rt::mask_matrix other(T, S, 1);
          for (std::size_t i = 0; i < T; ++i)
            for (std::size_t j = 0; j < S; ++j) other(i, j) = (i + 2 * j) % 7 != 3;
          const rt::mask_matrix merged = allowed_of(pad, T, kind == 5 ? &other : nullptr);
          rt::attention_mask with_padding, with_allowed;
          with_padding.causal = with_allowed.causal = kind == 1 || kind == 2 || kind == 4;
          with_padding.window = with_allowed.window = kind == 2 ? 5 : 0;
          with_padding.alibi_slope = with_allowed.alibi_slope = kind == 3 ? 0.3 : 0;
          with_padding.alignment = with_allowed.alignment =
              kind == 4 ? rt::causal_alignment::lower_right : rt::causal_alignment::upper_left;
          with_padding.set_key_padding(pad);
          if (kind == 5) with_padding.allowed = &other;
          with_allowed.allowed = &merged;
          const F scale = rt::default_scale<F>(d);
          for (rt::thread_pool* pool : {&one, &two}) {
            dynamic_matrix<F> out_p(T, dv), out_a(T, dv), sc_p(T, S), sc_a(T, S), w_p(T, S), w_a(T, S);
            auto scp = sc_p.view(), sca = sc_a.view(), wp = w_p.view(), wa = w_a.view();
            rt::scaled_dot_product_attention<F>(q.view(), k.view(), v.view(), out_p.view(), scale,
                                                with_padding, &scp, &wp, pool);
            rt::scaled_dot_product_attention<F>(q.view(), k.view(), v.view(), out_a.view(), scale,
                                                with_allowed, &sca, &wa, pool);
            differ += !same_bits(out_p, out_a) + !same_bits(w_p, w_a) + !same_bits(sc_p, sc_a);
            // a padded key's weight is exactly 0
            for (std::size_t i = 0; i < T; ++i)
              for (std::size_t j = 0; j < S; ++j)
                if (pad[j]) differ += w_p(i, j) != F(0);
            dynamic_matrix<F> st_p(T, dv), st_a(T, dv);
            rt::scaled_dot_product_attention<F>(q.view(), k.view(), v.view(), st_p.view(), scale,
                                                with_padding, nullptr, nullptr, pool);
            rt::scaled_dot_product_attention<F>(q.view(), k.view(), v.view(), st_a.view(), scale,
                                                with_allowed, nullptr, nullptr, pool);
            differ += !same_bits(st_p, st_a);
            for (const auto* out : {&out_p, &st_p})
              for (std::size_t i = 0; i < T; ++i) {
                const bool masked_row = unpadded == 0 || (with_padding.causal && kind != 4 && i < 2);
                if (masked_row) {  // no key to attend to: 0, whatever the values hold
                  for (std::size_t c = 0; c < dv; ++c) differ += (*out)(i, c) != F(0);
                  continue;
                }
                // the +inf sits on a padded key: it never reaches an output
                differ += !std::isfinite((*out)(i, 1));
                // without causal or window every query sees the NaN's key
                if (nonfinite && unpadded > 0 && (kind == 0 || kind == 3))
                  differ += !std::isnan((*out)(i, 0));
                if (!nonfinite) differ += !std::isfinite((*out)(i, 0));
              }
            ++cases;
          }
        }
  CHECK(cases == 7 * 6 * 2 * 2 * 2);
  CHECK(differ == 0);
}

TEST_CASE(
    "multi-head attention() with key_padding equals it with the allowed matrix, bit for bit: GQA, cross, "
    "rope, ALiBi, bias") {
  rt::thread_pool one(1), two(2);
  const std::size_t d_in = 24, dq = 32, dv = 32;
  for (int config = 0; config < 4; ++config) {
    // 0: self, causal; 1: cross (45 queries, 70 keys), GQA 4 heads over 2, rope; 2: cross,
    // ALiBi, a bias per head, window 9, causal lower_right; 3: self, 300 tokens, multi-query,
    // an allowed matrix beside the padding
    const std::size_t T = config == 3 ? 300 : 45, S = config == 1 || config == 2 ? 70 : T;
    const auto x = random_matrix<float>(T, d_in, 1000 + unsigned(config));
    auto c = config == 1 || config == 2 ? random_matrix<float>(S, d_in, 1010 + unsigned(config)) : x;
    rt::attention_weights<float> w;
    const std::size_t kv_heads = config == 1 ? 2 : config == 3 ? 1 : 0, heads = config == 0 ? 2 : 4;
    const std::size_t dk = kv_heads ? dq / heads * kv_heads : dq, dvk = kv_heads ? dv / heads * kv_heads : dv;
    w.q = {random_matrix<float>(dq, d_in, 1020, 0.3), std::vector<float>(dq, 0.05f)};
    w.k = {random_matrix<float>(dk, d_in, 1021, 0.3), {}};
    w.v = {random_matrix<float>(dvk, d_in, 1022, 0.3), {}};
    w.o = rt::linear_weights<float>{random_matrix<float>(16, dv / heads * heads, 1023, 0.3), {}};
    const auto pad = padding_pattern(S, 2, unsigned(config));
    // a NaN token at a padded key (cross-attention: in the context): its key and value rows are
    // NaN, and no query may see them
    const std::size_t nan_row = 1;
    REQUIRE(pad[nan_row]);
    if (config == 1 || config == 2) c(nan_row, 3) = std::numeric_limits<float>::quiet_NaN();
    rt::attention_options<float> opt;
    opt.keep_weights = true;
    opt.heads = heads;
    opt.kv_heads = kv_heads;
    opt.causal = config == 0 || config == 2;
    if (config == 1) opt.rope = rt::rope_options{};
    if (config == 2) {
      opt.alibi = true;
      opt.window = 9;
      opt.alignment = rt::causal_alignment::lower_right;
      opt.bias = random_matrix<float>(heads * T, S, 1030, 0.5);
    }
    rt::mask_matrix other(T, S, 1);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < S; ++j) other(i, j) = (5 * i + j) % 9 != 2;
    rt::attention_options<float> by_allowed = opt, by_padding = opt;
    by_allowed.allowed = allowed_of(pad, T, config == 3 ? &other : nullptr);
    by_padding.key_padding = pad;
    if (config == 3) by_padding.allowed = other;
    for (bool keep : {true, false})
      for (rt::thread_pool* pool : {&one, &two}) {
        CAPTURE(config);
        CAPTURE(keep);
        CAPTURE(pool->size());
        by_allowed.keep_weights = by_padding.keep_weights = keep;
        const auto a = rt::attention(x, c, w, by_allowed, pool);
        const auto b = rt::attention(x, c, w, by_padding, pool);
        CHECK(same_bits(a.concat, b.concat));
        CHECK(same_bits(a.output, b.output));
        REQUIRE(a.weights.size() == b.weights.size());
        for (std::size_t h = 0; h < a.weights.size(); ++h) {
          CHECK(same_bits(a.weights[h], b.weights[h]));
          for (std::size_t i = 0; i < T; ++i)
            for (std::size_t j = 0; j < S; ++j)
              if (pad[j]) CHECK(b.weights[h](i, j) == 0.0f);
        }
        // the NaN token is a padded key: no output sees it
        for (std::size_t i = 0; i < T; ++i)
          for (std::size_t o = 0; o < b.output.cols(); ++o) CHECK(std::isfinite(b.output(i, o)));
      }
    // the core's call shape (self_attention.hpp): its scaled scores are -inf at the padded keys
    if (config == 0) {
      by_allowed.keep_weights = by_padding.keep_weights = true;
      const auto a = rt::cross_attention(x, c, w.q.weight, w.k.weight, w.v.weight, rt::out_in, by_allowed);
      const auto b = rt::cross_attention(x, c, w.q.weight, w.k.weight, w.v.weight, rt::out_in, by_padding);
      CHECK(same_bits(a.scaled_scores, b.scaled_scores));
      CHECK(same_bits(a.context, b.context));
      for (std::size_t r = 0; r < b.scaled_scores.rows(); ++r)
        CHECK(b.scaled_scores(r, nan_row) == -std::numeric_limits<float>::infinity());
    }
  }
}

TEST_CASE("key_padding of the wrong length is refused naming both sizes") {
  const auto q = random_matrix<float>(4, 8, 60), k = random_matrix<float>(6, 8, 61),
             v = random_matrix<float>(6, 3, 62);
  dynamic_matrix<float> out(4, 3);
  const std::vector<unsigned char> five(5, 0);
  rt::attention_mask mask;
  mask.set_key_padding(five);
  CHECK_THROWS_WITH_AS(
      rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), out.view(), 0.5f, mask),
      "attention: key_padding has 5 flags but there are 6 keys (k is 6x8)", rt::shape_error);
  mask.key_padding = nullptr;  // a size without its flags
  CHECK_THROWS_WITH_AS(
      rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), out.view(), 0.5f, mask),
      "attention: key_padding is null but key_padding_size is 5 (set_key_padding sets both)",
      rt::shape_error);
  const auto x = random_matrix<float>(3, 4, 63), c = random_matrix<float>(6, 4, 64);
  rt::attention_weights<float> w;
  w.q.weight = random_matrix<float>(4, 4, 65);
  w.k.weight = random_matrix<float>(4, 4, 66);
  w.v.weight = random_matrix<float>(4, 4, 67);
  rt::attention_options<float> opt;
  opt.key_padding = five;
  for (bool keep : {true, false}) {
    opt.keep_weights = keep;
    CHECK_THROWS_WITH_AS((void)rt::attention(x, c, w, opt),
                         "attention: key_padding has 5 flags but there are 6 keys (context is 6x4)",
                         rt::shape_error);
  }
  opt.key_padding = std::vector<unsigned char>(6, 0);
  CHECK(rt::attention(x, c, w, opt).output.rows() == 3);
}

// ---------------------------------------------------------------------------------------------
// PyTorch's numbers

namespace {

struct reference {
  qkv::io::json_document doc;
  explicit reference(const std::string& name)
      : doc(qkv::io::json_document::load(std::string(QKV_TEST_DATA) + "/reference/" + name)) {}
  /// a tensor of `section`, reshaped to rows x cols (a [1, R, C] or [C] tensor fits)
  template <class T>
  dynamic_matrix<T> get(const std::string& section, const std::string& name, std::size_t rows,
                        std::size_t cols) const {
    const auto t = qkv::io::read_tensor<T>(doc, section + "." + name, doc.json().at(section).at(name));
    REQUIRE(t.data.size() == rows * cols);
    dynamic_matrix<T> m(rows, cols);
    for (std::size_t k = 0; k < t.data.size(); ++k) m.data()[k] = t.data[k];
    return m;
  }
  template <class T>
  std::vector<T> vec(const std::string& section, const std::string& name) const {
    return qkv::io::read_tensor<T>(doc, section + "." + name, doc.json().at(section).at(name)).data;
  }
};

}  // namespace

TEST_CASE("tutorial 003: one BERT head (9 tokens, 768 -> 64 with bias, scale 1/8) agrees with PyTorch") {
  const reference ref("003_bert_attention_head_linear_init.json");
  const auto x = ref.get<float>("float32", "seq_embedding", 9, 768);
  rt::attention_weights<float> w;
  w.q = {ref.get<float>("float32", "query_weight", 64, 768), ref.vec<float>("float32", "query_bias")};
  w.k = {ref.get<float>("float32", "key_weight", 64, 768), ref.vec<float>("float32", "key_bias")};
  w.v = {ref.get<float>("float32", "value_weight", 64, 768), ref.vec<float>("float32", "value_bias")};
  rt::attention_options<float> opt;  // default scale 1/sqrt(64) = 1/8, exact
  for (bool keep : {true, false}) {
    opt.keep_weights = keep;
    const auto r = rt::self_attention(x, w, opt);
    // bounds: projections in float from exact inputs (gamma(768) sum |x||w| and the bias add)
    dynamic_matrix<double> q, dq, k, dk, v, dv;
    const double u = qkv::testing::unit<float>, g = qkv::testing::gamma_n<float>(768);
    qkv::testing::reference_linear(to_double(x), to_double(w.q.weight),
                                   std::vector<double>(w.q.bias.begin(), w.q.bias.end()), g, u, q, dq);
    qkv::testing::reference_linear(to_double(x), to_double(w.k.weight),
                                   std::vector<double>(w.k.bias.begin(), w.k.bias.end()), g, u, k, dk);
    qkv::testing::reference_linear(to_double(x), to_double(w.v.weight),
                                   std::vector<double>(w.v.bias.begin(), w.v.bias.end()), g, u, v, dv);
    const auto a = reference_attention::compute<float>(q, dq, k, dk, v, dv, 0.125, false, nullptr, 1);
    // PyTorch float64 is the exact answer to within 1e-15; our float run is within the bound
    expect_within(r.queries, ref.get<double>("float64", "query", 9, 64), dq, "queries vs PyTorch float64");
    expect_within(r.output, ref.get<double>("float64", "output", 9, 64), a.out_bound,
                  "output vs PyTorch float64");
    if (keep) {
      // PyTorch's scores are q kᵀ / 8; ours are raw: times 1/8 is exact
      auto scaled = to_double(r.scores[0]);
      for (std::size_t x2 = 0; x2 < scaled.size(); ++x2) scaled.data()[x2] /= 8;
      auto sb = a.scores_bound;
      for (std::size_t x2 = 0; x2 < sb.size(); ++x2) sb.data()[x2] /= 8;
      expect_within(scaled, ref.get<double>("float64", "scores", 9, 9), sb, "scores vs PyTorch float64");
      expect_within(r.weights[0], ref.get<double>("float64", "weights", 9, 9), a.weights_bound,
                    "weights vs PyTorch float64");
    }
  }
}

TEST_CASE("tutorial 001: three heads and cross-attention agree with PyTorch") {
  const reference ref("001_self_attention_from_scratch.json");
  const auto x = ref.get<float>("float32", "embedded_sentence", 6, 16);
  SUBCASE("single head, scale 1/sqrt(24)") {
    rt::attention_weights<float> w;
    w.q.weight = ref.get<float>("float32", "W_query", 24, 16);
    w.k.weight = ref.get<float>("float32", "W_key", 24, 16);
    w.v.weight = ref.get<float>("float32", "W_value", 28, 16);
    const auto r = rt::self_attention(x, w, {.keep_weights = true});
    // PyTorch divides by sqrt(24) in float32; our scale is 1/sqrt(24) in float32 (2 roundings
    // more than PyTorch's one): a relative 3u on the scaled scores, inside the softmax bound
    dynamic_matrix<double> q, dq, k, dk, v, dv;
    const double u = qkv::testing::unit<float>, g = qkv::testing::gamma_n<float>(16);
    qkv::testing::reference_linear(to_double(x), to_double(w.q.weight), {}, g, u, q, dq);
    qkv::testing::reference_linear(to_double(x), to_double(w.k.weight), {}, g, u, k, dk);
    qkv::testing::reference_linear(to_double(x), to_double(w.v.weight), {}, g, u, v, dv);
    const auto a =
        reference_attention::compute<float>(q, dq, k, dk, v, dv, 1 / std::sqrt(24.0), false, nullptr, 3);
    expect_within(r.scores[0], ref.get<double>("float64", "omega", 6, 6), a.scores_bound, "omega");
    expect_within(r.weights[0], ref.get<double>("float64", "attention_weights", 6, 6), a.weights_bound,
                  "attention_weights");
    expect_within(r.output, ref.get<double>("float64", "context", 6, 28), a.out_bound, "context");
  }
  SUBCASE("three heads: per-head weights stacked into one projection") {
    // multihead_W_query is (3, 24, 16): stacked it is (72, 16), head h in rows 24h .. 24h+23
    rt::attention_weights<float> w;
    w.q.weight = ref.get<float>("float32", "multihead_W_query", 72, 16);
    w.k.weight = ref.get<float>("float32", "multihead_W_key", 72, 16);
    w.v.weight = ref.get<float>("float32", "multihead_W_value", 84, 16);
    rt::attention_options<float> opt;
    opt.keep_weights = true;
    opt.heads = 3;
    const auto r = rt::self_attention(x, w, opt);
    const auto omega = ref.get<double>("float64", "multihead_omega", 18, 6);
    const auto weights = ref.get<double>("float64", "multihead_attention_weights", 18, 6);
    const auto concat = ref.get<double>("float64", "multihead_context_concat", 6, 84);
    dynamic_matrix<double> q, dq, k, dk, v, dv;
    const double u = qkv::testing::unit<float>, g = qkv::testing::gamma_n<float>(16);
    qkv::testing::reference_linear(to_double(x), to_double(w.q.weight), {}, g, u, q, dq);
    qkv::testing::reference_linear(to_double(x), to_double(w.k.weight), {}, g, u, k, dk);
    qkv::testing::reference_linear(to_double(x), to_double(w.v.weight), {}, g, u, v, dv);
    for (std::size_t h = 0; h < 3; ++h) {
      CAPTURE(h);
      auto head = [&](const dynamic_matrix<double>& m, std::size_t width) {
        return copy_of(rt::column_block(m.view(), h * width, width));
      };
      const auto a = reference_attention::compute<float>(head(q, 24), head(dq, 24), head(k, 24), head(dk, 24),
                                                         head(v, 28), head(dv, 28), 1 / std::sqrt(24.0),
                                                         false, nullptr, 3);
      expect_within(r.scores[h], copy_of(rt::row_block(omega.view(), 6 * h, 6)), a.scores_bound,
                    "multihead_omega");
      expect_within(r.weights[h], copy_of(rt::row_block(weights.view(), 6 * h, 6)), a.weights_bound,
                    "multihead_attention_weights");
      expect_within(r.context[h], head(concat, 28), a.out_bound, "multihead_context");
    }
  }
  SUBCASE("cross-attention: query 2 over the 8 tokens of a second sequence") {
    const auto x2 = ref.get<float>("float32", "embedded_sentence_2", 8, 16);
    rt::attention_weights<float> w;
    w.q.weight = ref.get<float>("float32", "W_query", 24, 16);
    w.k.weight = ref.get<float>("float32", "W_key", 24, 16);
    w.v.weight = ref.get<float>("float32", "W_value", 28, 16);
    const auto r = rt::attention(x, x2, w, {.keep_weights = true});
    CHECK(r.weights[0].rows() == 6);
    CHECK(r.weights[0].cols() == 8);
    dynamic_matrix<double> q, dq, k, dk, v, dv;
    const double u = qkv::testing::unit<float>, g = qkv::testing::gamma_n<float>(16);
    qkv::testing::reference_linear(to_double(x), to_double(w.q.weight), {}, g, u, q, dq);
    qkv::testing::reference_linear(to_double(x2), to_double(w.k.weight), {}, g, u, k, dk);
    qkv::testing::reference_linear(to_double(x2), to_double(w.v.weight), {}, g, u, v, dv);
    const auto a =
        reference_attention::compute<float>(q, dq, k, dk, v, dv, 1 / std::sqrt(24.0), false, nullptr, 3);
    expect_within(copy_of(rt::row_block(r.weights[0].view(), 1, 1)),
                  ref.get<double>("float64", "cross_attention_weights_2", 1, 8),
                  copy_of(rt::row_block(a.weights_bound.view(), 1, 1)), "cross_attention_weights_2");
    expect_within(copy_of(rt::row_block(r.output.view(), 1, 1)),
                  ref.get<double>("float64", "cross_context_vector_2", 1, 28),
                  copy_of(rt::row_block(a.out_bound.view(), 1, 1)), "cross_context_vector_2");
  }
}

TEST_CASE_TEMPLATE("the streaming path's few-keys case equals its tiled case bit for bit, masks included", F,
                   float, double) {
  // attend_rows_small (s <= small_keys, d <= small_depth) against attend_rows_tiled: the same
  // chains, the same exp sums, one key block; a row with every key masked gives 0 on both
  int differ = 0, cases = 0;
  unsigned seed = 300;
  for (std::size_t T : {1, 3, 6, 17})
    for (std::size_t S : {1, 3, 8, 9, 17, 32})
      for (std::size_t d : {1, 3, 24, 64})
        for (std::size_t dv : {1, 3, 8, 28})
          for (int kind = 0; kind < 3; ++kind) {
            const auto q = random_matrix<F>(T, d, seed++, 2), k = random_matrix<F>(S, d, seed++, 2),
                       v = random_matrix<F>(S, dv, seed++);
            rt::mask_matrix allowed(T, S, 1);
            for (std::size_t i = 0; i < T; ++i)
              for (std::size_t j = 0; j < S; ++j) allowed(i, j) = (i * 7 + j * 3) % 4 != 0;
            if (T > 1)
              for (std::size_t j = 0; j < S; ++j) allowed(1, j) = 0;  // row 1: every key masked
            rt::attention_mask mask;
            mask.causal = kind == 1;
            mask.allowed = kind == 2 ? &allowed : nullptr;
            dynamic_matrix<F> small(T, dv), tiled(T, dv);
            rt::detail::attend_rows_small<F>(q.view(), k.view(), v.view(), small.view(), F(0.3), mask, 0, T);
            rt::detail::attend_rows_tiled<F>(q.view(), k.view(), v.view(), tiled.view(), F(0.3), mask, 0, T);
            differ += !(small == tiled);
            ++cases;
            if (kind == 2 && T > 1)
              for (std::size_t j = 0; j < dv; ++j) CHECK(small(1, j) == F(0));
          }
  CHECK(cases == 1152);
  CHECK(differ == 0);
}

TEST_CASE("attention with its weights packed once equals attention with the weights, bit for bit") {
  // tutorial 001's shapes (no bias) and a small BERT-like layer (bias, heads, output projection)
  for (int layer = 0; layer < 2; ++layer) {
    const std::size_t T = layer == 0 ? 6 : 40, d_in = layer == 0 ? 16 : 96, dq = layer == 0 ? 24 : 96,
                      dv = layer == 0 ? 28 : 96, H = layer == 0 ? 1 : 4;
    const auto x = random_matrix<float>(T, d_in, 400 + layer);
    rt::attention_weights<float> w;
    w.q.weight = random_matrix<float>(dq, d_in, 410, 0.3);
    w.k.weight = random_matrix<float>(dq, d_in, 411, 0.3);
    w.v.weight = random_matrix<float>(dv, d_in, 412, 0.3);
    if (layer == 1) {
      for (auto* l : {&w.q, &w.k, &w.v}) l->bias.assign(l->out_features(), 0.05f);
      w.o = rt::linear_weights<float>{random_matrix<float>(dv, dv, 413, 0.1), std::vector<float>(dv, -0.1f)};
    }
    const rt::packed_attention_weights<float> packed(w);
    for (bool keep : {true, false}) {
      CAPTURE(layer);
      CAPTURE(keep);
      rt::attention_options<float> opt;
      opt.heads = H;
      opt.keep_weights = keep;
      opt.causal = layer == 1;
      const auto a = rt::attention(x, x, w, opt);
      const auto b = rt::attention(x, x, packed, opt);
      CHECK(a.queries == b.queries);
      CHECK(a.keys == b.keys);
      CHECK(a.values == b.values);
      CHECK(a.weights == b.weights);
      CHECK(a.concat == b.concat);
      CHECK(a.output == b.output);
    }
  }
  // a packed layer keeps the source's shape for its messages
  rt::attention_weights<float> w;
  w.q.weight = random_matrix<float>(3, 5, 420);
  w.k.weight = random_matrix<float>(3, 4, 421);
  w.v.weight = random_matrix<float>(3, 4, 422);
  const rt::packed_attention_weights<float> packed(w);
  CHECK_THROWS_WITH_AS(
      (void)rt::attention(random_matrix<float>(3, 4, 423), random_matrix<float>(3, 4, 424), packed),
      doctest::Contains("x is 3x4 but wq is 3x5"), rt::shape_error);
}
