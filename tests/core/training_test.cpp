// The constexpr core's training pieces (core/cross_entropy.hpp, embedding_backward.hpp, sgd.hpp,
// adamw.hpp): their edges and identities. Example 17 proves one training step's numbers against
// PyTorch 1.13; this file states what happens at bad ids, NaN and -inf logits, unused and
// padding tokens, a zero learning rate, and AdamW's bias corrections over two steps.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>

#include <qkv/core/adamw.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/cross_entropy.hpp>
#include <qkv/core/embedding_backward.hpp>
#include <qkv/core/math.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/sgd.hpp>

// this file's own names (tests/core/ is a unity build: tests/runtime/meson.build says why)
namespace training_test {

using qkv::matrix;
constexpr double inf_d = std::numeric_limits<double>::infinity();
constexpr double nan_d = std::numeric_limits<double>::quiet_NaN();
bool is_nan(double x) { return x != x; }

TEST_CASE("cross_entropy of equal logits is log V, and its gradient is (1/V - onehot) / N exactly") {
  // every logit 0: p = e^0 / (4 e^0) = 1/4 exactly, l = log 4 - 0; d = (1/4 - [j = t]) / 2, exact
  constexpr matrix<double, 2, 4> z{};
  constexpr matrix<int, 1, 2> t{{{1, 3}}};
  constexpr auto r = qkv::cross_entropy(z, t);
  static_assert(r.probabilities(0, 0) == 0.25 && r.probabilities(1, 3) == 0.25);
  CHECK(r.loss == qkv::log(4.0));
  constexpr auto d = qkv::cross_entropy_backward(r.probabilities, t);
  static_assert(d(0, 1) == -0.375 && d(0, 0) == 0.125 && d(1, 3) == -0.375 && d(1, 2) == 0.125);
}

TEST_CASE("cross_entropy's gradient is the loss's slope: central differences within a derived tolerance") {
  // L(z) = mean_i (log sum_j e^z_ij - z_i,t). (L(z + h e) - L(z - h e)) / 2h - dL/dz is at most
  // h^2 / 6 max |L'''| (truncation; along one logit L''' = p (1 - p) (1 - 2p) / N, |.| < 0.1 / N)
  // plus the loss's rounding divided by h: each L within 20 u |L| (exp, the sum, log, the mean),
  // 2 20 u |L| / 2h. h = 1e-4, |L| < 3: 1.7e-10 / N + 6.7e-11 < 1e-9.
  const matrix<double, 2, 3> z{{{0.5, -1.25, 2.0}, {1.0, 0.75, -0.5}}};
  const matrix<int, 1, 2> t{{{2, 0}}};
  const auto d = qkv::cross_entropy_backward(qkv::cross_entropy(z, t).probabilities, t);
  const double h = 1e-4;
  for (std::size_t k = 0; k < 6; ++k) {
    auto up = z, down = z;
    up.v[k] += h;
    down.v[k] -= h;
    const double slope = (qkv::cross_entropy(up, t).loss - qkv::cross_entropy(down, t).loss) / (2 * h);
    CHECK(std::abs(slope - d.v[k]) < 1e-9);
  }
}

TEST_CASE("a target outside the vocabulary throws std::out_of_range, in the forward and the backward") {
  const matrix<float, 1, 3> z{{{1, 2, 3}}};
  CHECK_THROWS_AS((void)qkv::cross_entropy(z, matrix<int, 1, 1>{{{3}}}), std::out_of_range);
  CHECK_THROWS_AS((void)qkv::cross_entropy(z, matrix<int, 1, 1>{{{-1}}}), std::out_of_range);
  CHECK_THROWS_AS((void)qkv::cross_entropy_backward(z, matrix<std::size_t, 1, 1>{{{7}}}), std::out_of_range);
  CHECK_NOTHROW((void)qkv::cross_entropy(z, matrix<int, 1, 1>{{{2}}}));
}

TEST_CASE("a NaN logit makes its row's loss and gradient NaN, and leaves the other rows alone") {
  const matrix<double, 2, 2> z{{{nan_d, 1}, {0, 0}}};
  const matrix<int, 1, 2> t{{{1, 0}}};
  const auto r = qkv::cross_entropy(z, t);
  CHECK(is_nan(r.losses(0, 0)));
  CHECK(r.losses(1, 0) == qkv::log(2.0));
  CHECK(is_nan(r.loss));
  const auto d = qkv::cross_entropy_backward(r.probabilities, t);
  CHECK(is_nan(d(0, 0)));
  CHECK(d(1, 0) == -0.25);
  CHECK(d(1, 1) == 0.25);
}

TEST_CASE("a -inf logit has probability 0; as the target its loss is infinite") {
  const matrix<double, 1, 3> z{{{-inf_d, 0, 0}}};
  const auto other = qkv::cross_entropy(z, matrix<int, 1, 1>{{{1}}});
  CHECK(other.probabilities(0, 0) == 0.0);
  CHECK(other.loss == qkv::log(2.0));
  const auto target = qkv::cross_entropy(z, matrix<int, 1, 1>{{{0}}});
  CHECK(target.loss == inf_d);
}

TEST_CASE("embed_backward adds a token's rows, gives an unused token 0 and keeps the padding row 0") {
  // ids 2 0 2: row 2 = d row 0 + d row 2, row 0 = d row 1, rows 1 and 3 = 0
  constexpr matrix<double, 3, 2> d{{{1, 2}, {3, 4}, {0.5, -2}}};
  constexpr matrix<int, 1, 3> ids{{{2, 0, 2}}};
  constexpr auto g = qkv::embed_backward<4>(d, ids);
  static_assert(g == matrix<double, 4, 2>{{{3, 4}, {0, 0}, {1.5, 0}, {0, 0}}});
  constexpr auto padded = qkv::embed_backward<4>(d, ids, 2);  // nn.Embedding(4, 2, padding_idx=2)
  static_assert(padded == matrix<double, 4, 2>{{{3, 4}, {0, 0}, {0, 0}, {0, 0}}});
  CHECK_THROWS_AS((void)qkv::embed_backward<4>(d, matrix<int, 1, 3>{{{0, 4, 1}}}), std::out_of_range);
  CHECK_THROWS_AS((void)qkv::embed_backward<4>(d, matrix<int, 1, 3>{{{0, -1, 1}}}), std::out_of_range);
}

TEST_CASE("sgd_step rounds w - lr g once; lr = 0 leaves the weights; a NaN gradient gives NaN") {
  constexpr matrix<float, 1, 3> w{{{1, -2, 0.5f}}};
  constexpr matrix<float, 1, 3> g{{{0.5f, 4, -1}}};
  // exact cases: 1 - 0.5 0.5 = 0.75, -2 - 0.5 4 = -4, 0.5 + 0.5 = 1
  static_assert(qkv::sgd_step(w, g, 0.5f) == matrix<float, 1, 3>{{{0.75f, -4, 1}}});
  static_assert(qkv::sgd_step(w, g, 0.0f) == w);
  // one rounding: fl(w - lr g) is the exactly rounded fma, not fl(w - fl(lr g))
  constexpr float a = 1.0f + 0x1p-23f, b = 1.0f - 0x1p-23f;
  static_assert(qkv::sgd_step(matrix<float, 1, 1>{{{-1.0f}}}, matrix<float, 1, 1>{{{-a}}}, b)(0, 0) ==
                -0x1p-46f);
  const auto n =
      qkv::sgd_step(w, matrix<float, 1, 3>{{{std::numeric_limits<float>::quiet_NaN(), 0, 0}}}, 0.1f);
  CHECK(is_nan(n(0, 0)));
  CHECK(n(0, 1) == -2.0f);
}

TEST_CASE(
    "adamw_step moves a weight by lr g / (|g| + eps) after the decay, on the first and the second step") {
  // g = 2 twice, PyTorch's defaults (lr 1e-3, wd 1e-2): the bias corrections make m_hat = 2 and
  // v_hat = 4 at both steps, so each step is w (1 - 1e-5) - 1e-3 2 / (2 + 1e-8). In double each
  // step's roundings are about 14 (adamw.hpp's count, example 17) relative on the 1e-3 move and
  // 2 on w: with |w| <= 1, 1e-3 14 u + 3 u < 1e-18 + 7e-16; the second step's beta^2 and the
  // corrections 1 - beta^2 carry their own roundings, relative 1e-15 at most: 1e-14 covers both.
  const qkv::adamw_parameter<double, 1, 1> p0{matrix<double, 1, 1>{{{1.0}}}};
  const matrix<double, 1, 1> g{{{2.0}}};
  const auto p1 = qkv::adamw_step(p0, g);
  const double move = 1e-3 * 2 / (2 + 1e-8);
  CHECK(p1.step == 1);
  CHECK(std::abs(p1.w(0, 0) - (1.0 * (1 - 1e-5) - move)) < 1e-14);
  CHECK(std::abs(p1.m(0, 0) - 0.2) < 1e-15);
  CHECK(std::abs(p1.v(0, 0) - 0.004) < 1e-17);
  const auto p2 = qkv::adamw_step(p1, g);
  CHECK(p2.step == 2);
  CHECK(std::abs(p2.m(0, 0) - 0.38) < 1e-15);
  CHECK(std::abs(p2.w(0, 0) - (p1.w(0, 0) * (1 - 1e-5) - move)) < 1e-14);
}

TEST_CASE("adamw_step: a gradient of exactly 0 only decays the weight; a NaN gradient gives NaN") {
  const qkv::adamw_parameter<float, 1, 2> p{matrix<float, 1, 2>{{{0.5f, -3}}}};
  const auto z = qkv::adamw_step(p, matrix<float, 1, 2>{}, {.lr = 0.01});
  CHECK(z.w(0, 0) == float(0.5f * float(1 - 0.01 * 0.01)));
  CHECK(z.w(0, 1) == float(-3.0f * float(1 - 0.01 * 0.01)));
  const auto n = qkv::adamw_step(p, matrix<float, 1, 2>{{{std::numeric_limits<float>::quiet_NaN(), 1}}});
  CHECK(is_nan(n.w(0, 0)));
  CHECK(is_nan(n.m(0, 0)));
  CHECK(!is_nan(n.w(0, 1)));
}

}  // namespace training_test
