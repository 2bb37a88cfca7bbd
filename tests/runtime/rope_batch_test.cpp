// Rotary position embeddings (runtime/rope.hpp) and batches with key padding
// (runtime/batch.hpp): PyTorch's numbers (tests/data/rope_batch/, made by
// scripts/fixtures/torch_rope_batch_fixtures.py), the two properties of a rotation (norms kept, scores that
// depend only on m - n) within derived bounds, and bits across thread counts.
//
// Bounds (standard model, Higham 3.1; u = 2^-24 for float). One rotated pair:
//   y0 = fl(fl(x0 c') - fl(x1 s')), c' = c (1 + e1), s' = s (1 + e2), |e| <= delta
//   |y0 - (x0 c - x1 s)| <= (|x0 c| + |x1 s|) kappa,  kappa = (1 + delta)(1 + u)^2 - 1
// and the same for y1; |x0 c| + |x1 s| <= |x0| + |x1| <= sqrt(2) |(x0, x1)|, so the pair moves by
// at most 2 kappa |(x0, x1)| and the whole rotated vector by at most 2 kappa |x| from the exact
// rotation by the double angle. c' and s' are double cos and sin (glibc: under 1 ulp of double)
// rounded to float: delta = u + 2^-52 (we use 1.001 u). The double angle p * theta is itself
// within p * 2^-51 rad of p times the exact theta (theta: pow and a division, then a product,
// each under 1 ulp of double), and a rotation by an angle off by a moves x by at most a |x|.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <qkv/io/json.hpp>
#include <qkv/runtime/batch.hpp>
#include <qkv/runtime/rope.hpp>
#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::expect_within;
using qkv::testing::random_matrix;
using qkv::testing::reference_attention;
using qkv::testing::same_bits;
using qkv::testing::to_double;
using rt::dynamic_matrix;

namespace {

constexpr double u32 = qkv::testing::unit<float>;
constexpr double u64 = qkv::testing::unit<double>;
// the rotation's relative error per pair (header comment): kappa for float
const double kappa = (1 + 1.001 * u32) * (1 + u32) * (1 + u32) - 1;

qkv::io::json_document fixture(const std::string& name) {
  return qkv::io::json_document::load(std::string(QKV_TEST_DATA) + "/rope_batch/" + name);
}

template <class T>
dynamic_matrix<T> matrix_at(const qkv::io::json_document& doc, const nlohmann::json& j,
                            const std::string& field) {
  return qkv::io::read_matrix<T>(doc, field, j.at(field));
}

template <class T>
std::vector<T> vector_at(const qkv::io::json_document& doc, const nlohmann::json& j,
                         const std::string& field) {
  return qkv::io::read_tensor<T>(doc, field, j.at(field)).data;
}

rt::rope_layout layout_of(const std::string& s) {
  return s == "interleaved" ? rt::rope_layout::interleaved : rt::rope_layout::half_split;
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

std::vector<double> row_of(const dynamic_matrix<float>& m, std::size_t i) {
  std::vector<double> v(m.cols());
  for (std::size_t c = 0; c < m.cols(); ++c) v[c] = m(i, c);
  return v;
}

/// one row rotated to position p (a 1-row matrix)
dynamic_matrix<float> rotated(const std::vector<float>& x, std::size_t head_dim, rt::rope_layout layout,
                              std::size_t p) {
  dynamic_matrix<float> m(1, x.size());
  for (std::size_t c = 0; c < x.size(); ++c) m(0, c) = x[c];
  rt::rope_options o;
  o.layout = layout;
  rt::apply_rope<float>(m.view(), head_dim, o, p, nullptr);
  return m;
}

/// the exact rotation (in double) of a vector taken as exact, head by head, at position p
std::vector<double> exact_rotation(const std::vector<double>& x, std::size_t head_dim, std::size_t rotary_dim,
                                   rt::rope_layout layout, double base, double p) {
  std::vector<double> y = x;
  const std::size_t pairs = rotary_dim / 2;
  for (std::size_t h = 0; h < x.size() / head_dim; ++h)
    for (std::size_t i = 0; i < pairs; ++i) {
      const double a = p / std::pow(base, double(2 * i) / double(rotary_dim));
      const std::size_t j0 = h * head_dim + (layout == rt::rope_layout::half_split ? i : 2 * i);
      const std::size_t j1 = layout == rt::rope_layout::half_split ? j0 + pairs : j0 + 1;
      y[j0] = x[j0] * std::cos(a) - x[j1] * std::sin(a);
      y[j1] = x[j1] * std::cos(a) + x[j0] * std::sin(a);
    }
  return y;
}

}  // namespace

TEST_CASE(
    "rope: cos, sin and the rotated rows are PyTorch's bit for bit, both layouts, partial rotary, far "
    "positions") {
  const auto doc = fixture("rope.json");
  for (const auto& c : doc.json().at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    INFO(name);
    rt::rope_options o;
    o.layout = layout_of(c.at("layout").get<std::string>());
    o.base = c.at("base").get<double>();
    o.rotary_dim = c.at("rotary_dim").get<std::size_t>();
    o.position_offset = c.at("position_offset").get<std::size_t>();
    const std::size_t hd = c.at("head_dim").get<std::size_t>();
    auto x = matrix_at<float>(doc, c, "x");
    const auto want = matrix_at<float>(doc, c, "rotated");
    // the table: float64 angles, cos and sin rounded once to float, as the script computes them
    const rt::rope_table<float> t(o, o.rotary_dim, o.position_offset, x.rows());
    const auto cos = vector_at<float>(doc, c, "cos"), sin = vector_at<float>(doc, c, "sin");
    CHECK(t.cos == cos);
    CHECK(t.sin == sin);
    // the rotation: q * cos + rotate_half(q) * sin in float32 rounds as x0 c - x1 s does
    for (std::size_t threads : {1, 2}) {
      auto y = x;
      rt::thread_pool pool(threads);
      rt::apply_rope<float>(y.view(), hd, o, o.position_offset, &pool);
      CHECK(same_bits(y, want));
    }
    // Hugging Face's float32 angles are another convention: at position 100000 they are ~1e-3
    // away (the angle's float32 rounding, p * 2^-24 rad), which is why the angles here are double
    const auto hf = matrix_at<float>(doc, c, "hf_float32");
    if (o.position_offset >= 100000) CHECK_FALSE(same_bits(hf, want));
  }
}

TEST_CASE("rope: the rotation keeps each row's norm within 2 kappa |x|, both layouts, positions up to 2^20") {
  // |  |y| - |x|  | <= |y - R x| <= 2 kappa |x| (header comment; the exact rotation keeps norms),
  // plus the double norms' own rounding, (n + 1) 2^-53 relative each
  const auto x = random_matrix<float>(1, 64, 5);
  std::vector<float> xv(x.data(), x.data() + x.size());
  const double nx = norm(row_of(x, 0));
  for (auto layout : {rt::rope_layout::half_split, rt::rope_layout::interleaved})
    for (std::size_t p :
         {std::size_t(0), std::size_t(1), std::size_t(17), std::size_t(4095), std::size_t(1) << 20})
      for (std::size_t hd : {std::size_t(8), std::size_t(64)}) {
        const auto y = rotated(xv, hd, layout, p);
        const double bound = 2 * kappa * nx + 2 * 65 * u64 * nx;
        CHECK(std::abs(norm(row_of(y, 0)) - nx) <= bound);
      }
}

TEST_CASE("rope: q_m . k_n depends only on m - n, within the derived bound, both layouts") {
  // exactly, R_m q . R_n k = q . R_(n-m) k. Each rotated float vector is within
  // e(p) = 2 kappa + p 2^-51 of the exact rotation (relative to its norm), so a dot product is
  // within (e(m) + e(n) + e(m) e(n)) |q| |k| of the exact one; two of them differ by at most the
  // sum of their bounds, plus the double dot products' own rounding (gamma(d) sum |q||k| each).
  const std::size_t d = 32;
  const auto q = random_matrix<float>(1, d, 21), k = random_matrix<float>(1, d, 22);
  std::vector<float> qv(q.data(), q.data() + d), kv(k.data(), k.data() + d);
  const double nq = norm(row_of(q, 0)), nk = norm(row_of(k, 0));
  auto e = [](double p) { return 2 * kappa + p * std::ldexp(1.0, -51); };
  auto dot = [&](const dynamic_matrix<float>& a, const dynamic_matrix<float>& b) {
    double s = 0;
    for (std::size_t c = 0; c < d; ++c) s += double(a(0, c)) * double(b(0, c));
    return s;
  };
  for (auto layout : {rt::rope_layout::half_split, rt::rope_layout::interleaved})
    for (std::size_t hd : {std::size_t(8), std::size_t(32)})
      for (std::size_t m : {std::size_t(5), std::size_t(2), std::size_t(300)})
        for (std::size_t n : {std::size_t(2), std::size_t(9)})
          for (std::size_t shift :
               {std::size_t(1), std::size_t(100), std::size_t(4093), std::size_t(65536)}) {
            const double s0 = dot(rotated(qv, hd, layout, m), rotated(kv, hd, layout, n));
            const double s1 = dot(rotated(qv, hd, layout, m + shift), rotated(kv, hd, layout, n + shift));
            const auto b = [&](double pm, double pn) { return (e(pm) + e(pn) + e(pm) * e(pn)) * nq * nk; };
            const double bound = b(double(m), double(n)) + b(double(m + shift), double(n + shift)) +
                                 2 * qkv::testing::gamma_n<double>(d) * nq * nk;
            INFO("m = " << m << ", n = " << n << ", shift = " << shift);
            CHECK(std::abs(s0 - s1) <= bound);
          }
}

TEST_CASE("rope: a bad rotary_dim or base is refused naming the head's width") {
  dynamic_matrix<float> m(2, 8);
  rt::rope_options o;
  o.rotary_dim = 5;
  CHECK_THROWS_WITH_AS(rt::apply_rope<float>(m.view(), 8, o, 0, nullptr),
                       "rope: rotary_dim 5 must be even and at most the head's 8 columns", rt::shape_error);
  o.rotary_dim = 10;
  CHECK_THROWS_WITH_AS(rt::apply_rope<float>(m.view(), 8, o, 0, nullptr),
                       "rope: rotary_dim 10 must be even and at most the head's 8 columns", rt::shape_error);
  o.rotary_dim = 0;  // the whole head, 3 columns: odd
  CHECK_THROWS_WITH_AS(rt::apply_rope<float>(m.view(), 3, o, 0, nullptr),
                       "rope: heads of 3 columns do not divide a 2x8 matrix", rt::shape_error);
  o.base = 0;
  CHECK_THROWS_AS(rt::apply_rope<float>(m.view(), 8, o, 0, nullptr), rt::shape_error);
  // through attention(): the head is d_q / heads wide
  rt::attention_weights<float> w;
  w.q = w.k = w.v = {random_matrix<float>(8, 8, 3), {}};
  rt::attention_options<float> opt;
  opt.keep_weights = true;
  opt.heads = 2;
  opt.rope = rt::rope_options{};
  opt.rope->rotary_dim = 6;
  CHECK_THROWS_WITH_AS((void)rt::self_attention(m, w, opt),
                       "rope: rotary_dim 6 must be even and at most the head's 4 columns", rt::shape_error);
}

TEST_CASE(
    "rope in attention(): queries and keys rotated per head after the projections; LLaMA's layer as PyTorch "
    "computes it") {
  const auto doc = fixture("rope_attention.json");
  const auto& j = doc.json();
  const auto x = matrix_at<float>(doc, j, "x");
  rt::attention_weights<float> w;
  w.q = {matrix_at<float>(doc, j, "wq"), vector_at<float>(doc, j, "bq")};
  w.k = {matrix_at<float>(doc, j, "wk"), vector_at<float>(doc, j, "bk")};
  w.v = {matrix_at<float>(doc, j, "wv"), vector_at<float>(doc, j, "bv")};
  w.o = rt::linear_weights<float>{matrix_at<float>(doc, j, "wo"), vector_at<float>(doc, j, "bo")};
  rt::attention_options<float> opt;
  opt.keep_weights = true;
  opt.heads = j.at("heads").get<std::size_t>();
  opt.causal = true;
  opt.rope = rt::rope_options{};
  opt.rope->position_offset = j.at("position_offset").get<std::size_t>();
  const std::size_t T = x.rows(), d = x.cols(), H = opt.heads, hd = d / H;
  rt::thread_pool one(1), two(2);
  const auto r = rt::self_attention(x, w, opt, &one);
  // the hook: the same bits as projecting, then apply_rope at positions 3.. (queries and keys)
  auto q = rt::linear(x, w.q, &one);
  rt::apply_rope<float>(q.view(), hd, *opt.rope, 3, nullptr);
  CHECK(same_bits(r.queries, q));
  // and on two threads, streaming or not
  CHECK(same_bits(rt::self_attention(x, w, opt, &two).output, r.output));
  // PyTorch float64 (the exact answer to ~1e-15) against our float run, within the chain of
  // bounds: projections (reference_linear), the rotation (kappa and the propagated projection
  // error: |c|, |s| <= 1), attention (reference_attention), the output projection
  const double g = qkv::testing::gamma_n<float>(d);
  dynamic_matrix<double> qd, dq, kd, dk, vd, dv;
  auto vec = [](const std::vector<float>& b) { return std::vector<double>(b.begin(), b.end()); };
  qkv::testing::reference_linear(to_double(x), to_double(w.q.weight), vec(w.q.bias), g, u32, qd, dq);
  qkv::testing::reference_linear(to_double(x), to_double(w.k.weight), vec(w.k.bias), g, u32, kd, dk);
  qkv::testing::reference_linear(to_double(x), to_double(w.v.weight), vec(w.v.bias), g, u32, vd, dv);
  auto rotate_with_bound = [&](const dynamic_matrix<double>& m, const dynamic_matrix<double>& dm,
                               dynamic_matrix<double>& y, dynamic_matrix<double>& dy) {
    y = m;
    dy = dm;
    for (std::size_t i = 0; i < T; ++i) {
      const double p = double(3 + i);
      std::vector<double> xi(d);
      for (std::size_t c = 0; c < d; ++c) xi[c] = m(i, c);
      const auto row = exact_rotation(xi, hd, hd, rt::rope_layout::half_split, 10000, p);
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t k = 0; k < hd / 2; ++k) {
          const std::size_t a = h * hd + k, b = a + hd / 2;
          y(i, a) = row[a];
          y(i, b) = row[b];
          const double mag = std::abs(m(i, a)) + dm(i, a) + std::abs(m(i, b)) + dm(i, b);
          const double err = dm(i, a) + dm(i, b) + (kappa + p * std::ldexp(1.0, -51)) * mag;
          dy(i, a) = dy(i, b) = err;
        }
    }
  };
  dynamic_matrix<double> qr, dqr, kr, dkr;
  rotate_with_bound(qd, dq, qr, dqr);
  rotate_with_bound(kd, dk, kr, dkr);
  expect_within(r.queries, matrix_at<double>(doc, j, "queries"), dqr, "rotated queries vs PyTorch float64");
  expect_within(r.keys, matrix_at<double>(doc, j, "keys"), dkr, "rotated keys vs PyTorch float64");
  const auto torch_w = qkv::io::read_tensor<double>(doc, "weights", j.at("weights")).data;  // (H, T, T)
  dynamic_matrix<double> concat(T, d), dconcat(T, d);
  for (std::size_t h = 0; h < H; ++h) {
    auto cols = [&](const dynamic_matrix<double>& m) {
      dynamic_matrix<double> c(T, hd);
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t k = 0; k < hd; ++k) c(i, k) = m(i, h * hd + k);
      return c;
    };
    const auto a = reference_attention::compute<float>(cols(qr), cols(dqr), cols(kr), cols(dkr), cols(vd),
                                                       cols(dv), 1 / std::sqrt(double(hd)), true, nullptr);
    dynamic_matrix<double> tw(T, T);
    for (std::size_t k = 0; k < T * T; ++k) tw.data()[k] = torch_w[h * T * T + k];
    expect_within(r.weights[h], tw, a.weights_bound, "weights vs PyTorch float64");
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t k = 0; k < hd; ++k) {
        concat(i, h * hd + k) = a.out(i, k);
        dconcat(i, h * hd + k) = a.out_bound(i, k);
      }
  }
  // output = concat Woᵀ + bo with an inexact concat: gamma(d) sum (|c| + dc)|w| + sum dc |w| + the bias add
  const auto wo = to_double(w.o->weight);
  dynamic_matrix<double> dout(T, d);
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t o = 0; o < d; ++o) {
      double acc = 0, mag = 0, prop = 0;
      for (std::size_t c = 0; c < d; ++c) {
        acc += concat(i, c) * wo(o, c);
        mag += (std::abs(concat(i, c)) + dconcat(i, c)) * std::abs(wo(o, c));
        prop += dconcat(i, c) * std::abs(wo(o, c));
      }
      dout(i, o) = g * mag + prop + 2 * u32 * (std::abs(acc) + std::abs(double(w.o->bias[o])) + prop);
    }
  expect_within(r.output, matrix_at<double>(doc, j, "output"), dout, "output vs PyTorch float64");
}

// --- batches -----------------------------------------------------------------------------------

namespace {

struct torch_batch {
  qkv::io::json_document doc = fixture("batch.json");
  rt::attention_weights<float> w;
  std::vector<dynamic_matrix<float>> x;  // one (L, E) matrix per sequence, padding included
  std::vector<std::vector<unsigned char>> padding;
  std::size_t heads = 0, B = 0, L = 0, E = 0;

  torch_batch() {
    const auto& j = doc.json();
    w.q = {matrix_at<float>(doc, j, "wq"), vector_at<float>(doc, j, "bq")};
    w.k = {matrix_at<float>(doc, j, "wk"), vector_at<float>(doc, j, "bk")};
    w.v = {matrix_at<float>(doc, j, "wv"), vector_at<float>(doc, j, "bv")};
    w.o = rt::linear_weights<float>{matrix_at<float>(doc, j, "wo"), vector_at<float>(doc, j, "bo")};
    heads = j.at("heads").get<std::size_t>();
    const auto t = qkv::io::read_tensor<float>(doc, "x", j.at("x"));
    B = t.shape[0], L = t.shape[1], E = t.shape[2];
    for (std::size_t b = 0; b < B; ++b) {
      dynamic_matrix<float> m(L, E);
      for (std::size_t k = 0; k < L * E; ++k) m.data()[k] = t.data[b * L * E + k];
      x.push_back(std::move(m));
      std::vector<unsigned char> f;
      for (const auto& v : j.at("key_padding").at(b)) f.push_back(static_cast<unsigned char>(v.get<int>()));
      padding.push_back(std::move(f));
    }
  }
  std::vector<rt::batch_sequence<float>> sequences() const {
    std::vector<rt::batch_sequence<float>> s;
    for (std::size_t b = 0; b < B; ++b) s.push_back({x[b].view(), std::nullopt, padding[b]});
    return s;
  }
};

/// one sequence's attention alone, the padding as `allowed`
template <class T>
rt::multihead_result<T> alone(const rt::batch_sequence<T>& s, const rt::attention_weights<T>& w,
                              rt::attention_options<T> opt, rt::thread_pool* pool) {
  const auto c = s.context ? *s.context : s.x;
  if (!s.key_padding.empty()) {
    opt.allowed = rt::mask_matrix(s.x.rows, c.rows, 1);
    for (std::size_t i = 0; i < s.x.rows; ++i)
      for (std::size_t j = 0; j < c.rows; ++j)
        if (s.key_padding[j]) (*opt.allowed)(i, j) = 0;
  }
  rt::multihead_result<T> r;
  rt::attention<T>(s.x, c, w, opt, r, pool);
  return r;
}

}  // namespace

TEST_CASE("batch: a padded batch agrees with nn.MultiheadAttention(batch_first) and its key_padding_mask") {
  const torch_batch tb;
  const auto& j = tb.doc.json();
  rt::attention_options<float> opt;
  opt.keep_weights = true;
  opt.heads = tb.heads;
  const auto seqs = tb.sequences();
  const auto r = rt::batch_attention<float>(std::span<const rt::batch_sequence<float>>(seqs), tb.w, opt);
  REQUIRE(r.size() == tb.B);
  const auto torch_out = qkv::io::read_tensor<double>(tb.doc, "output", j.at("output")).data;  // (B, L, E)
  const auto torch_w = qkv::io::read_tensor<double>(tb.doc, "weights", j.at("weights")).data;  // (B, H, L, L)
  const std::size_t L = tb.L, E = tb.E, H = tb.heads, hd = E / H;
  const double g = qkv::testing::gamma_n<float>(E);
  auto vec = [](const std::vector<float>& b) { return std::vector<double>(b.begin(), b.end()); };
  for (std::size_t b = 0; b < tb.B; ++b) {
    INFO("sequence " << b);
    const bool all_padded =
        std::all_of(tb.padding[b].begin(), tb.padding[b].end(), [](unsigned char f) { return f != 0; });
    if (all_padded) {
      // PyTorch 1.13: NaN (softmax over no keys); qkv: weights 0, context 0, output = bo exactly
      for (std::size_t k = 0; k < L * E; ++k) CHECK(std::isnan(torch_out[b * L * E + k]));
      for (std::size_t i = 0; i < L; ++i)
        for (std::size_t o = 0; o < E; ++o) CHECK(r[b].output(i, o) == tb.w.o->bias[o]);
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t k = 0; k < L * L; ++k) CHECK(r[b].weights[h].data()[k] == 0.0f);
      continue;
    }
    // the chain of bounds: projections, attention with the padding as the mask, output projection
    dynamic_matrix<double> qd, dq, kd, dk, vd, dv;
    const auto xd = to_double(tb.x[b]);
    qkv::testing::reference_linear(xd, to_double(tb.w.q.weight), vec(tb.w.q.bias), g, u32, qd, dq);
    qkv::testing::reference_linear(xd, to_double(tb.w.k.weight), vec(tb.w.k.bias), g, u32, kd, dk);
    qkv::testing::reference_linear(xd, to_double(tb.w.v.weight), vec(tb.w.v.bias), g, u32, vd, dv);
    rt::mask_matrix allowed(L, L, 1);
    for (std::size_t i = 0; i < L; ++i)
      for (std::size_t k = 0; k < L; ++k)
        if (tb.padding[b][k]) allowed(i, k) = 0;
    dynamic_matrix<double> concat(L, E), dconcat(L, E);
    for (std::size_t h = 0; h < H; ++h) {
      auto cols = [&](const dynamic_matrix<double>& m) {
        dynamic_matrix<double> c(L, hd);
        for (std::size_t i = 0; i < L; ++i)
          for (std::size_t k = 0; k < hd; ++k) c(i, k) = m(i, h * hd + k);
        return c;
      };
      const auto a =
          reference_attention::compute<float>(cols(qd), cols(dq), cols(kd), cols(dk), cols(vd), cols(dv),
                                              1 / std::sqrt(double(hd)), false, &allowed);
      dynamic_matrix<double> tw(L, L);
      for (std::size_t k = 0; k < L * L; ++k) tw.data()[k] = torch_w[(b * H + h) * L * L + k];
      expect_within(r[b].weights[h], tw, a.weights_bound, "weights vs PyTorch float64");
      for (std::size_t i = 0; i < L; ++i)
        for (std::size_t k = 0; k < hd; ++k) {
          concat(i, h * hd + k) = a.out(i, k);
          dconcat(i, h * hd + k) = a.out_bound(i, k);
        }
    }
    const auto wo = to_double(tb.w.o->weight);
    dynamic_matrix<double> want(L, E), dout(L, E);
    for (std::size_t i = 0; i < L; ++i)
      for (std::size_t o = 0; o < E; ++o) {
        double acc = 0, mag = 0, prop = 0;
        for (std::size_t c = 0; c < E; ++c) {
          acc += concat(i, c) * wo(o, c);
          mag += (std::abs(concat(i, c)) + dconcat(i, c)) * std::abs(wo(o, c));
          prop += dconcat(i, c) * std::abs(wo(o, c));
        }
        dout(i, o) = g * mag + prop + 2 * u32 * (std::abs(acc) + std::abs(double(tb.w.o->bias[o])) + prop);
        want(i, o) = torch_out[(b * L + i) * E + o];
      }
    // padded query rows included: PyTorch computes them (it masks keys, not queries), and so do we
    expect_within(r[b].output, want, dout, "output vs PyTorch float64");
  }
}

TEST_CASE(
    "batch: each result is attention() of its sequence alone, bit for bit, on 1, 2 and 3 threads, streaming "
    "or not") {
  // 7 sequences of different lengths (1 to 300 rows, cross-attention for some), random padding
  const std::size_t d = 32, dc = 24;
  rt::attention_weights<float> w;
  w.q = {random_matrix<float>(32, d, 1, 0.3), std::vector<float>(32, 0.1f)};
  w.k = {random_matrix<float>(32, dc, 2, 0.3), {}};
  w.v = {random_matrix<float>(48, dc, 3, 0.3), {}};
  w.o = rt::linear_weights<float>{random_matrix<float>(16, 48, 4, 0.3), {}};
  std::vector<dynamic_matrix<float>> xs, cs;
  const std::size_t lengths[] = {1, 300, 17, 64, 65, 5, 130};
  for (std::size_t b = 0; b < 7; ++b) {
    xs.push_back(random_matrix<float>(lengths[b], d, 10 + unsigned(b)));
    cs.push_back(random_matrix<float>(lengths[(b + 3) % 7], dc, 20 + unsigned(b)));
  }
  std::vector<rt::batch_sequence<float>> seqs;
  for (std::size_t b = 0; b < 7; ++b) {
    std::vector<unsigned char> pad;
    if (b % 2 == 0) {
      pad.resize(cs[b].rows());
      for (std::size_t j = 0; j < pad.size(); ++j) pad[j] = (j * 7 + b) % 5 == 0;
    }
    seqs.push_back({xs[b].view(), cs[b].view(), pad});
  }
  for (bool keep : {true, false})
    for (bool causal : {false, true}) {
      rt::attention_options<float> opt;
      opt.heads = 4;
      opt.keep_weights = keep;
      opt.causal = causal;
      opt.rope = rt::rope_options{};
      rt::thread_pool one(1);
      std::vector<rt::multihead_result<float>> want;
      for (const auto& s : seqs) want.push_back(alone<float>(s, w, opt, &one));
      for (std::size_t threads : {1, 2, 3}) {
        rt::thread_pool pool(threads);
        const auto r =
            rt::batch_attention<float>(std::span<const rt::batch_sequence<float>>(seqs), w, opt, &pool);
        for (std::size_t b = 0; b < 7; ++b) {
          INFO("keep " << keep << ", causal " << causal << ", threads " << threads << ", sequence " << b);
          CHECK(same_bits(r[b].output, want[b].output));
          CHECK(same_bits(r[b].queries, want[b].queries));
          if (keep) CHECK(same_bits(r[b].weights[3], want[b].weights[3]));
        }
      }
      // few sequences per thread (the other strategy: one after another, each over the pool)
      rt::thread_pool pool(3);
      const auto r = rt::batch_attention<float>(std::span<const rt::batch_sequence<float>>(seqs).first(2), w,
                                                opt, &pool);
      CHECK(same_bits(r[1].output, want[1].output));
    }
}

TEST_CASE("batch: trailing padding gives the real rows of the unpadded sequence, bit for bit") {
  // a padded key is skipped (never read), and each projected row is the same fma chain whatever
  // the other rows: a sequence padded to L with key_padding and the same sequence cut to its
  // length give the same numbers on its real rows
  const torch_batch tb;
  rt::attention_options<float> opt;
  opt.heads = tb.heads;
  for (bool keep : {true, false}) {
    opt.keep_weights = keep;
    const auto padded = tb.sequences();
    std::vector<rt::batch_sequence<float>> cut;
    const auto lengths = tb.doc.json().at("lengths");
    for (std::size_t b = 0; b < tb.B; ++b)
      cut.push_back({rt::row_block(tb.x[b].view(), 0, lengths[b].get<std::size_t>()), std::nullopt, {}});
    const auto rp = rt::batch_attention<float>(std::span<const rt::batch_sequence<float>>(padded), tb.w, opt);
    const auto rc = rt::batch_attention<float>(std::span<const rt::batch_sequence<float>>(cut), tb.w, opt);
    for (std::size_t b = 0; b < tb.B; ++b) {
      const std::size_t n = lengths[b].get<std::size_t>();
      REQUIRE(rc[b].output.rows() == n);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t o = 0; o < tb.E; ++o) CHECK(rc[b].output(i, o) == rp[b].output(i, o));
    }
  }
}

TEST_CASE("batch: bad shapes and sizes are refused before anything is computed, naming the sequence") {
  const torch_batch tb;
  rt::attention_options<float> opt;
  opt.keep_weights = true;
  opt.heads = tb.heads;
  auto seqs = tb.sequences();
  std::vector<rt::multihead_result<float>> r;
  auto run = [&] {
    rt::batch_attention<float>(std::span<const rt::batch_sequence<float>>(seqs), tb.w, opt, r);
  };
  seqs[2].key_padding.push_back(0);
  CHECK_THROWS_WITH_AS(run(),
                       "batch attention: sequence 2: key_padding has 6 flags but there are 5 keys (x is 5x8)",
                       rt::shape_error);
  seqs[2].key_padding.pop_back();
  const dynamic_matrix<float> narrow(3, 7);
  seqs[1].x = narrow.view();
  CHECK_THROWS_WITH_AS(run(), "batch attention: sequence 1: x is 3x7 but wq takes 8 features",
                       rt::shape_error);
  seqs = tb.sequences();
  opt.allowed = rt::mask_matrix(5, 5, 1);
  CHECK_THROWS_AS(run(), rt::shape_error);
  opt.allowed.reset();
  // one bias for sequences of different lengths: sequence 1 cut to 3 tokens (x 3 x 8) does not fit
  // the (5, 5) bias the others take; refused before any sequence is computed, naming both shapes
  opt.bias = dynamic_matrix<float>(5, 5, 0.0f);
  const dynamic_matrix<float> three = tb.x[1];
  seqs[1].x = rt::row_block(rt::matrix_view<const float>(three.view()), 0, 3);
  seqs[1].key_padding.resize(3);
  r.clear();
  CHECK_THROWS_WITH_AS(
      run(),
      "batch attention: sequence 1: the bias is 5x5 but this sequence needs 3x3 or 6x3 (heads x "
      "queries by keys); one bias serves a batch only when every sequence has that shape",
      rt::shape_error);
  CHECK(r.empty());  // nothing was made
  seqs = tb.sequences();
  run();  // the same bias fits every sequence of 5 tokens: it runs
  CHECK(r.size() == 4);
  opt.bias.reset();
  opt.heads = 3;  // 3 heads do not divide d_q = 8: attention() refuses it on the first sequence
  CHECK_THROWS_WITH_AS(
      run(), "attention: 3 heads do not divide d_q = 8 or 3 key/value heads do not divide d_v = 8 evenly",
      rt::shape_error);
  opt.heads = tb.heads;
  r.clear();
  // the limit: 4 sequences x 2 x 2 heads x 5 x 5 x 4 bytes = 1600 bytes (the padding, 5 flags
  // per sequence, is not counted)
  opt.max_weights_bytes = 1599;
  CHECK_THROWS_WITH_AS(
      run(),
      "batch attention: 4 sequences keep scores and weights of 1600 bytes in all, over the limit of "
      "1599 (attention_options::max_weights_bytes; keep_weights = false streams in O(T + S))",
      rt::size_limit_error);
  CHECK(r.empty());  // nothing was made
  opt.key_padding =
      std::vector<unsigned char>(5, 0);  // one padding cannot serve sequences of different lengths
  opt.max_weights_bytes = 1600;
  CHECK_THROWS_AS(run(), rt::shape_error);
  opt.key_padding.reset();
  run();
  CHECK(r.size() == 4);
  // an empty batch is an empty result; an empty sequence an empty output
  seqs.clear();
  run();
  CHECK(r.empty());
  const dynamic_matrix<float> none(0, 8);
  seqs.push_back({none.view(), std::nullopt, {}});
  run();
  REQUIRE(r.size() == 1);
  CHECK(r[0].output.rows() == 0);
}

TEST_CASE(
    "batch: long padded sequences stream within a limit far below T x S, each as attention() alone, bit for "
    "bit") {
  // two sequences of 3000 tokens, 2 heads of 4 columns, keep_weights = false and a limit of
  // 1 MiB: the padding is 3000 flags per sequence, not a 3000 x 3000 mask (9 MB each, which the
  // limit refused before key_padding); each result is attention() of its sequence alone, with the
  // padding as key_padding and as the allowed matrix it stands for
  const std::size_t T = 3000, d = 8;
  rt::attention_weights<float> w;
  w.q = {random_matrix<float>(d, d, 1200, 0.4), std::vector<float>(d, 0.1f)};
  w.k = {random_matrix<float>(d, d, 1201, 0.4), {}};
  w.v = {random_matrix<float>(d, d, 1202, 0.4), {}};
  w.o = rt::linear_weights<float>{random_matrix<float>(d, d, 1203, 0.4), std::vector<float>(d, -0.2f)};
  const auto x0 = random_matrix<float>(T, d, 1210), x1 = random_matrix<float>(T, d, 1211);
  std::vector<unsigned char> trailing(T, 0), scattered(T, 0);
  for (std::size_t j = 2400; j < T; ++j) trailing[j] = 1;  // a sequence of 2400 tokens padded to 3000
  for (std::size_t j = 0; j < T; ++j) scattered[j] = j % 3 == 1;
  const std::vector<rt::batch_sequence<float>> seqs = {{x0.view(), std::nullopt, trailing},
                                                       {x1.view(), std::nullopt, scattered}};
  rt::attention_options<float> opt;
  opt.heads = 2;
  opt.causal = true;
  opt.keep_weights = false;
  opt.max_weights_bytes = std::size_t(1) << 20;
  rt::thread_pool two(2);
  const auto r = rt::batch_attention<float>(std::span<const rt::batch_sequence<float>>(seqs), w, opt, &two);
  REQUIRE(r.size() == 2);
  rt::thread_pool one(1);
  for (std::size_t b = 0; b < 2; ++b) {
    CAPTURE(b);
    CHECK(r[b].weights.empty());
    const auto by_allowed = alone<float>(seqs[b], w, opt, &one);
    rt::attention_options<float> o = opt;
    o.key_padding = seqs[b].key_padding;
    rt::multihead_result<float> by_padding;
    rt::attention<float>(seqs[b].x, seqs[b].x, w, o, by_padding, &one);
    CHECK(same_bits(r[b].output, by_allowed.output));
    CHECK(same_bits(r[b].output, by_padding.output));
    CHECK(same_bits(r[b].concat, by_allowed.concat));
    // real values: every row sees key 0 (unpadded in both), so no row is 0
    for (std::size_t i = 0; i < T; i += 499) CHECK(r[b].concat(i, 0) != 0.0f);
  }
  // row 0 sees key 0 alone (causal): its context is v's row 0 exactly (one weight of 1)
  for (std::size_t c = 0; c < d; ++c) CHECK(r[0].concat(0, c) == r[0].values(0, c));
  // keeping the weights still counts them: 2 sequences x 2 x 2 heads x 3000 x 3000 x 4 bytes
  opt.keep_weights = true;
  CHECK_THROWS_WITH_AS(
      (void)rt::batch_attention<float>(std::span<const rt::batch_sequence<float>>(seqs), w, opt, &two),
      doctest::Contains(
          "2 sequences keep scores and weights of 288000000 bytes in all, over the limit of 1048576"),
      rt::size_limit_error);
}

TEST_CASE(
    "batch: trailing padding against cutting, longer sequences: the bits where the kernels' paths agree") {
  const std::size_t d = 32;
  rt::attention_weights<float> w;
  w.q = {random_matrix<float>(32, d, 1, 0.3), {}};
  w.k = {random_matrix<float>(32, d, 2, 0.3), {}};
  w.v = {random_matrix<float>(32, d, 3, 0.3), {}};
  const auto x = random_matrix<float>(300, d, 9);
  for (bool keep : {true, false})
    for (std::size_t n : {std::size_t(1), std::size_t(20), std::size_t(33), std::size_t(129),
                          std::size_t(256), std::size_t(263)}) {
      rt::attention_options<float> opt;
      opt.heads = 2;
      opt.keep_weights = keep;
      std::vector<unsigned char> pad(300, 0);
      for (std::size_t j = n; j < 300; ++j) pad[j] = 1;
      const std::vector<rt::batch_sequence<float>> s = {{x.view(), std::nullopt, pad},
                                                        {rt::row_block(x.view(), 0, n), std::nullopt, {}}};
      const auto r = rt::batch_attention<float>(std::span<const rt::batch_sequence<float>>(s), w, opt);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t c = 0; c < d; ++c) differ += r[0].output(i, c) != r[1].output(i, c);
      INFO("keep " << keep << ", n = " << n << ": " << differ << " elements differ");
      CHECK(differ == 0);
    }
}
