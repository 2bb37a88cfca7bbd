// core_multihead_batch_test.cpp: core/batch.hpp's multi-head, grouped-query and cross-attention
// padded batches against PyTorch's float64 nn.MultiheadAttention (batch_first, key_padding_mask;
// tests/data/chapter2/torch_chapter2.hpp, made by scripts/fixtures/torch_chapter2.py) and against the
// runtime's batch_attention (runtime/batch.hpp) on the same inputs, each within a derived bound;
// and the edges: lengths over the memory's rows, a NaN in a padded memory row never read, causal
// with padding in H heads, GQA equal to multi-head with the K/V heads repeated, bit for bit.
// Example 14 (steps 8 and 9) proves the main results at compile time.
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <qkv/core/batch.hpp>
#include <qkv/core/grouped.hpp>
#include <qkv/core/multihead.hpp>
#include <qkv/runtime/batch.hpp>

#include "../../examples/chapter2_bounds.hpp"
#include "../support/runtime.hpp"
#include "../data/chapter2/torch_chapter2.hpp"

namespace rt = qkv::runtime;
using qkv::testing::same_bits;
namespace mh = qkv_test::torch_chapter2::multihead_batch;
namespace c2 = qkv::examples::chapter2;

// a namespace of its own: core_runtime_batch_test.cpp, in the same unity unit, has its own B, N, lengths
namespace core_multihead_batch_test {

constexpr std::size_t B = 3, H = 2, N = 5, E = 8, Tc = 4, Dc = 6;
constexpr std::array<std::size_t, B> lengths{5, 3, 0};  // the self-attention batch
constexpr std::array<std::size_t, B> query_lengths{4, 2, 3}, memory_lengths{5, 2, 1};  // cross

template <std::size_t R, std::size_t C>
constexpr qkv::matrix<double, R, C> m(const double (&a)[R][C]) {
  return qkv::matrix<double, R, C>{a};
}

struct self_batch {
  qkv::stack<double, B, N, E> x{};
  qkv::matrix<double, E, E> wq = m(mh::wq), wk = m(mh::wk), wv = m(mh::wv), wo = m(mh::wo);
  qkv::matrix<double, 1, E> bo = m(mh::bo);
  constexpr self_batch() {
    x[0] = m(mh::x_0);
    x[1] = m(mh::x_1);
    x[2] = m(mh::x_2);
  }
};
struct cross_batch {
  qkv::stack<double, B, Tc, E> x{};
  qkv::stack<double, B, N, Dc> memory{};
  qkv::matrix<double, E, E> wq = m(mh::cross_wq), wo = m(mh::cross_wo);
  qkv::matrix<double, E, Dc> wk = m(mh::cross_wk), wv = m(mh::cross_wv);
  qkv::matrix<double, 1, E> bo = m(mh::cross_bo);
  constexpr cross_batch() {
    x[0] = m(mh::cross_x_0), x[1] = m(mh::cross_x_1), x[2] = m(mh::cross_x_2);
    memory[0] = m(mh::cross_memory_0), memory[1] = m(mh::cross_memory_1), memory[2] = m(mh::cross_memory_2);
  }
};

template <std::size_t C>
std::vector<double> as_vector(const qkv::matrix<double, 1, C>& a) {
  return std::vector<double>(a.v, a.v + C);
}

/// the largest ratio |actual - expected| / bound over a matrix (every element must be <= 1)
template <std::size_t R, std::size_t C, class Get>
double worst_ratio(const qkv::matrix<double, R, C>& expected, const qkv::matrix<double, R, C>& bound,
                   Get actual) {
  double worst = 0;
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) {
      const double r = std::fabs(actual(i, j) - expected(i, j)) / bound(i, j);
      worst = r > worst ? r : worst;
    }
  return worst;
}

/// the runtime's padding flags of a sequence with `length` real keys of `rows`
std::vector<unsigned char> padding(std::size_t length, std::size_t rows) {
  std::vector<unsigned char> p(rows, 0);
  for (std::size_t j = length; j < rows; ++j) p[j] = 1;
  return p;
}

TEST_CASE(
    "the core's multi-head padded batch is PyTorch's nn.MultiheadAttention with key_padding_mask within "
    "twice the bound") {
  constexpr self_batch in;
  constexpr auto r = qkv::batch_multihead_self_attention<H>(in.x, lengths, in.wq, in.wk, in.wv, qkv::out_in);
  constexpr auto out = qkv::output_projection(r, in.wo, in.bo);  // (3, 5, 8)
  // The bound (examples/chapter2_bounds.hpp, multihead_output_error): each side is within it of the
  // exact value of the same float64 inputs whatever the order of its sums (the standard model,
  // FMA or not), so the two within twice it. Sequence 2 has no real key: PyTorch 1.13 gives NaN
  // (the script asserts it), qkv bo exactly (below).
  const double* expected[2] = {&mh::output_0[0][0], &mh::output_1[0][0]};
  for (std::size_t b = 0; b < 2; ++b) {
    INFO("sequence " << b << ", length " << lengths[b]);
    const auto bound = c2::multihead_output_error(r.sequence[b], c2::projection_error(in.x[b], in.wq),
                                                  c2::projection_error(in.x[b], in.wk),
                                                  c2::projection_error(in.x[b], in.wv), in.wo, out[b]);
    for (std::size_t k = 0; k < N * E; ++k) CHECK(std::fabs(out[b].v[k] - expected[b][k]) <= 2 * bound.v[k]);
    CHECK(qkv::max_abs_difference(bound, qkv::matrix<double, N, E>{}) < 1e-12);  // the bound is not vacuous
  }
  for (std::size_t i = 0; i < N; ++i) CHECK(same_bits(qkv::row(out[2], i), in.bo));
}

TEST_CASE(
    "the core's cross-attention over a padded memory is PyTorch's within twice the bound, every sequence") {
  constexpr cross_batch in;
  constexpr auto r = qkv::batch_multihead_cross_attention<H>(in.x, in.memory, memory_lengths, in.wq, in.wk,
                                                             in.wv, qkv::out_in);
  constexpr auto out = qkv::output_projection(r, in.wo, in.bo);  // (3, 4, 8)
  const double* expected[3] = {&mh::cross_output_0[0][0], &mh::cross_output_1[0][0],
                               &mh::cross_output_2[0][0]};
  for (std::size_t b = 0; b < B; ++b) {
    INFO("sequence " << b << ", memory length " << memory_lengths[b]);
    const auto bound = c2::multihead_output_error(r.sequence[b], c2::projection_error(in.x[b], in.wq),
                                                  c2::projection_error(in.memory[b], in.wk),
                                                  c2::projection_error(in.memory[b], in.wv), in.wo, out[b]);
    for (std::size_t k = 0; k < Tc * E; ++k) CHECK(std::fabs(out[b].v[k] - expected[b][k]) <= 2 * bound.v[k]);
  }
}

TEST_CASE(
    "the core's multi-head and cross-attention batches agree with the runtime's batch_attention within the "
    "derived bounds") {
  constexpr self_batch in;
  constexpr auto core =
      qkv::batch_multihead_self_attention<H>(in.x, lengths, in.wq, in.wk, in.wv, qkv::out_in);
  constexpr auto core_out = qkv::output_projection(core, in.wo, in.bo);
  rt::attention_weights<double> w;
  w.q = {rt::to_dynamic(in.wq), {}};
  w.k = {rt::to_dynamic(in.wk), {}};
  w.v = {rt::to_dynamic(in.wv), {}};
  w.o = rt::linear_weights<double>{rt::to_dynamic(in.wo), as_vector(in.bo)};
  std::vector<rt::dynamic_matrix<double>> xs;
  for (std::size_t b = 0; b < B; ++b) xs.push_back(rt::to_dynamic(in.x[b]));
  std::vector<rt::batch_sequence<double>> seqs;
  for (std::size_t b = 0; b < B; ++b) seqs.push_back({xs[b].view(), std::nullopt, padding(lengths[b], N)});
  rt::attention_options<double> opt;
  opt.keep_weights = true;
  opt.heads = H;  // scale 1/sqrt(4) = 1/2 on both paths: exact
  const auto run = rt::batch_attention<double>(std::span<const rt::batch_sequence<double>>(seqs), w, opt);
  REQUIRE(run.size() == B);
  // Not bit for bit: the runtime's products are GEMM kernels (fma chains, other orders), its sums
  // lane by lane and its exp is vexp (within 2 ulp). The bound: the core within
  // multihead_output_error (exp 1 ulp) of the exact value, the runtime within the same with exp
  // 2 ulp (context_error's 2E), evaluated on the core's intermediates (the runtime's differ by
  // ~1e-15 relative, inside the bound's 1% margin); the two within the sum.
  for (std::size_t b = 0; b < B; ++b) {
    INFO("sequence " << b << ", length " << lengths[b]);
    const auto dq = c2::projection_error(in.x[b], in.wq), dk = c2::projection_error(in.x[b], in.wk);
    const auto dv = c2::projection_error(in.x[b], in.wv);
    const auto bound = c2::multihead_output_error(core.sequence[b], dq, dk, dv, in.wo, core_out[b]) +
                       c2::multihead_output_error(core.sequence[b], dq, dk, dv, in.wo, core_out[b], 2.0);
    CHECK(worst_ratio(core_out[b], bound,
                      [&](std::size_t i, std::size_t j) { return run[b].output(i, j); }) <= 1.0);
    REQUIRE(run[b].weights.size() == H);
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < N; ++i)
        for (std::size_t j = lengths[b]; j < N; ++j) {  // padding keys: exactly 0 in both, every row
          CHECK(core.sequence[b].weights[h](i, j) == 0.0);
          CHECK(run[b].weights[h](i, j) == 0.0);
        }
  }
  // the padded query rows of sequence 1 (zero rows: q = 0): weights 1/3 on the 3 real keys in both
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t i = 3; i < N; ++i)
      for (std::size_t j = 0; j < 3; ++j) {
        CHECK(core.sequence[1].weights[h](i, j) == 1.0 / 3);
        CHECK(run[1].weights[h](i, j) == 1.0 / 3);
      }
  // no real key: output exactly bo in both
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = 0; j < E; ++j) {
      CHECK(core_out[2](i, j) == in.bo(0, j));
      CHECK(run[2].output(i, j) == in.bo(0, j));
    }

  // cross-attention: the memory as each sequence's context, its padding the memory's
  constexpr cross_batch cin;
  constexpr auto cross = qkv::batch_multihead_cross_attention<H>(cin.x, cin.memory, memory_lengths, cin.wq,
                                                                 cin.wk, cin.wv, qkv::out_in);
  constexpr auto cross_out = qkv::output_projection(cross, cin.wo, cin.bo);
  rt::attention_weights<double> cw;
  cw.q = {rt::to_dynamic(cin.wq), {}};
  cw.k = {rt::to_dynamic(cin.wk), {}};
  cw.v = {rt::to_dynamic(cin.wv), {}};
  cw.o = rt::linear_weights<double>{rt::to_dynamic(cin.wo), as_vector(cin.bo)};
  std::vector<rt::dynamic_matrix<double>> cx, cm;
  for (std::size_t b = 0; b < B; ++b)
    cx.push_back(rt::to_dynamic(cin.x[b])), cm.push_back(rt::to_dynamic(cin.memory[b]));
  std::vector<rt::batch_sequence<double>> cseqs;
  for (std::size_t b = 0; b < B; ++b)
    cseqs.push_back({cx[b].view(), cm[b].view(), padding(memory_lengths[b], N)});
  const auto crun = rt::batch_attention<double>(std::span<const rt::batch_sequence<double>>(cseqs), cw, opt);
  REQUIRE(crun.size() == B);
  for (std::size_t b = 0; b < B; ++b) {
    INFO("cross sequence " << b << ", memory length " << memory_lengths[b]);
    const auto dq = c2::projection_error(cin.x[b], cin.wq);
    const auto dk = c2::projection_error(cin.memory[b], cin.wk);
    const auto dv = c2::projection_error(cin.memory[b], cin.wv);
    const auto bound = c2::multihead_output_error(cross.sequence[b], dq, dk, dv, cin.wo, cross_out[b]) +
                       c2::multihead_output_error(cross.sequence[b], dq, dk, dv, cin.wo, cross_out[b], 2.0);
    CHECK(worst_ratio(cross_out[b], bound,
                      [&](std::size_t i, std::size_t j) { return crun[b].output(i, j); }) <= 1.0);
  }
  // sequence 1's padded query rows (zero rows: q = 0) over its 2 real memory rows: 1/2 each in both
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t i = query_lengths[1]; i < Tc; ++i)
      for (std::size_t j = 0; j < memory_lengths[1]; ++j) {
        CHECK(cross.sequence[1].weights[h](i, j) == 0.5);
        CHECK(crun[1].weights[h](i, j) == 0.5);
      }
  // one real memory row: its weight exactly 1 in both, every head and query
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t i = 0; i < Tc; ++i) {
      CHECK(cross.sequence[2].weights[h](i, 0) == 1.0);
      CHECK(crun[2].weights[h](i, 0) == 1.0);
    }
}

TEST_CASE(
    "grouped-query padded batches are multi-head ones with each K/V head repeated, bit for bit, and the "
    "runtime's within the bound") {
  static constexpr self_batch in;
  // 2 query heads sharing 1 key/value head of width 4: Wk, Wv's first 4 rows
  static constexpr auto wk1 = qkv::block<4, E>(in.wk, 0, 0), wv1 = qkv::block<4, E>(in.wv, 0, 0);
  constexpr auto projected = [] {
    struct {
      qkv::stack<double, B, N, E> q;
      qkv::stack<double, B, N, 4> k, v;
      qkv::stack<double, B, N, E> k2, v2;  // repeat_kv: the one head twice
    } p{};
    for (std::size_t b = 0; b < B; ++b) {
      p.q[b] = qkv::project(in.x[b], in.wq, qkv::out_in);
      p.k[b] = qkv::project(in.x[b], wk1);
      p.v[b] = qkv::project(in.x[b], wv1);
      p.k2[b] = qkv::repeat_kv<1, 2>(p.k[b]);
      p.v2[b] = qkv::repeat_kv<1, 2>(p.v[b]);
    }
    return p;
  }();
  constexpr qkv::attention_options<double> causal{.causal = true};
  constexpr auto gqa =
      qkv::batch_grouped_query_attend_projected<H, 1>(projected.q, projected.k, projected.v, lengths, causal);
  constexpr auto mha =
      qkv::batch_multihead_attend_projected<H>(projected.q, projected.k2, projected.v2, lengths, causal);
  for (std::size_t b = 0; b < B; ++b) {
    CHECK(same_bits(gqa.sequence[b].concat, mha.sequence[b].concat));
    for (std::size_t h = 0; h < H; ++h)
      CHECK(same_bits(gqa.sequence[b].weights[h], mha.sequence[b].weights[h]));
  }
  // the runtime with kv_heads = 1 and causal: the same numbers within the bound of the test above
  // (multi-head on the repeated K/V is the same arithmetic on each side)
  rt::attention_weights<double> w;
  w.q = {rt::to_dynamic(in.wq), {}};
  w.k = {rt::to_dynamic(wk1), {}};
  w.v = {rt::to_dynamic(wv1), {}};
  std::vector<rt::dynamic_matrix<double>> xs;
  for (std::size_t b = 0; b < B; ++b) xs.push_back(rt::to_dynamic(in.x[b]));
  std::vector<rt::batch_sequence<double>> seqs;
  for (std::size_t b = 0; b < B; ++b) seqs.push_back({xs[b].view(), std::nullopt, padding(lengths[b], N)});
  rt::attention_options<double> opt;
  opt.keep_weights = true;
  opt.heads = H;
  opt.kv_heads = 1;
  opt.causal = true;
  const auto run = rt::batch_attention<double>(std::span<const rt::batch_sequence<double>>(seqs), w, opt);
  for (std::size_t b = 0; b < B; ++b) {
    INFO("sequence " << b << ", length " << lengths[b]);
    const auto dq = c2::projection_error(in.x[b], in.wq);
    const auto dk = qkv::repeat_kv<1, 2>(c2::projection_error(in.x[b], wk1));
    const auto dv = qkv::repeat_kv<1, 2>(c2::projection_error(in.x[b], wv1));
    const qkv::matrix<double, E, E> identity = [] {  // no output projection: concat I (exact), no bias
      qkv::matrix<double, E, E> i{};
      for (std::size_t k = 0; k < E; ++k) i(k, k) = 1;
      return i;
    }();
    const auto bound =
        c2::multihead_output_error(mha.sequence[b], dq, dk, dv, identity, mha.sequence[b].concat) +
        c2::multihead_output_error(mha.sequence[b], dq, dk, dv, identity, mha.sequence[b].concat, 2.0);
    CHECK(worst_ratio(mha.sequence[b].concat, bound,
                      [&](std::size_t i, std::size_t j) { return run[b].output(i, j); }) <= 1.0);
  }
}

TEST_CASE(
    "multi-head batches: real rows equal the sequence alone bit for bit with causal, a NaN in a padded "
    "memory row is never read") {
  constexpr self_batch in;
  constexpr qkv::attention_options<double> causal{.causal = true};
  constexpr auto r =
      qkv::batch_multihead_self_attention<H>(in.x, lengths, in.wq, in.wk, in.wv, qkv::out_in, causal);
  constexpr auto alone = qkv::multihead_self_attention<H>(qkv::block<3, E>(in.x[1], 0, 0), in.wq, in.wk,
                                                          in.wv, qkv::out_in, causal);
  CHECK(same_bits(qkv::block<3, E>(r.sequence[1].concat, 0, 0), alone.concat));
  // causal and padding together: padded query row 4 sees keys j <= 4 and j < 3, so keys 0..2
  for (std::size_t h = 0; h < H; ++h) {
    CHECK(r.sequence[1].weights[h](1, 2) == 0.0);  // causal
    CHECK(r.sequence[1].weights[h](4, 3) == 0.0);  // padding
    CHECK(r.sequence[1].weights[h](4, 2) > 0.0);
  }

  const cross_batch cin;
  auto poisoned = cin.memory;
  for (std::size_t j = 0; j < Dc; ++j)
    poisoned(1, 3, j) = std::numeric_limits<double>::quiet_NaN();  // memory 1: length 2
  const auto clean = qkv::batch_multihead_cross_attention<H>(cin.x, cin.memory, memory_lengths, cin.wq,
                                                             cin.wk, cin.wv, qkv::out_in);
  const auto dirty = qkv::batch_multihead_cross_attention<H>(cin.x, poisoned, memory_lengths, cin.wq, cin.wk,
                                                             cin.wv, qkv::out_in);
  CHECK(same_bits(clean.sequence[1].concat, dirty.sequence[1].concat));
  CHECK(std::isnan(dirty.sequence[1].values(3, 0)));  // the NaN is there, projected, and never read
}

TEST_CASE("a memory length over the memory's rows throws length_error naming the sequence and both sizes") {
  const cross_batch cin;
  constexpr std::array<std::size_t, B> too_long{5, 6, 1};
  try {
    (void)qkv::batch_multihead_cross_attention<H>(cin.x, cin.memory, too_long, cin.wq, cin.wk, cin.wv,
                                                  qkv::out_in);
    FAIL("no exception");
  } catch (const std::length_error& e) {
    CHECK(std::string(e.what()) == "qkv::batch: sequence 1 has length 6 but the batch is padded to 5 tokens");
  }
}

}  // namespace core_multihead_batch_test
