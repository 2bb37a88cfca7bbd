// The run-time backward (runtime/backward.hpp) against a plain materialised backward in long
// double (backward_reference.hpp, which derives the bounds), with every mask of the forward, float and double; threads give the
// same bits; masked keys and rows get exact zeros; a non-finite d_context reaches exactly the
// entries it flows into. PyTorch 1.13 autograd parity: backward_torch_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <qkv/runtime/backward.hpp>
#include <qkv/runtime/multihead_backward.hpp>

#include "../support/backward_reference.hpp"
#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::random_matrix;
using qkv::testing::same_bits;
using rt::dynamic_matrix;

namespace {

using qkv::testing::reference_backward;
using ld = long double;

/// one case: shapes, mask; forward + backward in F against the reference
template <class F>
void check_case(std::size_t T, std::size_t S, std::size_t d, std::size_t dv, rt::attention_mask mask,
                const dynamic_matrix<F>* bias, const std::string& what, unsigned seed = 1) {
  const auto q = random_matrix<F>(T, d, seed), k = random_matrix<F>(S, d, seed + 1),
             v = random_matrix<F>(S, dv, seed + 2), d_out = random_matrix<F>(T, dv, seed + 3);
  if (bias) mask.set_bias(rt::matrix_view<const F>(bias->view()));
  const F scale = rt::default_scale<F>(d);
  const qkv::testing::forward_backward<F> run(q, k, v, d_out, scale, mask);
  const auto& out = run.out;
  const auto& g = run.g;
  const rt::attention_mask& rm = run.resolved;
  const auto allowed = [&](std::size_t i, std::size_t j) { return run.allowed(i, j); };
  const auto bias_of = [&](std::size_t i, std::size_t j) -> ld {
    ld b = bias ? ld((*bias)(i, j)) : 0;
    if (rm.alibi_slope != 0)
      b += ld(F(rm.alibi_slope)) * ld(std::ptrdiff_t(j) - std::ptrdiff_t(i) - rm.offset);
    return b;
  };
  const auto ref = reference_backward::compute<F>(q, k, v, d_out, double(scale), allowed, bias_of);
  INFO(what);
  qkv::testing::expect_within(out, ref.out.to_double(), ref.out_bound.to_double(), what + ": out");
  qkv::testing::expect_within(g.d_values, ref.dv.to_double(), ref.dv_bound.to_double(), what + ": d_values");
  qkv::testing::expect_within(g.d_keys, ref.dk.to_double(), ref.dk_bound.to_double(), what + ": d_keys");
  qkv::testing::expect_within(g.d_queries, ref.dq.to_double(), ref.dq_bound.to_double(),
                              what + ": d_queries");
}

}  // namespace

TEST_CASE_TEMPLATE("the streaming backward matches a materialised long double backward within derived bounds",
                   F, float, double) {
  check_case<F>(37, 53, 16, 24, {}, nullptr, "no mask, few keys");
  check_case<F>(300, 300, 64, 64, {}, nullptr, "no mask, 300 x 300 (3 key blocks, dQ in parts)");
  rt::attention_mask causal;
  causal.causal = true;
  check_case<F>(300, 300, 32, 48, causal, nullptr, "causal");
  check_case<F>(150, 260, 32, 32, causal, nullptr, "causal upper_left, T < S");
  causal.alignment = rt::causal_alignment::lower_right;
  check_case<F>(150, 260, 32, 32, causal, nullptr, "causal lower_right, T < S");
  check_case<F>(260, 150, 32, 32, causal, nullptr, "causal lower_right, T > S (first rows see nothing)");
  std::vector<unsigned char> padding(200, 0);
  for (std::size_t j = 150; j < 200; ++j) padding[j] = 1;
  padding[7] = 1;
  rt::attention_mask padded;
  padded.set_key_padding(padding);
  check_case<F>(90, 200, 32, 16, padded, nullptr, "key padding");
  rt::attention_mask window;
  window.causal = true;
  window.window = 40;
  check_case<F>(333, 333, 32, 32, window, nullptr, "causal sliding window of 40");
  rt::attention_mask alibi;
  alibi.causal = true;
  alibi.alibi_slope = 0.0625;
  check_case<F>(200, 200, 32, 32, alibi, nullptr, "ALiBi, causal");
  auto bias = random_matrix<F>(100, 180, 9);
  for (std::size_t i = 0; i < 100; ++i) bias(i, (i * 7) % 180) = -std::numeric_limits<F>::infinity();
  check_case<F>(100, 180, 32, 32, {}, &bias, "a float bias with -inf entries");
}

TEST_CASE("the backward gives the same bits on 1 and 2 threads (dQ in 4 parts, causal and not)") {
  for (const bool causal : {false, true}) {
    const std::size_t T = 700, S = 700, d = 64;
    const auto q = random_matrix<float>(T, d, 1), k = random_matrix<float>(S, d, 2),
               v = random_matrix<float>(S, d, 3), d_out = random_matrix<float>(T, d, 4);
    rt::attention_mask mask;
    mask.causal = causal;
    CHECK(rt::detail::dq_parts(1, 6, 1e9) == 4);
    const float scale = rt::default_scale<float>(d);
    rt::attention_gradients<float> g[2];
    for (const std::size_t threads : {1u, 2u}) {
      rt::thread_pool pool(threads);
      dynamic_matrix<float> out(T, d);
      rt::attention_statistics<float> stats;
      rt::attention_forward_for_backward<float>(q.view(), k.view(), v.view(), out.view(), scale, mask, stats,
                                                &pool);
      rt::attention_backward<float>(q.view(), k.view(), v.view(), out.view(), d_out.view(), scale, mask,
                                    stats, g[threads - 1], &pool);
    }
    CHECK(same_bits(g[0].d_queries, g[1].d_queries));
    CHECK(same_bits(g[0].d_keys, g[1].d_keys));
    CHECK(same_bits(g[0].d_values, g[1].d_values));
  }
}

TEST_CASE("masked keys and fully masked rows get gradient exactly 0") {
  const std::size_t T = 40, S = 50, d = 8;
  const auto q = random_matrix<double>(T, d, 1), k = random_matrix<double>(S, d, 2),
             v = random_matrix<double>(S, d, 3), d_out = random_matrix<double>(T, d, 4);
  std::vector<unsigned char> padding(S, 0);
  padding[3] = padding[49] = 1;
  rt::mask_matrix allowed(T, S);
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < S; ++j) allowed(i, j) = i == 5 ? 0 : 1;  // row 5 sees nothing
  rt::attention_mask mask;
  mask.allowed = &allowed;
  mask.set_key_padding(padding);
  dynamic_matrix<double> out(T, d);
  rt::attention_statistics<double> stats;
  rt::attention_forward_for_backward<double>(q.view(), k.view(), v.view(), out.view(), 0.3, mask, stats);
  rt::attention_gradients<double> g;
  rt::attention_backward<double>(q.view(), k.view(), v.view(), out.view(), d_out.view(), 0.3, mask, stats, g);
  for (std::size_t c = 0; c < d; ++c) {
    CHECK(g.d_queries(5, c) == 0.0);
    for (const std::size_t j : {3u, 49u}) {
      CHECK(g.d_keys(j, c) == 0.0);
      CHECK(g.d_values(j, c) == 0.0);
    }
    CHECK(g.d_keys(4, c) != 0.0);
  }
}

TEST_CASE("a NaN or inf in d_context reaches exactly the gradients it flows into") {
  // causal, 20 x 20: row 6 sees keys 0..6. dO(6, 2) = NaN: dV(j, 2) NaN for j <= 6 only; dQ's
  // row 6 NaN; dK(j, .) NaN for j <= 6 (through dP(6, j) and D(6)); everything else as the run
  // without it (dV(j, 2) for j > 6 included), bit for bit. dO(9, 1) = +inf: dV(j, 1) = +inf
  // for j <= 9 (P(9, j) > 0 here, and finite dO elsewhere in column 1)
  const std::size_t T = 20, d = 4;
  const auto q = random_matrix<float>(T, d, 1), k = random_matrix<float>(T, d, 2),
             v = random_matrix<float>(T, d, 3);
  auto d_out = random_matrix<float>(T, d, 4);
  rt::attention_mask mask;
  mask.causal = true;
  dynamic_matrix<float> out(T, d);
  rt::attention_statistics<float> stats;
  rt::attention_forward_for_backward<float>(q.view(), k.view(), v.view(), out.view(), 0.5f, mask, stats);
  rt::attention_gradients<float> clean, g;
  rt::attention_backward<float>(q.view(), k.view(), v.view(), out.view(), d_out.view(), 0.5f, mask, stats,
                                clean);
  d_out(6, 2) = std::numeric_limits<float>::quiet_NaN();
  d_out(9, 1) = std::numeric_limits<float>::infinity();
  rt::attention_backward<float>(q.view(), k.view(), v.view(), out.view(), d_out.view(), 0.5f, mask, stats, g);
  for (std::size_t j = 0; j < T; ++j)
    for (std::size_t c = 0; c < d; ++c) {
      CAPTURE(j);
      CAPTURE(c);
      if (c == 2 && j <= 6)
        CHECK(std::isnan(g.d_values(j, c)));
      else if (c == 1 && j <= 9)
        CHECK(g.d_values(j, c) == std::numeric_limits<float>::infinity());
      else
        CHECK(g.d_values(j, c) == clean.d_values(j, c));
      // dK(j, .) for j <= 6: row 6's NaN; for 7 <= j <= 9 row 9's infinities (dP(9, j) and
      // D(9) infinite: dS(9, j) = P (dP - D) is an infinity or NaN, as IEEE decides)
      if (j <= 6)
        CHECK(std::isnan(g.d_keys(j, c)));
      else if (j <= 9)
        CHECK(!std::isfinite(g.d_keys(j, c)));
      else
        CHECK(g.d_keys(j, c) == clean.d_keys(j, c));
      if (j == 6)
        CHECK(std::isnan(g.d_queries(j, c)));
      else if (j == 9)
        CHECK(!std::isfinite(g.d_queries(j, c)));
      else
        CHECK(g.d_queries(j, c) == clean.d_queries(j, c));
    }
}

TEST_CASE("the backward refuses shapes that do not fit, naming them") {
  const auto q = random_matrix<float>(4, 8, 1), k = random_matrix<float>(5, 8, 2),
             v = random_matrix<float>(5, 8, 3), d_out = random_matrix<float>(3, 8, 4);
  dynamic_matrix<float> out(4, 8);
  rt::attention_statistics<float> stats;
  rt::attention_forward_for_backward<float>(q.view(), k.view(), v.view(), out.view(), 0.5f, {}, stats);
  rt::attention_gradients<float> g;
  CHECK_THROWS_WITH_AS(
      rt::attention_backward<float>(q.view(), k.view(), v.view(), out.view(), d_out.view(), 0.5f, {}, stats,
                                    g),
      "attention_backward: d_context is 3x8 but the output is 4x8 (one gradient per output element)",
      rt::shape_error);
}

TEST_CASE(
    "the layer's backward: a shared key/value head sums its query heads' gradients (GQA, ALiBi, causal), "
    "the same bits on 1 and 2 threads") {
  // 4 query heads of 16 on 2 key/value heads: heads 0, 1 read K/V head 0, heads 2, 3 head 1.
  // The heads' part is checked against the long double reference on the forward's own Q, K, V
  // and the backward's d_concat (the inputs of that part, exact as they are): d_keys and
  // d_values of head g are the sums over its two query heads (their bounds summed, the chains
  // over 2 T rows)
  const std::size_t T = 160, E = 64, H = 4, HK = 2, dh = 16;
  const auto x = random_matrix<float>(T, E, 1), dy = random_matrix<float>(T, E, 2);
  rt::attention_weights<float> w;
  w.q = {random_matrix<float>(H * dh, E, 3, 0.2), std::vector<float>(H * dh, 0.1f)};
  w.k = {random_matrix<float>(HK * dh, E, 4, 0.2), std::vector<float>(HK * dh, -0.1f)};
  w.v = {random_matrix<float>(HK * dh, E, 5, 0.2), {}};
  w.o = rt::linear_weights<float>{random_matrix<float>(E, H * dh, 6, 0.2), std::vector<float>(E, 0.05f)};
  rt::attention_options<float> opt;
  opt.keep_weights = true;
  opt.heads = H;
  opt.kv_heads = HK;
  opt.causal = true;
  opt.alibi = true;
  rt::attention_gradients<float> g[2];
  rt::multihead_result<float> r;
  for (const std::size_t threads : {1u, 2u}) {
    rt::thread_pool pool(threads);
    rt::attention_statistics<float> stats;
    rt::attention_forward_for_backward<float>(x.view(), w, opt, r, stats, &pool);
    rt::attention_backward<float>(x.view(), w, opt, r, stats, dy.view(), g[threads - 1], &pool);
  }
  CHECK(same_bits(g[0].d_x, g[1].d_x));
  CHECK(same_bits(g[0].d_w_query, g[1].d_w_query));
  CHECK(same_bits(g[0].d_w_key, g[1].d_w_key));
  CHECK(same_bits(g[0].d_w_value, g[1].d_w_value));
  CHECK(same_bits(g[0].d_w_output, g[1].d_w_output));
  CHECK(same_bits(g[0].d_keys, g[1].d_keys));
  CHECK(g[0].d_b_value.empty());
  CHECK(g[0].d_b_key.size() == HK * dh);
  // the forward's output is attention()'s streaming path's, bit for bit
  opt.keep_weights = false;
  const auto plain = rt::self_attention(x, w, opt);
  CHECK(same_bits(plain.output, r.output));
  using qkv::testing::lmat;
  const auto cols = [](const dynamic_matrix<float>& m, std::size_t c0, std::size_t n) {
    lmat l(m.rows(), n);
    for (std::size_t i = 0; i < m.rows(); ++i)
      for (std::size_t j = 0; j < n; ++j) l(i, j) = m(i, c0 + j);
    return l;
  };
  const auto slopes = rt::alibi_slopes(H);
  const auto& gr = g[0];
  for (std::size_t kv = 0; kv < HK; ++kv) {
    lmat dk(T, dh), dkb(T, dh), dv(T, dh), dvb(T, dh);
    for (std::size_t h = kv * 2; h < kv * 2 + 2; ++h) {
      const float slope = float(slopes[h]);
      const auto ref = reference_backward::compute_l<float>(
          cols(r.queries, h * dh, dh), cols(r.keys, kv * dh, dh), cols(r.values, kv * dh, dh),
          cols(gr.d_concat, h * dh, dh), {}, {}, {}, {}, double(r.scale),
          [](std::size_t i, std::size_t j) { return j <= i; },
          [&](std::size_t i, std::size_t j) { return ld(slope) * (ld(j) - ld(i)); }, 2);
      dynamic_matrix<float> dq_h(T, dh);
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t c = 0; c < dh; ++c) dq_h(i, c) = gr.d_queries(i, h * dh + c);
      qkv::testing::expect_within(dq_h, ref.dq.to_double(), ref.dq_bound.to_double(),
                                  "d_queries of head " + std::to_string(h));
      for (std::size_t k = 0; k < dk.a.size(); ++k) {
        dk.a[k] += ref.dk.a[k];
        dkb.a[k] += ref.dk_bound.a[k];
        dv.a[k] += ref.dv.a[k];
        dvb.a[k] += ref.dv_bound.a[k];
      }
    }
    dynamic_matrix<float> dk_g(T, dh), dv_g(T, dh);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t c = 0; c < dh; ++c) {
        dk_g(i, c) = gr.d_keys(i, kv * dh + c);
        dv_g(i, c) = gr.d_values(i, kv * dh + c);
      }
    qkv::testing::expect_within(dk_g, dk.to_double(), dkb.to_double(),
                                "d_keys of key/value head " + std::to_string(kv));
    qkv::testing::expect_within(dv_g, dv.to_double(), dvb.to_double(),
                                "d_values of key/value head " + std::to_string(kv));
  }
}

TEST_CASE("empty inputs: no queries gives zero key and value gradients, no keys zero query gradients") {
  for (const auto& [T, S] : {std::pair<std::size_t, std::size_t>{0, 5}, {4, 0}, {0, 0}}) {
    const auto q = random_matrix<float>(T, 8, 1), k = random_matrix<float>(S, 8, 2),
               v = random_matrix<float>(S, 6, 3), d_out = random_matrix<float>(T, 6, 4);
    dynamic_matrix<float> out(T, 6);
    rt::attention_statistics<float> stats;
    rt::attention_forward_for_backward<float>(q.view(), k.view(), v.view(), out.view(), 0.5f, {}, stats);
    rt::attention_gradients<float> g;
    rt::attention_backward<float>(q.view(), k.view(), v.view(), out.view(), d_out.view(), 0.5f, {}, stats, g);
    CHECK(g.d_queries.rows() == T);
    CHECK(g.d_keys.rows() == S);
    CHECK(g.d_values.rows() == S);
    for (std::size_t k2 = 0; k2 < g.d_queries.size(); ++k2) CHECK(g.d_queries.data()[k2] == 0.0f);
    for (std::size_t k2 = 0; k2 < g.d_keys.size(); ++k2) CHECK(g.d_keys.data()[k2] == 0.0f);
    for (std::size_t k2 = 0; k2 < g.d_values.size(); ++k2) CHECK(g.d_values.data()[k2] == 0.0f);
    for (std::size_t k2 = 0; k2 < out.size(); ++k2) CHECK(out.data()[k2] == 0.0f);
  }
}

TEST_CASE("16-bit inputs: the layer's gradients are the float layer's on the exactly widened x and weights") {
  const std::size_t T = 40, E = 32;
  const auto round16 = [](const dynamic_matrix<float>& m) {
    dynamic_matrix<rt::bfloat16> r(m.rows(), m.cols());
    rt::from_float(m.data(), r.data(), m.size());
    return r;
  };
  const auto widen = [](const dynamic_matrix<rt::bfloat16>& m) {
    dynamic_matrix<float> r(m.rows(), m.cols());
    rt::to_float(m.data(), r.data(), m.size());
    return r;
  };
  const auto x16 = round16(random_matrix<float>(T, E, 1));
  rt::attention_weights<rt::bfloat16> w16;
  rt::attention_weights<float> wf;
  unsigned seed = 2;
  for (auto [l16, lf] : {std::pair{&w16.q, &wf.q}, {&w16.k, &wf.k}, {&w16.v, &wf.v}}) {
    l16->weight = round16(random_matrix<float>(E, E, seed++, 0.2));
    lf->weight = widen(l16->weight);
  }
  w16.o = rt::linear_weights<rt::bfloat16>{round16(random_matrix<float>(E, E, seed++, 0.2)), {}};
  wf.o = rt::linear_weights<float>{widen(w16.o->weight), {}};
  rt::attention_options<float> opt;
  opt.keep_weights = true;
  opt.heads = 4;
  opt.causal = true;
  const auto dy = random_matrix<float>(T, E, 9);
  rt::multihead_result<float> r16, rf;
  rt::attention_statistics<float> s16, sf;
  rt::attention_gradients<float> g16, gf;
  rt::attention_forward_for_backward(x16, w16, opt, r16, s16);
  rt::attention_backward(x16, w16, opt, r16, s16, rt::matrix_view<const float>(dy.view()), g16);
  const auto xf = widen(x16);
  rt::attention_forward_for_backward<float>(xf.view(), wf, opt, rf, sf);
  rt::attention_backward<float>(xf.view(), wf, opt, rf, sf, dy.view(), gf);
  CHECK(same_bits(r16.output, rf.output));
  CHECK(same_bits(g16.d_x, gf.d_x));
  CHECK(same_bits(g16.d_w_query, gf.d_w_query));
  CHECK(same_bits(g16.d_w_output, gf.d_w_output));
}

TEST_CASE("the forward that saves the statistics gives scaled_dot_product_attention's streaming bits") {
  for (const bool causal : {false, true}) {
    const std::size_t T = 300, S = 260, d = 32;
    auto q = random_matrix<float>(T, d, 1), k = random_matrix<float>(S, d, 2),
         v = random_matrix<float>(S, d, 3);
    v(7, 3) = std::numeric_limits<float>::quiet_NaN();  // the repair of non-finite values too
    rt::attention_mask mask;
    mask.causal = causal;
    mask.alignment = rt::causal_alignment::lower_right;
    dynamic_matrix<float> saved(T, d), plain(T, d);
    rt::attention_statistics<float> stats;
    rt::attention_forward_for_backward<float>(q.view(), k.view(), v.view(), saved.view(), 0.2f, mask, stats);
    rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), plain.view(), 0.2f, mask);
    CHECK(std::memcmp(saved.data(), plain.data(), saved.size() * sizeof(float)) == 0);
    // the statistics: l = sum over visible keys of e^(s - m), m their maximum (row 0 sees
    // keys 0 .. S - T = -40 with lower_right: none, so m = -inf, l = 0)
    CHECK(stats.max.rows() == 1);
    if (causal) {
      CHECK(stats.max(0, 0) == -std::numeric_limits<float>::infinity());
      CHECK(stats.sum(0, 0) == 0.0f);
    }
    CHECK(stats.sum(0, T - 1) >= 1.0f);  // the maximum's own term is e^0 = 1
  }
}
