// qkv_wasm.cpp: the learner pages' WebAssembly module (wasm/meson.build, docs/pages.md "Editing a
// page"): the C functions the page's script calls, around include/qkv/core/flat_attention.hpp,
// multi-head self-attention at run-time sizes in the core's arithmetic (the `qkv attend` pages)
// and its backward (include/qkv/core/flat_attention_backward.hpp, for a case with d_output), and
// include/qkv/core/flat_steps.hpp, one step of a `qkv explain` page (io/page_recompute.hpp). Those
// headers are the one source of the arithmetic: `qkv attend --arithmetic core` computes with them natively
// (tools/cmd_attend.hpp), and wasm/qkv_wasm_check.cpp includes this file to check it against the
// core's templates and the .wasm against the native build, bit for bit (tests/wasm/module_test.py).
#include <cstddef>
#include <cstdlib>

#include <qkv/core/flat_attention.hpp>
#include <qkv/core/flat_steps.hpp>
#include <qkv/core/flat_attention_backward.hpp>
#include <qkv/exact/rational.hpp>

// the exact pages' numbers (01b, 15): rational<long long>, two 64-bit integers (numerator, then
// denominator > 0, in lowest terms), which the page's script reads as a BigInt64Array and never
// writes: every value it holds came from qkv_q64_parse or a step
using q64 = qkv::exact::rational<long long>;
static_assert(sizeof(q64) == 2 * sizeof(long long) && alignof(q64) == alignof(long long),
              "the page's script reads a q64 as two int64 at offsets 0 and 8");

// The C interface the page's script calls (and qkv_wasm_check.cpp): pointers into the module's
// memory, from qkv_alloc. A null bias (0) is no bias; wo = 0: no output projection (dout ignored).
extern "C" {

void* qkv_alloc(std::size_t bytes) { return std::malloc(bytes); }
void qkv_free(void* p) { std::free(p); }

std::size_t qkv_output_size(std::size_t t, std::size_t dq, std::size_t dv, std::size_t heads,
                            std::size_t dout) {
  return qkv::flat::output_size(t, dq, dv, heads, dout);
}

int qkv_attend_f32(const float* x, std::size_t t, std::size_t d, const float* wq, const float* bq,
                   const float* wk, const float* bk, const float* wv, const float* bv, std::size_t dq,
                   std::size_t dv, const float* wo, const float* bo, std::size_t dout, std::size_t heads,
                   int out_in, float scale, const unsigned char* masked, float* out) {
  return qkv::flat::attend<float>(x, t, d, wq, bq, wk, bk, wv, bv, dq, dv, wo, bo, dout, heads, out_in != 0,
                                  scale, masked, out);
}

int qkv_attend_f64(const double* x, std::size_t t, std::size_t d, const double* wq, const double* bq,
                   const double* wk, const double* bk, const double* wv, const double* bv, std::size_t dq,
                   std::size_t dv, const double* wo, const double* bo, std::size_t dout, std::size_t heads,
                   int out_in, double scale, const unsigned char* masked, double* out) {
  return qkv::flat::attend<double>(x, t, d, wq, bq, wk, bk, wv, bv, dq, dv, wo, bo, dout, heads, out_in != 0,
                                   scale, masked, out);
}

// one step of a `qkv explain` page (flat_steps.hpp's extended_step(): step() and the kinds
// 40-59 in one type, column_sums and sgd): sizes holds rows, cols, as, bs, n,
// ac, br, bc (step_sizes); scalar the factor, divisor or eps, in the page's type
int qkv_step_f32(int kind, const float* a, const float* b, const float* c, const unsigned char* masked,
                 const std::size_t* sizes, double scalar, float* out) {
  const qkv::flat::step_sizes z{sizes[0], sizes[1], sizes[2], sizes[3],
                                sizes[4], sizes[5], sizes[6], sizes[7]};
  return qkv::flat::extended_step<float>(static_cast<qkv::flat::kind>(kind), a, b, c, masked, z,
                                         static_cast<float>(scalar), out);
}

int qkv_step_f64(int kind, const double* a, const double* b, const double* c, const unsigned char* masked,
                 const std::size_t* sizes, double scalar, double* out) {
  const qkv::flat::step_sizes z{sizes[0], sizes[1], sizes[2], sizes[3],
                                sizes[4], sizes[5], sizes[6], sizes[7]};
  return qkv::flat::extended_step<double>(static_cast<qkv::flat::kind>(kind), a, b, c, masked, z, scalar,
                                          out);
}

std::size_t qkv_gradients_size(std::size_t t, std::size_t d, std::size_t dq, std::size_t dv,
                               std::size_t heads, std::size_t dout) {
  return qkv::flat::gradients_size(t, d, dq, dv, heads, dout);
}

// the backward of qkv_attend_*: fwd is its output for the same arguments, d_output (t, dout; no
// wo: (t, dv)) the upstream gradient; every gradient to out (qkv::flat::gradients_layout)
int qkv_attend_backward_f32(const float* x, std::size_t t, std::size_t d, const float* wq, const float* wk,
                            const float* wv, std::size_t dq, std::size_t dv, const float* wo,
                            std::size_t dout, std::size_t heads, int out_in, float scale, const float* fwd,
                            const float* d_output, float* out) {
  return qkv::flat::attend_backward<float>(x, t, d, wq, wk, wv, dq, dv, wo, dout, heads, out_in != 0, scale,
                                           fwd, d_output, out);
}

int qkv_attend_backward_f64(const double* x, std::size_t t, std::size_t d, const double* wq, const double* wk,
                            const double* wv, std::size_t dq, std::size_t dv, const double* wo,
                            std::size_t dout, std::size_t heads, int out_in, double scale, const double* fwd,
                            const double* d_output, double* out) {
  return qkv::flat::attend_backward<double>(x, t, d, wq, wk, wv, dq, dv, wo, dout, heads, out_in != 0, scale,
                                            fwd, d_output, out);
}

// The exact pages (io/page_recompute.hpp's exact plan). An error (an overflow, a zero
// denominator, malformed text) fails as rational.hpp says: core/fail.hpp writes "qkv: " and the
// native tool's message to stderr (WASI's fd_write, which the page's script supplies and reads)
// and traps; the script catches the trap, shows the message and puts the last good numbers back.

// *out = rational::parse(text) (what a learner types: 3/2, 0.9, -1.5e-3; text NUL-terminated)
int qkv_q64_parse(const char* text, q64* out) {
  *out = q64::parse(text);
  return 0;
}

// one exact step (flat_steps.hpp's exact_step()): sizes as qkv_step_f32's; 1 for a kind that has
// no exact form
int qkv_step_q64(int kind, const q64* a, const q64* b, const q64* c, const std::size_t* sizes, q64* out) {
  const qkv::flat::step_sizes z{sizes[0], sizes[1], sizes[2], sizes[3],
                                sizes[4], sizes[5], sizes[6], sizes[7]};
  return qkv::flat::exact_step<q64>(static_cast<qkv::flat::kind>(kind), a, b, c, z, out);
}

// the double nearest each of n values (rational::to<double>: correctly rounded), for the page's
// heatmaps and sums
void qkv_q64_to_f64(const q64* v, std::size_t n, double* out) {
  for (std::size_t k = 0; k < n; ++k) out[k] = v[k].to<double>();
}
}

// the second form (qkv::flat::attend_args: a context, kv_heads, a bias, ALiBi, RoPE), for the
// pages of chapter two's cases. p: 16 pointers (0: none) x, context, wq, bq, wk, bk, wv, bv, wo,
// bo, bias, slopes, cos_q, sin_q, cos_k, sin_k; z: 13 sizes t, d, s, dc, dq, dv (the
// concatenation's columns), heads, kv_heads, dout, out_in, bias_heads, rotary_dim, interleaved;
// offset: ALiBi's query i sits at position i + offset; masked (t, s) bytes or 0
namespace {
template <class T>
qkv::flat::attend_args<T> case_args(const T* const* p, const std::size_t* z, int offset, T scale,
                                    const unsigned char* masked) {
  qkv::flat::attend_args<T> a;
  a.x = p[0], a.context = p[1], a.wq = p[2], a.bq = p[3], a.wk = p[4], a.bk = p[5], a.wv = p[6], a.bv = p[7];
  a.wo = p[8], a.bo = p[9], a.bias = p[10], a.slopes = p[11];
  a.cos_q = p[12], a.sin_q = p[13], a.cos_k = p[14], a.sin_k = p[15];
  a.t = z[0], a.d = z[1], a.s = z[2], a.dc = z[3], a.dq = z[4], a.dv = z[5], a.heads = z[6],
  a.kv_heads = z[7];
  a.dout = z[8], a.out_in = z[9] != 0, a.bias_heads = z[10], a.rotary_dim = z[11], a.interleaved = z[12] != 0;
  a.offset = offset;
  a.scale = scale;
  a.masked = masked;
  return a;
}
}  // namespace

extern "C" {

// how many numbers qkv_attend_case_* writes (steps_layout), and its backward (gradients_layout)
std::size_t qkv_case_output_size(const std::size_t* z) {
  if (z[6] == 0) return 0;  // no heads: nothing to lay out (attend refuses it)
  return qkv::flat::steps_layout{z[0], z[4], z[5], z[6], z[8], z[3] ? z[2] : 0, z[7], z[11] != 0}.size();
}
std::size_t qkv_case_gradients_size(const std::size_t* z) {
  if (z[6] == 0) return 0;
  return qkv::flat::gradients_layout{z[0], z[1], z[4], z[5], z[6], z[8], z[7]}.size();
}

int qkv_attend_case_f32(const float* const* p, const std::size_t* z, int offset, float scale,
                        const unsigned char* masked, float* out) {
  return qkv::flat::attend<float>(case_args<float>(p, z, offset, scale, masked), out);
}
int qkv_attend_case_f64(const double* const* p, const std::size_t* z, int offset, double scale,
                        const unsigned char* masked, double* out) {
  return qkv::flat::attend<double>(case_args<double>(p, z, offset, scale, masked), out);
}

// the backward of qkv_attend_case_* (no context, no RoPE): fwd its output for the same arguments
int qkv_attend_case_backward_f32(const float* const* p, const std::size_t* z, int offset, float scale,
                                 const unsigned char* masked, const float* fwd, const float* d_output,
                                 float* out) {
  return qkv::flat::attend_backward<float>(case_args<float>(p, z, offset, scale, masked), fwd, d_output, out);
}
int qkv_attend_case_backward_f64(const double* const* p, const std::size_t* z, int offset, double scale,
                                 const unsigned char* masked, const double* fwd, const double* d_output,
                                 double* out) {
  return qkv::flat::attend_backward<double>(case_args<double>(p, z, offset, scale, masked), fwd, d_output,
                                            out);
}
}

// a number rounded to bfloat16 or float16 as stored (core/half.hpp: to nearest, ties to even; the
// tool's rounding of a 16-bit case's inputs), back as the float of the same value: what the page
// of a 16-bit case does to a typed number before the float32 arithmetic
#include <qkv/core/half.hpp>

extern "C" {
float qkv_round_bfloat16(float x) { return static_cast<float>(qkv::bfloat16(x)); }
float qkv_round_float16(float x) { return static_cast<float>(qkv::float16(x)); }
}

// a step from one type to another (flat_steps.hpp's cast, kind 40: a page whose steps mix float32,
// float64 and exact rationals, io/page_recompute.hpp): n values of a, of type `from`, into out, of
// type `to` (0 float32, 1 float64, 2 q64), as matrix_cast converts: float32 -> float64, float64 ->
// float32 (rounded to nearest), a float -> its exact value (rational::exactly; a float outside the rational's range traps with its message),
// an exact value -> the nearest float32 or float64 (rational::to, correctly rounded).
// Returns 0, or 1 for a pair it does not convert (nothing written)
extern "C" {
int qkv_cast(int from, int to, const void* a, std::size_t n, void* out) {
  if (from == 0 && to == 1) {
    qkv::flat::cast(static_cast<const float*>(a), n, static_cast<double*>(out));
  } else if (from == 0 && to == 2) {
    qkv::flat::cast(static_cast<const float*>(a), n, static_cast<q64*>(out));
  } else if (from == 1 && to == 2) {
    qkv::flat::cast(static_cast<const double*>(a), n, static_cast<q64*>(out));
  } else if (from == 1 && to == 0) {  // float64 -> float32, rounded to nearest (static_cast<float>)
    qkv::flat::cast(static_cast<const double*>(a), n, static_cast<float*>(out));
  } else if (from == 2 && to == 0) {  // exact -> float32, the nearest float (rational::to)
    qkv::flat::cast(static_cast<const q64*>(a), n, static_cast<float*>(out));
  } else if (from == 2 && to == 1) {  // exact -> float64, the nearest double
    qkv::flat::cast(static_cast<const q64*>(a), n, static_cast<double*>(out));
  } else {
    return 1;
  }
  return 0;
}
}

// already-projected queries, keys and values (attend_args' q, k, v): the inputs of a summarised
// `qkv attend` page whose x and weights are too large to embed whole (tools/attend_page.hpp,
// docs/pages.md "The summarised attend page"); p and z as qkv_attend_case_* (x, the weights and
// wo not read: no output projection), q (t, dq), k (s, dkv), v (s, dvkv), before RoPE when the
// case has it (the module rotates q and k with the page's tables); out: steps_layout with dout 0
extern "C" {
std::size_t qkv_projected_output_size(const std::size_t* z) {
  if (z[6] == 0) return 0;
  return qkv::flat::steps_layout{z[0], z[4], z[5], z[6], 0, z[2], z[7], z[11] != 0}.size();
}
int qkv_attend_projected_f32(const float* const* p, const std::size_t* z, int offset, float scale,
                             const unsigned char* masked, const float* q, const float* k, const float* v,
                             float* out) {
  auto a = case_args<float>(p, z, offset, scale, masked);
  a.q = q, a.k = k, a.v = v;
  return qkv::flat::attend<float>(a, out);
}
int qkv_attend_projected_f64(const double* const* p, const std::size_t* z, int offset, double scale,
                             const unsigned char* masked, const double* q, const double* k, const double* v,
                             double* out) {
  auto a = case_args<double>(p, z, offset, scale, masked);
  a.q = q, a.k = k, a.v = v;
  return qkv::flat::attend<double>(a, out);
}
}
