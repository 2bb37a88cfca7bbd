// paths_test.cpp: the same bits on every path (issue 32, item 5). A row's output depends only on
// its own inputs (its query row, the keys and values it may see, its mask row and the options):
// not on whether the weights are kept (materialised) or streamed, not on the call (attention(),
// self_attention(), multihead_attention() on projected q, k, v, scaled_dot_product_attention on
// one head's columns), not on how the queries are split into blocks and tasks, not on the
// thread count, not on the other rows of a batch (a row alone or among padding), and not on the
// keys it cannot see (a causal row against the whole sequence or against its prefix only, as a
// KV cache holds it). Every comparison here is bit for bit (same_bits: NaN equal to NaN).
//
// Why these can agree at all: every path computes a row's output with one kernel's order of
// sums (attention.hpp's streaming order: the scores' fma chain over the depth from 0, key blocks
// of key_block = 128 in order with the online rescale, the exp sums' lanes in key order and then
// a fixed lane order). key_block is a constant, not chosen from S, T or the threads (the
// split-KV size fixed, as flash-attention#1897 asks), and masked or absent keys add exactly 0
// (e^-inf) to the sums and leave the maximum alone.
// Not covered (not the same bits today, docs/performance.md "The same bits on every path" says
// why): decode_attend, the one-token KV-cache fast path (another order, for memory speed), and
// an AVX2 build against an AVX-512 one (8 or 16 lanes).
#include <doctest/doctest.h>

#include <cstddef>
#include <limits>
#include <vector>

#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::random_matrix;
using qkv::testing::same_bits;
using rt::dynamic_matrix;

namespace {

/// rows r0 .. r0 + n of m, as a new matrix
dynamic_matrix<float> rows_of(const dynamic_matrix<float>& m, std::size_t r0, std::size_t n) {
  return rt::copy_of(rt::row_block(m.view(), r0, n));
}

/// a self-attention layer of width d (H heads), biases, an output projection
rt::attention_weights<float> layer(std::size_t d, unsigned seed) {
  rt::attention_weights<float> w;
  w.q = {random_matrix<float>(d, d, seed, 0.3), std::vector<float>(d, 0.01f)};
  w.k = {random_matrix<float>(d, d, seed + 1, 0.3), {}};
  w.v = {random_matrix<float>(d, d, seed + 2, 0.3), std::vector<float>(d, -0.03f)};
  w.o = rt::linear_weights<float>{random_matrix<float>(d, d, seed + 3, 0.3), {}};
  return w;
}

}  // namespace

TEST_CASE("keeping the weights or streaming gives the same output bits, for every option") {
  // T = 150, S = 150 crosses the few-keys kernel (32), two key blocks and three query blocks of 64
  const std::size_t d = 32, H = 4;
  for (const std::size_t T : {std::size_t(5), std::size_t(150)}) {
    CAPTURE(T);
    const auto x = random_matrix<float>(T, d, 1);
    const auto w = layer(d, 2);
    std::vector<rt::attention_options<float>> cases(6);
    for (auto& o : cases) o.heads = H;
    cases[1].causal = true;
    cases[2].causal = true, cases[2].window = 3;
    cases[3].alibi = true, cases[3].kv_heads = 2;
    cases[4].key_padding = std::vector<unsigned char>(T, 0), (*cases[4].key_padding)[T - 1] = 1;
    cases[5].bias = random_matrix<float>(T, T, 3);
    for (std::size_t c = 0; c < cases.size(); ++c) {
      CAPTURE(c);
      auto keep = cases[c], stream = cases[c];
      keep.keep_weights = true;
      stream.keep_weights = false;
      if (c == 3) {  // GQA: k and v have 2 heads of 8 columns
        auto g = w;
        g.k.weight = random_matrix<float>(d / 2, d, 9, 0.3);
        g.v.weight = random_matrix<float>(d / 2, d, 10, 0.3);
        g.v.bias.clear();
        g.o = rt::linear_weights<float>{random_matrix<float>(d, d, 11, 0.3), {}};
        const auto a = rt::self_attention(x, g, keep), b = rt::self_attention(x, g, stream);
        CHECK(same_bits(a.concat, b.concat));
        CHECK(same_bits(a.output, b.output));
        continue;
      }
      const auto a = rt::self_attention(x, w, keep), b = rt::self_attention(x, w, stream);
      REQUIRE(a.weights.size() == H);
      CHECK(same_bits(a.concat, b.concat));
      CHECK(same_bits(a.output, b.output));
    }
  }
}

TEST_CASE("one head through scaled_dot_product_attention, materialised or not, gives the same bits") {
  const std::size_t T = 200, S = 170, d = 16;
  const auto q = random_matrix<float>(T, d, 21), k = random_matrix<float>(S, d, 22),
             v = random_matrix<float>(S, d, 23);
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    const rt::attention_mask mask{causal, nullptr};
    dynamic_matrix<float> a(T, d), b(T, d), scores(T, S), weights(T, S);
    const auto sv = scores.view();
    const auto wv = weights.view();
    rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), a.view(), 0.25f, mask);
    rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), b.view(), 0.25f, mask, &sv, &wv);
    CHECK(same_bits(a, b));
  }
}

TEST_CASE("attention(), multihead_attention() on q, k, v and each head alone give the same bits") {
  const std::size_t T = 140, d = 48, H = 3, dh = d / H;
  const auto q = random_matrix<float>(T, d, 31), k = random_matrix<float>(T, d, 32),
             v = random_matrix<float>(T, d, 33);
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    rt::attention_options<float> opt;
    opt.heads = H;
    opt.causal = causal;
    dynamic_matrix<float> fast(T, d);
    rt::multihead_attention(q.view(), k.view(), v.view(), fast.view(), opt);
    opt.keep_weights = true;
    const auto kept = rt::multihead_attention(q, k, v, opt);
    CHECK(same_bits(fast, kept.concat));
    for (std::size_t h = 0; h < H; ++h) {
      dynamic_matrix<float> one(T, dh);
      rt::scaled_dot_product_attention<float>(
          rt::column_block(q.view(), h * dh, dh), rt::column_block(k.view(), h * dh, dh),
          rt::column_block(v.view(), h * dh, dh), one.view(), rt::default_scale<float>(dh),
          rt::attention_mask{causal, nullptr});
      CHECK(same_bits(one, rt::copy_of(rt::column_block(fast.view(), h * dh, dh))));
    }
  }
}

TEST_CASE("a row's output does not depend on the other rows: alone, in any block, any thread count") {
  // 700 queries: two streaming blocks of at most 512 (split differently on 1 and 2 threads) and
  // eleven materialised blocks of 64; each row is recomputed alone and in a slice that starts
  // inside a block
  const std::size_t T = 700, S = 300, d = 64, H = 2;
  const auto q = random_matrix<float>(T, d, 41), k = random_matrix<float>(S, d, 42),
             v = random_matrix<float>(S, d, 43);
  rt::attention_options<float> opt;
  opt.heads = H;
  rt::thread_pool one(1), two(2);
  dynamic_matrix<float> full1(T, d), full2(T, d);
  rt::multihead_attention(q.view(), k.view(), v.view(), full1.view(), opt, &one);
  rt::multihead_attention(q.view(), k.view(), v.view(), full2.view(), opt, &two);
  CHECK(same_bits(full1, full2));
  opt.keep_weights = true;
  CHECK(same_bits(rt::multihead_attention(q, k, v, opt, &two).concat, full1));
  opt.keep_weights = false;
  for (const std::size_t i :
       {std::size_t(0), std::size_t(63), std::size_t(64), std::size_t(511), std::size_t(699)}) {
    CAPTURE(i);
    dynamic_matrix<float> alone(1, d);
    rt::multihead_attention(rows_of(q, i, 1).view(), k.view(), v.view(), alone.view(), opt, &two);
    CHECK(same_bits(alone, rows_of(full1, i, 1)));
  }
  dynamic_matrix<float> slice(77, d);
  rt::multihead_attention(rows_of(q, 100, 77).view(), k.view(), v.view(), slice.view(), opt, &two);
  CHECK(same_bits(slice, rows_of(full1, 100, 77)));
}

TEST_CASE("a causal row against its prefix of keys (a KV cache's view) is its row of full causal attention") {
  // the query at position p sees keys 0 .. p; computed with all T keys (upper_left) and with only
  // the p + 1 keys it sees (lower_right, as a KV cache holds them): the same bits
  const std::size_t T = 260, d = 32, H = 2;
  const auto q = random_matrix<float>(T, d, 51), k = random_matrix<float>(T, d, 52),
             v = random_matrix<float>(T, d, 53);
  rt::attention_options<float> opt;
  opt.heads = H;
  opt.causal = true;
  dynamic_matrix<float> full(T, d);
  rt::multihead_attention(q.view(), k.view(), v.view(), full.view(), opt);
  opt.alignment = rt::causal_alignment::lower_right;
  for (const std::size_t p : {std::size_t(0), std::size_t(31), std::size_t(32), std::size_t(127),
                              std::size_t(128), std::size_t(259)}) {
    CAPTURE(p);
    dynamic_matrix<float> row(1, d);
    rt::multihead_attention(rows_of(q, p, 1).view(), rows_of(k, 0, p + 1).view(), rows_of(v, 0, p + 1).view(),
                            row.view(), opt);
    CHECK(same_bits(row, rows_of(full, p, 1)));
  }
  // the KV cache's general path (rt::attend on a kv_cache, token by token) gives the same rows:
  // tests/runtime/decoder_cache_test.cpp, "decoding token by token ... bit for bit"
}

TEST_CASE("a sequence alone or in a padded batch gives the same bits") {
  const std::size_t N = 40, d = 16, H = 2;
  const auto w = layer(d, 61);
  const auto x = random_matrix<float>(N, d, 62);
  for (const std::size_t len : {std::size_t(1), std::size_t(17), std::size_t(40)}) {
    CAPTURE(len);
    rt::attention_options<float> alone_opt;
    alone_opt.heads = H;
    const auto alone = rt::self_attention(rows_of(x, 0, len), w, alone_opt);
    // the same rows padded to N, the padding keys masked by key_padding
    rt::attention_options<float> padded_opt = alone_opt;
    std::vector<unsigned char> pad(N, 0);
    for (std::size_t j = len; j < N; ++j) pad[j] = 1;
    padded_opt.key_padding = pad;
    for (const bool keep : {false, true}) {
      CAPTURE(keep);
      padded_opt.keep_weights = keep;
      const auto padded = rt::self_attention(x, w, padded_opt);
      CHECK(same_bits(rows_of(padded.output, 0, len), alone.output));
    }
  }
}

namespace {

/// (T, H d) heads side by side -> (H T, d) heads first: head h's columns become rows h T ..
dynamic_matrix<float> heads_first_of(const dynamic_matrix<float>& m, std::size_t heads) {
  const std::size_t t = m.rows(), d = m.cols() / heads;
  dynamic_matrix<float> r(heads * t, d);
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t i = 0; i < t; ++i)
      for (std::size_t c = 0; c < d; ++c) r(h * t + i, c) = m(i, h * d + c);
  return r;
}

}  // namespace

TEST_CASE("the (H, T, d) layout gives the bits of heads side by side, for every option and thread count") {
  // T = 150 queries, S = 170 keys: the few-keys kernel is not taken, two key blocks, GQA 4 over 2
  const std::size_t T = 150, S = 170, H = 4, HK = 2, d = 16;
  const auto q = random_matrix<float>(T, H * d, 71), k = random_matrix<float>(S, HK * d, 72);
  auto v = random_matrix<float>(S, HK * d, 73);
  v(5, 3) = std::numeric_limits<float>::quiet_NaN();       // key 5 of key/value head 0, column 3
  v(100, d + 2) = std::numeric_limits<float>::infinity();  // key 100 of head 1
  const auto qf = heads_first_of(q, H), kf = heads_first_of(k, HK), vf = heads_first_of(v, HK);
  std::vector<rt::attention_options<float>> cases(6);
  for (auto& o : cases) o.heads = H, o.kv_heads = HK;
  cases[1].causal = true, cases[1].alignment = rt::causal_alignment::lower_right;
  cases[2].alibi = true, cases[2].window = 40, cases[2].causal = true;
  cases[3].key_padding = std::vector<unsigned char>(S, 0), (*cases[3].key_padding)[7] = 1;
  cases[4].bias = random_matrix<float>(H * T, S, 74);
  cases[5].rope = rt::rope_options{};
  rt::thread_pool one(1), two(2);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    CAPTURE(c);
    dynamic_matrix<float> side(T, H * d);
    rt::multihead_attention(q.view(), k.view(), v.view(), side.view(), cases[c], &one);
    for (rt::thread_pool* pool : {&one, &two}) {
      dynamic_matrix<float> first(H * T, d);
      rt::multihead_attention(rt::heads_first, qf.view(), kf.view(), vf.view(), first.view(), cases[c], pool);
      CHECK(same_bits(first, heads_first_of(side, H)));
    }
  }
  dynamic_matrix<float> bad(H * T, d + 1);
  CHECK_THROWS_WITH_AS(
      rt::multihead_attention(rt::heads_first, qf.view(), kf.view(), vf.view(), bad.view(), cases[0]),
      "attention (heads first): out is 600x17 but must be 600x16 (q's rows by v's columns)", rt::shape_error);
}
