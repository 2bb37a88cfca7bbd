// The 50-digit truth of one page step (include/qkv/reference/step_truth.hpp): each kind against a
// derivation by hand or against Boost's own functions, its error in ulps, and its 20-digit text
// against Boost's str(20), which io/page_truth.hpp wrote before and which the truth module
// (wasm/qkv_truth.cpp) cannot carry (iostreams).
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include <qkv/core/flat_steps.hpp>
#include <qkv/reference/step_truth.hpp>

namespace {

using qkv::flat::kind;
using qkv::flat::step_sizes;
using qkv::reference::step_truth;
using qkv::reference::truth_real;
namespace mp = boost::multiprecision;

std::vector<truth_real> reals(std::initializer_list<double> v) { return {v.begin(), v.end()}; }

}  // namespace

TEST_CASE("A product's truth is the exact sum of its products, its bias added") {
  // a (2 x 2) = [[1.5, 2], [0.1f, -3]], b (2 x 2) rows as dot's keys: [[0.25, 3], [1, 1]], bias [0.5, -1]
  // out(0, 0) = 1.5 * 0.25 + 2 * 3 + 0.5 = 0.375 + 6 + 0.5 = 6.875
  // out(0, 1) = 1.5 * 1 + 2 * 1 - 1 = 2.5
  // out(1, 0) = 0.1f * 0.25 - 3 * 3 + 0.5 = 0.025000000372529 - 8.5 (0.1f = 13421773 / 2^27, exactly)
  const auto a = reals({1.5, 2, double(0.1f), -3}), b = reals({0.25, 3, 1, 1}), c = reals({0.5, -1});
  std::vector<truth_real> out(4);
  const double computed[4] = {};
  step_sizes z{2, 2, 2, 2, 2, 0, 0, 0};
  REQUIRE(step_truth(kind::dot, a.data(), b.data(), c.data(), z, 0, computed, out.data()) == 0);
  CHECK(out[0] == truth_real(6.875));
  CHECK(out[1] == truth_real(2.5));
  CHECK(out[2] == truth_real(13421773) / 536870912 - truth_real(8.5));  // 13421773 / 2^29 = 0.1f / 4
  // matmul: b's rows are the sum's terms: out(0, 0) = 1.5 * 0.25 + 2 * 1 = 2.375 (no bias)
  REQUIRE(step_truth(kind::matmul, a.data(), b.data(), nullptr, z, 0, computed, out.data()) == 0);
  CHECK(out[0] == truth_real(2.375));
  // row_dot: out(i, 0) = a(i) . b(i): 1.5 * 0.25 + 2 * 3 = 6.375
  z.cols = 1;
  REQUIRE(step_truth(kind::row_dot, a.data(), b.data(), nullptr, z, 0, computed, out.data()) == 0);
  CHECK(out[0] == truth_real(6.375));
}

TEST_CASE("A scaled score's truth uses the scale as stated, and stays -inf where the step masked") {
  // divide by float32(sqrt(24)) = 4.898979663848876953125 (as a double, the page's divisor)
  const double divisor = double(std::sqrt(24.0f));
  const auto a = reals({1, 2, 3, 4}), c = reals({0.5, 0, 0, 0});
  const double computed[4] = {0, -std::numeric_limits<double>::infinity(), 0, 0};
  std::vector<truth_real> out(4);
  const step_sizes z{2, 2, 2, 0, 0, 0, 0, 0};
  REQUIRE(step_truth(kind::divide, a.data(), nullptr, c.data(), z, divisor, computed, out.data()) == 0);
  CHECK(out[0] == truth_real(1) / truth_real(divisor) + truth_real(0.5));  // 1 / 4.89... + 0.5 (c added)
  CHECK((mp::isinf(out[1]) && out[1] < 0));                                // masked where the step gave -inf
  CHECK(out[3] == truth_real(4) / truth_real(divisor));
  // scale by 0.125: 3 * 0.125 = 0.375, exactly
  REQUIRE(step_truth(kind::scale, a.data(), nullptr, nullptr, z, 0.125, computed, out.data()) == 0);
  CHECK(out[2] == truth_real(0.375));
}

TEST_CASE("A softmax's truth is e^(s - max) / sum in 50 digits; a masked row is 0, a NaN row NaN") {
  // row 0: [0, 0] -> [1/2, 1/2] exactly; row 1: [-inf, 1] -> [0, 1]
  // row 2: [1, 2]: e^(1 - 2) / (e^-1 + 1) = 1 / (1 + e), Boost's 50-digit exp
  const double inf = std::numeric_limits<double>::infinity();
  const auto a = reals({0, 0, -inf, 1, 1, 2, -inf, -inf, NAN, 1});
  std::vector<truth_real> out(10);
  const double computed[10] = {};
  const step_sizes z{5, 2, 2, 0, 0, 0, 0, 0};
  REQUIRE(step_truth(kind::softmax, a.data(), nullptr, nullptr, z, 0, computed, out.data()) == 0);
  CHECK(out[0] == truth_real(0.5));
  CHECK(out[1] == truth_real(0.5));
  CHECK(out[2] == 0);
  CHECK(out[3] == 1);
  const truth_real want = 1 / (1 + mp::exp(truth_real(1)));
  CHECK(mp::abs(out[4] - want) <= want * truth_real("1e-48"));  // the same exp; the division rounds once
  CHECK(out[6] == 0);                                           // every key masked: 0 (docs/numerics.md)
  CHECK(out[7] == 0);
  CHECK(mp::isnan(out[8]));  // a NaN score: the row is NaN
  CHECK(mp::isnan(out[9]));
}

TEST_CASE("The whole matrix's softmax (01's numpy pitfall) has one denominator for every cell") {
  // a = [[0, 0], [-inf, 0]]: e^0 = 1 three times, -inf gives 0: each 1/3, the masked one 0
  const auto a = reals({0, 0, -std::numeric_limits<double>::infinity(), 0});
  std::vector<truth_real> out(4);
  const double computed[4] = {};
  REQUIRE(step_truth(kind::softmax_all, a.data(), nullptr, nullptr, {2, 2, 2, 0, 0, 0, 0, 0}, 0, computed,
                     out.data()) == 0);
  CHECK(out[0] == truth_real(1) / 3);
  CHECK(out[2] == 0);
  CHECK(out[3] == truth_real(1) / 3);
}

TEST_CASE("LayerNorm's truth: (a - mean) / sqrt(var + eps) w + b, the biased variance") {
  // a = [1, 3]: mean 2, var ((1 - 2)^2 + (3 - 2)^2) / 2 = 1; eps 0 -> [-1, 1]; w = [2, 0.5], b = [0, 1]
  // -> [-2, 1.5]
  const auto a = reals({1, 3}), w = reals({2, 0.5}), b = reals({0, 1});
  std::vector<truth_real> out(2);
  const double computed[2] = {};
  const step_sizes z{1, 2, 2, 0, 0, 0, 0, 0};
  REQUIRE(step_truth(kind::layer_norm, a.data(), w.data(), b.data(), z, 0, computed, out.data()) == 0);
  CHECK(out[0] == -2);
  CHECK(out[1] == truth_real(1.5));
}

TEST_CASE("The copies' truths are their operands' numbers; RoPE has none") {
  // a (2 x 3) = [[1, 2, 3], [4, 5, 6]]: its transpose (3 x 2), its block (row 1, cols 1..2), beside b
  const auto a = reals({1, 2, 3, 4, 5, 6}), b = reals({7, 8});
  std::vector<truth_real> out(8);
  const double computed[8] = {};
  REQUIRE(step_truth(kind::transpose, a.data(), nullptr, nullptr, {3, 2, 3, 0, 0, 0, 0, 0}, 0, computed,
                     out.data()) == 0);
  CHECK(out[1] == 4);  // out(0, 1) = a(1, 0)
  CHECK(out[2] == 2);  // out(1, 0) = a(0, 1)
  REQUIRE(step_truth(kind::block, a.data(), nullptr, nullptr, {1, 2, 3, 0, 0, 0, 1, 1}, 0, computed,
                     out.data()) == 0);
  CHECK(out[0] == 5);
  CHECK(out[1] == 6);
  REQUIRE(step_truth(kind::hconcat, a.data(), b.data(), nullptr, {2, 4, 3, 1, 0, 0, 0, 0}, 0, computed,
                     out.data()) == 0);
  CHECK(out[3] == 7);  // row 0: 1, 2, 3, then b(0) = 7
  CHECK(out[7] == 8);
  // softmax's backward: P (dP - D): 0.5 (3 - 1) = 1, and 0 where P is 0 whatever dP is
  const auto p = reals({0.5, 0}), dp = reals({3, NAN}), d = reals({1});
  REQUIRE(step_truth(kind::softmax_backward, p.data(), dp.data(), d.data(), {1, 2, 2, 0, 0, 0, 0, 0}, 0,
                     computed, out.data()) == 0);
  CHECK(out[0] == 1);
  CHECK(out[1] == 0);
  CHECK(step_truth(kind::rope, a.data(), b.data(), b.data(), {1, 2, 2, 1, 2, 2, 0, 0}, 0, computed,
                   out.data()) == 1);
}

TEST_CASE("Chapter four's steps: embeddings, their backward, cross entropy, column sums, SGD") {
  // a table (3 x 2) = [[1, 2], [3, 4], [5, 6]], ids [2, 0]: embedding -> [[5, 6], [1, 2]]
  const auto table = reals({1, 2, 3, 4, 5, 6}), ids = reals({2, 0});
  std::vector<truth_real> out(6);
  const double computed[6] = {};
  REQUIRE(step_truth(qkv::flat::embedding_kind, table.data(), ids.data(), nullptr, {2, 2, 2, 0, 3, 0, 0, 0},
                     0, computed, out.data()) == 0);
  CHECK(out[0] == 5);
  CHECK(out[3] == 2);
  // its backward: d_out (2 x 2) = [[0.5, 1], [2, 4]] into a (3 x 2) table: row 2 = [0.5, 1], row 0
  // = [2, 4], row 1 = 0
  const auto d_out = reals({0.5, 1, 2, 4});
  REQUIRE(step_truth(qkv::flat::embedding_backward_kind, d_out.data(), ids.data(), nullptr,
                     {3, 2, 2, 0, 2, 0, 0, 0}, 0, computed, out.data()) == 0);
  CHECK(out[0] == 2);
  CHECK(out[2] == 0);
  CHECK(out[4] == truth_real(0.5));
  // an id outside the table has no truth (the step fails on it)
  const auto bad = reals({3, 0});
  CHECK(step_truth(qkv::flat::embedding_kind, table.data(), bad.data(), nullptr, {2, 2, 2, 0, 3, 0, 0, 0}, 0,
                   computed, out.data()) == 1);
  // cross entropy of the logits [0, 0] for target 1: log(e^0 + e^0) - 0 = log 2 (Boost's 50 digits)
  const auto logits = reals({0, 0}), target = reals({1});
  REQUIRE(step_truth(qkv::flat::cross_entropy_kind, logits.data(), target.data(), nullptr,
                     {1, 1, 2, 0, 2, 0, 0, 0}, 0, computed, out.data()) == 0);
  CHECK(out[0] == mp::log(truth_real(2)));
  // column sums of [[1, 2], [3, 4], [5, 6]]: [9, 12]; SGD with lr 0.1 (as a double): 1 - 0.1 * 3
  REQUIRE(step_truth(qkv::flat::column_sums_kind, table.data(), nullptr, nullptr, {1, 2, 2, 0, 3, 0, 0, 0}, 0,
                     computed, out.data()) == 0);
  CHECK(out[0] == 9);
  CHECK(out[1] == 12);
  REQUIRE(step_truth(qkv::flat::sgd_kind, table.data(), table.data() + 2, nullptr, {1, 2, 2, 2, 0, 0, 0, 0},
                     0.1, computed, out.data()) == 0);
  CHECK(out[0] == 1 - truth_real(0.1) * 3);  // 0.1 the double nearest 1/10, exactly
}

TEST_CASE("Flash's truths: m, l, L, the recomputed weights, its output and its sums are exact") {
  // one query's scores [0, 0, -inf] (the last key masked), blocks of 2: m = 0, l = e^0 + e^0 = 2;
  // P = e^(0 - 0) / 2 = 0.5, 0.5 and 0 (masked); L = 0 + log 2, e^(0 - L) = 1/2; flash's output
  // over values [1], [3], [100]: (1 + 3) / 2 = 2, the masked key's 100 not reached
  const double inf = std::numeric_limits<double>::infinity();
  const auto s = reals({0, 0, -inf}), v = reals({1, 3, 100});
  std::vector<truth_real> m(1), l(1), L(1), p(3), o(1);
  const double computed[3] = {};
  REQUIRE(step_truth(qkv::flat::flash_row_max_kind, s.data(), nullptr, nullptr, {1, 1, 3, 0, 2, 0, 0, 0}, 0,
                     computed, m.data()) == 0);
  REQUIRE(step_truth(qkv::flat::flash_row_sum_kind, s.data(), nullptr, nullptr, {1, 1, 3, 0, 2, 0, 0, 0}, 0,
                     computed, l.data()) == 0);
  CHECK(m[0] == 0);
  CHECK(l[0] == 2);
  REQUIRE(step_truth(qkv::flat::flash_weights_kind, s.data(), m.data(), l.data(), {1, 3, 3, 1, 0, 0, 0, 0}, 0,
                     computed, p.data()) == 0);
  CHECK(p[0] == truth_real(0.5));
  CHECK(p[2] == 0);
  REQUIRE(step_truth(qkv::flat::logsumexp_kind, m.data(), l.data(), nullptr, {1, 1, 1, 1, 0, 0, 0, 0}, 0,
                     computed, L.data()) == 0);
  CHECK(L[0] == mp::log(truth_real(2)));
  REQUIRE(step_truth(qkv::flat::logsumexp_weights_kind, s.data(), L.data(), nullptr, {1, 3, 3, 1, 0, 0, 0, 0},
                     0, computed, p.data()) == 0);
  CHECK(mp::abs(p[1] - truth_real(0.5)) < truth_real(1e-45));  // e^(-log 2): Boost's exp of its log
  CHECK(p[2] == 0);
  REQUIRE(step_truth(kind::online_attention, s.data(), v.data(), nullptr, {1, 1, 3, 1, 2, 0, 0, 0}, 0,
                     computed, o.data()) == 0);
  CHECK(o[0] == 2);
  // dQ = sum over the keys of [1, 2, 4] times the rows [1], [10], [100]: 1 + 20 = 21 (the masked
  // key's 400 skipped); over the queries, the same numbers as one key's column: 21 again
  const auto a = reals({1, 2, 4}), b = reals({1, 10, 100});
  REQUIRE(step_truth(qkv::flat::flash_over_keys_kind, a.data(), b.data(), s.data(), {1, 1, 3, 1, 3, 0, 0, 0},
                     0, computed, o.data()) == 0);
  CHECK(o[0] == 21);
  REQUIRE(step_truth(qkv::flat::flash_over_queries_kind, a.data(), b.data(), s.data(),
                     {1, 1, 1, 1, 3, 0, 0, 0}, 0, computed, o.data()) == 0);
  CHECK(o[0] == 21);
  // a fully masked row: m = -inf, l = 0, L = -inf, P = 0, output 0; a NaN score: m, l NaN
  const auto dead = reals({-inf, -inf, -inf}), nan = reals({0, NAN, 1});
  step_truth(qkv::flat::flash_row_max_kind, dead.data(), nullptr, nullptr, {1, 1, 3, 0, 2, 0, 0, 0}, 0,
             computed, m.data());
  step_truth(qkv::flat::flash_row_sum_kind, dead.data(), nullptr, nullptr, {1, 1, 3, 0, 2, 0, 0, 0}, 0,
             computed, l.data());
  CHECK((mp::isinf(m[0]) && m[0] < 0 && l[0] == 0));
  step_truth(qkv::flat::logsumexp_kind, m.data(), l.data(), nullptr, {1, 1, 1, 1, 0, 0, 0, 0}, 0, computed,
             L.data());
  CHECK((mp::isinf(L[0]) && L[0] < 0));
  step_truth(qkv::flat::flash_weights_kind, dead.data(), m.data(), l.data(), {1, 3, 3, 1, 0, 0, 0, 0}, 0,
             computed, p.data());
  CHECK((p[0] == 0 && p[1] == 0 && p[2] == 0));
  step_truth(kind::online_attention, dead.data(), v.data(), nullptr, {1, 1, 3, 1, 2, 0, 0, 0}, 0, computed,
             o.data());
  CHECK(o[0] == 0);
  step_truth(qkv::flat::flash_row_sum_kind, nan.data(), nullptr, nullptr, {1, 1, 3, 0, 2, 0, 0, 0}, 0,
             computed, l.data());
  CHECK(mp::isnan(l[0]));
}

TEST_CASE("A value's error against its truth is in ulps of its type, subnormals included") {
  // 1 + 2^-23 (float32's next after 1) against 1: 1 ulp; against 1 + 2^-24: half an ulp
  CHECK(qkv::reference::truth_ulps(1 + std::ldexp(1.0, -23), truth_real(1), 24, -126) == 1);
  CHECK(qkv::reference::truth_ulps(1 + std::ldexp(1.0, -23), 1 + mp::ldexp(truth_real(1), -24), 24, -126) ==
        0.5);
  // just below 1 the ulp halves: 1 - 2^-24 against 1 - 2^-23 is +1 ulp (2^-24)
  CHECK(qkv::reference::truth_ulps(1 - std::ldexp(1.0, -24), 1 - mp::ldexp(truth_real(1), -23), 24, -126) ==
        1);
  // float32's subnormals: the ulp stays 2^-149; 2^-149 against 0.5 2^-149: half an ulp
  CHECK(qkv::reference::truth_ulps(std::ldexp(1.0, -149), mp::ldexp(truth_real(1), -150), 24, -126) == 0.5);
  // double: 1 + 2^-52 against 1
  CHECK(qkv::reference::truth_ulps(1 + std::ldexp(1.0, -52), truth_real(1), 53, -1022) == 1);
  CHECK(std::isnan(qkv::reference::truth_ulps(NAN, truth_real(1), 24, -126)));
  CHECK(qkv::reference::truth_ulps(INFINITY, std::numeric_limits<truth_real>::infinity(), 24, -126) == 0);
  CHECK(std::isnan(qkv::reference::truth_ulps(1, truth_real(0), 24, -126)));
}

TEST_CASE("A truth's 20 digits are the ones Boost's str(20) writes, ties to even") {
  // exp(x) / 7 over x in [-30, 30) (every decade from 1e-14 to 1e12), both signs; floats and
  // their thousandths, whose exact decimal expansions end in 5 at the 21st digit (the ties)
  std::size_t n = 0, same = 0;
  auto test = [&](const truth_real& t) {
    ++n;
    if (qkv::reference::truth_digits(t) == t.str(20))
      ++same;
    else
      FAIL_CHECK(qkv::reference::truth_digits(t) << " where Boost writes " << t.str(20));
  };
  for (int k = -3000; k < 3000; k += 7) {
    const truth_real t = mp::exp(truth_real(k) / 100) / 7;
    test(t);
    test(-t);
  }
  for (int k = 1; k < 3000; k += 3) {
    const float f = float(k) / 7.0f;
    test(truth_real(f));
    test(truth_real(double(f) * 1e-3));
  }
  for (double v : {-0.925676822662353515625, 0.306999683380126953125, 0.5, 1e20, 1e19, 1e-5, 1.5e-5, 1e-300})
    test(truth_real(v));
  CHECK(same == n);
  CHECK(qkv::reference::truth_digits(truth_real(0)) == "0");
  CHECK(qkv::reference::truth_digits(std::numeric_limits<truth_real>::infinity()) == "inf");
  CHECK(qkv::reference::truth_digits(-std::numeric_limits<truth_real>::infinity()) == "-inf");
  CHECK(qkv::reference::truth_digits(std::numeric_limits<truth_real>::quiet_NaN()) == "nan");
}

TEST_CASE("Example 14's padding steps: the mask from the lengths, the padded division") {
  // lengths [2, 0] over 3 keys: [[0 0 1], [1 1 1]], exactly; a length of 4 (above 3) has no truth
  const auto lengths = reals({2, 0}), too_long = reals({4, 0});
  std::vector<truth_real> out(6);
  const double none[6] = {};
  REQUIRE(step_truth(qkv::flat::key_padding_mask_kind, lengths.data(), nullptr, nullptr,
                     {2, 3, 0, 0, 0, 0, 0, 0}, 0, none, out.data()) == 0);
  CHECK(out[0] == 0);
  CHECK(out[2] == 1);
  CHECK(out[3] == 1);
  CHECK(step_truth(qkv::flat::key_padding_mask_kind, too_long.data(), nullptr, nullptr,
                   {2, 3, 0, 0, 0, 0, 0, 0}, 0, none, out.data()) == 1);
  // scores [1, 2, 3] / 3 (the divisor as a double) with key 2 masked by the step (-inf): [1/3, 2/3, -inf]
  const auto scores = reals({1, 2, 3}), mask = reals({0, 0, 1});
  const double computed[3] = {0.33, 0.67, -std::numeric_limits<double>::infinity()};
  REQUIRE(step_truth(qkv::flat::padded_divide_kind, scores.data(), mask.data(), nullptr,
                     {1, 3, 3, 3, 0, 0, 0, 0}, 3, computed, out.data()) == 0);
  CHECK(out[0] == truth_real(1) / 3);
  CHECK(out[1] == truth_real(2) / 3);
  CHECK(mp::isinf(out[2]));
  CHECK(out[2] < 0);
}
