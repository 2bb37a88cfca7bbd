// core_rope_cache_test.cpp: RoPE applied by the constexpr KV cache (core/kv_cache.hpp's `rope`)
// and core/rope.hpp's rotary_dim (partial rotary embeddings), proven at compile time where the
// claim is exact; the edges (bad rotary_dim, odd key width, queries before their keys) at run time.
#include <cstddef>
#include <stdexcept>
#include <string>

#include <doctest/doctest.h>

#include <qkv/core/kv_cache.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/rope.hpp>
#include <qkv/core/torch.hpp>

using qkv::matrix;
using qkv::rope_layout;

namespace {

constexpr std::size_t S = 5, Dk = 6, Dv = 4;  // 5 tokens, keys of 6, values of 4

template <class T>
struct qkv_inputs {
  matrix<T, S, Dk> q, k;
  matrix<T, S, Dv> v;
};
template <class T>
constexpr qkv_inputs<T> inputs() {
  qkv::torch::generator gen{16};  // torch.manual_seed(16); randn(5, 6), randn(5, 6), randn(5, 4)
  return {gen.randn<T, S, Dk>(), gen.randn<T, S, Dk>(), gen.randn<T, S, Dv>()};
}

/// decoding token by token through a cache with `rope` set: the queries rotated by rope_queries,
/// the keys by append; returns each step's (1, S) weights and (1, Dv) context as rows of (S, .)
template <class T>
struct decoded {
  matrix<T, S, S> weights;
  matrix<T, S, Dv> context;
  matrix<T, S, Dk> keys;  // the cache's keys after the last step
};
template <class T>
constexpr decoded<T> decode(const qkv_inputs<T>& in, const qkv::rope_options& o) {
  qkv::kv_cache<T, S, Dk, Dv> cache;
  cache.rope = o;
  qkv::attention_options<T> causal{};
  causal.causal = true;
  decoded<T> out{};
  for (std::size_t t = 0; t < S; ++t) {
    cache.append(qkv::block<1, Dk>(in.k, t, 0), qkv::block<1, Dv>(in.v, t, 0));  // rotated at position t
    const auto q_t = qkv::rope_queries(qkv::block<1, Dk>(in.q, t, 0), cache);    // rotated at position t
    const auto a = qkv::attend_cache(q_t, cache, causal);                        // lower_right
    for (std::size_t j = 0; j < S; ++j) out.weights(t, j) = a.weights(0, j);
    for (std::size_t c = 0; c < Dv; ++c) out.context(t, c) = a.context(0, c);
  }
  out.keys = cache.keys;
  return out;
}

/// the same through full causal attention of rope(Q) and rope(K) (every position at once)
template <class T>
constexpr bool decode_is_full_causal(const qkv::rope_options& o) {
  constexpr auto in = inputs<T>();
  const auto d = decode(in, o);
  qkv::attention_options<T> causal{};
  causal.causal = true;
  const auto full = qkv::attend_projected(qkv::rope(in.q, o), qkv::rope(in.k, o), in.v, causal);
  return d.keys == full.keys && d.weights == full.weights && d.context == full.context;
}

}  // namespace

// THE PROOF: decoding with RoPE through the cache == full causal attention with RoPE, bit for
// bit. Why exactly: rope() computes row p's element from that row, the position p and
// theta_i alone (rope_cos_sin(p, theta_i): the same double angle p theta_i, the same rounding);
// appending token t rotates its key at first_position = length = t, and rope_queries rotates the
// query at length - 1 = t, so every rotated key and query is the full run's row t to the bit.
// From there the argument of example 10 holds unchanged (same dot products in the same order;
// keys not yet cached and future keys are both -inf: e^-inf = 0 adds exactly nothing).
// Both layouts, float and double, the whole head and a partial rotary_dim of 4 of 6 (and of 2).
static_assert(decode_is_full_causal<double>({rope_layout::half_split, 10000.0, 0}));
static_assert(decode_is_full_causal<double>({rope_layout::interleaved, 10000.0, 0}));
static_assert(decode_is_full_causal<float>({rope_layout::half_split, 10000.0, 0}));
static_assert(decode_is_full_causal<float>({rope_layout::interleaved, 500000.0, 4}));
static_assert(decode_is_full_causal<float>({rope_layout::half_split, 10000.0, 2}));

// And RoPE is really on: without it the cached keys are the keys as given, with it token 0's
// key is unchanged (position 0 turns by 0: c = 1, s = 0 exactly) and token 1's is not.
static_assert([] {
  constexpr auto in = inputs<double>();
  const auto d = decode(in, {});
  return qkv::block<1, Dk>(d.keys, 0, 0) == qkv::block<1, Dk>(in.k, 0, 0) &&
         !(qkv::block<1, Dk>(d.keys, 1, 0) == qkv::block<1, Dk>(in.k, 1, 0));
}());

// rotary_dim: only the first r columns turn, as a head of width r; the rest is copied.
// Hand check, one row x = [1, 0, 0, 0, 5, 7] at position 1, half_split, r = 4, base 100:
// theta_0 = 100^0 = 1, theta_1 = 100^(-2/4) = 0.1. Pairs (0, 2) and (1, 3):
//   (1, 0) turns by 1 rad   -> (cos 1, sin 1)       = (0.540302, 0.841471)
//   (0, 0) turns by 0.1 rad -> (0, 0)
//   columns 4, 5 (past r): 5, 7 unchanged, bit for bit
// Tolerance: cos and sin of qkv::cos/sin are correctly rounded doubles, the products by 1 and 0
// exact, so the entries are cos 1 and sin 1 to within 1 ulp (2.3e-16); 1e-6 covers the 6
// decimals written here.
static_assert([] {
  const matrix<double, 1, 6> x{{{1, 0, 0, 0, 5, 7}}};
  const auto y = qkv::rope(x, rope_layout::half_split, 1, 100.0, 4);
  const auto near = [](double a, double b) { return (a - b < 1e-6) && (b - a < 1e-6); };
  return near(y(0, 0), 0.540302) && y(0, 1) == 0 && near(y(0, 2), 0.841471) && y(0, 3) == 0 && y(0, 4) == 5 &&
         y(0, 5) == 7;
}());
// r = D is the default (0) bit for bit; rotary_dim 2 of 6, interleaved, rotates columns 0, 1 only
static_assert(qkv::rope(inputs<double>().q, rope_layout::interleaved, 3, 10000.0, Dk) ==
              qkv::rope(inputs<double>().q, rope_layout::interleaved, 3));
static_assert([] {
  constexpr auto q = inputs<double>().q;
  const auto y = qkv::rope(q, rope_layout::interleaved, 3, 10000.0, 2);
  // pair 0 of a width-2 head turns by p theta_0 = p rad, exactly as the first pair of a full head
  const auto full = qkv::rope(q, rope_layout::interleaved, 3);
  return qkv::block<S, 2>(y, 0, 0) == qkv::block<S, 2>(full, 0, 0) &&
         qkv::block<S, 4>(y, 0, 2) == qkv::block<S, 4>(q, 0, 2);
}());

TEST_CASE("core rope refuses an odd or too wide rotary_dim, naming it") {
  const matrix<double, 2, 4> x{{{1, 2, 3, 4}, {5, 6, 7, 8}}};
  CHECK_THROWS_WITH_AS((void)qkv::rope(x, rope_layout::half_split, 0, 10000.0, 3),
                       "qkv::rope: rotary_dim must be even and at most the row's width D",
                       std::invalid_argument);
  CHECK_THROWS_AS((void)qkv::rope(x, rope_layout::half_split, 0, 10000.0, 6), std::invalid_argument);
}

TEST_CASE("a RoPE cache refuses queries whose keys are not appended yet, and an odd key width") {
  qkv::kv_cache<double, 4, 2, 2> cache;
  cache.rope = qkv::rope_options{};
  cache.append(matrix<double, 1, 2>{{{1, 2}}}, matrix<double, 1, 2>{{{3, 4}}});
  CHECK_THROWS_WITH_AS((void)qkv::rope_queries(matrix<double, 2, 2>{}, cache),
                       "qkv::rope_queries: 2 queries but only 1 positions cached (append their keys first)",
                       std::length_error);
  // one query at position 0: unchanged (cos 0 = 1, sin 0 = 0)
  CHECK(qkv::rope_queries(matrix<double, 1, 2>{{{7, 9}}}, cache) == matrix<double, 1, 2>{{{7, 9}}});
  qkv::kv_cache<double, 4, 3, 1> odd;
  odd.rope = qkv::rope_options{};
  CHECK_THROWS_AS(odd.append(matrix<double, 1, 3>{}, matrix<double, 1, 1>{}), std::invalid_argument);
  CHECK(odd.length == 0);
  // without rope an odd key width works as before (example 13 caches keys of 3)
  qkv::kv_cache<double, 4, 3, 1> plain;
  plain.append(matrix<double, 1, 3>{{{1, 2, 3}}}, matrix<double, 1, 1>{{{4}}});
  CHECK(plain.keys(0, 2) == 3);
  CHECK(qkv::rope_queries(matrix<double, 1, 3>{{{1, 2, 3}}}, plain) == matrix<double, 1, 3>{{{1, 2, 3}}});
}
