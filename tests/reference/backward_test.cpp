// The 50-digit truth for attention's backward (include/qkv/reference/attention_backward.hpp),
// checked against central differences of the 50-digit forward, and the float paths judged by it.
//
// For a loss L = sum(dO ∘ output) the gradient of L with respect to any input is the backward
// with upstream dO. Central differences (L(w + h) - L(w - h)) / 2h with h = 1e-20 in
// cpp_bin_float_50 (166 bits, unit roundoff 2^-166 = 1.3e-50) differ from the derivative by:
//   truncation  h^2 / 6 |L'''|: below 1e-40 |L'''|, and |L'''| < 1e5 for these inputs (scores of
//               a few tens at most enter through exp; each derivative brings down a factor |q|
//               or |k| below 50): < 1e-35;
//   rounding    L's 50-digit error over 2h: the forward is a few thousand operations on numbers
//               below 1e3, each rounding by 1.3e-50 relative: |error of L| < 1e-44, over 2e-20:
//               < 5e-25.
// So |analytic - central difference| <= 1e-24 + 1e-30 |analytic| (the analytic gradient's own
// 50-digit rounding), asserted element by element.
#include <doctest/doctest.h>

#include <cstddef>
#include <string>

#include <qkv/core/attention.hpp>
#include <qkv/core/attention_backward.hpp>
#include <qkv/core/backward_bounds.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/reference/attention_backward.hpp>
#include <qkv/reference/multiprecision.hpp>

#include "../data/backward/torch_backward.hpp"

namespace {

using qkv::matrix;
using qkv::reference::real;
namespace ref = qkv::reference;
namespace torch = qkv_test::torch_backward;

const real h("1e-20");

template <std::size_t R, std::size_t C>
real dot_all(const matrix<real, R, C>& a, const matrix<real, R, C>& b) {
  real s = 0;
  for (std::size_t k = 0; k < R * C; ++k) s += a.v[k] * b.v[k];
  return s;
}

template <class X, class Q, class K, class V>
struct inputs {
  X x;
  Q wq;
  K wk;
  V wv;
};

template <class In, class L, class D>
real loss(const In& in, L layout, const D& dO, const ref::scaling& how) {
  return dot_all(dO, ref::self_attention_real(in.x, in.wq, in.wk, in.wv, layout, how).context);
}

/// every element of one input (in.*member): its analytic gradient against the central difference
/// of L = sum(dO ∘ output); the number that differ by more than the tolerance, and the worst
template <class In, class M, class G, class L, class D>
std::size_t check_member(In in, M In::*member, const G& grad, L layout, const D& dO, const ref::scaling& how,
                         real& worst) {
  auto& m = in.*member;
  std::size_t bad = 0;
  for (std::size_t n = 0; n < m.size(); ++n) {
    const real keep = m.v[n];
    m.v[n] = keep + h;
    const real up = loss(in, layout, dO, how);
    m.v[n] = keep - h;
    const real down = loss(in, layout, dO, how);
    m.v[n] = keep;
    const real fd = (up - down) / (2 * h);
    const real err = abs(fd - grad.v[n]);
    if (!(err <= real("1e-24") + real("1e-30") * abs(grad.v[n]))) ++bad;
    if (err > worst) worst = err;
  }
  return bad;
}

/// the four checks of one forward and one upstream gradient
template <class In, class L, class D>
void check_all(const In& in, L layout, const D& dO, const ref::scaling& how, const std::string& what) {
  const auto g = ref::self_attention_backward(in.x, in.wq, in.wk, in.wv, layout, dO, how);
  real worst = 0;
  const std::size_t bad = check_member(in, &In::x, g.d_x, layout, dO, how, worst) +
                          check_member(in, &In::wq, g.d_w_query, layout, dO, how, worst) +
                          check_member(in, &In::wk, g.d_w_key, layout, dO, how, worst) +
                          check_member(in, &In::wv, g.d_w_value, layout, dO, how, worst);
  INFO(what << ": worst |analytic - central difference| " << static_cast<double>(worst));
  CHECK(bad == 0);
  CHECK(worst < real("1e-24"));
}

template <class F, std::size_t R, std::size_t C>
matrix<real, R, C> real_of(const matrix<F, R, C>& a) {
  return ref::to_real(a);
}
template <std::size_t R, std::size_t C>
matrix<real, R, C> real_of(const double (&a)[R][C]) {
  return ref::to_real(matrix<double, R, C>(a));
}

// tutorial 000's inputs (x @ W, no scaling) and tutorial 004's module (x Wᵀ, / sqrt(2))
const matrix<float, 3, 4> x000{{{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}}};
const matrix<float, 4, 3> wk000{{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}, {1, 1, 0}}};
const matrix<float, 4, 3> wq000{{{1, 0, 1}, {1, 0, 0}, {0, 0, 1}, {0, 1, 1}}};
const matrix<float, 4, 3> wv000{{{0, 2, 0}, {0, 3, 0}, {1, 0, 3}, {1, 1, 0}}};

struct module004 {
  matrix<float, 3, 2> x{{{1.16f, 0.23f}, {0.57f, 1.36f}, {4.41f, -2.16f}}};
  matrix<float, 2, 2> wq, wk, wv;
  module004() {
    qkv::torch::generator gen{42};
    wq = gen.linear<float, 2, 2>(qkv::torch::bias::none).weight;
    wk = gen.linear<float, 2, 2>(qkv::torch::bias::none).weight;
    wv = gen.linear<float, 2, 2>(qkv::torch::bias::none).weight;
  }
};

TEST_CASE("the 50-digit backward of tutorial 000 is the central difference of its forward") {
  const inputs<matrix<real, 3, 4>, matrix<real, 4, 3>, matrix<real, 4, 3>, matrix<real, 4, 3>> in{
      real_of(x000), real_of(wq000), real_of(wk000), real_of(wv000)};
  check_all(in, qkv::in_out, qkv::filled<real, 3, 3>(real(1)), ref::scaling::none(), "000, output.sum()");
  check_all(in, qkv::in_out, real_of(torch::t000::d_context_drawn), ref::scaling::none(), "000, dO drawn");
}

TEST_CASE("the 50-digit backward of tutorial 004's module is the central difference of its forward") {
  const module004 m;
  const inputs<matrix<real, 3, 2>, matrix<real, 2, 2>, matrix<real, 2, 2>, matrix<real, 2, 2>> in{
      real_of(m.x), real_of(m.wq), real_of(m.wk), real_of(m.wv)};
  check_all(in, qkv::out_in, qkv::filled<real, 3, 2>(real(1)), ref::scaling::divide_by_sqrt_dk(),
            "004, output.sum()");
  check_all(in, qkv::out_in, real_of(torch::t004::d_context_drawn), ref::scaling::divide_by_sqrt_dk(),
            "004, dO drawn");
}

TEST_CASE("the 50-digit backward of tutorial 001's sentence is the central difference of its forward") {
  qkv::torch::generator gen{123};
  const auto embedding = gen.embedding<float, 6, 16>();
  const auto sentence = qkv::torch::embedding_lookup(embedding, std::array<std::size_t, 6>{0, 4, 5, 2, 1, 3});
  qkv::torch::generator gen2{123};
  const auto wq = gen2.rand<float, 24, 16>();
  const auto wk = gen2.rand<float, 24, 16>();
  const auto wv = gen2.rand<float, 28, 16>();
  const inputs<matrix<real, 16, 6>, matrix<real, 24, 16>, matrix<real, 24, 16>, matrix<real, 28, 16>> in{
      real_of(qkv::transposed(sentence)), real_of(wq), real_of(wk), real_of(wv)};
  check_all(in, qkv::columns, real_of(torch::t001::d_context_drawn), ref::scaling::divide_by_sqrt_dk(),
            "001, dO drawn");
}

// ---------------------------------------------------------------------------------------------
// the float paths judged by the truth: PyTorch's float32 and float64 autograd and core's float32
// backward, each within core/backward_bounds.hpp's bound of the 50-digit gradients (tutorial 000,
// output.sum(): the case whose float32 dQ is hundreds of ulps off)

TEST_CASE("tutorial 000's float gradients are within their derived bounds of the 50-digit truth") {
  const auto truth =
      ref::self_attention_backward(real_of(x000), real_of(wq000), real_of(wk000), real_of(wv000), qkv::in_out,
                                   qkv::filled<real, 3, 3>(real(1)), ref::scaling::none());
  const auto r = ref::self_attention_real(real_of(x000), real_of(wq000), real_of(wk000), real_of(wv000),
                                          qkv::in_out, ref::scaling::none());
  const auto P = ref::to_double(r.weights), Q = ref::to_double(r.queries), K = ref::to_double(r.keys),
             V = ref::to_double(r.values);
  const matrix<double, 3, 3> zero{};
  auto bounds_in = [&](auto tag) {
    using F = decltype(tag);
    const auto e_p = qkv::bounds::softmax_rows_error<F>(ref::to_double(r.scores), P, zero);
    return qkv::bounds::attention_backward_error<F>(P, e_p, V, zero, K, zero, Q, zero,
                                                    qkv::filled<double, 3, 3>(1.0), zero, 1.0, 0.0);
  };
  const auto b32 = bounds_in(float{});
  const auto b64 = bounds_in(double{});
  const auto core32 = qkv::self_attention_backward(
      x000, wq000, wk000, wv000, qkv::in_out,
      qkv::self_attention(x000, wq000, wk000, wv000, qkv::in_out, {qkv::scaling<float>::none()}),
      qkv::filled<float, 3, 3>(1.0f), {qkv::scaling<float>::none()});
  // 1e-9 relative on the bounds: they are computed in double from values rounded to double
  auto within = [](const auto& computed, const auto& truth_m, const matrix<double, 3, 3>& bound) {
    const auto err = ref::error(computed, truth_m);
    for (std::size_t n = 0; n < 9; ++n)
      if (!(err.v[n] <= real(bound.v[n] * (1 + 1e-9)))) return false;
    return true;
  };
  CHECK(within(core32.attention.d_queries, truth.attention.d_queries, b32.d_queries));
  CHECK(
      within(matrix<double, 3, 3>(torch::t000::sum_f32_d_queries), truth.attention.d_queries, b32.d_queries));
  CHECK(
      within(matrix<double, 3, 3>(torch::t000::sum_f64_d_queries), truth.attention.d_queries, b64.d_queries));
  CHECK(within(core32.attention.d_keys, truth.attention.d_keys, b32.d_keys));
  CHECK(within(matrix<double, 3, 3>(torch::t000::sum_f32_d_keys), truth.attention.d_keys, b32.d_keys));
  CHECK(within(core32.attention.d_values, truth.attention.d_values, b32.d_values));
  CHECK(within(matrix<double, 3, 3>(torch::t000::sum_f32_d_values), truth.attention.d_values, b32.d_values));
  // the measured fact of example 15, against the truth: PyTorch's float32 dQ(2, 2) is 1.85e-6 off
  const auto err =
      ref::error(matrix<double, 3, 3>(torch::t000::sum_f32_d_queries), truth.attention.d_queries);
  CHECK(static_cast<double>(err(1, 1)) > 1.8e-6);
  CHECK(static_cast<double>(err(1, 1)) < 1.9e-6);
}

}  // namespace
