// consumer.cpp: what a project that uses an installed (or subproject) qkv compiles. Tutorial
// 000's self-attention in double: if this file compiles, the compiler proved the result; run,
// it computes the same from inputs it cannot see at compile time and must get the same bits.
// Built by the three projects beside it (pkg-config, meson subproject, CMake find_package).
#include <cstdio>

#include <qkv/qkv.hpp>  // the umbrella header: every core header must be installed

namespace {

using qkv::matrix;

// tutorial 000: three inputs of size 4, weights (in, out), unscaled scores
constexpr matrix<double, 3, 4> x{{{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}}};
constexpr matrix<double, 4, 3> w_query{{{1, 0, 1}, {1, 0, 0}, {0, 0, 1}, {0, 1, 1}}};
constexpr matrix<double, 4, 3> w_key{{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}, {1, 1, 0}}};
constexpr matrix<double, 4, 3> w_value{{{0, 2, 0}, {0, 3, 0}, {1, 0, 3}, {1, 1, 0}}};
constexpr qkv::attention_options<double> unscaled{qkv::scaling<double>::none(), false};

constexpr auto r = qkv::self_attention(x, w_query, w_key, w_value, qkv::in_out, unscaled);

// queries [1,0,2], [2,2,2], [2,1,3] against keys [0,1,1], [4,4,0], [2,3,1]:
// [0+0+2, 4+0+0, 2+0+2] = [2, 4, 4]; [0+2+2, 8+8+0, 4+6+2] = [4, 16, 12];
// [0+1+3, 8+4+0, 4+3+3] = [4, 12, 10]: small integers, exact in double
static_assert(qkv::check::equal(r.scores, matrix<double, 3, 3>{{{2, 4, 4}, {4, 16, 12}, {4, 12, 10}}}));

// row 0: softmax [2, 4, 4] = [e^-2, 1, 1] / (2 + e^-2) = [1/(1+2e^2), ...]
//   = [0.063378938333037621, 0.46831053083348118, 0.46831053083348118] (40-digit decimal,
//   rounded to double; rows 1 and 2 the same way).
// Tolerance: s_j - max is exact (integers); qkv::exp is within 1 ulp (2u relative,
// u = 2^-53), the 3-term sum adds 2u, the division u: each weight within 5u relative, and a
// weight is < 1, so 5 * 2^-53 = 5.6e-16 < 1e-15 absolute.
static_assert(qkv::check::near(qkv::softmax_rows(r.scores),
                               matrix<double, 3, 3>{
                                   {{0.063378938333037621, 0.46831053083348118, 0.46831053083348118},
                                    {6.0336648545583371e-06, 0.98200786489581682, 0.017986101439328644},
                                    {2.9538722303456454e-04, 0.88053690177496158, 0.11916771100200384}}},
                               1e-15));
// context = weights V, V = [[1,2,3],[2,8,0],[2,6,3]]; row 0 = 0.0634 [1,2,3] + 0.4683 ([2,8,0] +
// [2,6,3]) = [1.9366210616669624, 6.6831053083348122, 1.5950684074995565].
// Tolerance: each weight off by <= 1e-15 times |v| <= 8, three terms: 2.4e-14; the products
// and the 3-term sum round by 3u of a result <= 8: 2.7e-15; together < 3e-14.
static_assert(qkv::check::near(r.context,
                               matrix<double, 3, 3>{
                                   {{1.9366210616669624, 6.6831053083348122, 1.5950684074995565},
                                    {1.9999939663351454, 7.9639915951322156, 0.053976405312549602},
                                    {1.9997046127769655, 7.7598922546577853, 0.35838929467511521}}},
                               3e-14));

}  // namespace

int main() {
  // the same call at run time, on inputs the optimizer cannot fold
  volatile double one = 1;
  const auto xr = qkv::scaled(static_cast<double>(one), x);
  const auto rr = qkv::self_attention(xr, w_query, w_key, w_value, qkv::in_out, unscaled);
  int bad = 0;
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      // exactly equal, not near: the package carries -ffp-contract=off, the FMA policy
      if (rr.weights(i, j) != r.weights(i, j) || rr.context(i, j) != r.context(i, j)) ++bad;
    }
  std::printf("qkv consumer: context row 0 = [%.17g, %.17g, %.17g]\n", rr.context(0, 0), rr.context(0, 1),
              rr.context(0, 2));
  if (bad != 0) {
    std::printf("qkv consumer: %d of 18 run-time results differ from the compile-time ones\n", bad);
    return 1;
  }
  std::printf("qkv consumer: run time == compile time, to the bit\n");
  return 0;
}
