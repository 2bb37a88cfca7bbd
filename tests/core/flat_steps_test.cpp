// flat_steps_test.cpp: core/flat_steps.hpp, the steps a `qkv explain` page recomputes (in its
// WebAssembly module and natively), against the core's fixed-size functions they stand for, bit
// for bit, and their edges: a fully masked row, a NaN in a masked key's value, a NaN score, the
// naive softmax's overflow, an unknown step; exact_step over rationals, value for value, and its
// overflow. (The examples' pages check every step against the examples' own numbers each time a
// page is written: io/page_recompute.hpp.)
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <doctest/doctest.h>

#include <qkv/core/adamw.hpp>
#include <qkv/core/attention.hpp>
#include <qkv/core/batch.hpp>
#include <qkv/core/cross_entropy.hpp>
#include <qkv/core/embedding_backward.hpp>
#include <qkv/core/flash_backward.hpp>
#include <qkv/core/flat_steps.hpp>
#include <qkv/core/half.hpp>
#include <qkv/core/layers.hpp>
#include <qkv/core/online_softmax.hpp>
#include <qkv/core/rope.hpp>
#include <qkv/core/sequence.hpp>
#include <qkv/core/sgd.hpp>
#include <qkv/core/softmax.hpp>
#include <qkv/core/softmax_backward.hpp>
#include <qkv/exact/rational.hpp>

namespace {

using qkv::matrix;

// the bits of every number, NaN as one pattern (a NaN's payload is the compiler's choice)
template <class T, std::size_t R, std::size_t C>
bool same_bits(const matrix<T, R, C>& m, const std::vector<T>& v) {
  if (v.size() != R * C) return false;
  for (std::size_t k = 0; k < R * C; ++k) {
    if (m.v[k] != m.v[k] && v[k] != v[k]) continue;
    if (std::memcmp(&m.v[k], &v[k], sizeof(T)) != 0) return false;
  }
  return true;
}

// x (3, 4), w (3, 4) in nn.Linear's layout, b (1, 3): small numbers whose sums round
constexpr matrix<float, 3, 4> x{
    {{0.1f, -0.7f, 1.3f, 0.25f}, {2.2f, 0.01f, -1.1f, 0.5f}, {-0.3f, 0.9f, 0.77f, -2.f}}};
constexpr matrix<float, 3, 4> w{
    {{0.3f, 0.2f, -0.6f, 1.1f}, {-1.7f, 0.05f, 0.4f, 0.9f}, {0.33f, -0.21f, 0.8f, 0.1f}}};
constexpr matrix<float, 1, 3> b{{{0.1f, -0.2f, 0.3f}}};

}  // namespace

TEST_CASE("each flat step gives the bits of the core function it stands for") {
  qkv::flat::step_sizes z{3, 3, 4, 4, 4, 0, 0, 0};
  std::vector<float> y(9);
  // dot with a bias: x Wᵀ + b
  REQUIRE(qkv::flat::step<float>(qkv::flat::kind::dot, x.v, w.v, b.v, nullptr, z, 0.f, y.data()) == 0);
  const auto xw = qkv::add_row_vector(qkv::matrix_product_transposed(x, w), b);
  CHECK(same_bits(xw, y));
  // matmul: x (3, 4) times wᵀ (4, 3)
  const auto wt = qkv::transposed(w);
  z.bs = 3;
  qkv::flat::step<float>(qkv::flat::kind::matmul, x.v, wt.v, nullptr, nullptr, z, 0.f, y.data());
  CHECK(same_bits(qkv::matrix_product(x, wt), y));
  // scale by a factor, divide by a divisor (they round differently), then the mask
  const auto s = qkv::matrix_product_transposed(x, w);
  qkv::flat::step_sizes e{3, 3};
  qkv::flat::step<float>(qkv::flat::kind::scale, s.v, nullptr, nullptr, nullptr, e, 0.5f, y.data());
  CHECK(same_bits(qkv::scaled(0.5f, s), y));
  const float root = qkv::sqrt(3.f);
  qkv::flat::step<float>(qkv::flat::kind::divide, s.v, nullptr, nullptr, nullptr, e, root, y.data());
  const auto scaled = qkv::divided(s, root);
  CHECK(same_bits(scaled, y));
  const unsigned char causal[9] = {0, 1, 1, 0, 0, 1, 0, 0, 0};
  qkv::flat::step<float>(qkv::flat::kind::divide, s.v, nullptr, nullptr, causal, e, root, y.data());
  const auto masked = qkv::causal_masked(scaled);
  CHECK(same_bits(masked, y));
  // the stable and the naive softmax, each the core's own
  std::vector<float> p(9), q(9);
  qkv::flat::step<float>(qkv::flat::kind::softmax, masked.v, nullptr, nullptr, nullptr, e, 0.f, p.data());
  const auto weights = qkv::softmax_rows(masked);
  CHECK(same_bits(weights, p));
  qkv::flat::step<float>(qkv::flat::kind::naive_softmax, scaled.v, nullptr, nullptr, nullptr, e, 0.f,
                         q.data());
  CHECK(same_bits(qkv::naive_softmax_rows(scaled), q));
  // the weights times the values, attended_context's policy (the masked keys skipped)
  const auto v = qkv::matrix_product_transposed(x, w);  // (3, 3) values
  qkv::flat::step_sizes a{3, 3, 3, 3, 3, 0, 0, 0};
  qkv::flat::step<float>(qkv::flat::kind::attended, weights.v, v.v, masked.v, nullptr, a, 0.f, y.data());
  CHECK(same_bits(qkv::attended_context(masked, weights, v), y));
  // add, relu, transpose, hconcat, LayerNorm
  qkv::flat::step<float>(qkv::flat::kind::add, s.v, v.v, nullptr, nullptr, e, 0.f, y.data());
  CHECK(same_bits(s + v, y));
  qkv::flat::step<float>(qkv::flat::kind::relu, s.v, nullptr, nullptr, nullptr, e, 0.f, y.data());
  CHECK(same_bits(qkv::relu(s), y));
  std::vector<float> t(12);
  qkv::flat::step_sizes tz{4, 3};  // C (4, 3) = xᵀ
  qkv::flat::step<float>(qkv::flat::kind::transpose, x.v, nullptr, nullptr, nullptr, tz, 0.f, t.data());
  CHECK(same_bits(qkv::transposed(x), t));
  std::vector<float> h(21);
  qkv::flat::step_sizes hz{3, 7, 4, 3};
  qkv::flat::step<float>(qkv::flat::kind::hconcat, x.v, s.v, nullptr, nullptr, hz, 0.f, h.data());
  CHECK(same_bits(qkv::hconcat(x, s), h));
  std::vector<float> r(4);
  qkv::flat::step_sizes bz{1, 4, 4, 0, 0, 0, 2, 0};  // row 2 of x (from row br = 2, column bc = 0)
  qkv::flat::step<float>(qkv::flat::kind::block, x.v, nullptr, nullptr, nullptr, bz, 0.f, r.data());
  CHECK(same_bits(qkv::row(x, 2), r));
  // RoPE with the tables rope() uses (position m, pair i), both layouts: rope()'s bits
  const auto xd = qkv::matrix_cast<double>(x);  // (3, 4): positions 0, 1, 2, one head of width 4
  std::vector<double> cs(6), sn(6), rd(12);
  for (std::size_t m = 0; m < 3; ++m)
    for (std::size_t i = 0; i < 2; ++i) {
      const auto t = qkv::rope_cos_sin<double>(m, qkv::rope_frequency(i, 4));
      cs[m * 2 + i] = t.cos, sn[m * 2 + i] = t.sin;
    }
  for (bool inter : {true, false}) {
    qkv::flat::step_sizes rz{3, 4, 4, 2, 4, 4, inter ? 1u : 0u, 0};
    qkv::flat::step<double>(qkv::flat::kind::rope, xd.v, cs.data(), sn.data(), nullptr, rz, 0.0, rd.data());
    CHECK(same_bits(qkv::rope(xd, inter ? qkv::rope_layout::interleaved : qkv::rope_layout::half_split), rd));
  }
  qkv::layer_norm_parameters<float, 4> ln;
  ln.weight = matrix<float, 1, 4>{{{1.5f, -0.5f, 1.f, 2.f}}};
  ln.bias = matrix<float, 1, 4>{{{0.1f, 0.f, -0.3f, 0.2f}}};
  qkv::flat::step_sizes lz{3, 4};
  qkv::flat::step<float>(qkv::flat::kind::layer_norm, x.v, ln.weight.v, ln.bias.v, nullptr, lz, 1e-5f,
                         t.data());
  CHECK(same_bits(qkv::layer_norm(x, ln, 1e-5f), t));
  // the softmax backward: D = rowsum(dP ∘ P), then P (dP - D)
  std::vector<float> d(3);
  qkv::flat::step_sizes rz{3, 1, 3, 3, 3, 0, 0, 0};
  qkv::flat::step<float>(qkv::flat::kind::row_dot, s.v, weights.v, nullptr, nullptr, rz, 0.f, d.data());
  const auto D = qkv::row_dots(s, weights);
  CHECK(same_bits(D, d));
  qkv::flat::step<float>(qkv::flat::kind::softmax_backward, weights.v, s.v, d.data(), nullptr, e, 0.f,
                         y.data());
  CHECK(same_bits(qkv::softmax_backward(weights, s, D), y));
}

// kind 17, softmax_all: tutorial 000's numpy cell, np.exp(s) / np.sum(np.exp(s)) over all nine
// scores (example 01's whole_matrix_softmax), the core's softmax_all bit for bit
TEST_CASE("softmax_all normalises over the whole matrix as the core's softmax_all") {
  constexpr matrix<double, 3, 3> scores{{{2, 4, 4}, {4, 16, 12}, {4, 12, 10}}};
  std::vector<double> y(9);
  qkv::flat::step_sizes z{3, 3};
  REQUIRE(qkv::flat::step<double>(qkv::flat::kind::softmax_all, scores.v, nullptr, nullptr, nullptr, z, 0.0,
                                  y.data()) == 0);
  CHECK(same_bits(qkv::softmax_all(scores), y));
  // by hand: e^(s - 16) over the sum of the nine, 1 + 2 e^-4 + e^-6 + 4 e^-12 + e^-14 = 1.0391354
  // (the maximum 16 gives e^0 = 1), so cell (1, 1) = 1 / 1.0391354 = 0.96233846 (numpy:
  // 0.962338462448094), and row 0 sums to (e^-14 + 2 e^-12) / 1.0391354 = 1.2626e-5, not 1.
  // Tolerance: each side within 11u relative (exp 2u, the 8 sums u each, the division u): 22u
  // = 2.5e-15 of 0.96; the row's three weights and two sums within 14u = 1.6e-15 relative each:
  // 3.2e-15 x 1.26e-5 = 4e-20
  CHECK(std::fabs(y[4] - 0.962338462448094) <= 2.5e-15);
  CHECK(std::fabs(y[0] + y[1] + y[2] - 1.2625835807136469e-05) <= 4e-20);
  // four equal scores: e^0 / 4 = 0.25 exactly; a -inf score gets exactly 0 (e^-inf), in float
  const float flat4[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  float q[4];
  qkv::flat::softmax_all(flat4, 2, 2, q);
  CHECK((q[0] == 0.25f && q[1] == 0.25f && q[2] == 0.25f && q[3] == 0.25f));
  const float masked[4] = {1.f, -std::numeric_limits<float>::infinity(), 1.f, 1.f};
  qkv::flat::softmax_all(masked, 2, 2, q);
  CHECK(q[1] == 0.f);
  CHECK(q[0] == 1.f / 3.f);
  // a NaN anywhere makes every number NaN (the whole matrix is one softmax)
  const float with_nan[4] = {1.f, std::numeric_limits<float>::quiet_NaN(), 1.f, 1.f};
  qkv::flat::softmax_all(with_nan, 2, 2, q);
  CHECK((std::isnan(q[0]) && std::isnan(q[3])));
}

// kinds 18-21, flash attention's online softmax (example 09's blocks): the core's
// online_softmax_step, online_softmax_output and online_attention, bit for bit
TEST_CASE("the online softmax's steps give the core's running state, p, o / l and flash output") {
  // by hand, one query, values (4, 1) = [1, 3, 5, 7], blocks of 2: block 0's scores [0, 0]: m = 0,
  // p = [e^0, e^0] = [1, 1], l = 2, o = 1 + 3 = 4 (rescale 0: nothing kept); block 1's [-inf, 0]: m
  // stays 0, rescale e^0 = 1, p = [0, 1], l = 3, o = 4 + 7 = 11; o / l = 11/3 (rounded once)
  const double inf = std::numeric_limits<double>::infinity();
  const double sc[4] = {0, 0, -inf, 0}, vals[4] = {1, 3, 5, 7};
  double st0[5], st1[5], p1[2], out[1];
  qkv::flat::step_sizes z0{1, 5, 4, 1, 2, 0, 0, 0};  // C (1, 4 + 1), 2 keys from column 0, values from row 0
  REQUIRE(qkv::flat::step<double>(qkv::flat::kind::online_state, sc, vals, nullptr, nullptr, z0, 0.0, st0) ==
          0);
  CHECK((st0[0] == 0 && st0[1] == 0 && st0[2] == 0 && st0[3] == 2 && st0[4] == 4));
  qkv::flat::step_sizes z1{1, 5, 4, 1, 2, 2, 2, 0};  // keys 2, 3: from column 2 and value row 2
  qkv::flat::step<double>(qkv::flat::kind::online_state, sc, vals, st0, nullptr, z1, 0.0, st1);
  CHECK((st1[0] == 0 && st1[1] == 0 && st1[2] == 1 && st1[3] == 3 && st1[4] == 11));
  qkv::flat::step_sizes zp{1, 2, 4, 5, 0, 2, 0, 0};  // p of keys 2, 3 against state 1's m
  qkv::flat::step<double>(qkv::flat::kind::online_p, sc, st1, nullptr, nullptr, zp, 0.0, p1);
  CHECK((p1[0] == 0 && p1[1] == 1));
  qkv::flat::step_sizes zo{1, 1, 1, 5};  // o / l: o (1, 1), l column 3 of the state
  qkv::flat::step<double>(qkv::flat::kind::online_output, st1 + 4, st1, nullptr, nullptr, zo, 0.0, out);
  CHECK(out[0] == 11.0 / 3.0);
  // the core's own, on scores with a new maximum in a later block, a masked key, and an odd last
  // block: every state after each block (blocks of 2 over 5 keys), and every query's output
  constexpr matrix<float, 2, 5> scores{
      {{0.3f, -1.2f, 2.5f, -std::numeric_limits<float>::infinity(), 0.7f}, {1.1f, 0.4f, -0.6f, 2.2f, -3.f}}};
  constexpr matrix<float, 5, 3> v{
      {{0.5f, -1.f, 2.f}, {1.5f, 0.25f, -0.75f}, {-2.f, 3.f, 1.f}, {0.1f, 0.2f, 0.3f}, {4.f, -0.5f, 0.9f}}};
  const auto trace = qkv::online_softmax_blocks<2>(qkv::row(scores, 0), v);
  std::vector<float> prev, now(7);
  for (std::size_t b = 0; b < 3; ++b) {
    const std::size_t j0 = 2 * b, n = b == 2 ? 1 : 2;
    qkv::flat::step_sizes zs{1, 7, 5, 3, n, j0, j0, 0};
    qkv::flat::step<float>(qkv::flat::kind::online_state, scores.v, v.v, b ? prev.data() : nullptr, nullptr,
                           zs, 0.f, now.data());
    const auto& t = trace.after[b];
    const std::vector<float> want{t.block_max, t.m, t.rescale, t.l, t.o.v[0], t.o.v[1], t.o.v[2]};
    CHECK(same_bits(matrix<float, 1, 7>{{{want[0], want[1], want[2], want[3], want[4], want[5], want[6]}}},
                    now));
    prev = now;
  }
  std::vector<float> o(3);
  qkv::flat::step_sizes zo3{1, 3, 3, 7};
  qkv::flat::step<float>(qkv::flat::kind::online_output, prev.data() + 4, prev.data(), nullptr, nullptr, zo3,
                         0.f, o.data());
  CHECK(same_bits(trace.output, o));
  std::vector<float> flash(6);
  qkv::flat::step_sizes za{2, 3, 5, 3, 2};  // every query, blocks of 2
  REQUIRE(qkv::flat::step<float>(qkv::flat::kind::online_attention, scores.v, v.v, nullptr, nullptr, za, 0.f,
                                 flash.data()) == 0);
  CHECK(same_bits(qkv::online_attention<2>(scores, v), flash));
  // a block of 0 keys is refused, nothing written
  za.n = 0;
  CHECK(qkv::flat::step<float>(qkv::flat::kind::online_attention, scores.v, v.v, nullptr, nullptr, za, 0.f,
                               flash.data()) == 1);
  // a NaN score: every number of the state NaN from that block on
  const double with_nan[2] = {0.5, std::numeric_limits<double>::quiet_NaN()};
  qkv::flat::step<double>(qkv::flat::kind::online_state, with_nan, vals, nullptr, nullptr, z0, 0.0, st0);
  CHECK((std::isnan(st0[1]) && std::isnan(st0[3]) && std::isnan(st0[4])));
}

// kinds 22 and 23: a float rounded to bfloat16 or float16 and read back (example 14's 16-bit run)
TEST_CASE("round_bfloat16 and round_float16 give as_float(rounded_to(x)), floats only") {
  // by hand: 1 + 2^-8 lies half-way between bfloat16's 1 and 1 + 2^-7: ties to even, 1; 1 + 3 x
  // 2^-8 half-way between 1 + 2^-7 and 1 + 2^-6 (the even one): 1 + 2^-6 = 1.015625; float16:
  // 65519 rounds to its largest finite 65504, 65520 (half-way to 2^16) to inf; NaN stays NaN
  const float in[6] = {1.00390625f, 1.01171875f, 65519.f,
                       65520.f,     -0.3f,       std::numeric_limits<float>::quiet_NaN()};
  float b16[6], f16[6];
  qkv::flat::step_sizes z{2, 3};
  REQUIRE(qkv::flat::step<float>(qkv::flat::kind::round_bfloat16, in, nullptr, nullptr, nullptr, z, 0.f,
                                 b16) == 0);
  REQUIRE(qkv::flat::step<float>(qkv::flat::kind::round_float16, in, nullptr, nullptr, nullptr, z, 0.f,
                                 f16) == 0);
  CHECK(b16[0] == 1.f);
  CHECK(b16[1] == 1.015625f);
  CHECK(f16[2] == 65504.f);
  CHECK(f16[3] == std::numeric_limits<float>::infinity());
  CHECK((std::isnan(b16[5]) && std::isnan(f16[5])));
  // the core's own: rounded_to then as_float, bit for bit
  const matrix<float, 2, 3> m{{{in[0], in[1], in[2]}, {in[3], in[4], in[5]}}};
  CHECK(same_bits(qkv::as_float(qkv::rounded_to<qkv::bfloat16>(m)), std::vector<float>(b16, b16 + 6)));
  CHECK(same_bits(qkv::as_float(qkv::rounded_to<qkv::float16>(m)), std::vector<float>(f16, f16 + 6)));
  // a double is not rounded (a float32 step): nothing written, 1
  double d[1] = {0.5}, out[1] = {7.0};
  CHECK(qkv::flat::step<double>(qkv::flat::kind::round_bfloat16, d, nullptr, nullptr, nullptr, {1, 1}, 0.0,
                                out) == 1);
  CHECK(out[0] == 7.0);
}

// kinds 24 and 25: RoPE's half_split columns as interleaved pairs and back (example 12)
TEST_CASE("interleave lays a row's two halves out as pairs, deinterleave back, exactly") {
  // by hand, a row of 6: halves [0, 1, 2] and [3, 4, 5] as pairs (0, 3), (1, 4), (2, 5)
  const double row[6] = {0, 1, 2, 3, 4, 5}, pairs[6] = {0, 3, 1, 4, 2, 5};
  double out[6], back[6];
  qkv::flat::step_sizes z{1, 6};
  REQUIRE(qkv::flat::step<double>(qkv::flat::kind::interleave, row, nullptr, nullptr, nullptr, z, 0.0, out) ==
          0);
  CHECK(std::equal(out, out + 6, pairs));
  qkv::flat::step<double>(qkv::flat::kind::deinterleave, out, nullptr, nullptr, nullptr, z, 0.0, back);
  CHECK(std::equal(back, back + 6, row));
  // copies: a NaN, -0 and the exact rationals come through as they are
  const float odd[4] = {-0.f, std::numeric_limits<float>::quiet_NaN(), 2.5f, -1.f};
  float o4[4];
  qkv::flat::step<float>(qkv::flat::kind::interleave, odd, nullptr, nullptr, nullptr, {1, 4}, 0.f, o4);
  CHECK((std::signbit(o4[0]) && o4[1] == 2.5f && std::isnan(o4[2]) && o4[3] == -1.f));
  using q = qkv::exact::rational<long long>;
  const q r[2] = {q(1, 3), q(-2, 7)};
  q ro[2];
  REQUIRE(qkv::flat::exact_step<q>(qkv::flat::kind::interleave, r, nullptr, nullptr, {1, 2}, ro) == 0);
  CHECK((ro[0] == q(1, 3) && ro[1] == q(-2, 7)));
}

TEST_CASE("flat steps keep the core's policy at the edges") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // a fully masked row: weights 0, context +0 (no term is read); a NaN value of a masked key is
  // never read; a NaN score makes its row NaN
  const double scaled[6] = {-inf, -inf, 0.5, -inf, nan, 1.0};
  double wts[6];
  qkv::flat::softmax(scaled, 3, 2, wts);
  CHECK(wts[0] == 0.0);
  CHECK(wts[1] == 0.0);
  CHECK(wts[2] == 1.0);
  CHECK(std::isnan(wts[4]));
  const double values[4] = {3.0, 4.0, nan, 2.0};  // key 0's values, then key 1's (a NaN)
  double ctx[6];
  qkv::flat::attended(wts, 2, scaled, 2, values, 2, 0, 3, 2, 2, ctx, 2);
  CHECK(ctx[0] == 0.0);
  CHECK(!std::signbit(ctx[0]));
  CHECK(ctx[2] == 3.0);  // row 1 sees key 0 only (weight 1): 1 x 3 and 1 x 4; key 1's NaN unread
  CHECK(ctx[3] == 4.0);
  CHECK(std::isnan(ctx[4]));
  // the naive softmax overflows where the stable one does not: e^1000 / (e^1000 + e^0) is inf / inf
  const double big[2] = {1000.0, 0.0};
  double n[2], st[2];
  qkv::flat::naive_softmax(big, 1, 2, n);
  qkv::flat::softmax(big, 1, 2, st);
  CHECK(std::isnan(n[0]));
  CHECK(st[0] == 1.0);
  // an unknown step writes nothing and says so
  double out[1] = {7.0};
  CHECK(qkv::flat::step<double>(static_cast<qkv::flat::kind>(99), big, nullptr, nullptr, nullptr, {1, 1}, 0.0,
                                out) == 1);
  CHECK(out[0] == 7.0);
}

// the exact steps (exact_step: the exact pages 01b and 15): the core's own functions over
// rationals, value for value, and the kinds that have no exact form refused. Tutorial 000's
// x (3, 4) and w_key (4, 3) with a fraction in each: keys = x w_key, scores = keys keysᵀ.
TEST_CASE("exact steps over rationals give the core functions' exact values") {
  using q = qkv::exact::rational<long long>;
  const matrix<q, 3, 4> xq{{{1, 0, q(3, 2), 0}, {0, 2, 0, 2}, {1, 1, 1, q(-1, 10)}}};
  const matrix<q, 4, 3> wq{{{0, 0, 1}, {1, q(1, 3), 0}, {0, 1, 0}, {1, 1, 0}}};
  qkv::flat::step_sizes z{3, 3, 4, 3, 4, 0, 0, 0};
  std::vector<q> k(9), y(9), d(3), t(12);
  REQUIRE(qkv::flat::exact_step<q>(qkv::flat::kind::matmul, xq.v, wq.v, nullptr, z, k.data()) == 0);
  const auto keys = qkv::matrix_product(xq, wq);
  // [1, 0, 3/2, 0] w_key = [0, 3/2, 1]; [0, 2, 0, 2] w_key = [4, 8/3, 0]; [1, 1, 1, -1/10] -> [1 - 1/10, 1/3 + 1 - 1/10, 1] = [9/10, 37/30, 1]
  CHECK(keys == matrix<q, 3, 3>{{{0, q(3, 2), 1}, {4, q(8, 3), 0}, {q(9, 10), q(37, 30), 1}}});
  CHECK(std::vector<q>(keys.v, keys.v + 9) == k);
  qkv::flat::step_sizes s{3, 3, 3, 3, 3, 0, 0, 0};
  qkv::flat::exact_step<q>(qkv::flat::kind::dot, k.data(), k.data(), nullptr, s, y.data());
  const auto scores = qkv::matrix_product_transposed(keys, keys);
  CHECK(std::vector<q>(scores.v, scores.v + 9) == y);
  CHECK(y[0] == q(13, 4));  // 0 + 9/4 + 1
  // the softmax backward of weights P over dP = scores: D = rowsum(dP ∘ P), then P (dP - D)
  const matrix<q, 3, 3> p{{{0, q(1, 2), q(1, 2)}, {0, 1, 0}, {0, q(9, 10), q(1, 10)}}};
  qkv::flat::step_sizes r{3, 1, 3, 3, 3, 0, 0, 0};
  qkv::flat::exact_step<q>(qkv::flat::kind::row_dot, y.data(), p.v, nullptr, r, d.data());
  const auto D = qkv::row_dots(scores, p);
  CHECK(std::vector<q>(D.v, D.v + 3) == d);
  std::vector<q> g(9);
  qkv::flat::exact_step<q>(qkv::flat::kind::softmax_backward, p.v, y.data(), d.data(), s, g.data());
  const auto ds = qkv::softmax_backward(p, scores, D);
  CHECK(std::vector<q>(ds.v, ds.v + 9) == g);
  qkv::flat::step_sizes tz{4, 3};
  qkv::flat::exact_step<q>(qkv::flat::kind::transpose, xq.v, nullptr, nullptr, tz, t.data());
  const auto xt = qkv::transposed(xq);
  CHECK(std::vector<q>(xt.v, xt.v + 12) == t);
  qkv::flat::exact_step<q>(qkv::flat::kind::add, k.data(), y.data(), nullptr, s, g.data());
  const auto sum = keys + scores;
  CHECK(std::vector<q>(sum.v, sum.v + 9) == g);
  // no exact form: nothing written, 1
  std::vector<q> untouched(9, q(7));
  for (auto kind : {qkv::flat::kind::softmax, qkv::flat::kind::scale, qkv::flat::kind::attended,
                    qkv::flat::kind::layer_norm, qkv::flat::kind::rope, qkv::flat::kind::relu})
    CHECK(qkv::flat::exact_step<q>(kind, k.data(), k.data(), k.data(), s, untouched.data()) == 1);
  CHECK(untouched == std::vector<q>(9, q(7)));
}

TEST_CASE("an exact step whose products overflow 64-bit integers fails with rational's message") {
  using q = qkv::exact::rational<long long>;
  // 3037000500^2 > 2^63 - 1 = 9223372036854775807 (3037000500^2 = 9223372037000250000)
  const std::vector<q> a{q(3037000500LL)}, b{q(3037000500LL)};
  std::vector<q> out(1);
  qkv::flat::step_sizes z{1, 1, 1, 1, 1, 0, 0, 0};
  CHECK_THROWS_WITH_AS(
      qkv::flat::exact_step<q>(qkv::flat::kind::dot, a.data(), b.data(), nullptr, z, out.data()),
      "qkv::exact::rational: a product overflows the integer type", std::overflow_error);
  // 3037000499^2 = 9223372030926249001 fits
  const std::vector<q> c{q(3037000499LL)};
  qkv::flat::exact_step<q>(qkv::flat::kind::dot, c.data(), c.data(), nullptr, z, out.data());
  CHECK(out[0] == q(9223372030926249001LL));
}

// kind 40, cast (a page whose steps mix types: 03b's double run and its exact values): the
// conversion matrix_cast does, value for value. 0.1f is 13421773 / 2^27 (13421773 = 0xCCCCCD, the
// 24-bit mantissa rounded up, times 2^-27), so as a double it is 0.100000001490116119384765625
// exactly and as a rational 13421773/134217728; 0.1 (double) is 3602879701896397 / 2^55.
TEST_CASE("a cast step converts as matrix_cast: float32 to double exactly, a float to its rational") {
  using q = qkv::exact::rational<long long>;
  const matrix<float, 2, 2> f{{{0.1f, -1.5f}, {0.f, 3.f}}};
  std::vector<double> d(4);
  qkv::flat::cast(f.v, 4, d.data());
  const auto md = qkv::matrix_cast<double>(f);
  CHECK(std::vector<double>(md.v, md.v + 4) == d);
  CHECK(d[0] == 0.100000001490116119384765625);
  std::vector<q> r(4);
  qkv::flat::cast(f.v, 4, r.data());
  CHECK(r == std::vector<q>{q(13421773, 134217728), q(-3, 2), q(0), q(3)});
  const matrix<double, 1, 1> tenth{{{0.1}}};
  qkv::flat::cast(tenth.v, 1, r.data());
  CHECK(r[0] == q(3602879701896397LL, 36028797018963968LL));
  // edges: NaN and infinity have no exact value; 2^-70 needs a denominator past 2^63
  const float nan = std::numeric_limits<float>::quiet_NaN(), tiny = 0x1p-70f;
  CHECK_THROWS_WITH_AS(qkv::flat::cast(&nan, 1, r.data()),
                       "qkv::exact::rational: NaN and infinity have no exact value", std::domain_error);
  CHECK_THROWS_WITH_AS(qkv::flat::cast(&tiny, 1, r.data()),
                       "qkv::exact::rational: the value does not fit the integer type", std::overflow_error);
  // float32 -> double keeps NaN and infinity
  const float edges[2] = {nan, -std::numeric_limits<float>::infinity()};
  qkv::flat::cast(edges, 2, d.data());
  CHECK(std::isnan(d[0]));
  CHECK(d[1] == -std::numeric_limits<double>::infinity());
  // constexpr, as the core's steps are
  constexpr double c = [] {
    const float one_third = 1.f / 3.f;
    double out = 0;
    qkv::flat::cast(&one_third, 1, &out);
    return out;
  }();
  static_assert(c == 0.3333333432674407958984375);  // 11184811 / 2^25
  CHECK(qkv::flat::cast_kind == static_cast<qkv::flat::kind>(40));
}

// kinds 41 and 42 (example 17's page: a bias's gradient and the SGD step). column_sums, by hand:
// [[1, 2], [3, 4], [5, 6]] gives [1 + 3 + 5, 2 + 4 + 6] = [9, 12]; in float32 the order shows:
// 1e8 + 1 + (-1e8) is (1e8 + 1) - 1e8 = 0 (1e8 + 1 rounds to 1e8: float32's spacing there is 8),
// as column_sums sums row 0 first. sgd: fma(-lr, g, w), one rounding of w - lr g (core/sgd.hpp's
// sgd_step, the reference for the bits below; torch.optim.SGD's fused kernel).
TEST_CASE("column sums and the SGD step give the bits of column_sums and sgd_step") {
  const matrix<float, 3, 2> a{{{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}};
  std::vector<float> out(2);
  qkv::flat::step_sizes z{1, 2, 2, 0, 3, 0, 0, 0};
  REQUIRE(qkv::flat::extended_step<float>(qkv::flat::column_sums_kind, a.v, nullptr, nullptr, nullptr, z, 0.f,
                                          out.data()) == 0);
  CHECK(out == std::vector<float>{9.f, 12.f});
  CHECK(same_bits(qkv::column_sums(a), out));
  const matrix<float, 3, 1> order{{{1e8f}, {1.f}, {-1e8f}}};
  qkv::flat::column_sums(order.v, 3, 1, out.data());
  CHECK(out[0] == 0.f);
  CHECK(same_bits(qkv::column_sums(order), std::vector<float>{out[0]}));
  // SGD: torch.optim.SGD(lr=0.1) on x's numbers with w as the gradient (float32 and double)
  std::vector<float> s(12);
  qkv::flat::step_sizes g{3, 4, 4, 4, 0, 0, 0, 0};
  REQUIRE(qkv::flat::extended_step<float>(qkv::flat::sgd_kind, x.v, w.v, nullptr, nullptr, g, 0.1f,
                                          s.data()) == 0);
  CHECK(same_bits(qkv::sgd_step(x, w, 0.1f), s));
  const auto xd = qkv::matrix_cast<double>(x), wd = qkv::matrix_cast<double>(w);
  std::vector<double> sd(12);
  qkv::flat::extended_step<double>(qkv::flat::sgd_kind, xd.v, wd.v, nullptr, nullptr, g, 0.1, sd.data());
  CHECK(same_bits(qkv::sgd_step(xd, wd, 0.1), sd));
  // 1 - 1 (1 + 2^-23) = -2^-23, exactly (one rounding of an exact value)
  const float one = 1.f, g1 = 1.f + 0x1p-23f;
  float r = 0;
  qkv::flat::sgd(&one, &g1, 1, 1.f, &r);
  CHECK(r == -0x1p-23f);
  // a NaN gradient gives a NaN weight; the kinds 40-59 other than these: 1, nothing written
  const float nan = std::numeric_limits<float>::quiet_NaN();
  qkv::flat::sgd(&one, &nan, 1, 0.1f, &r);
  CHECK(std::isnan(r));
  r = 7.f;
  CHECK(qkv::flat::extended_step<float>(static_cast<qkv::flat::kind>(59), &one, &one, nullptr, nullptr, z,
                                        0.f, &r) == 1);
  CHECK(r == 7.f);
}

// kind 43 (example 17's losses): cross_entropy's losses, bit for bit. By hand: logits [0, 0, 0, 0]
// with any target is log(4) - (0 - 0) = log 4 = 1.3862944 (float32: 1.38629436); with x's rows as
// logits the core's cross_entropy is the reference. A target outside the vocabulary, or not an
// integer, is cross_entropy's out_of_range.
TEST_CASE("cross-entropy losses give the bits of cross_entropy's losses") {
  const matrix<int, 1, 3> targets{{{3, 0, 1}}};
  const float tf[3] = {3.f, 0.f, 1.f};
  std::vector<float> out(3);
  qkv::flat::step_sizes z{3, 1, 4, 3, 4, 0, 0, 0};
  REQUIRE(qkv::flat::extended_step<float>(qkv::flat::cross_entropy_kind, x.v, tf, nullptr, nullptr, z, 0.f,
                                          out.data()) == 0);
  CHECK(same_bits(qkv::cross_entropy(x, targets).losses, out));
  const auto xd = qkv::matrix_cast<double>(x);
  const double td[3] = {3, 0, 1};
  std::vector<double> od(3);
  qkv::flat::cross_entropy_losses(xd.v, td, 3, 4, od.data());
  CHECK(same_bits(qkv::cross_entropy(xd, targets).losses, od));
  const float zeros[4] = {0.f, 0.f, 0.f, 0.f}, t2 = 2.f;
  float l = 0;
  qkv::flat::cross_entropy_losses(zeros, &t2, 1, 4, &l);
  CHECK(l == doctest::Approx(1.3862944).epsilon(1e-7));
  CHECK(l == qkv::log(4.f));
  const float bad[2] = {4.f, 0.5f};
  for (float t : bad)
    CHECK_THROWS_WITH_AS(qkv::flat::cross_entropy_losses(zeros, &t, 1, 4, &l),
                         "cross_entropy: a target id is outside the vocabulary (the logits' columns)",
                         std::out_of_range);
}

// kind 44 (example 17's d_tok): embed_backward's gradient, bit for bit. By hand: ids [0, 1, 0] and
// d_out rows [1, 2], [3, 4], [5, -0] give row 0 = [0 + 1 + 5, 0 + 2 + -0] = [6, 2], row 1 = [3, 4],
// rows 2 and 3 = 0 (the table's rows no position holds); an id outside the table fails as
// embed_backward's does.
TEST_CASE("the embedding's backward gives the bits of embed_backward") {
  const matrix<float, 3, 2> d{{{1.f, 2.f}, {3.f, 4.f}, {5.f, -0.f}}};
  const matrix<int, 1, 3> ids{{{0, 1, 0}}};
  const float idf[3] = {0.f, 1.f, 0.f};
  std::vector<float> out(8, 7.f);
  qkv::flat::step_sizes z{4, 2, 2, 3, 3, 0, 0, 0};
  REQUIRE(qkv::flat::extended_step<float>(qkv::flat::embedding_backward_kind, d.v, idf, nullptr, nullptr, z,
                                          0.f, out.data()) == 0);
  CHECK(out == std::vector<float>{6.f, 2.f, 3.f, 4.f, 0.f, 0.f, 0.f, 0.f});
  CHECK(same_bits(qkv::embed_backward<4>(d, ids), out));
  // x's rows as d_out into a table of 5 rows, ids [4, 4, 2]
  const matrix<int, 1, 3> ids2{{{4, 4, 2}}};
  const float id2[3] = {4.f, 4.f, 2.f};
  std::vector<float> t(20);
  qkv::flat::embedding_backward(x.v, id2, 3, 5, 4, t.data());
  CHECK(same_bits(qkv::embed_backward<5>(x, ids2), t));
  const float bad = 5.f;
  CHECK_THROWS_WITH_AS(qkv::flat::embedding_backward(x.v, &bad, 1, 5, 4, t.data()),
                       "embed_backward: a token id is outside the embedding table's rows", std::out_of_range);
}

// kind 45 (example 17's tok[ids]): embed's rows, value for value. By hand: ids [2, 0, 2] of x
// (3, 4) are x's rows 3, 1, 3; an id outside the table is embed's out_of_range.
TEST_CASE("the embedding's rows are embed's") {
  const matrix<int, 1, 3> ids{{{2, 0, 2}}};
  const float idf[3] = {2.f, 0.f, 2.f};
  std::vector<float> out(12);
  qkv::flat::step_sizes z{3, 4, 4, 3, 3, 0, 0, 0};
  REQUIRE(qkv::flat::extended_step<float>(qkv::flat::embedding_kind, x.v, idf, nullptr, nullptr, z, 0.f,
                                          out.data()) == 0);
  CHECK(same_bits(qkv::embed(x, ids), out));
  CHECK(out[0] == -0.3f);
  CHECK(out[4] == 0.1f);
  const float bad = 3.f;
  CHECK_THROWS_WITH_AS(qkv::flat::embedding(x.v, &bad, 1, 3, 4, out.data()),
                       "embed: a token id is outside the embedding table's rows", std::out_of_range);
}

// kind 53 (example 14's key_padding_mask from its lengths): key_padding_mask<B, N>'s booleans as
// 1 and 0. By hand: lengths [3, 1, 0] over N = 3 keys: [[0 0 0], [0 1 1], [1 1 1]]. A length
// that is not a whole number from 0 to N fails, as the batch functions refuse a length above N.
TEST_CASE("the key padding mask from the lengths is key_padding_mask's") {
  const float lengths[3] = {3.f, 1.f, 0.f};
  std::vector<float> out(9);
  qkv::flat::step_sizes z{3, 3, 0, 0, 0, 0, 0, 0};
  REQUIRE(qkv::flat::extended_step<float>(qkv::flat::key_padding_mask_kind, lengths, nullptr, nullptr,
                                          nullptr, z, 0.f, out.data()) == 0);
  const auto mask = qkv::key_padding_mask<3, 3>(std::array<std::size_t, 3>{3, 1, 0});
  CHECK(same_bits(qkv::matrix_cast<float>(mask), out));
  CHECK(out == std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1, 1});
  for (const double bad :
       {4.0, -1.0, 1.5, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    const double row[1] = {bad};
    std::vector<double> o(3);
    CHECK_THROWS_WITH_AS(
        qkv::flat::key_padding_mask(row, 1, 3, o.data()),
        "key_padding_mask: a length is not a whole number from 0 to the sequences' padded length",
        std::length_error);
  }
}

// kind 54 (example 14's scaled scores): attend_padded's scaled scores, bit for bit: the scores
// divided by float(sqrt(d_k)), then every key j >= length -inf. By hand: x's scores x xᵀ / sqrt(4)
// with length 2: column 2 is -inf in every row (a NaN score there too: masked, as attend_padded
// masks it); a cell of `masked` (the learner's) is -inf as well.
TEST_CASE("a padded division is attend_padded's scaled scores, its mask from the mask matrix") {
  const auto r = qkv::attend_padded(x, x, x, 2);
  const float padding[6] = {0, 0, 0, 0, 0, 1};  // rows of lengths 3 and 2: row 1 masks key 2
  std::vector<float> out(9);
  qkv::flat::step_sizes z{3, 3, 0, 3, 0, 0, 1, 0};
  REQUIRE(qkv::flat::extended_step<float>(qkv::flat::padded_divide_kind, r.scores.v, padding, nullptr,
                                          nullptr, z, qkv::sqrt(4.f), out.data()) == 0);
  CHECK(same_bits(r.scaled_scores, out));
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(out[2] == -inf);
  CHECK(out[8] == -inf);
  CHECK(out[0] == r.scores(0, 0) / 2.f);
  auto scores = r.scores;
  scores(1, 2) = std::numeric_limits<float>::quiet_NaN();
  const unsigned char mine[9] = {0, 1, 0, 0, 0, 0, 0, 0, 0};
  REQUIRE(qkv::flat::extended_step<float>(qkv::flat::padded_divide_kind, scores.v, padding, nullptr, mine, z,
                                          2.f, out.data()) == 0);
  CHECK(out[5] == -inf);
  CHECK(out[1] == -inf);
  CHECK(out[3] == r.scaled_scores(1, 0));
}

// kinds 46-52 (example 16's flash blocks): flash attention's m and l, P recomputed from m and l or
// from the logsumexp L, L itself, and the backward's sums, against core/flash_backward.hpp's
// flash_attention_forward, row_logsumexp and both flash_attention_backward, bit for bit: the
// backward written as the page writes it, P, dP = dO · v (dot), D = rowsum(dO ∘ O) (row_dot),
// dS = P (dP - D) (softmax_backward), dS / sqrt(d_k) (divide), then dQ over the keys and dK, dV
// over the queries, a masked key skipped (causal, and not).
TEST_CASE("flash's statistics, weights and backward sums give flash_attention_backward's bits") {
  using qkv::flat::step_sizes;
  // by hand: one query, scores [0, 0, -inf] in blocks of 2: block 0 gives m = 0, l = e^0 + e^0 = 2;
  // block 1 (the masked key) adds nothing. P = e^(0 - 0) / 2 = 0.5, 0.5, 0 (masked); L = 0 + log 2;
  // e^(0 - log 2) = 0.5 (to a rounding: exp and log are rounded); dQ with A = [1, 2, 4] against
  // B's rows [1], [10], [100]: 1 + 20 = 21 (the masked key's 400 skipped)
  const double inf = std::numeric_limits<double>::infinity();
  const double s1[3] = {0, 0, -inf};
  double m = 7, l = 7, L = 7, p[3], a3[3] = {1, 2, 4}, b3[3] = {1, 10, 100}, dq = 7;
  REQUIRE(qkv::flat::extended_step<double>(qkv::flat::flash_row_max_kind, s1, nullptr, nullptr, nullptr,
                                           step_sizes{1, 1, 3, 0, 2}, 0.0, &m) == 0);
  qkv::flat::extended_step<double>(qkv::flat::flash_row_sum_kind, s1, nullptr, nullptr, nullptr,
                                   step_sizes{1, 1, 3, 0, 2}, 0.0, &l);
  CHECK((m == 0 && l == 2));
  qkv::flat::extended_step<double>(qkv::flat::flash_weights_kind, s1, &m, &l, nullptr, step_sizes{1, 3}, 0.0,
                                   p);
  CHECK((p[0] == 0.5 && p[1] == 0.5 && p[2] == 0));
  qkv::flat::extended_step<double>(qkv::flat::logsumexp_kind, &m, &l, nullptr, nullptr, step_sizes{1, 1}, 0.0,
                                   &L);
  CHECK(L == qkv::log(2.0));
  qkv::flat::extended_step<double>(qkv::flat::logsumexp_weights_kind, s1, &L, nullptr, nullptr,
                                   step_sizes{1, 3}, 0.0, p);
  CHECK((p[0] == doctest::Approx(0.5).epsilon(1e-15) && p[2] == 0));
  qkv::flat::extended_step<double>(qkv::flat::flash_over_keys_kind, a3, b3, s1, nullptr,
                                   step_sizes{1, 1, 3, 1, 3}, 0.0, &dq);
  CHECK(dq == 21);
  // a fully masked row: m = -inf, l = 0, L = -inf, P = 0, and nothing summed: 0
  const double dead[3] = {-inf, -inf, -inf};
  qkv::flat::flash_statistic(dead, 1, 3, 2, 1, &m);
  qkv::flat::flash_statistic(dead, 1, 3, 2, 3, &l);
  qkv::flat::logsumexp(&m, &l, 1, &L);
  CHECK((m == -inf && l == 0 && L == -inf));
  qkv::flat::flash_weights(dead, &m, &l, 1, 3, p);
  CHECK((p[0] == 0 && p[1] == 0 && p[2] == 0));
  qkv::flat::flash_sum(a3, 3, b3, 1, dead, 1, 1, 3, true, &dq);
  CHECK(dq == 0);
  // a block of 0 keys is refused, nothing written
  m = 7;
  CHECK(qkv::flat::extended_step<double>(qkv::flat::flash_row_max_kind, s1, nullptr, nullptr, nullptr,
                                         step_sizes{1, 1, 3, 0, 0}, 0.0, &m) == 1);
  CHECK(m == 7);

  // the core's own: 4 queries, 5 keys (blocks of 2: the last block of 1), d_k 3, d_v 2
  constexpr matrix<float, 4, 3> q{
      {{0.3f, -1.2f, 2.5f}, {1.1f, 0.4f, -0.6f}, {-0.7f, 0.9f, 0.2f}, {2.f, -0.5f, 1.5f}}};
  constexpr matrix<float, 5, 3> k{
      {{0.5f, -1.f, 2.f}, {1.5f, 0.25f, -0.75f}, {-2.f, 3.f, 1.f}, {0.1f, 0.2f, 0.3f}, {4.f, -0.5f, 0.9f}}};
  constexpr matrix<float, 5, 2> v{{{1.f, -2.f}, {0.5f, 0.75f}, {-1.5f, 2.5f}, {3.f, 0.1f}, {-0.2f, -0.9f}}};
  constexpr matrix<float, 4, 2> dO{{{0.6f, -1.3f}, {2.1f, 0.2f}, {-0.4f, 0.8f}, {1.f, 1.7f}}};
  const float divisor = qkv::sqrt(3.f);
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    qkv::attention_options<float> opt;
    opt.causal = causal;
    std::vector<float> s(20);  // the scores flash computes, masked above the diagonal when causal
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 5; ++j) s[i * 5 + j] = qkv::detail::flash_score(q, k, i, j, opt);
    const auto fwd = qkv::flash_attention_forward<2>(q, k, v, opt);
    std::vector<float> mm(4), ll(4), o(8), LL(4);
    REQUIRE(qkv::flat::extended_step<float>(qkv::flat::flash_row_max_kind, s.data(), nullptr, nullptr,
                                            nullptr, step_sizes{4, 1, 5, 0, 2}, 0.f, mm.data()) == 0);
    qkv::flat::extended_step<float>(qkv::flat::flash_row_sum_kind, s.data(), nullptr, nullptr, nullptr,
                                    step_sizes{4, 1, 5, 0, 2}, 0.f, ll.data());
    qkv::flat::extended_step<float>(qkv::flat::kind::online_attention, s.data(), v.v, nullptr, nullptr,
                                    step_sizes{4, 2, 5, 2, 2}, 0.f, o.data());
    CHECK(same_bits(fwd.row_max, mm));
    CHECK(same_bits(fwd.row_sum, ll));
    CHECK(same_bits(fwd.context, o));
    qkv::flat::extended_step<float>(qkv::flat::logsumexp_kind, mm.data(), ll.data(), nullptr, nullptr,
                                    step_sizes{4, 1}, 0.f, LL.data());
    CHECK(same_bits(qkv::row_logsumexp(fwd), LL));
    // the backward as the page's steps, from P (m and l, or L)
    const auto backward = [&](const std::vector<float>& P) {
      std::vector<float> dP(20), D(4), dS(20), dsc(20), dQ(12), dK(15), dV(10);
      qkv::flat::dot(dO.v, 2, v.v, 2, 4, 5, 2, 0, 0, static_cast<const float*>(nullptr), dP.data());
      qkv::flat::row_dot(dO.v, 2, o.data(), 2, 4, 2, 0, 0, D.data());
      qkv::flat::softmax_backward(P.data(), dP.data(), D.data(), 4, 5, dS.data());
      qkv::flat::scale(dS.data(), 4, 5, divisor, true, nullptr, static_cast<const float*>(nullptr),
                       dsc.data());
      qkv::flat::extended_step<float>(qkv::flat::flash_over_keys_kind, dsc.data(), k.v, s.data(), nullptr,
                                      step_sizes{4, 3, 5, 3, 5}, 0.f, dQ.data());
      qkv::flat::extended_step<float>(qkv::flat::flash_over_queries_kind, dsc.data(), q.v, s.data(), nullptr,
                                      step_sizes{5, 3, 5, 3, 4}, 0.f, dK.data());
      qkv::flat::extended_step<float>(qkv::flat::flash_over_queries_kind, P.data(), dO.v, s.data(), nullptr,
                                      step_sizes{5, 2, 5, 2, 4}, 0.f, dV.data());
      return std::vector<std::vector<float>>{D, dQ, dK, dV};
    };
    std::vector<float> P(20), Pl(20);
    qkv::flat::extended_step<float>(qkv::flat::flash_weights_kind, s.data(), mm.data(), ll.data(), nullptr,
                                    step_sizes{4, 5}, 0.f, P.data());
    qkv::flat::extended_step<float>(qkv::flat::logsumexp_weights_kind, s.data(), LL.data(), nullptr, nullptr,
                                    step_sizes{4, 5}, 0.f, Pl.data());
    const auto g = qkv::flash_attention_backward<2>(q, k, v, fwd, dO, opt);
    const auto mine = backward(P);
    CHECK(same_bits(g.d_row, mine[0]));
    CHECK(same_bits(g.d_queries, mine[1]));
    CHECK(same_bits(g.d_keys, mine[2]));
    CHECK(same_bits(g.d_values, mine[3]));
    const auto gl = qkv::flash_attention_backward<2>(q, k, v, fwd.context, qkv::row_logsumexp(fwd), dO, opt);
    const auto lse = backward(Pl);
    CHECK(same_bits(gl.d_queries, lse[1]));
    CHECK(same_bits(gl.d_keys, lse[2]));
    CHECK(same_bits(gl.d_values, lse[3]));
  }
}

// kind 57 (example 17's W_q after AdamW): the first step of AdamW from zero moments, bit for bit
// adamw_step's (core/adamw.hpp: the same adamw_element) given the scalars adamw_step_scalars
// makes. By hand, with torch.optim.AdamW(lr=0.01)'s scalars in float32 (decay 1 - 0.01 0.01 =
// 0.9999, 1 - beta1 = 0.1, 1 - beta2 = 0.001, -(lr / bc1) = -0.1, sqrt(bc2) = sqrt(0.001)): W = 1,
// g = 2: m = 0.2, v = 0.004, sqrt(v) / sqrt(bc2) = 2, so W' = 0.9999 - 0.1 0.2 / (2 + 1e-8) =
// 0.9899 in real numbers; float32 rounds 7 operations of at most 2^-24 relative each and the
// quotient's terms are near 1, so W' is within 8 ulps of 1 (8 2^-23 = 9.6e-7) of 0.9899.
// g = 0: m = v = 0, the quotient -0.1 0 / eps = -0, W' = W decay exactly: 0.9999f.
TEST_CASE("the AdamW step gives the bits of adamw_step's first step") {
  const auto sc = qkv::adamw_step_scalars<float>({.lr = 0.01}, 1);
  const matrix<float, 1, 8> s{
      {{sc.decay, sc.beta1, sc.alpha1, sc.beta2, sc.value2, sc.step_size, sc.bc2_sqrt, sc.eps}}};
  CHECK(sc.decay == 0.9999f);
  CHECK(sc.step_size == -0.1f);
  CHECK(sc.alpha1 == 0.1f);
  CHECK(sc.value2 == 0.001f);
  const float one = 1.f, two = 2.f, zero = 0.f;
  float r = 0;
  qkv::flat::adamw(&one, &two, s.v, 1, &r);
  CHECK(std::fabs(r - 0.9899f) <= 8 * 0x1p-23f);
  qkv::flat::adamw(&one, &zero, s.v, 1, &r);
  CHECK(r == 0.9999f);
  // x's numbers as the weights, w's as the gradient: adamw_step's bits (float32 and double)
  std::vector<float> out(12);
  const qkv::flat::step_sizes z{3, 4, 4, 4, 0, 0, 0, 0};
  REQUIRE(qkv::flat::extended_step<float>(qkv::flat::adamw_kind, x.v, w.v, s.v, nullptr, z, 0.f,
                                          out.data()) == 0);
  CHECK(same_bits(qkv::adamw_step(qkv::adamw_parameter<float, 3, 4>{x}, w, {.lr = 0.01}).w, out));
  const auto sd = qkv::adamw_step_scalars<double>({}, 1);  // PyTorch's defaults: lr 1e-3
  const matrix<double, 1, 8> s64{
      {{sd.decay, sd.beta1, sd.alpha1, sd.beta2, sd.value2, sd.step_size, sd.bc2_sqrt, sd.eps}}};
  const auto xd = qkv::matrix_cast<double>(x), wd = qkv::matrix_cast<double>(w);
  std::vector<double> outd(12);
  qkv::flat::extended_step<double>(qkv::flat::adamw_kind, xd.v, wd.v, s64.v, nullptr, z, 0.0, outd.data());
  CHECK(same_bits(qkv::adamw_step(qkv::adamw_parameter<double, 3, 4>{xd}, wd).w, outd));
  // a NaN gradient gives a NaN weight (adamw.hpp's edges); an infinite one: m / sqrt(v) is inf / inf
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  qkv::flat::adamw(&one, &nan, s.v, 1, &r);
  CHECK(std::isnan(r));
  qkv::flat::adamw(&one, &inf, s.v, 1, &r);
  CHECK(std::isnan(r));
  CHECK(qkv::flat::adamw_kind == static_cast<qkv::flat::kind>(57));
}
