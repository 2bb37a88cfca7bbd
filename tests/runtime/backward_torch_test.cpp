// The run-time backward against PyTorch 1.13 autograd (tests/data/backward/backward_torch.json,
// made by scripts/fixtures/torch_backward_fixtures.py): scaled dot-product attention (no mask, causal in
// both alignments, key padding) and nn.MultiheadAttention with its in/out projections (biases,
// causal, key padding), float32 and float64, each against PyTorch's run in the same type.
//
// Tolerance, derived: backward_reference.hpp bounds the error of any run in F of these
// computations (any summation order, fma or not; D from dO ∘ O as qkv computes it or from
// dP ∘ P as PyTorch's softmax backward does), against the truth computed in long double. qkv's
// run and PyTorch's are each within that bound of the truth, so within twice the bound of each
// other. For the layer the projections' errors enter the attention bound as input errors:
//   Q = x Wqᵀ + bq (and K, V):   gamma(E + 1) (sum |x| |Wq| + |bq|)   (E: the chain; +1: the
//                                bias's add; PyTorch's q * scaling before its product adds one
//                                rounding of |q|, which the score bound's gamma(d + 1) takes)
//   d_concat = d_output Wo:      gamma(E) sum |dY| |Wo|
//   d_w_output = dYᵀ concat:     gamma(T) sum |dY| |concat| + sum |dY| e_concat
//   d_b_output = colsum dY:      gamma(T) sum |dY|
//   d_w_query = d_queriesᵀ x:    gamma(T) sum |dQ| |x| + sum e_dQ |x|     (and k, v; biases alike)
//   d_x = dQ Wq + dK Wk + dV Wv: gamma(3 E) sum (|dQ| |Wq| + ...) + sum (e_dQ |Wq| + ...)
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include <qkv/io/json.hpp>
#include <qkv/runtime/backward.hpp>
#include <qkv/runtime/multihead_backward.hpp>

#include "../support/backward_reference.hpp"
#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::lmat;
using qkv::testing::reference_backward;
using rt::dynamic_matrix;
using ld = long double;

namespace {

const nlohmann::json& fixture() {
  static const auto doc =
      qkv::io::json_document::load(std::string(QKV_TEST_DATA) + "/backward/backward_torch.json");
  return doc.json();
}

/// rows x cols of the case's field; inputs were drawn in float32 (read as double, rounded to
/// float: exact), results are F's
template <class F>
dynamic_matrix<F> field(const nlohmann::json& c, const char* name, std::size_t rows, std::size_t cols,
                        bool input = false) {
  const auto& a = c.at(name);
  REQUIRE(a.size() == rows * cols);
  dynamic_matrix<F> m(rows, cols);
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double x = a.at(k).get<double>();
    m.data()[k] = input ? F(float(x)) : F(x);
  }
  return m;
}

/// every |a - b| <= 2 bound (both within bound of the truth)
template <class F>
void expect_twice(const dynamic_matrix<F>& qkv, const dynamic_matrix<F>& torch, const lmat& bound,
                  const std::string& what) {
  dynamic_matrix<double> expected(torch.rows(), torch.cols()), twice(torch.rows(), torch.cols());
  REQUIRE(bound.rows == torch.rows());
  REQUIRE(bound.cols == torch.cols());
  for (std::size_t k = 0; k < torch.size(); ++k) {
    expected.data()[k] = double(torch.data()[k]);
    twice.data()[k] = double(2 * bound.a[k]);
  }
  qkv::testing::expect_within(qkv, expected, twice, what);
}

template <class F>
dynamic_matrix<F> of_vector(const std::vector<F>& v) {
  dynamic_matrix<F> m(1, v.size());
  for (std::size_t k = 0; k < v.size(); ++k) m(0, k) = v[k];
  return m;
}

template <class F>
void sdpa_case(const nlohmann::json& c) {
  const std::size_t T = c.at("T"), S = c.at("S"), d = c.at("d"), dv = c.at("dv");
  const std::string name = c.at("name");
  INFO(name);
  const auto q = field<F>(c, "q", T, d, true), k = field<F>(c, "k", S, d, true),
             v = field<F>(c, "v", S, dv, true), d_out = field<F>(c, "d_context", T, dv, true);
  std::vector<unsigned char> padding(S, 0);
  for (const auto& j : c.at("padding")) padding[j.get<std::size_t>()] = 1;
  rt::attention_mask mask;
  mask.causal = c.at("causal");
  if (c.at("lower_right")) mask.alignment = rt::causal_alignment::lower_right;
  mask.set_key_padding(padding);
  const F scale = rt::default_scale<F>(d);
  CHECK(double(scale) == c.at("scale").get<double>());
  const qkv::testing::forward_backward<F> run(q, k, v, d_out, scale, mask);
  const auto& out = run.out;
  const auto& g = run.g;
  const auto allowed = [&](std::size_t i, std::size_t j) { return run.allowed(i, j); };
  const auto ref = reference_backward::compute<F>(q, k, v, d_out, double(scale), allowed,
                                                  [](std::size_t, std::size_t) { return ld(0); });
  expect_twice(out, field<F>(c, "out", T, dv), ref.out_bound, name + ": out");
  expect_twice(g.d_queries, field<F>(c, "d_queries", T, d), ref.dq_bound, name + ": d_queries");
  expect_twice(g.d_keys, field<F>(c, "d_keys", S, d), ref.dk_bound, name + ": d_keys");
  expect_twice(g.d_values, field<F>(c, "d_values", S, dv), ref.dv_bound, name + ": d_values");
}

/// a (r, c) = sum_t a(r, t) b(t, c) in long double and its magnitude sum |a| |b| (+ |a| eb + ea |b|)
struct lproduct {
  lmat value, magnitude, propagated;
};
lproduct product(const lmat& a, const lmat& b, const lmat& ea = {}, const lmat& eb = {}) {
  lproduct p{lmat(a.rows, b.cols), lmat(a.rows, b.cols), lmat(a.rows, b.cols)};
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < b.cols; ++j) {
      ld acc = 0, mag = 0, prop = 0;
      for (std::size_t t = 0; t < a.cols; ++t) {
        acc += a(i, t) * b(t, j);
        mag += std::abs(a(i, t) * b(t, j));
        if (!ea.a.empty()) prop += ea(i, t) * std::abs(b(t, j));
        if (!eb.a.empty()) prop += std::abs(a(i, t)) * eb(t, j);
      }
      p.value(i, j) = acc;
      p.magnitude(i, j) = mag;
      p.propagated(i, j) = prop;
    }
  return p;
}
lmat transpose(const lmat& a) {
  lmat t(a.cols, a.rows);
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < a.cols; ++j) t(j, i) = a(i, j);
  return t;
}
lmat columns(const lmat& a, std::size_t c0, std::size_t n) {
  lmat r(a.rows, n);
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < n; ++j) r(i, j) = a(i, c0 + j);
  return r;
}
void put_columns(lmat& a, const lmat& part, std::size_t c0) {
  for (std::size_t i = 0; i < part.rows; ++i)
    for (std::size_t j = 0; j < part.cols; ++j) a(i, c0 + j) = part(i, j);
}

template <class F>
void mha_case(const nlohmann::json& c) {
  const std::size_t T = c.at("T"), E = c.at("E"), H = c.at("heads"), dh = E / H;
  const std::string name = c.at("name");
  INFO(name);
  const double u = std::numeric_limits<F>::epsilon() / 2;
  const auto gamma = [&](double n) { return ld(n * u / (1 - n * u)); };
  const auto x = field<F>(c, "x", T, E, true), dy = field<F>(c, "d_output", T, E, true);
  rt::attention_weights<F> w;
  const auto bias = [&](const char* f) {
    const auto m = field<F>(c, f, 1, E, true);
    return std::vector<F>(m.data(), m.data() + E);
  };
  w.q = {field<F>(c, "w_query", E, E, true), bias("b_query")};
  w.k = {field<F>(c, "w_key", E, E, true), bias("b_key")};
  w.v = {field<F>(c, "w_value", E, E, true), bias("b_value")};
  w.o = rt::linear_weights<F>{field<F>(c, "w_output", E, E, true), bias("b_output")};
  rt::attention_options<F> opt;
  opt.keep_weights = true;
  opt.heads = H;
  opt.causal = c.at("causal");
  std::vector<unsigned char> padding(T, 0);
  for (const auto& j : c.at("padding")) padding[j.get<std::size_t>()] = 1;
  opt.key_padding = padding;
  rt::multihead_result<F> r;
  rt::attention_statistics<F> stats;
  rt::attention_forward_for_backward<F>(x.view(), w, opt, r, stats);
  rt::attention_gradients<F> g;
  rt::attention_backward<F>(x.view(), w, opt, r, stats, dy.view(), g);
  // the truth and the bounds (the header comment)
  const lmat lx = lmat::of(x), ldy = lmat::of(dy);
  lmat proj[3], eproj[3];
  const rt::linear_weights<F>* lw[3] = {&w.q, &w.k, &w.v};
  for (int p = 0; p < 3; ++p) {
    const auto pr = product(lx, transpose(lmat::of(lw[p]->weight)));
    proj[p] = pr.value;
    eproj[p] = lmat(T, E);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < E; ++j) {
        proj[p](i, j) += ld(lw[p]->bias[j]);
        eproj[p](i, j) = gamma(double(E + 1)) * (pr.magnitude(i, j) + std::abs(ld(lw[p]->bias[j])));
      }
  }
  const lmat lwo = lmat::of(w.o->weight);
  const auto dconcat = product(ldy, lwo);
  lmat edconcat(T, E);
  for (std::size_t k = 0; k < edconcat.a.size(); ++k)
    edconcat.a[k] = gamma(double(E)) * dconcat.magnitude.a[k];
  lmat concat(T, E), econcat(T, E), dq(T, E), edq(T, E), dk(T, E), edk(T, E), dv(T, E), edv(T, E);
  const double scale = double(rt::default_scale<F>(dh));
  const auto allowed = [&](std::size_t i, std::size_t j) { return !padding[j] && (!opt.causal || j <= i); };
  for (std::size_t h = 0; h < H; ++h) {
    const auto ref = reference_backward::compute_l<F>(
        columns(proj[0], h * dh, dh), columns(proj[1], h * dh, dh), columns(proj[2], h * dh, dh),
        columns(dconcat.value, h * dh, dh), columns(eproj[0], h * dh, dh), columns(eproj[1], h * dh, dh),
        columns(eproj[2], h * dh, dh), columns(edconcat, h * dh, dh), scale, allowed,
        [](std::size_t, std::size_t) { return ld(0); });
    put_columns(concat, ref.out, h * dh);
    put_columns(econcat, ref.out_bound, h * dh);
    put_columns(dq, ref.dq, h * dh);
    put_columns(edq, ref.dq_bound, h * dh);
    put_columns(dk, ref.dk, h * dh);
    put_columns(edk, ref.dk_bound, h * dh);
    put_columns(dv, ref.dv, h * dh);
    put_columns(edv, ref.dv_bound, h * dh);
  }
  // d_w = dYᵀ input (out_in), d_b = colsum dY
  const auto weight_bound = [&](const lmat& dyl, const lmat& edy, const lmat& in, const lmat& ein) {
    const auto pr = product(transpose(dyl), in, transpose(edy), ein);
    lmat b(pr.value.rows, pr.value.cols);
    for (std::size_t k = 0; k < b.a.size(); ++k)
      b.a[k] = gamma(double(T)) * pr.magnitude.a[k] + pr.propagated.a[k];
    return b;
  };
  const auto bias_bound = [&](const lmat& dyl, const lmat& edy) {
    lmat b(dyl.cols, 1);
    for (std::size_t j = 0; j < dyl.cols; ++j) {
      ld mag = 0, prop = 0;
      for (std::size_t i = 0; i < dyl.rows; ++i) {
        mag += std::abs(dyl(i, j));
        prop += edy.a.empty() ? 0 : edy(i, j);
      }
      b(j, 0) = gamma(double(T)) * mag + prop;
    }
    return transpose(b);
  };
  const lmat zero;
  expect_twice(
      r.output, field<F>(c, "output", T, E),
      [&] {
        const auto pr = product(concat, transpose(lwo), econcat);
        lmat b(T, E);
        for (std::size_t i = 0; i < T; ++i)
          for (std::size_t j = 0; j < E; ++j)
            b(i, j) = gamma(double(E + 1)) * (pr.magnitude(i, j) + std::abs(ld(w.o->bias[j]))) +
                      pr.propagated(i, j);
        return b;
      }(),
      name + ": output");
  expect_twice(g.d_w_output, field<F>(c, "d_w_output", E, E), weight_bound(ldy, zero, concat, econcat),
               name + ": d_w_output");
  expect_twice(of_vector(g.d_b_output), field<F>(c, "d_b_output", 1, E), bias_bound(ldy, zero),
               name + ": d_b_output");
  expect_twice(g.d_w_query, field<F>(c, "d_w_query", E, E), weight_bound(dq, edq, lx, zero),
               name + ": d_w_query");
  expect_twice(g.d_w_key, field<F>(c, "d_w_key", E, E), weight_bound(dk, edk, lx, zero), name + ": d_w_key");
  expect_twice(g.d_w_value, field<F>(c, "d_w_value", E, E), weight_bound(dv, edv, lx, zero),
               name + ": d_w_value");
  expect_twice(of_vector(g.d_b_query), field<F>(c, "d_b_query", 1, E), bias_bound(dq, edq),
               name + ": d_b_query");
  expect_twice(of_vector(g.d_b_key), field<F>(c, "d_b_key", 1, E), bias_bound(dk, edk), name + ": d_b_key");
  expect_twice(of_vector(g.d_b_value), field<F>(c, "d_b_value", 1, E), bias_bound(dv, edv),
               name + ": d_b_value");
  lmat edx(T, E);
  {
    const lmat* grads[3] = {&dq, &dk, &dv};
    const lmat* errs[3] = {&edq, &edk, &edv};
    for (int p = 0; p < 3; ++p) {
      const auto pr = product(*grads[p], lmat::of(lw[p]->weight), *errs[p]);
      for (std::size_t k = 0; k < edx.a.size(); ++k)
        edx.a[k] += gamma(double(3 * E)) * pr.magnitude.a[k] + pr.propagated.a[k];
    }
  }
  expect_twice(g.d_x, field<F>(c, "d_x", T, E), edx, name + ": d_x");
}

}  // namespace

TEST_CASE("scaled dot-product attention's gradients match PyTorch 1.13 autograd within derived bounds") {
  std::size_t n = 0;
  for (const auto& c : fixture().at("cases")) {
    if (c.at("kind") != "sdpa") continue;
    if (c.at("dtype") == "float32")
      sdpa_case<float>(c);
    else
      sdpa_case<double>(c);
    ++n;
  }
  CHECK(n == 10);
}

TEST_CASE("nn.MultiheadAttention's gradients (projections, heads, output projection) match PyTorch 1.13") {
  std::size_t n = 0;
  for (const auto& c : fixture().at("cases")) {
    if (c.at("kind") != "mha") continue;
    if (c.at("dtype") == "float32")
      mha_case<float>(c);
    else
      mha_case<double>(c);
    ++n;
  }
  CHECK(n == 4);
}
