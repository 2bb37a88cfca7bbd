// qkv_wasm_check.cpp: the native twin of the page's WebAssembly module (qkv_wasm.cpp, compiled
// into this program), for tests/wasm/module_test.py.
//
//   qkv_wasm_check core      the module's run-time loops (core/flat_attention.hpp and
//                            core/flat_attention_backward.hpp, which `qkv attend --arithmetic
//                            core` runs too) against the core's fixed-size templates
//                            (multihead_attend_projected, output_projection; for a d_output
//                            output_projection_backward, multihead_backward, project_backward),
//                            bit for bit, on a 4-token, 2-head case (float and double; finite, a
//                            NaN in x, a fully masked row; the in_out layout without biases), and
//                            backward_hand.json's forward and backward evaluated in a constant
//                            expression == at run time; exit 1 naming the first difference
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
  same_bits(g.data() + at.d_concat(), go.d_x.v, N * DV, "d_concat", bad_backward);
  same_bits(g.data() + at.d_wo(), go.d_w.v, DO * DV, "d_wo", bad_backward);
  same_bits(g.data() + at.d_bo(), go.d_b.v, DO, "d_bo", bad_backward);
  for (std::size_t h = 0; h < H; ++h) {  // D has no field in the core: dS holds it in every cell
    same_bits(g.data() + at.d_weights(h), ga.d_weights[h].v, N * N, "d_weights", bad_backward);
    same_bits(g.data() + at.d_scaled_scores(h), ga.d_scaled_scores[h].v, N * N, "d_scaled_scores",
              bad_backward);
    same_bits(g.data() + at.d_scores(h), ga.d_scores[h].v, N * N, "d_scores", bad_backward);
  }
  same_bits(g.data() + at.d_queries(), ga.d_queries.v, N * DQ, "d_queries", bad_backward);
  same_bits(g.data() + at.d_keys(), ga.d_keys.v, N * DQ, "d_keys", bad_backward);
  same_bits(g.data() + at.d_values(), ga.d_values.v, N * DV, "d_values", bad_backward);
  same_bits(g.data() + at.d_wq(), pq.d_w.v, DQ * D, "d_wq", bad_backward);
  same_bits(g.data() + at.d_bq(), pq.d_b.v, DQ, "d_bq", bad_backward);
  same_bits(g.data() + at.d_wk(), pk.d_w.v, DQ * D, "d_wk", bad_backward);
  same_bits(g.data() + at.d_bk(), pk.d_b.v, DQ, "d_bk", bad_backward);
  same_bits(g.data() + at.d_wv(), pv.d_w.v, DV * D, "d_wv", bad_backward);
  same_bits(g.data() + at.d_bv(), pv.d_b.v, DV, "d_bv", bad_backward);
  same_bits(g.data() + at.d_x(), d_x.v, N * D, "d_x", bad_backward);
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
  std::fprintf(stderr, "usage: qkv_wasm_check core | run < case.bin\n");
  return 2;
}
