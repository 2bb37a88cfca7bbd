// qkv_wide.cpp: the pages' wide exact module (wasm/meson.build, docs/pages.md "The exact pages"):
// exact steps over rationals of Boost.Multiprecision's int128_t (qkv::exact::q128, the type
// example 03b computes its scores with), for the steps of an exact page whose fractions overflow
// the main module's rationals of 64-bit integers (03b's w_T_2: denominators near 2^104). The
// arithmetic is core/flat_steps.hpp's exact_step, the function the main module's qkv_step_q64
// calls, here over q128; io/page_wide.hpp runs the same natively when the tool writes the page.
// A module of its own, embedded only in a page that has such a step.
//
// Built as the truth module is (Boost without exceptions or threads); an error (a sum or product
// that overflows even 128 bits) writes rational.hpp's message through WASI's fd_write and traps,
// as the main module's exact steps do.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#include <qkv/core/flat_steps.hpp>
#include <qkv/exact/fixed_width.hpp>

#include "boost_wasm.hpp"  // Boost without exceptions, the stack guard

using q128 = qkv::exact::q128;
using int128 = boost::multiprecision::int128_t;

namespace {
// |x| in decimal into buf (at least 40 bytes: 2^128 has 39 digits), from its last digit; returns
// the number of digits written. No iostreams: they would add a third to the module
std::size_t digits(int128 x, char* buf) {
  if (x < 0) x = -x;
  char rev[48];
  std::size_t n = 0;
  do {
    rev[n++] = static_cast<char>('0' + static_cast<int>(x % 10));
    x /= 10;
  } while (x != 0);
  for (std::size_t k = 0; k < n; ++k) buf[k] = rev[n - 1 - k];
  return n;
}
}  // namespace

extern "C" {

void* qkv_alloc(std::size_t bytes) { return std::malloc(bytes); }
void qkv_free(void* p) { std::free(p); }

// the bytes one q128 takes (the script allocates rows * cols of them per matrix)
std::size_t qkv_q128_size() { return sizeof(q128); }

// out[k] = the q64 v[2k] / v[2k + 1] (the main module's rationals: numerator, denominator > 0,
// in lowest terms), the same value in q128
void qkv_q128_from_q64(const long long* v, std::size_t n, q128* out) {
  for (std::size_t k = 0; k < n; ++k) new (out + k) q128(int128(v[2 * k]), int128(v[2 * k + 1]));
}

// one exact step (flat_steps.hpp's exact_step) over q128: sizes as qkv_wasm.cpp's qkv_step_q64
// (rows, cols, as, bs, n, ac, br, bc); 0, or 1 for a kind that has no exact form
int qkv_step_q128(int kind, const q128* a, const q128* b, const q128* c, const std::size_t* sizes,
                  q128* out) {
  const qkv::flat::step_sizes z{sizes[0], sizes[1], sizes[2], sizes[3],
                                sizes[4], sizes[5], sizes[6], sizes[7]};
  for (std::size_t k = 0; k < z.rows * z.cols; ++k) new (out + k) q128();
  return qkv::flat::exact_step<q128>(static_cast<qkv::flat::kind>(kind), a, b, c, z, out);
}

// the value as the page writes a fraction (page.hpp's exact_text: "n" or "n/d", in full),
// NUL-terminated into buf (at least 84 bytes); returns its length
std::size_t qkv_q128_text(const q128* v, char* buf) {
  std::size_t n = 0;
  if (v->numerator() < 0) buf[n++] = '-';
  n += digits(v->numerator(), buf + n);
  if (v->denominator() != 1) {
    buf[n++] = '/';
    n += digits(v->denominator(), buf + n);
  }
  buf[n] = '\0';
  return n;
}

// the double nearest each of n values (rational::to<double>: correctly rounded), for the page's
// heatmaps and sums
void qkv_q128_to_f64(const q128* v, std::size_t n, double* out) {
  for (std::size_t k = 0; k < n; ++k) out[k] = v[k].to<double>();
}
}
