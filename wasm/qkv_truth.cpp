// qkv_truth.cpp: the learner pages' truth module (wasm/meson.build, docs/pages.md "The error
// against the truth"): the 50-digit truth of a page's steps for a learner's own inputs, and each
// value's error against it, in the browser. The arithmetic is include/qkv/reference/step_truth.hpp,
// the same function io/page_truth.hpp writes a page's truth with natively. A module of its own
// (Boost.Multiprecision's exp makes it about four times the size of qkv_wasm.cpp's), embedded only
// in the pages that carry a truth.
//
// Built for wasm32-wasi without exceptions or threads: Boost is told so (-DBOOST_NO_EXCEPTIONS,
// -DBOOST_DISABLE_THREADS, and wasm/boost_shim's lightweight_mutex, since WASI has no std::mutex),
// and an error Boost would throw writes its message and traps as core/fail.hpp does.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <qkv/reference/step_truth.hpp>

#include "boost_wasm.hpp"  // Boost without exceptions, the stack guard

using real = qkv::reference::truth_real;

extern "C" {

void* qkv_alloc(std::size_t bytes) { return std::malloc(bytes); }
void qkv_free(void* p) { std::free(p); }

// the bytes one truth takes (the script allocates rows * cols of them per matrix)
std::size_t qkv_truth_size() { return sizeof(real); }

// out[k] = v[k] exactly (a float32 or float64 page's input, as a double: exact either way)
void qkv_truth_of(const double* v, std::size_t n, real* out) {
  for (std::size_t k = 0; k < n; ++k) new (out + k) real(v[k]);
}

// one step's truth (step_truth.hpp): sizes as qkv_wasm.cpp's qkv_step_f32 (rows, cols, as, bs,
// n, ac, br, bc), scalar as the page states it, computed the step's numbers as doubles; 0, or 1
// for a kind without a truth
int qkv_truth_step(int kind, const real* a, const real* b, const real* c, const std::size_t* sizes,
                   double scalar, const double* computed, real* out) {
  const qkv::flat::step_sizes z{sizes[0], sizes[1], sizes[2], sizes[3],
                                sizes[4], sizes[5], sizes[6], sizes[7]};
  const std::size_t n = z.rows * z.cols;
  for (std::size_t k = 0; k < n; ++k) new (out + k) real();
  return qkv::reference::step_truth(static_cast<qkv::flat::kind>(kind), a, b, c, z, scalar, computed, out);
}

// the error of each of n values against its truth, in ulps of float32 (digits 24) or float64 (53)
void qkv_truth_ulps(const real* t, const double* values, std::size_t n, int digits, double* out) {
  for (std::size_t k = 0; k < n; ++k)
    out[k] = qkv::reference::truth_ulps(values[k], t[k], digits, digits == 24 ? -126 : -1022);
}

// the truth as 20 significant digits (truth_digits), NUL-terminated into buf (at least 48 bytes);
// returns its length
std::size_t qkv_truth_text(const real* t, char* buf) {
  const std::string s = qkv::reference::truth_digits(*t);
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return s.size();
}
}
