// qkv_wasm_check.cpp: the native twin of the page's WebAssembly module (qkv_wasm.cpp, compiled
// into this program), for tests/wasm/module_test.py.
//
//   qkv_wasm_check core      the module's run-time loops (core/flat_attention.hpp and
//                            core/flat_attention_backward.hpp, which `qkv attend --arithmetic
//                            core` runs too) against the core's fixed-size templates
//                            (multihead_attend_projected, output_projection; the second form,
//                            cross-attention with grouped-query heads and RoPE, against
//                            grouped_query_attend_projected and rope(); for a d_output
//                            output_projection_backward, multihead_backward, project_backward),
//                            bit for bit, on a 4-token, 2-head case (float and double; finite, a
//                            NaN in x, a fully masked row; the in_out layout without biases), and
//                            backward_hand.json's forward and backward evaluated in a constant
//                            expression == at run time; exit 1 naming the first difference
//   qkv_wasm_check run_case  the same for attend()'s second form (a context, kv_heads, a bias,
//                            ALiBi, RoPE: run_case's binary form), for tests/browser/page_edit_test.py
//   qkv_wasm_check run       a case in the binary form of tests/wasm/module_test.py on stdin,
//                            every step's bytes on stdout, then every gradient's with a d_output
//                            (what wasm/run_module.mjs does with the .wasm under node), so that
//                            the two can be compared byte for byte
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <qkv/qkv.hpp>

#include "qkv_wasm.cpp"

namespace {

template <class T>
bool same_bits(const T* a, const T* b, std::size_t n, const char* what, int& bad) {
  for (std::size_t k = 0; k < n; ++k)
    if (std::memcmp(a + k, b + k, sizeof(T)) != 0) {
      std::fprintf(stderr, "%s[%zu]: module %a, core %a\n", what, k, double(a[k]), double(b[k]));
      ++bad;
      return false;
    }
  return true;
}

/// the module against the core on x (4, 6), Wq/Wk (4, 6), Wv (6, 6), Wo (5, 6) out_in, biases, 2 heads
/// every gradient of attend_backward's buffer g (layout at) against the core's: the output
/// projection's (go), the attention's (ga; D has no field in the core: dS holds it in every cell),
/// the three projections' (pq, pk, pv) and d_x; the keys' and values' widths are at's dkv(),
/// dvkv() (kv_heads key/value heads, or heads)
template <class T>
void same_gradients(const T* g, const qkv::flat::gradients_layout& at, const auto& go, const auto& ga,
                    const auto& pq, const auto& pk, const auto& pv, const auto& d_x, int& bad) {
  const std::size_t N = at.t, D = at.d, DQ = at.dq, DV = at.dv, DKV = at.dkv(), DVKV = at.dvkv(),
                    DO = at.dout;
  same_bits(g + at.d_concat(), go.d_x.v, N * DV, "d_concat", bad);
  same_bits(g + at.d_wo(), go.d_w.v, DO * DV, "d_wo", bad);
  same_bits(g + at.d_bo(), go.d_b.v, DO, "d_bo", bad);
  for (std::size_t h = 0; h < at.heads; ++h) {
    same_bits(g + at.d_weights(h), ga.d_weights[h].v, N * N, "d_weights", bad);
    same_bits(g + at.d_scaled_scores(h), ga.d_scaled_scores[h].v, N * N, "d_scaled_scores", bad);
    same_bits(g + at.d_scores(h), ga.d_scores[h].v, N * N, "d_scores", bad);
  }
  same_bits(g + at.d_queries(), ga.d_queries.v, N * DQ, "d_queries", bad);
  same_bits(g + at.d_keys(), ga.d_keys.v, N * DKV, "d_keys", bad);
  same_bits(g + at.d_values(), ga.d_values.v, N * DVKV, "d_values", bad);
  same_bits(g + at.d_wq(), pq.d_w.v, DQ * D, "d_wq", bad);
  same_bits(g + at.d_bq(), pq.d_b.v, DQ, "d_bq", bad);
  same_bits(g + at.d_wk(), pk.d_w.v, DKV * D, "d_wk", bad);
  same_bits(g + at.d_bk(), pk.d_b.v, DKV, "d_bk", bad);
  same_bits(g + at.d_wv(), pv.d_w.v, DVKV * D, "d_wv", bad);
  same_bits(g + at.d_bv(), pv.d_b.v, DVKV, "d_bv", bad);
  same_bits(g + at.d_x(), d_x.v, N * D, "d_x", bad);
}

template <class T>
int check_core(int variant) {
  constexpr std::size_t N = 4, D = 6, DQ = 4, DV = 6, DO = 5, H = 2;
  std::uint32_t state = 12345u + unsigned(variant);
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return T(int(state >> 9) % 2001 - 1000) / T(437);
  };
  qkv::matrix<T, N, D> x;
  qkv::matrix<T, DQ, D> wq, wk;
  qkv::matrix<T, DV, D> wv;
  qkv::matrix<T, DO, DV> wo;
  qkv::matrix<T, 1, DQ> bq, bk;
  qkv::matrix<T, 1, DV> bv;
  qkv::matrix<T, 1, DO> bo;
  for (auto& e : x.v) e = next();
  for (auto& e : wq.v) e = next();
  for (auto& e : wk.v) e = next();
  for (auto& e : wv.v) e = next();
  for (auto& e : wo.v) e = next();
  for (auto& e : bq.v) e = next();
  for (auto& e : bk.v) e = next();
  for (auto& e : bv.v) e = next();
  for (auto& e : bo.v) e = next();
  if (variant == 1) x.v[1 * D + 2] = std::numeric_limits<T>::quiet_NaN();  // token 1: NaN
  const T scale = T(1) / std::sqrt(T(DQ / H));
  qkv::attention_options<T> opt;
  opt.scale = qkv::scaling<T>::multiply_by(scale);
  opt.causal = variant != 0;
  const auto q = qkv::project(x, wq, bq, qkv::out_in), k = qkv::project(x, wk, bk, qkv::out_in);
  const auto v = qkv::project(x, wv, bv, qkv::out_in);
  auto r = qkv::multihead_attend_projected<H>(q, k, v, opt);
  std::vector<unsigned char> mask(N * N, 0);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = i + 1; j < N; ++j) mask[i * N + j] = variant != 0;
  if (variant == 2) {  // query 2 sees no key at all: every score -inf, weights 0, context 0
    for (std::size_t j = 0; j < N; ++j) mask[2 * N + j] = 1;
    for (std::size_t h = 0; h < H; ++h) {
      for (std::size_t j = 0; j < N; ++j)
        r.scaled_scores[h].v[2 * N + j] = -std::numeric_limits<T>::infinity();
      r.weights[h] = qkv::softmax_rows(r.scaled_scores[h]);
      r.context[h] = qkv::attended_context(r.scaled_scores[h], r.weights[h], qkv::split_heads<H>(v)[h]);
    }
    r.concat = qkv::hconcat(r.context);
  }
  const auto out = qkv::output_projection(r, wo, bo);
  std::vector<T> m(qkv::flat::output_size(N, DQ, DV, H, DO));
  if (qkv::flat::attend<T>(x.v, N, D, wq.v, bq.v, wk.v, bk.v, wv.v, bv.v, DQ, DV, wo.v, bo.v, DO, H, true,
                           scale, mask.data(), m.data()) != 0)
    return 1;
  int bad = 0;
  const T* p = m.data();
  same_bits(p, q.v, N * DQ, "queries", bad), p += N * DQ;
  same_bits(p, k.v, N * DQ, "keys", bad), p += N * DQ;
  same_bits(p, v.v, N * DV, "values", bad), p += N * DV;
  for (std::size_t h = 0; h < H; ++h) {
    same_bits(p, r.scores[h].v, N * N, "scores", bad), p += N * N;
    same_bits(p, r.scaled_scores[h].v, N * N, "scaled", bad), p += N * N;
    same_bits(p, r.weights[h].v, N * N, "weights", bad), p += N * N;
    same_bits(p, r.context[h].v, N * DV / H, "context", bad), p += N * DV / H;
  }
  same_bits(p, r.concat.v, N * DV, "concat", bad), p += N * DV;
  same_bits(p, out.v, N * DO, "output", bad);
  // the backward for a d_output: multihead_self_attention_backward's steps (written out, as that
  // function takes d_q = d_v): output_projection_backward, multihead_backward, project_backward
  qkv::matrix<T, N, DO> d_output;
  for (auto& e : d_output.v) e = next();
  const auto go = qkv::output_projection_backward(r.concat, wo, d_output);
  const auto ga = qkv::multihead_backward<H>(r, go.d_x, opt);
  const auto pq = qkv::project_backward(x, wq, bq, ga.d_queries, qkv::out_in);
  const auto pk = qkv::project_backward(x, wk, bk, ga.d_keys, qkv::out_in);
  const auto pv = qkv::project_backward(x, wv, bv, ga.d_values, qkv::out_in);
  const auto d_x = pq.d_x + pk.d_x + pv.d_x;
  const qkv::flat::gradients_layout at{N, D, DQ, DV, H, DO};
  std::vector<T> g(at.size());
  if (qkv::flat::attend_backward<T>(x.v, N, D, wq.v, wk.v, wv.v, DQ, DV, wo.v, DO, H, true, scale, m.data(),
                                    d_output.v, g.data()) != 0)
    return 1;
  int bad_backward = 0;
  same_gradients(g.data(), at, go, ga, pq, pk, pv, d_x, bad_backward);
  std::printf(
      "%s variant %d (%s): forward %s, backward %s\n", sizeof(T) == 4 ? "float32" : "float64", variant,
      variant == 0   ? "finite"
      : variant == 1 ? "causal, NaN in x[1][2]"
                     : "causal, query 2 fully masked",
      bad ? "DIFFERS" : "same bits in every step", bad_backward ? "DIFFERS" : "same bits in every gradient");
  return bad + bad_backward ? 1 : 0;
}

template <class T>
int run(const std::vector<std::uint32_t>& h, const unsigned char* data) {
  // header: dtype t d dq dv dout heads out_in has_bq has_bk has_bv has_wo has_bo has_mask has_d_output
  const std::size_t t = h[1], d = h[2], dq = h[3], dv = h[4], dout = h[5], heads = h[6];
  const T* p = reinterpret_cast<const T*>(data);
  T scale;
  std::memcpy(&scale, p, sizeof(T));
  ++p;
  auto take = [&](bool present, std::size_t n) -> const T* {
    if (!present) return nullptr;
    const T* r = p;
    p += n;
    return r;
  };
  const T* x = take(true, t * d);
  const T* wq = take(true, dq * d);
  const T* bq = take(h[8], dq);
  const T* wk = take(true, dq * d);
  const T* bk = take(h[9], dq);
  const T* wv = take(true, dv * d);
  const T* bv = take(h[10], dv);
  const T* wo = take(h[11], dout * dv);
  const T* bo = take(h[12], dout);
  const unsigned char* mask = h[13] ? reinterpret_cast<const unsigned char*>(p) : nullptr;
  std::vector<T> out(qkv::flat::output_size(t, dq, dv, heads, wo ? dout : 0));
  const int rc = qkv::flat::attend<T>(x, t, d, wq, bq, wk, bk, wv, bv, dq, dv, wo, bo, dout, heads, h[7] != 0,
                                      scale, mask, out.data());
  if (rc != 0) return 2;
  std::fwrite(out.data(), sizeof(T), out.size(), stdout);
  if (h[14]) {  // d_output (t, dout; no wo: t, dv) after the mask's t x t bytes: the gradients too
    std::vector<T> d_output(t * (wo ? dout : dv));
    std::memcpy(d_output.data(), reinterpret_cast<const unsigned char*>(p) + (h[13] ? t * t : 0),
                d_output.size() * sizeof(T));
    std::vector<T> g(qkv::flat::gradients_size(t, d, dq, dv, heads, wo ? dout : 0));
    if (qkv::flat::attend_backward<T>(x, t, d, wq, wk, wv, dq, dv, wo, dout, heads, h[7] != 0, scale,
                                      out.data(), d_output.data(), g.data()) != 0)
      return 2;
    std::fwrite(g.data(), sizeof(T), g.size(), stdout);
  }
  return 0;
}

/// @brief `run_case`: attend()'s second form on a case in the binary form below on stdin; every
/// step's bytes on stdout, then every gradient's with a d_output (run_module.mjs's `case` mode does
/// the same with the .wasm). 32 header words: dtype t d s dc dq dv heads kv_heads dout out_in
/// bias_heads rotary_dim interleaved offset (int32) has_context has_bq has_bk has_bv has_wo has_bo
/// has_slopes has_mask has_d_output, 8 unused; then scale, x, context, wq, bq, wk, bk, wv, bv, wo,
/// bo, bias, slopes, cos_q, sin_q, cos_k, sin_k (the numbers, each present one), the mask's t x s
/// bytes, d_output
template <class T>
int run_case(const std::vector<std::uint32_t>& h, const unsigned char* data, std::size_t bytes) {
  const std::size_t t = h[1], d = h[2], s = h[3], dc = h[4], dq = h[5], dv = h[6], heads = h[7], kvh = h[8],
                    dout = h[9], bias_heads = h[11], rotary = h[12];
  const bool ctx = h[15] != 0;
  const std::size_t keys = ctx ? s : t, din = ctx ? dc : d, hk = kvh ? kvh : heads;
  if (heads == 0 || hk == 0) return 2;
  const std::size_t dkv = hk * (dq / heads), dvkv = hk * (dv / heads), half = rotary / 2;
  std::vector<T> numbers(bytes / sizeof(T));
  std::memcpy(numbers.data(), data, numbers.size() * sizeof(T));
  const T* p = numbers.data();
  const T scale = *p++;
  std::size_t used = 1;
  auto take = [&](bool present, std::size_t n) -> const T* {
    if (!present) return nullptr;
    const T* r = p;
    p += n, used += n;
    return r;
  };
  qkv::flat::attend_args<T> a;
  a.x = take(true, t * d), a.t = t, a.d = d;
  a.context = take(ctx, s * dc), a.s = ctx ? s : 0, a.dc = ctx ? dc : 0;
  a.wq = take(true, dq * d), a.bq = take(h[16], dq), a.wk = take(true, dkv * din), a.bk = take(h[17], dkv);
  a.wv = take(true, dvkv * din), a.bv = take(h[18], dvkv), a.wo = take(h[19], dout * dv),
  a.bo = take(h[20], dout);
  a.bias = take(bias_heads != 0, bias_heads * t * keys), a.bias_heads = bias_heads;
  a.slopes = take(h[21], heads);
  a.offset = static_cast<std::int32_t>(h[14]);
  if (rotary) {
    a.cos_q = take(true, t * half), a.sin_q = take(true, t * half);
    a.cos_k = take(true, keys * half), a.sin_k = take(true, keys * half);
  }
  a.rotary_dim = rotary, a.interleaved = h[13] != 0;
  a.dq = dq, a.dv = dv, a.heads = heads, a.kv_heads = kvh, a.dout = dout, a.out_in = h[10] != 0,
  a.scale = scale;
  const unsigned char* rest = data + used * sizeof(T);
  a.masked = h[22] ? rest : nullptr;
  std::vector<T> out(a.layout().size());
  if (qkv::flat::attend<T>(a, out.data()) != 0) return 2;
  std::fwrite(out.data(), sizeof(T), out.size(), stdout);
  if (h[23]) {
    std::vector<T> d_output(t * (a.wo ? dout : dv));
    std::memcpy(d_output.data(), rest + (h[22] ? t * keys : 0), d_output.size() * sizeof(T));
    std::vector<T> g(qkv::flat::gradients_layout{t, d, dq, dv, heads, a.wo ? dout : 0, kvh}.size());
    if (qkv::flat::attend_backward<T>(a, out.data(), d_output.data(), g.data()) != 0) return 2;
    std::fwrite(g.data(), sizeof(T), g.size(), stdout);
  }
  return 0;
}

/// the in_out layout (x W, W (d_in, d_out)), no biases, causal, against project(x, w, in_out),
/// multihead_attend_projected, project(concat, wo, in_out) and their backward (project_backward
/// in_out, multihead_backward; d_bo: column_sums of d_output): x (4, 6), Wq/Wk (6, 4), Wv (6, 6),
/// Wo (6, 5), 2 heads
template <class T>
int check_in_out() {
  constexpr std::size_t N = 4, D = 6, DQ = 4, DV = 6, DO = 5, H = 2;
  std::uint32_t state = 777u;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return T(int(state >> 9) % 2001 - 1000) / T(437);
  };
  qkv::matrix<T, N, D> x;
  qkv::matrix<T, D, DQ> wq, wk;
  qkv::matrix<T, D, DV> wv;
  qkv::matrix<T, DV, DO> wo;
  qkv::matrix<T, N, DO> d_output;
  for (auto& e : x.v) e = next();
  for (auto& e : wq.v) e = next();
  for (auto& e : wk.v) e = next();
  for (auto& e : wv.v) e = next();
  for (auto& e : wo.v) e = next();
  for (auto& e : d_output.v) e = next();
  const T scale = T(1) / std::sqrt(T(DQ / H));
  qkv::attention_options<T> opt;
  opt.scale = qkv::scaling<T>::multiply_by(scale);
  opt.causal = true;
  const auto q = qkv::project(x, wq, qkv::in_out), k = qkv::project(x, wk, qkv::in_out);
  const auto v = qkv::project(x, wv, qkv::in_out);
  const auto r = qkv::multihead_attend_projected<H>(q, k, v, opt);
  const auto out = qkv::project(r.concat, wo, qkv::in_out);
  std::vector<unsigned char> mask(N * N, 0);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = i + 1; j < N; ++j) mask[i * N + j] = 1;
  const qkv::flat::steps_layout st{N, DQ, DV, H, DO};
  std::vector<T> m(st.size());
  if (qkv::flat::attend<T>(x.v, N, D, wq.v, nullptr, wk.v, nullptr, wv.v, nullptr, DQ, DV, wo.v, nullptr, DO,
                           H, false, scale, mask.data(), m.data()) != 0)
    return 1;
  int bad = 0;
  same_bits(m.data() + st.queries(), q.v, N * DQ, "queries", bad);
  same_bits(m.data() + st.keys(), k.v, N * DQ, "keys", bad);
  same_bits(m.data() + st.values(), v.v, N * DV, "values", bad);
  for (std::size_t h = 0; h < H; ++h)
    same_bits(m.data() + st.weights(h), r.weights[h].v, N * N, "weights", bad);
  same_bits(m.data() + st.output(), out.v, N * DO, "output", bad);
  const auto go = qkv::project_backward(r.concat, wo, d_output, qkv::in_out);
  const auto d_bo = qkv::column_sums(d_output);
  const auto ga = qkv::multihead_backward<H>(r, go.d_x, opt);
  const auto pq = qkv::project_backward(x, wq, ga.d_queries, qkv::in_out);
  const auto pk = qkv::project_backward(x, wk, ga.d_keys, qkv::in_out);
  const auto pv = qkv::project_backward(x, wv, ga.d_values, qkv::in_out);
  const auto d_x = pq.d_x + pk.d_x + pv.d_x;
  const qkv::flat::gradients_layout at{N, D, DQ, DV, H, DO};
  std::vector<T> g(at.size());
  if (qkv::flat::attend_backward<T>(x.v, N, D, wq.v, wk.v, wv.v, DQ, DV, wo.v, DO, H, false, scale, m.data(),
                                    d_output.v, g.data()) != 0)
    return 1;
  same_bits(g.data() + at.d_concat(), go.d_x.v, N * DV, "d_concat", bad);
  same_bits(g.data() + at.d_wo(), go.d_w.v, DV * DO, "d_wo", bad);
  same_bits(g.data() + at.d_bo(), d_bo.v, DO, "d_bo", bad);
  for (std::size_t h = 0; h < H; ++h) {
    same_bits(g.data() + at.d_weights(h), ga.d_weights[h].v, N * N, "d_weights", bad);
    same_bits(g.data() + at.d_scaled_scores(h), ga.d_scaled_scores[h].v, N * N, "d_scaled_scores", bad);
    same_bits(g.data() + at.d_scores(h), ga.d_scores[h].v, N * N, "d_scores", bad);
  }
  same_bits(g.data() + at.d_queries(), ga.d_queries.v, N * DQ, "d_queries", bad);
  same_bits(g.data() + at.d_keys(), ga.d_keys.v, N * DQ, "d_keys", bad);
  same_bits(g.data() + at.d_values(), ga.d_values.v, N * DV, "d_values", bad);
  same_bits(g.data() + at.d_wq(), pq.d_w.v, D * DQ, "d_wq", bad);
  same_bits(g.data() + at.d_wk(), pk.d_w.v, D * DQ, "d_wk", bad);
  same_bits(g.data() + at.d_wv(), pv.d_w.v, D * DV, "d_wv", bad);
  same_bits(g.data() + at.d_x(), d_x.v, N * D, "d_x", bad);
  std::printf("%s in_out (x W, no biases, causal): forward and backward %s\n",
              sizeof(T) == 4 ? "float32" : "float64",
              bad ? "DIFFER" : "same bits in every step and gradient");
  return bad ? 1 : 0;
}

/// @brief attend()'s second form against the core's templates: cross-attention (3 queries from x
/// (3, 4) over 5 keys from a context (5, 6)) with grouped-query heads (4 query heads, 2 key/value
/// heads, d_k 4, d_v 3), biases, wo, RoPE on the first `rotary` columns of each head (the core's
/// rope() per head, its cos and sin tables given to the flat loops), causal (upper_left, as
/// attend_projected); then the backward of grouped-query self-attention (x as the context, no
/// RoPE) against grouped_query_attention_backward, output_projection_backward and
/// project_backward. Every step and gradient bit for bit.
template <class T>
int check_grouped(bool interleaved, std::size_t rotary) {
  constexpr std::size_t N = 3, S = 5, D = 4, DC = 6, H = 4, HK = 2, DK = 4, DVH = 3, DQ = H * DK,
                        DKV = HK * DK, DVKV = HK * DVH, DV = H * DVH, DO = 5;
  std::uint32_t state = 4242u + unsigned(rotary) + (interleaved ? 7u : 0u);
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return T(int(state >> 9) % 2001 - 1000) / T(437);
  };
  qkv::matrix<T, N, D> x;
  qkv::matrix<T, S, DC> c;
  qkv::matrix<T, DQ, D> wq;
  qkv::matrix<T, DKV, DC> wk;
  qkv::matrix<T, DVKV, DC> wv;
  qkv::matrix<T, DO, DV> wo;
  qkv::matrix<T, 1, DQ> bq;
  qkv::matrix<T, 1, DKV> bk;
  qkv::matrix<T, 1, DVKV> bv;
  qkv::matrix<T, 1, DO> bo;
  for (auto& e : x.v) e = next();
  for (auto& e : c.v) e = next();
  for (auto& e : wq.v) e = next();
  for (auto& e : wk.v) e = next();
  for (auto& e : wv.v) e = next();
  for (auto& e : wo.v) e = next();
  for (auto& e : bq.v) e = next();
  for (auto& e : bk.v) e = next();
  for (auto& e : bv.v) e = next();
  for (auto& e : bo.v) e = next();
  const T scale = T(1) / std::sqrt(T(DK));
  qkv::attention_options<T> opt;
  opt.scale = qkv::scaling<T>::multiply_by(scale);
  opt.causal = true;  // upper_left: key j > query i masked
  const auto layout = interleaved ? qkv::rope_layout::interleaved : qkv::rope_layout::half_split;
  const std::size_t qpos = 2, kpos = 0;  // the queries at positions 2.., the keys at 0..
  const auto ql = qkv::project(x, wq, bq, qkv::out_in);
  const auto kl = qkv::project(c, wk, bk, qkv::out_in);
  const auto v = qkv::project(c, wv, bv, qkv::out_in);
  auto qh = qkv::split_heads<H>(ql);
  auto kh = qkv::split_heads<HK>(kl);
  if (rotary)
    for (std::size_t h = 0; h < H; ++h) {
      qh[h] = qkv::rope(qh[h], layout, qpos, 10000.0, rotary);
      if (h < HK) kh[h] = qkv::rope(kh[h], layout, kpos, 10000.0, rotary);
    }
  const auto q = qkv::hconcat(qh);
  const auto k = qkv::hconcat(kh);
  const auto r = qkv::grouped_query_attend_projected<H, HK>(q, k, v, opt);
  const auto out =
      qkv::add_row_vector(qkv::matrix_product_transposed(r.concat, wo), bo);  // output_projection's
  // the tables rope() rotated with: rope_cos_sin of each position and pair
  std::vector<T> cq(N * (rotary / 2 + 1)), sq(cq.size()), ck(S * (rotary / 2 + 1)), sk(ck.size());
  for (std::size_t i = 0; i < rotary / 2; ++i) {
    const double theta = qkv::rope_frequency(i, rotary);
    for (std::size_t p = 0; p < N; ++p) {
      const auto a = qkv::rope_cos_sin<T>(qpos + p, theta);
      cq[p * (rotary / 2) + i] = a.cos, sq[p * (rotary / 2) + i] = a.sin;
    }
    for (std::size_t p = 0; p < S; ++p) {
      const auto a = qkv::rope_cos_sin<T>(kpos + p, theta);
      ck[p * (rotary / 2) + i] = a.cos, sk[p * (rotary / 2) + i] = a.sin;
    }
  }
  std::vector<unsigned char> mask(N * S, 0);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = i + 1; j < S; ++j) mask[i * S + j] = 1;
  qkv::flat::attend_args<T> a;
  a.x = x.v, a.t = N, a.d = D, a.context = c.v, a.s = S, a.dc = DC;
  a.wq = wq.v, a.bq = bq.v, a.wk = wk.v, a.bk = bk.v, a.wv = wv.v, a.bv = bv.v, a.wo = wo.v, a.bo = bo.v;
  a.dq = DQ, a.dv = DV, a.heads = H, a.kv_heads = HK, a.dout = DO, a.out_in = true, a.scale = scale;
  a.masked = mask.data();
  if (rotary) {
    a.cos_q = cq.data(), a.sin_q = sq.data(), a.cos_k = ck.data(), a.sin_k = sk.data();
    a.rotary_dim = rotary, a.interleaved = interleaved;
  }
  const auto st = a.layout();
  std::vector<T> m(st.size());
  if (qkv::flat::attend<T>(a, m.data()) != 0) return 1;
  int bad = 0;
  same_bits(m.data() + st.queries(), q.v, N * DQ, "queries", bad);
  same_bits(m.data() + st.keys(), k.v, S * DKV, "keys", bad);
  same_bits(m.data() + st.values(), v.v, S * DVKV, "values", bad);
  if (rotary) {
    same_bits(m.data() + st.queries_linear(), ql.v, N * DQ, "queries before RoPE", bad);
    same_bits(m.data() + st.keys_linear(), kl.v, S * DKV, "keys before RoPE", bad);
  }
  for (std::size_t h = 0; h < H; ++h) {
    same_bits(m.data() + st.scores(h), r.scores[h].v, N * S, "scores", bad);
    same_bits(m.data() + st.scaled(h), r.scaled_scores[h].v, N * S, "scaled", bad);
    same_bits(m.data() + st.weights(h), r.weights[h].v, N * S, "weights", bad);
    same_bits(m.data() + st.context(h), r.context[h].v, N * DVH, "context", bad);
  }
  same_bits(m.data() + st.concat(), r.concat.v, N * DV, "concat", bad);
  same_bits(m.data() + st.output(), out.v, N * DO, "output", bad);
  // the backward of grouped-query self-attention: x (3, 4) as the keys' input too (wk, wv read
  // x's 4 columns: the first 4 of each row of theirs), no RoPE
  qkv::matrix<T, DKV, D> wk2;
  qkv::matrix<T, DVKV, D> wv2;
  for (std::size_t i = 0; i < DKV; ++i)
    for (std::size_t j = 0; j < D; ++j) wk2.v[i * D + j] = wk.v[i * DC + j];
  for (std::size_t i = 0; i < DVKV; ++i)
    for (std::size_t j = 0; j < D; ++j) wv2.v[i * D + j] = wv.v[i * DC + j];
  const auto q2 = qkv::project(x, wq, bq, qkv::out_in);
  const auto k2 = qkv::project(x, wk2, bk, qkv::out_in);
  const auto v2 = qkv::project(x, wv2, bv, qkv::out_in);
  const auto r2 = qkv::grouped_query_attend_projected<H, HK>(q2, k2, v2, opt);
  qkv::matrix<T, N, DO> d_output;
  for (auto& e : d_output.v) e = next();
  const auto go = qkv::output_projection_backward(r2.concat, wo, d_output);
  const auto ga = qkv::grouped_query_attention_backward<H, HK>(r2, go.d_x, opt);
  const auto pq = qkv::project_backward(x, wq, bq, ga.d_queries, qkv::out_in);
  const auto pk = qkv::project_backward(x, wk2, bk, ga.d_keys, qkv::out_in);
  const auto pv = qkv::project_backward(x, wv2, bv, ga.d_values, qkv::out_in);
  const auto d_x = pq.d_x + pk.d_x + pv.d_x;
  std::vector<unsigned char> mask2(N * N, 0);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = i + 1; j < N; ++j) mask2[i * N + j] = 1;
  qkv::flat::attend_args<T> b = a;
  b.context = nullptr, b.s = 0, b.dc = 0, b.wk = wk2.v, b.wv = wv2.v, b.masked = mask2.data();
  b.cos_q = b.sin_q = b.cos_k = b.sin_k = nullptr, b.rotary_dim = 0;
  std::vector<T> f(b.layout().size());
  if (qkv::flat::attend<T>(b, f.data()) != 0) return 1;
  for (std::size_t h = 0; h < H; ++h)
    same_bits(f.data() + b.layout().weights(h), r2.weights[h].v, N * N, "self weights", bad);
  const qkv::flat::gradients_layout at{N, D, DQ, DV, H, DO, HK};
  std::vector<T> g(at.size());
  if (qkv::flat::attend_backward<T>(b, f.data(), d_output.v, g.data()) != 0) return 1;
  int bad_backward = 0;
  same_gradients(g.data(), at, go, ga, pq, pk, pv, d_x, bad_backward);
  std::printf(
      "%s cross-attention, 4 heads on 2 key/value heads, causal, %s: forward %s; grouped-query "
      "self-attention backward %s\n",
      sizeof(T) == 4 ? "float32" : "float64",
      rotary == 0   ? "no RoPE"
      : interleaved ? "RoPE interleaved on 2 of 4 columns"
                    : "RoPE half_split on all 4 columns",
      bad ? "DIFFERS" : "same bits in every step", bad_backward ? "DIFFERS" : "same bits in every gradient");
  return bad + bad_backward ? 1 : 0;
}

/// tests/cli/attend/backward_hand.json (x = Wq = Wk = Wv = I, scale 1, d_output [[1, 0], [0, 0]]):
/// the forward and the backward, every number
template <class T>
struct hand_case {
  T fwd[qkv::flat::output_size(2, 2, 2, 1, 0)];
  T grads[qkv::flat::gradients_size(2, 2, 2, 2, 1, 0)];
};

template <class T>
constexpr hand_case<T> hand(T one) {
  const T x[4] = {one, 0, 0, one}, d_output[4] = {one, 0, 0, 0};
  hand_case<T> c{};
  qkv::flat::attend<T>(x, 2, 2, x, nullptr, x, nullptr, x, nullptr, 2, 2, nullptr, nullptr, 0, 1, true, T(1),
                       nullptr, c.fwd);
  qkv::flat::attend_backward<T>(x, 2, 2, x, x, x, 2, 2, nullptr, 0, 1, true, T(1), c.fwd, d_output, c.grads);
  return c;
}

/// the backward evaluated by the compiler (a constant expression) gives the run-time bits
template <class T>
int check_constexpr() {
  constexpr hand_case<T> at_compile_time = hand<T>(T(1));
  // the hand derivation's exact zeros (backward_hand.expect): row 1 of dS, column 1 of d_values
  constexpr qkv::flat::gradients_layout at{2, 2, 2, 2, 1, 0};
  static_assert(at_compile_time.grads[at.d_scaled_scores(0) + 2] == T(0) &&
                at_compile_time.grads[at.d_scaled_scores(0) + 3] == T(0) &&
                at_compile_time.grads[at.d_values() + 1] == T(0) &&
                at_compile_time.grads[at.d_values() + 3] == T(0));
  volatile T one = T(1);  // read at run time: the compiler cannot fold this call
  const hand_case<T> at_run_time = hand<T>(one);
  const bool same = std::memcmp(&at_compile_time, &at_run_time, sizeof at_run_time) == 0;
  std::printf(
      "%s constexpr: backward_hand.json's forward and backward evaluated by the compiler %s the run time's\n",
      sizeof(T) == 4 ? "float32" : "float64", same ? "==" : "DIFFERS FROM");
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "core") {
    int bad = 0;
    for (int variant = 0; variant < 3; ++variant)
      bad += check_core<float>(variant) + check_core<double>(variant);
    bad += check_in_out<float>() + check_in_out<double>();
    bad += check_grouped<float>(false, 0) + check_grouped<double>(false, 0);
    bad += check_grouped<float>(false, 4) + check_grouped<double>(false, 4);
    bad += check_grouped<float>(true, 2) + check_grouped<double>(true, 2);
    bad += check_constexpr<float>() + check_constexpr<double>();
    return bad ? 1 : 0;
  }
  if (mode == "run") {
    std::vector<unsigned char> in((std::istreambuf_iterator<char>(std::cin)),
                                  std::istreambuf_iterator<char>());
    if (in.size() < 16 * 4) return 2;  // 15 header words and one unused: the numbers stay 8-aligned
    std::vector<std::uint32_t> h(16);
    std::memcpy(h.data(), in.data(), 16 * 4);
    return h[0] == 8 ? run<double>(h, in.data() + 16 * 4) : run<float>(h, in.data() + 16 * 4);
  }
  if (mode == "run_case") {
    std::vector<unsigned char> in((std::istreambuf_iterator<char>(std::cin)),
                                  std::istreambuf_iterator<char>());
    if (in.size() < 32 * 4) return 2;
    std::vector<std::uint32_t> h(32);
    std::memcpy(h.data(), in.data(), 32 * 4);
    const std::size_t n = in.size() - 32 * 4;
    return h[0] == 8 ? run_case<double>(h, in.data() + 32 * 4, n) : run_case<float>(h, in.data() + 32 * 4, n);
  }
  std::fprintf(stderr, "usage: qkv_wasm_check core | run < case.bin | run_case < case.bin\n");
  return 2;
}
