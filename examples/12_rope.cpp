// 12_rope.cpp: rotary position embeddings (RoPE), both layouts, proven.
//
// Example 07 ADDS a position's sinusoidal encoding to each embedding. RoPE (Su et al.,
// "RoFormer", 2021; used by GPT-J, GPT-NeoX, LLaMA, Mistral) instead ROTATES each query and key
// by its position: pair of dimensions i of the token at position m is turned by the angle
// m theta_i, theta_i = 10000^(-2i/d) (core/rope.hpp). Two facts make it work, both proven below
// within bounds derived here:
//   - a rotation keeps lengths: |R_m x| = |x|, so RoPE changes no query's or key's size;
//   - rotations compose: (R_m q) · (R_n k) = q · (R_(n-m) k), so a score depends on the two
//     positions only through m - n, the RELATIVE position.
// Which dimensions form a pair is the layout: interleaved (2i, 2i + 1) as RoFormer and GPT-J, or
// half_split (i, i + d/2) as GPT-NeoX and LLaMA. They are the same rotation on permuted columns
// (proven bit for bit). The worked case: 8 positions, head width d = 8, q and k drawn by
// torch.manual_seed(12); torch.rand(8, 8) twice; PyTorch's formulas (scripts/fixtures/torch_chapter2.py:
// RoFormer's rotate_every_two, LLaMA's rotate_half) agree with qkv's within a derived bound. The
// page is docs/examples/12_rope.md.
#include <cstddef>
#include <iostream>
#include <string>
#include <vector>

#include <qkv/core/bounds.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/math.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/rope.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/io/print.hpp>

#include "../tests/data/chapter2/torch_chapter2.hpp"

namespace qkv::examples::rope {

namespace check = qkv::check;
namespace torch64 = qkv_test::torch_chapter2::rope;
using qkv::matrix;
using qkv::rope_layout;

// =============================================================================================
// Step 1: the frequencies and the inputs. d = 8: four pairs, theta_i = 10000^(-2i/8) =
// 10000^(-i/4) = 1, 0.1, 0.01, 0.001: pair 0 turns by 1 radian per position, pair 3 by a
// thousandth. Computed as exp(-(2i/d) ln 10000) in double: ln 10000 correctly rounded (u), the
// product and the division (2u), an argument up to 9.21 off by 3.01 u of itself, exp within 1 ulp
// (2u): theta_i within (3.01 x 9.21 + 2) u = 30 u of itself
constexpr std::size_t N = 8, d = 8;
constexpr double u = qkv::bounds::unit_roundoff<double>();
static_assert(qkv::rope_frequency(0, d) == 1.0);  // exp(-0) = 1 exactly
static_assert(qkv::proven<check::near(qkv::rope_frequency(1, d), 0.1, 30 * u * 0.1) &&
                          check::near(qkv::rope_frequency(2, d), 0.01, 30 * u * 0.01) &&
                          check::near(qkv::rope_frequency(3, d), 0.001, 30 * u * 0.001)>);

struct inputs {
  matrix<float, N, d> q, k;
};
constexpr inputs in = [] {
  qkv::torch::generator gen{12};  // torch.manual_seed(12)
  return inputs{gen.rand<float, N, d>(), gen.rand<float, N, d>()};  // torch.rand(8, 8) twice
}();
constexpr auto q64 = qkv::matrix_cast<double>(in.q), k64 = qkv::matrix_cast<double>(in.k);
// row p of q is the query of the token at position p (rope's first_position = 0)
constexpr auto q_inter = qkv::rope(q64, rope_layout::interleaved);
constexpr auto q_half = qkv::rope(q64, rope_layout::half_split);

// Step 2: the rotation by hand. Position 0 turns by 0: cos 0 = 1, sin 0 = 0 exactly, and
// a 1 - b 0 = a, b 1 + a 0 = b: row 0 is unchanged, bit for bit
static_assert(qkv::row(q_inter, 0) == qkv::row(q64, 0) && qkv::row(q_half, 0) == qkv::row(q64, 0));
// Position 1, pair 0 turns by 1 radian: cos 1 = 0.540302, sin 1 = 0.841471. q row 1 is
// [0.731190, 0.722438, 0.199235, 0.694827, 0.583003, 0.631829, 0.555886, 0.126249].
// interleaved, pair (0, 1) = (0.731190, 0.722438):
//   0.731190 x 0.540302 - 0.722438 x 0.841471 = 0.395064 - 0.607912 = -0.212848
//   0.722438 x 0.540302 + 0.731190 x 0.841471 = 0.390335 + 0.615276 =  1.005611
// half_split, pair (0, 4) = (0.731190, 0.583003):
//   0.731190 x 0.540302 - 0.583003 x 0.841471 = 0.395064 - 0.490581 = -0.095517
// Tolerance: 6-decimal factors (off by 5e-7 each) move each product by 5e-7 (|a| + |c|) < 9e-7,
// two products 1.8e-6, the hand's 6-decimal products 1e-6: 3e-6
static_assert(qkv::proven<check::near(q_inter(1, 0), -0.212848, 3e-6) && check::near(q_inter(1, 1), 1.005611, 3e-6) &&
                          check::near(q_half(1, 0), -0.095517, 3e-6)>);

// =============================================================================================
// Step 3: the two layouts are one rotation on permuted columns. Moving column i to 2i and column
// i + d/2 to 2i + 1 turns half_split's pairs into interleaved's: half_split(x) is
// unpermute(interleaved(permute(x))), bit for bit (the same products of the same numbers)
template <class T, std::size_t R, std::size_t C>
constexpr matrix<T, R, C> half_to_interleaved(const matrix<T, R, C>& x) {
  matrix<T, R, C> out;
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t i = 0; i < C / 2; ++i) {
      out(r, 2 * i) = x(r, i);
      out(r, 2 * i + 1) = x(r, i + C / 2);
    }
  return out;
}
template <class T, std::size_t R, std::size_t C>
constexpr matrix<T, R, C> interleaved_to_half(const matrix<T, R, C>& x) {
  matrix<T, R, C> out;
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t i = 0; i < C / 2; ++i) {
      out(r, i) = x(r, 2 * i);
      out(r, i + C / 2) = x(r, 2 * i + 1);
    }
  return out;
}
static_assert(q_half == interleaved_to_half(qkv::rope(half_to_interleaved(q64), rope_layout::interleaved)));

// =============================================================================================
// Step 4: RoPE keeps lengths. For a pair (a, b) of length r with the rounded c = cos(1 + e1),
// s = sin(1 + e2), |e| <= u (correctly rounded in double; within u + 2^-52 for float's rounding
// of fdlibm's): the exact rotation by (c, s) has length r sqrt(c^2 + s^2), c^2 + s^2 within 2.01 u
// of 1; each computed element a c - b s is within gamma_2 (|a c| + |b s|) <= gamma_2 sqrt(2) r, so
// the pair within 2 gamma_2 r: the pair's squared length within (2.01 + 4 x 2.0001) u = 10.1 u
// of r^2 (plus u^2 terms). The sums of d squares are computed in T, each within gamma_d of its
// value: |computed |R x|^2 - computed |x|^2| <= (10.1 + 2 d + 0.9) u |x|^2 = (11 + 2 d) u |x|^2,
// the 0.9 u covering second-order terms. Whatever the ANGLE's own rounding: any angle's
// rotation keeps lengths. Checked for every row (position) of q and k, both layouts, float and double.
template <class T, std::size_t R, std::size_t C>
constexpr matrix<T, R, 1> squared_norms(const matrix<T, R, C>& x) {
  matrix<T, R, 1> out;
  for (std::size_t r = 0; r < R; ++r) {
    T s = T(0);
    for (std::size_t j = 0; j < C; ++j) s += x(r, j) * x(r, j);
    out(r, 0) = s;
  }
  return out;
}
template <class T, std::size_t R, std::size_t C>
constexpr matrix<double, R, 1> norm_bound(const matrix<T, R, C>& x) {
  return qkv::scaled(double(11 + 2 * C) * qkv::bounds::unit_roundoff<T>(), qkv::matrix_cast<double>(squared_norms(x)));
}
template <class T, std::size_t R, std::size_t C>
constexpr check::verdict keeps_lengths(const matrix<T, R, C>& x, rope_layout layout) {
  return check::within(squared_norms(qkv::rope(x, layout)), squared_norms(x), norm_bound(x));
}
static_assert(qkv::proven<keeps_lengths(q64, rope_layout::interleaved) && keeps_lengths(q64, rope_layout::half_split) &&
                          keeps_lengths(k64, rope_layout::interleaved) && keeps_lengths(k64, rope_layout::half_split)>);
static_assert(qkv::proven<keeps_lengths(in.q, rope_layout::interleaved) && keeps_lengths(in.q, rope_layout::half_split) &&
                          keeps_lengths(in.k, rope_layout::interleaved) && keeps_lengths(in.k, rope_layout::half_split)>);
// by hand for q row 1: |x|^2 = 0.534639 + 0.521917 + 0.039695 + 0.482785 + 0.339893 + 0.399208
// + 0.309009 + 0.015939 = 2.643085 (each 6-decimal square within 2 |x| 5e-7 + 5e-7 of the true
// one: 1.5e-5 in all), so in double the bound is (11 + 16) u 2.643 = 7.9e-15
static_assert(qkv::proven<check::near(squared_norms(q64)(1, 0), 2.643085, 1.5e-5)>);

// =============================================================================================
// Step 5: a score depends on m - n only. Put ONE query q (q's row 0) at every position m and ONE
// key k (k's row 0) at every position n: scores(m, n) = (R_m q) · (R_n k). In exact arithmetic,
// with the computed theta_i (the same number at every position), it equals q · (R_(n-m) k): a
// function of n - m. The computed value is off by the rounding of:
//   - the angle m theta_i (one product, theta_i <= 1): at most m u radians, moving the pair by m u r;
//   - the cosine and sine (correctly rounded): u r per element (|a (c - cos)| + |b (s - sin)| <= u r);
//   - a c - b s: gamma_2 (|a c| + |b s|) <= 2.01 u r.
// So R_m q is within (m + 3.01) u r_q,i per element of pair i, R_n k within (n + 3.01) u r_k,i, and
// the dot product of d terms adds gamma_d sum |y_j||z_j| <= 1.01 gamma_d sum_i r_q,i r_k,i:
//   |computed scores(m, n) - exact| <= B(m, n) = (2 (m + n + 6.02) + 1.01 d + 1) u P,
//   P = sum_i r_q,i r_k,i (the extra u P covers P's own rounding and second-order terms).
// Proven: every scores(m, n) is within B(m, n) + B(m - j, n - j), j = min(m, n), of the score at
// the same offset with one position 0: so all scores on one diagonal agree within their bounds.
template <rope_layout L>
struct relative {
  matrix<double, N, N> scores;
  matrix<double, N, N> bound;
};
template <rope_layout L>
constexpr relative<L> relative_scores() {
  matrix<double, N, d> qs, ks;  // q's row 0 and k's row 0 at each of the 8 positions
  for (std::size_t p = 0; p < N; ++p)
    for (std::size_t c = 0; c < d; ++c) {
      qs(p, c) = q64(0, c);
      ks(p, c) = k64(0, c);
    }
  relative<L> r{};
  r.scores = qkv::matrix_product_transposed(qkv::rope(qs, L), qkv::rope(ks, L));  // (8, 8): (m, n)
  double P = 0;
  for (std::size_t i = 0; i < d / 2; ++i) {
    const std::size_t f = qkv::rope_pair_first(i, L), g = qkv::rope_pair_second(i, d, L);
    P += qkv::sqrt(q64(0, f) * q64(0, f) + q64(0, g) * q64(0, g)) * qkv::sqrt(k64(0, f) * k64(0, f) + k64(0, g) * k64(0, g));
  }
  for (std::size_t m = 0; m < N; ++m)
    for (std::size_t n = 0; n < N; ++n) r.bound(m, n) = (2 * (double(m + n) + 6.02) + 1.01 * double(d) + 1) * u * P;
  return r;
}
template <rope_layout L>
constexpr check::verdict depends_on_offset_only(const relative<L>& r) {
  matrix<double, N, N> canonical{}, both{};
  for (std::size_t m = 0; m < N; ++m)
    for (std::size_t n = 0; n < N; ++n) {
      const std::size_t j = m < n ? m : n;
      canonical(m, n) = r.scores(m - j, n - j);
      both(m, n) = r.bound(m, n) + r.bound(m - j, n - j);
    }
  return check::within(r.scores, canonical, both);
}
constexpr auto rel_inter = relative_scores<rope_layout::interleaved>();
constexpr auto rel_half = relative_scores<rope_layout::half_split>();
static_assert(qkv::proven<depends_on_offset_only(rel_inter) && depends_on_offset_only(rel_half)>);
// and the offset matters: position 0 against positions 0 and 1 give different scores (a
// difference far above the bound, 1e-14)
static_assert(rel_inter.scores(0, 1) - rel_inter.scores(0, 0) > 1e-3 || rel_inter.scores(0, 0) - rel_inter.scores(0, 1) > 1e-3);

// =============================================================================================
// Step 6: PyTorch. scripts/fixtures/torch_chapter2.py applies RoFormer's rotate_every_two and LLaMA's
// rotate_half in float64 with inv_freq = 1 / 10000^(arange(0, d, 2) / d). Per element of pair i at
// position m, each side is within its own rounding of the exact rotation by m theta_i:
//   qkv:     theta 30 u (step 1), the angle 31 m u radians; cos, sin u; arithmetic 2.01 u
//   PyTorch: pow within 1 ulp and the reciprocal: 3.01 u, the angle 4.01 m u; glibc's cos and sin
//            within 1 ulp (2 u); arithmetic 2.01 u
// so |qkv - PyTorch| <= (35.02 m + 7.03) u r_i <= (36 m + 8) u r_i, r_i the pair's length.
template <rope_layout L>
constexpr matrix<double, N, d> torch_bound(const matrix<double, N, d>& x) {
  matrix<double, N, d> b;
  for (std::size_t m = 0; m < N; ++m)
    for (std::size_t i = 0; i < d / 2; ++i) {
      const std::size_t f = qkv::rope_pair_first(i, L), g = qkv::rope_pair_second(i, d, L);
      const double r = qkv::sqrt(x(m, f) * x(m, f) + x(m, g) * x(m, g));
      b(m, f) = b(m, g) = (36 * double(m) + 8) * u * r;
    }
  return b;
}
static_assert(qkv::proven<check::within(q_inter, matrix<double, N, d>{torch64::q_interleaved}, torch_bound<rope_layout::interleaved>(q64)) &&
                          check::within(q_half, matrix<double, N, d>{torch64::q_half_split}, torch_bound<rope_layout::half_split>(q64))>);
static_assert(qkv::proven<check::within(qkv::rope(k64, rope_layout::interleaved), matrix<double, N, d>{torch64::k_interleaved},
                                        torch_bound<rope_layout::interleaved>(k64)) &&
                          check::within(qkv::rope(k64, rope_layout::half_split), matrix<double, N, d>{torch64::k_half_split},
                                        torch_bound<rope_layout::half_split>(k64))>);

// =============================================================================================
inline void walkthrough() {
  using qkv::io::torch_str;
  std::cout << "Rotary position embeddings (RoPE), proven at compile time: 8 positions, head width 8,\n"
            << "theta_i = 10000^(-2i/8) = 1, 0.1, 0.01, 0.001; q, k = torch.rand(8, 8) after torch.manual_seed(12)\n\n"
            << "q =\n" << torch_str(in.q) << "\n\nRoPE(q), interleaved pairs (2i, 2i+1) (RoFormer, GPT-J) =\n"
            << torch_str(q_inter) << "\n\nRoPE(q), half_split pairs (i, i+4) (GPT-NeoX, LLaMA) =\n" << torch_str(q_half)
            << "\n\nlengths |q_m|^2 before and after (interleaved):\n";
  const auto before = squared_norms(q64), after = squared_norms(q_inter);
  for (std::size_t m = 0; m < N; ++m) std::cout << "  position " << m << ": " << before(m, 0) << "  " << after(m, 0) << "\n";
  std::cout << "\nOne query and one key at every position: scores (R_m q)·(R_n k), rows m, columns n\n"
            << "(each diagonal is one offset n - m: equal within the derived bound, proven):\n"
            << torch_str(rel_inter.scores) << "\n\nPyTorch float64 (rotate_every_two / rotate_half) vs qkv double: largest difference "
            << qkv::max_abs_difference(q_inter, matrix<double, N, d>{torch64::q_interleaved}) << " / "
            << qkv::max_abs_difference(q_half, matrix<double, N, d>{torch64::q_half_split}) << "\n";
}

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain rope --html FILE, io/page.hpp): the inputs, RoPE in both
// layouts, the lengths before and after, the relative-position scores, and PyTorch
template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  std::vector<std::string> positions, columns, pairs;
  for (std::size_t m = 0; m < N; ++m) positions.push_back("position " + std::to_string(m));
  for (std::size_t c = 0; c < d; ++c) columns.push_back("dim " + std::to_string(c));
  for (std::size_t i = 0; i < d / 2; ++i) pairs.push_back("pair " + std::to_string(i));
  // its matrices without a how are exact inputs, or marked derived(): the rotations recompute from
  // q (in.q in double, as the example rotates it) and the cos and sin tables
  p.with_truth();
  p.step(1);
  p.matrix("in.q", in.q).rows(positions).cols(columns).caption("in.q: the query of the token at each position");
  p.matrix("q", q64).rows(positions).cols(columns).caption("q: in.q in double, as the example rotates it");
  matrix<double, N, d / 2> cos_m{}, sin_m{};
  for (std::size_t m = 0; m < N; ++m)
    for (std::size_t i = 0; i < d / 2; ++i) {
      const auto cs = qkv::rope_cos_sin<double>(m, qkv::rope_frequency(i, d));
      cos_m(m, i) = cs.cos, sin_m(m, i) = cs.sin;
    }
  p.matrix("cos", cos_m).rows(positions).cols(pairs).caption("cos(m theta_i): qkv's cos of position m times theta_i");
  p.matrix("sin", sin_m).rows(positions).cols(pairs).caption("sin(m theta_i)");
  p.matrix("theta", matrix<double, 1, d / 2>{{{qkv::rope_frequency(0, d), qkv::rope_frequency(1, d), qkv::rope_frequency(2, d),
                                               qkv::rope_frequency(3, d)}}})
      .cols({"pair 0", "pair 1", "pair 2", "pair 3"})
      .caption("theta_i = 10000^(-2i/8)");
  p.step(2);
  p.matrix("q_inter", q_inter).rows(positions).cols(columns).caption("RoPE, interleaved pairs (2i, 2i+1)")
      .how(how::rope("q", "cos", "sin", d, d, "interleaved"));
  p.matrix("q_half", q_half).rows(positions).cols(columns).caption("RoPE, half_split pairs (i, i+4)")
      .how(how::rope("q", "cos", "sin", d, d, "half_split"));
  p.step(3);
  // q's halves as interleaved pairs, rotated as interleaved, and back (data only, then the result)
  p.matrix("q as interleaved", half_to_interleaved(q64)).rows(positions).cols(columns).how(how::interleave("q")).hidden();
  p.matrix("R (q as interleaved)", qkv::rope(half_to_interleaved(q64), rope_layout::interleaved))
      .rows(positions)
      .cols(columns)
      .how(how::rope("q as interleaved", "cos", "sin", d, d, "interleaved"))
      .hidden();
  p.matrix("q_half_via_interleaved", interleaved_to_half(qkv::rope(half_to_interleaved(q64), rope_layout::interleaved)))
      .rows(positions)
      .cols(columns)
      .caption("half_split computed as interleaved on permuted columns")
      .how(how::deinterleave("R (q as interleaved)"))
      .proven(q_half, "q_half", 0.0, "bit for bit");
  p.step(4);
  const auto before = squared_norms(q64), after = squared_norms(q_inter);
  matrix<double, N, 2> lengths{};
  for (std::size_t m = 0; m < N; ++m) {
    lengths(m, 0) = before(m, 0);
    lengths(m, 1) = after(m, 0);
  }
  p.matrix("lengths", lengths).rows(positions).cols({"|q|^2", "|R q|^2 (interleaved)"}).caption("squared lengths before and after: equal within (11 + 2d) u |q|^2")
      .derived_because("it is step 4's check, the sums of squares of q's and R q's rows, not a step of the attention");
  p.step(5);
  // one q (q's row 0) and one k (k's row 0) at every position: 1 x q(0, j) is q(0, j) exactly
  // (a product by one), so the rows are relative_scores()' qs and ks; each rotated at its
  // position, then every dot product
  matrix<double, N, 1> ones{};
  for (std::size_t m = 0; m < N; ++m) ones(m, 0) = 1;
  matrix<double, N, d> qs{}, ks{};
  for (std::size_t m = 0; m < N; ++m)
    for (std::size_t c = 0; c < d; ++c) qs(m, c) = q64(0, c), ks(m, c) = k64(0, c);
  p.matrix("k", qkv::row(k64, 0)).cols(columns).caption("k: in.k's row 0 in double, the key put at every position");
  p.matrix("ones", ones).rows(positions).hidden();
  p.matrix("rel_inter.qs", qs).rows(positions).cols(columns).how(how::matmul("ones", "q", 1)).hidden();
  p.matrix("rel_inter.ks", ks).rows(positions).cols(columns).how(how::matmul("ones", "k", 1)).hidden();
  p.matrix("rel_inter.R_q", qkv::rope(qs, rope_layout::interleaved)).rows(positions).cols(columns)
      .caption("R_m q: q's row 0 rotated at position m").how(how::rope("rel_inter.qs", "cos", "sin", d, d, "interleaved")).hidden();
  p.matrix("rel_inter.R_k", qkv::rope(ks, rope_layout::interleaved)).rows(positions).cols(columns)
      .caption("R_n k: k rotated at position n").how(how::rope("rel_inter.ks", "cos", "sin", d, d, "interleaved")).hidden();
  p.matrix("rel_inter.scores", rel_inter.scores)
      .rows(positions)
      .cols(positions)
      .caption("(R_m q)·(R_n k), one q and one k at every position: constant along each diagonal")
      .how(how::dot("rel_inter.R_q", "rel_inter.R_k", d));
  p.step(6);
  p.matrix("q_inter_vs_torch", q_inter)
      .rows(positions)
      .cols(columns)
      .caption("qkv's interleaved RoPE")
      .how(how::block("q_inter", 0))
      .proven(matrix<double, N, d>{torch64::q_interleaved}, "PyTorch float64 (rotate_every_two)",
              qkv::max_abs_difference(torch_bound<rope_layout::interleaved>(q64), matrix<double, N, d>{}),
              "(36 m + 8) u r, at most");
}

}  // namespace qkv::examples::rope

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::rope::walkthrough(); }
#endif
