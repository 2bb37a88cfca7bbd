// OpenBLAS peer: cblas_sgemm for every matmul (one pair per head), plus a
// plain scalar softmax loop (std::exp, no -ffast-math, so not vectorised).
// Threads: openblas_set_num_threads(threads) for the GEMMs (OpenBLAS's own
// pthread pool); the softmax loop runs on the calling thread.
// Projection biases use the BLAS idiom: pre-fill C with the bias, beta = 1.
//
// Diagnostic rows (not part of the peer set proper):
//  * "openblas-omp-softmax": the softmax rows split over an OpenMP team of
//    `threads` (threads > 1 only).  Two thread pools (OpenBLAS pthreads +
//    libgomp) that both spin-wait share 2 cores: shows the oversubscription
//    cost.  Sensitive to OMP_WAIT_POLICY / GOMP_SPINCOUNT.
//  * "openblas-gemm-only": the same GEMMs with the softmax skipped (so not an
//    attention; not validated) -- the time of the BLAS part alone.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "../attnbench.hpp"

extern "C" void openblas_set_num_threads(int);

namespace {
using namespace attnbench;

std::unique_ptr<float[]> uninit(size_t n) { return std::unique_ptr<float[]>(new float[n]); }

// C[m, cols] = A[m, k] * B[k, cols] (+ bias)
void proj(const float* A, const float* B, const float* bias, float* C, int m, int k, int cols) {
  if (bias)
    for (int i = 0; i < m; ++i) std::memcpy(C + size_t(i) * cols, bias, sizeof(float) * cols);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, cols, k, 1.0f, A, k, B, cols, bias ? 1.0f : 0.0f,
              C, cols);
}

inline void softmax_row(float* r, int cols) {
  float m = r[0];
  for (int j = 1; j < cols; ++j) m = std::max(m, r[j]);
  float s = 0.f;
  for (int j = 0; j < cols; ++j) {
    r[j] = std::exp(r[j] - m);
    s += r[j];
  }
  const float inv = 1.0f / s;
  for (int j = 0; j < cols; ++j) r[j] *= inv;
}

enum class Softmax { plain, omp, none };

template <Softmax kSoftmax>
void softmax_rows(float* S, int rows, int cols, int threads) {
  if constexpr (kSoftmax == Softmax::plain) {
    for (int i = 0; i < rows; ++i) softmax_row(S + size_t(i) * cols, cols);
  } else if constexpr (kSoftmax == Softmax::omp) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int i = 0; i < rows; ++i) softmax_row(S + size_t(i) * cols, cols);
  }
}

template <Softmax kSoftmax>
void openblas_attention(const Workload& w, const Inputs& in, float* out, int threads) {
  openblas_set_num_threads(threads);
  const int n = w.n, H = w.heads, dk = w.d_k, dv = w.d_v, qc = w.qk_cols(), vc = w.v_cols();
  std::unique_ptr<float[]> qb, kb, vb, ob;
  const float *Q = in.Q, *K = in.K, *V = in.V;
  if (w.project) {
    qb = uninit(size_t(n) * qc), kb = uninit(size_t(n) * qc), vb = uninit(size_t(n) * vc);
    proj(in.X, in.Wq, in.bq, qb.get(), n, w.d_model, qc);
    proj(in.X, in.Wk, in.bk, kb.get(), n, w.d_model, qc);
    proj(in.X, in.Wv, in.bv, vb.get(), n, w.d_model, vc);
    Q = qb.get(), K = kb.get(), V = vb.get();
  }
  float* O = out;
  if (w.out_proj) ob = uninit(size_t(n) * vc), O = ob.get();
  auto S = uninit(size_t(n) * n);  // the n^2 score matrix, reused by every head
  const float scale = 1.0f / std::sqrt(float(dk));
  for (int h = 0; h < H; ++h) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dk, scale, Q + h * dk, qc, K + h * dk, qc,
                0.0f, S.get(), n);
    if (w.causal)  // every score computed, the upper triangle masked before the softmax
      for (int i = 0; i + 1 < n; ++i)
        std::fill(S.get() + size_t(i) * n + i + 1, S.get() + size_t(i + 1) * n, -INFINITY);
    softmax_rows<kSoftmax>(S.get(), n, n, threads);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dv, n, 1.0f, S.get(), n, V + h * dv, vc, 0.0f,
                O + h * dv, vc);
  }
  if (w.out_proj) proj(O, in.Wo, in.bo, out, n, vc, w.d_model);
}

ATTNBENCH_REGISTER_FN("openblas", openblas_attention<Softmax::plain>, true,
                      "OpenBLAS cblas_sgemm (its pthread pool) + plain scalar softmax loop");
Runner omp_softmax_factory(const Workload& w, const Inputs& in, int threads) {
  if (threads < 2 || w.n < 64) return {};  // same as "openblas" on one thread; tiny n: pointless
  return [w, in, threads](float* out) { openblas_attention<Softmax::omp>(w, in, out, threads); };
}
ATTNBENCH_REGISTER_FACTORY("openblas-omp-softmax", omp_softmax_factory, true,
                           "diagnostic: as openblas, softmax rows on an OpenMP team (2 spinning pools)");
ATTNBENCH_REGISTER_FN("openblas-gemm-only", openblas_attention<Softmax::none>, false,
                      "diagnostic: the same sgemm calls, softmax skipped (not attention)");
}  // namespace
