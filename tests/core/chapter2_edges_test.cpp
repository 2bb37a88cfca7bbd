// core_chapter2_test.cpp: the edges of chapter two's constexpr core (core/masks.hpp's
// alignments and windows, core/kv_cache.hpp, core/grouped.hpp, core/rope.hpp, core/alibi.hpp):
// overflow, empty caches, queries before the first key, NaN in a masked key, shapes that must
// not compile. The examples 10..13 prove the main results; this file keeps the edges.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <doctest/doctest.h>

#include <qkv/core/alibi.hpp>
#include <qkv/core/grouped.hpp>
#include <qkv/core/kv_cache.hpp>
#include <qkv/core/masks.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/rope.hpp>

using qkv::causal_alignment;
using qkv::matrix;

namespace {
constexpr qkv::attention_options<double> causal_options() {
  qkv::attention_options<double> o{};
  o.causal = true;
  return o;
}
}  // namespace

// more queries than keys, lower right: the first Tq - S queries sit before the first key and see
// none (PyTorch's causal_lower_right gives them no key either)
static_assert(qkv::causal_mask<3, 2>(causal_alignment::lower_right) ==
              matrix<bool, 3, 2>{{{false, false}, {true, false}, {true, true}}});
static_assert(qkv::aligned_position(0, 3, 2, causal_alignment::lower_right) == -1);
// a window of 1: each query sees itself only
static_assert(qkv::sliding_window_mask<3, 3>(1) ==
              matrix<bool, 3, 3>{{{true, false, false}, {false, true, false}, {false, false, true}}});
// one head: the paper's get_slopes(1) = [2^-8]
static_assert(qkv::alibi_slopes<1>()[0] == 1.0 / 256);
// ALiBi for one new query against 4 keys (lower right): m (j - 3)
static_assert(qkv::alibi_bias<double, 1, 4>(0.25) == matrix<double, 1, 4>{{{-0.75, -0.5, -0.25, 0}}});

// shapes that must not compile: 4 query heads cannot share 3 key/value heads; RoPE needs an even width
template <std::size_t H, std::size_t Hkv, std::size_t DK>
concept gqa_compiles = requires(matrix<double, 2, 8> q, matrix<double, 2, DK> k, matrix<double, 2, DK> v) {
  qkv::grouped_query_attend_projected<H, Hkv>(q, k, v);
};
static_assert(gqa_compiles<4, 2, 4> && !gqa_compiles<4, 3, 6>);
template <std::size_t D>
concept rope_compiles = requires(matrix<double, 2, D> x) { qkv::rope(x, qkv::rope_layout::interleaved); };
static_assert(rope_compiles<8> && !rope_compiles<7>);

TEST_CASE("a KV cache that would overflow throws length_error naming both sizes and keeps what it held") {
  qkv::kv_cache<double, 3, 2, 2> cache;
  cache.append(matrix<double, 2, 2>{{{1, 2}, {3, 4}}}, matrix<double, 2, 2>{{{5, 6}, {7, 8}}});
  try {
    cache.append(matrix<double, 2, 2>{}, matrix<double, 2, 2>{});
    FAIL("no exception");
  } catch (const std::length_error& e) {
    const std::string what = e.what();
    CHECK(what.find("2 tokens do not fit") != std::string::npos);
    CHECK(what.find("2 held, capacity 3") != std::string::npos);
  }
  CHECK(cache.length == 2);
  CHECK(cache.keys(1, 1) == 4);
  CHECK(cache.keys(2, 0) == 0);
}

TEST_CASE("attention against an empty KV cache gives weights 0 and context 0, not NaN") {
  const qkv::kv_cache<double, 4, 2, 3> cache;
  const auto r = qkv::attend_cache(matrix<double, 1, 2>{{{1, 1}}}, cache, causal_options());
  for (std::size_t j = 0; j < 4; ++j) CHECK(r.weights(0, j) == 0);
  for (std::size_t c = 0; c < 3; ++c) CHECK(r.context(0, c) == 0);
}

TEST_CASE("queries before the first cached key (lower right, more queries than keys) see nothing") {
  qkv::kv_cache<double, 4, 1, 1> cache;
  cache.append(matrix<double, 1, 1>{{{1}}}, matrix<double, 1, 1>{{{5}}});
  const auto r = qkv::attend_cache(matrix<double, 2, 1>{{{1}, {1}}}, cache, causal_options());
  CHECK(r.context(0, 0) == 0);  // position -1: no key
  CHECK(r.weights(0, 0) == 0);
  CHECK(r.context(1, 0) == 5);  // position 0: key 0 alone, weight 1
  CHECK(r.weights(1, 0) == 1);
}

TEST_CASE("a NaN value outside the window never reaches the output") {
  qkv::kv_cache<double, 4, 1, 1> cache;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  cache.append(matrix<double, 3, 1>{{{1}, {2}, {3}}}, matrix<double, 3, 1>{{{nan}, {2}, {4}}});
  const auto windowed = qkv::attend_cache(matrix<double, 1, 1>{{{0}}}, cache, causal_options(),
                                          causal_alignment::lower_right, 2);
  // keys 1 and 2 only, scores 0 and 0: weights 1/2 each, output (2 + 4) / 2
  CHECK(windowed.weights(0, 0) == 0);
  CHECK(windowed.context(0, 0) == 3);
  const auto whole = qkv::attend_cache(matrix<double, 1, 1>{{{0}}}, cache, causal_options());
  CHECK(std::isnan(whole.context(0, 0)));  // attended: NaN in, NaN out (docs/numerics.md)
}

TEST_CASE("without causal, attention against a KV cache sees every held key and no empty slot") {
  qkv::kv_cache<double, 3, 1, 1> cache;
  cache.append(matrix<double, 2, 1>{{{0}, {0}}}, matrix<double, 2, 1>{{{2}, {4}}});
  const auto r = qkv::attend_cache(matrix<double, 2, 1>{{{1}, {1}}}, cache);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(r.weights(i, 0) == 0.5);
    CHECK(r.weights(i, 1) == 0.5);
    CHECK(r.weights(i, 2) == 0);
    CHECK(r.context(i, 0) == 3);
  }
}

TEST_CASE("RoPE from a first position equals the same rows of RoPE from position 0, bit for bit") {
  const matrix<double, 4, 4> x{
      {{0.1, 0.2, 0.3, 0.4}, {0.5, 0.6, 0.7, 0.8}, {0.9, 1.0, 1.1, 1.2}, {1.3, 1.4, 1.5, 1.6}}};
  for (const auto layout : {qkv::rope_layout::interleaved, qkv::rope_layout::half_split}) {
    const auto all = qkv::rope(x, layout);
    const auto tail = qkv::rope(qkv::block<2, 4>(x, 2, 0), layout, 2);
    CHECK(tail == qkv::block<2, 4>(all, 2, 0));
  }
}

TEST_CASE("RoPE of a NaN or an infinity stays in its pair") {
  const double inf = std::numeric_limits<double>::infinity();
  const matrix<double, 2, 4> x{{{1, 2, 3, 4}, {inf, 1, 5, 6}}};
  const auto r = qkv::rope(x, qkv::rope_layout::interleaved);
  CHECK(std::isfinite(r(1, 2)));  // pair (2, 3) untouched by the infinity in pair (0, 1)
  CHECK(std::isfinite(r(1, 3)));
  CHECK(!std::isfinite(r(1, 0)));
}
