// qkv_wasm.cpp: multi-head self-attention at run-time sizes in the core's arithmetic, as C
// functions, for the learner's pages (built to WebAssembly: wasm/meson.build, docs/pages.md
// "Editing a page") and natively (wasm/qkv_wasm_check.cpp, the same source, to check the bits).
//
// The core (include/qkv/core/) is fixed-size: matrix<T, R, C> with R and C template arguments.
// A page's learner edits values, not sizes, but the module is built once for every page, so it
// computes at run-time sizes with the core's own order of operations, step for step:
//   projections  matrix_product_transposed (out_in, nn.Linear's x Wᵀ) or matrix_product
//                (in_out, x W): each element summed left to right from the first product, one
//                rounding per product and per sum (no fma: -ffp-contract=off), then
//                add_row_vector's + b
//   scores       matrix_product_transposed(q_h, k_h)
//   scaled       scaling<T>::multiply_by: scale * score (the factor the page states)
//   masked       masked(): -inf where the page's mask says so (causal, window, cells)
//   weights      detail::stable_softmax, the core's function itself (qkv::exp inside)
//   context      attended_context: masked keys skipped, the NaN / inf policy of docs/numerics.md
//   output       concat Woᵀ (+ bo) or concat Wo, as the projections
// tests/wasm/module_test.py checks these loops against the core's fixed-size templates on
// tutorial 000 (wasm/qkv_wasm_check.cpp) and the wasm build against the native one, bit for bit.
//
// Every step is written to one output buffer, in this order (H heads, dq = heads * dk queries and
// keys columns, dv = heads * dvh values columns, T tokens):
//   queries (T, dq), keys (T, dq), values (T, dv),
//   per head h: scores (T, T), scaled (T, T), weights (T, T), context (T, dvh),
//   concat (T, dv) [the heads side by side], output (T, dout) [when wo is given]
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include <qkv/core/math.hpp>
#include <qkv/core/softmax.hpp>

namespace qkv::wasm {

/// one projection y = x Wᵀ + b (out_in: w is (dout, din)) or x W + b (in_out: w is (din, dout));
/// x is (n, din) with row stride xs; the core's summation order (see the top of this file)
template <class T>
void project(const T* x, std::size_t n, std::size_t din, std::size_t xs, const T* w, const T* b,
             std::size_t dout, bool out_in, T* y) {
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < dout; ++j) {
      auto wk = [&](std::size_t k) { return out_in ? w[j * din + k] : w[k * dout + j]; };
      T s = x[i * xs] * wk(0);
      for (std::size_t k = 1; k < din; ++k) s += x[i * xs + k] * wk(k);
      y[i * dout + j] = b ? T(s + b[j]) : s;
    }
}

/// how many numbers attend() writes for these sizes
inline std::size_t output_size(std::size_t t, std::size_t dq, std::size_t dv, std::size_t heads,
                               std::size_t dout) {
  return t * dq * 2 + t * dv + heads * (3 * t * t + t * (dv / heads)) + t * dv + t * dout;
}

/// @brief self-attention of x (T, d) with H heads, every step written to out (layout above).
/// masked (T x T bytes, row-major, or null): nonzero where query i may not see key j.
/// Returns 0, or 1 when the sizes do not split into heads.
template <class T>
int attend(const T* x, std::size_t t, std::size_t d, const T* wq, const T* bq, const T* wk, const T* bk,
           const T* wv, const T* bv, std::size_t dq, std::size_t dv, const T* wo, const T* bo,
           std::size_t dout, std::size_t heads, bool out_in, T scale, const unsigned char* masked, T* out) {
  if (heads == 0 || dq % heads != 0 || dv % heads != 0 || t == 0 || d == 0) return 1;
  const std::size_t dk = dq / heads, dvh = dv / heads;
  const T ninf = -std::numeric_limits<T>::infinity();
  T* q = out;
  T* k = q + t * dq;
  T* v = k + t * dq;
  project(x, t, d, d, wq, bq, dq, out_in, q);
  project(x, t, d, d, wk, bk, dq, out_in, k);
  project(x, t, d, d, wv, bv, dv, out_in, v);
  T* head = v + t * dv;
  T* concat = head + heads * (3 * t * t + t * dvh);
  for (std::size_t h = 0; h < heads; ++h) {
    T* sc = head;
    T* ss = sc + t * t;
    T* w = ss + t * t;
    T* ctx = w + t * t;
    head = ctx + t * dvh;
    for (std::size_t i = 0; i < t; ++i)
      for (std::size_t j = 0; j < t; ++j) {  // matrix_product_transposed(q_h, k_h)
        T s = q[i * dq + h * dk] * k[j * dq + h * dk];
        for (std::size_t c = 1; c < dk; ++c) s += q[i * dq + h * dk + c] * k[j * dq + h * dk + c];
        sc[i * t + j] = s;
        ss[i * t + j] = (masked && masked[i * t + j]) ? ninf : T(scale * s);  // scaled(), masked()
      }
    for (std::size_t i = 0; i < t; ++i) qkv::detail::stable_softmax(ss + i * t, w + i * t, t, 1);
    for (std::size_t i = 0; i < t; ++i) {  // attended_context, at run-time sizes
      const bool nan_row = w[i * t] != w[i * t];
      for (std::size_t c = 0; c < dvh; ++c) {
        T s = T(0);
        if (nan_row) {
          s = std::numeric_limits<T>::quiet_NaN();
        } else {
          bool first = true;
          unsigned seen = 0;  // 1 NaN, 2 +inf, 4 -inf
          for (std::size_t j = 0; j < t; ++j) {
            if (ss[i * t + j] == ninf) continue;  // masked: skipped
            const T xv = v[j * dv + h * dvh + c];
            if (xv != xv) {
              seen |= 1;
            } else if (xv == std::numeric_limits<T>::infinity()) {
              seen |= 2;
            } else if (xv == ninf) {
              seen |= 4;
            } else if (first) {
              s = w[i * t + j] * xv;
              first = false;
            } else {
              s += w[i * t + j] * xv;
            }
          }
          if ((seen & 1) || seen == 6) s = std::numeric_limits<T>::quiet_NaN();
          if (seen == 2) s = std::numeric_limits<T>::infinity();
          if (seen == 4) s = ninf;
        }
        ctx[i * dvh + c] = s;
        concat[i * dv + h * dvh + c] = s;
      }
    }
  }
  if (wo) project(concat, t, dv, dv, wo, bo, dout, out_in, concat + t * dv);
  return 0;
}

}  // namespace qkv::wasm

// The C interface the page's script calls (and qkv_wasm_check.cpp): pointers into the module's
// memory, from qkv_alloc. A null bias (0) is no bias; wo = 0: no output projection (dout ignored).
extern "C" {

void* qkv_alloc(std::size_t bytes) { return std::malloc(bytes); }
void qkv_free(void* p) { std::free(p); }

std::size_t qkv_output_size(std::size_t t, std::size_t dq, std::size_t dv, std::size_t heads,
                            std::size_t dout) {
  return qkv::wasm::output_size(t, dq, dv, heads, dout);
}

int qkv_attend_f32(const float* x, std::size_t t, std::size_t d, const float* wq, const float* bq,
                   const float* wk, const float* bk, const float* wv, const float* bv, std::size_t dq,
                   std::size_t dv, const float* wo, const float* bo, std::size_t dout, std::size_t heads,
                   int out_in, float scale, const unsigned char* masked, float* out) {
  return qkv::wasm::attend<float>(x, t, d, wq, bq, wk, bk, wv, bv, dq, dv, wo, bo, dout, heads, out_in != 0,
                                  scale, masked, out);
}

int qkv_attend_f64(const double* x, std::size_t t, std::size_t d, const double* wq, const double* bq,
                   const double* wk, const double* bk, const double* wv, const double* bv, std::size_t dq,
                   std::size_t dv, const double* wo, const double* bo, std::size_t dout, std::size_t heads,
                   int out_in, double scale, const unsigned char* masked, double* out) {
  return qkv::wasm::attend<double>(x, t, d, wq, bq, wk, bk, wv, bv, dq, dv, wo, bo, dout, heads, out_in != 0,
                                   scale, masked, out);
}
}
