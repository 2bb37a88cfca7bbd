// qkv_wasm_check.cpp: the native twin of the page's WebAssembly module (qkv_wasm.cpp, compiled
// into this program), for tests/wasm/module_test.py.
//
//   qkv_wasm_check core      the module's run-time loops (core/flat_attention.hpp, which
//                            `qkv attend --arithmetic core` runs too) against the core's fixed-size
//                            templates (multihead_attend_projected, output_projection), bit for bit,
//                            on a 4-token, 2-head case (float and double; finite, a NaN in x,
//                            a fully masked row); exit 1 naming the first difference
//   qkv_wasm_check run       a case in the binary form of tests/wasm/module_test.py on stdin,
//                            every step's bytes on stdout (what wasm/run_module.mjs does with the
//                            .wasm under node), so that the two can be compared byte for byte
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
  std::printf("%s variant %d (%s): %s\n", sizeof(T) == 4 ? "float32" : "float64", variant,
              variant == 0   ? "finite"
              : variant == 1 ? "causal, NaN in x[1][2]"
                             : "causal, query 2 fully masked",
              bad ? "DIFFERS" : "same bits in every step");
  return bad ? 1 : 0;
}

template <class T>
int run(const std::vector<std::uint32_t>& h, const unsigned char* data) {
  // header: dtype t d dq dv dout heads out_in has_bq has_bk has_bv has_wo has_bo has_mask
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
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "core") {
    int bad = 0;
    for (int variant = 0; variant < 3; ++variant)
      bad += check_core<float>(variant) + check_core<double>(variant);
    return bad ? 1 : 0;
  }
  if (mode == "run") {
    std::vector<unsigned char> in((std::istreambuf_iterator<char>(std::cin)),
                                  std::istreambuf_iterator<char>());
    if (in.size() < 14 * 4) return 2;
    std::vector<std::uint32_t> h(14);
    std::memcpy(h.data(), in.data(), 14 * 4);
    return h[0] == 8 ? run<double>(h, in.data() + 14 * 4) : run<float>(h, in.data() + 14 * 4);
  }
  std::fprintf(stderr, "usage: qkv_wasm_check core | run < case.bin\n");
  return 2;
}
