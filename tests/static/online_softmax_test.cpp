// static proofs of core/online_softmax.hpp: if this file compiles, they hold.
#include <limits>

#include <qkv/core/check.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/online_softmax.hpp>
#include <qkv/core/softmax.hpp>

namespace {

using qkv::matrix;
namespace check = qkv::check;
constexpr double inf = std::numeric_limits<double>::infinity();

// scores [0, ln 3] over values [[1], [5]] in blocks of 1:
//   block 0: m = 0, p = e^0 = 1, rescale 0 (nothing kept), l = 1, o = 1 · 1 = 1
//   block 1: ln 3 > 0, a new maximum: rescale = e^(0 - ln 3) = 1/3, p = e^0 = 1,
//            l = 1 · 1/3 + 1 = 4/3, o = 1 · 1/3 + 1 · 5 = 16/3; output o / l = 4
// = softmax([0, ln 3]) · [1, 5] = 0.25 · 1 + 0.75 · 5 = 4
constexpr double ln3 = 1.0986122886681098;
constexpr matrix<double, 1, 2> s{{{0, ln3}}};
constexpr matrix<double, 2, 1> v{{{1}, {5}}};
constexpr auto t = qkv::online_softmax_blocks<1>(s, v);
static_assert(t.after[0].m == 0 && t.after[0].l == 1 && t.after[0].rescale == 0 && t.after[0].o(0, 0) == 1);
static_assert(t.after[1].m == ln3 && check::near(t.after[1].rescale, 1.0 / 3, 1e-16));
static_assert(qkv::proven<check::near(t.after[1].l, 4.0 / 3, 4e-16) && check::near(t.after[1].o(0, 0), 16.0 / 3, 2e-15)>);
static_assert(qkv::proven<check::near(t.output(0, 0), 4.0, 4e-15)>);
// in one block (B = 2) the maximum is known at once: no rescale after the first block
static_assert(qkv::proven<check::near(qkv::online_softmax_blocks<2>(s, v).output(0, 0), 4.0, 4e-15)>);

// a larger block size than keys is one block; the blocks count rounds up
static_assert(qkv::online_blocks<6, 2> == 3 && qkv::online_blocks<7, 2> == 4 && qkv::online_blocks<1, 4> == 1);

// every score equal: every rescale is 1 and the output the mean of the values:
// (1 + 2 + 3 + 4 + 5) / 5 = 3, over blocks of 2, 2, 1
constexpr matrix<double, 1, 5> flat{{{7, 7, 7, 7, 7}}};
constexpr matrix<double, 5, 1> ramp{{{1}, {2}, {3}, {4}, {5}}};
constexpr auto tf = qkv::online_softmax_blocks<2>(flat, ramp);
static_assert(tf.after[1].rescale == 1 && tf.after[2].rescale == 1 && tf.after[2].l == 5 && tf.output(0, 0) == 3);

// the stable part: scores of 1000 (e^1000 overflows double) give [0.5, 0.5]: the average 3 of 1, 5
static_assert(qkv::online_softmax_blocks<1>(matrix<double, 1, 2>{{{1000, 1000}}}, v).output(0, 0) == 3);

// masked keys (-inf) add nothing: [-inf, 0, -inf] over [9, 2, 9] gives 2, whichever the blocks
constexpr matrix<double, 1, 3> masked{{{-inf, 0, -inf}}};
constexpr matrix<double, 3, 1> v3{{{9}, {2}, {9}}};
static_assert(qkv::online_softmax_blocks<1>(masked, v3).output(0, 0) == 2);
static_assert(qkv::online_softmax_blocks<2>(masked, v3).output(0, 0) == 2);
// a first block that is all masked keeps nothing (m = -inf, l = 0), then the next block starts
static_assert(qkv::online_softmax_blocks<1>(masked, v3).after[0].l == 0 &&
              qkv::online_softmax_blocks<1>(masked, v3).after[0].m == -inf);
// every key masked: l stays 0 and the output is 0 (not 0/0), as softmax_rows gives weights 0
constexpr matrix<double, 1, 3> none{{{-inf, -inf, -inf}}};
static_assert(qkv::online_softmax_blocks<2>(none, v3).output(0, 0) == 0 &&
              qkv::online_softmax_blocks<2>(none, v3).after[1].l == 0);

// NaN in, NaN out: a NaN score makes the state and the output NaN
constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr auto tn = qkv::online_softmax_blocks<1>(matrix<double, 1, 3>{{{1, nan, 2}}}, v3);
static_assert(tn.output(0, 0) != tn.output(0, 0) && tn.after[2].m != tn.after[2].m);

// online_attention, every row, float: within the derived bounds of the materialised softmax · v.
// Scores with range 6 over 5 keys in blocks of 2 (3 blocks): K = 5 + 4 · 3 + 3 = 20 roundings,
// eta = gamma_20 + 6u = 1.2e-6 + 3.6e-7; bound = 2 eta max|v| + u max|v| = 1.6e-5 for max|v| = 5
constexpr matrix<float, 2, 5> sf{{{0.5f, -2.0f, 3.0f, 1.0f, -3.0f}, {4.0f, 2.0f, -1.0f, 0.25f, -2.0f}}};
constexpr matrix<float, 5, 2> vf{{{1, -5}, {2, 4}, {-3, 3}, {4, -2}, {5, 1}}};
constexpr auto online = qkv::online_attention<2>(sf, vf);
constexpr auto materialised = qkv::matrix_product(qkv::softmax_rows(sf), vf);
static_assert(qkv::online_softmax_error<float>(5, 2, 6.0, 5.0) < 1.6e-5);
static_assert(qkv::online_softmax_error<float>(5, 2, 6.0, 5.0) > 1.5e-5);
constexpr double both = qkv::online_softmax_error<float>(5, 2, 6.0, 5.0) + qkv::materialised_softmax_error<float>(5, 6.0, 5.0);
static_assert(qkv::proven<check::within(online, materialised, qkv::filled<double, 2, 2>(both))>);
// ... and of the exact value (computed in double: its own error is within the double bound, 1e-15)
constexpr auto exact = qkv::matrix_product(qkv::softmax_rows(qkv::matrix_cast<double>(sf)), qkv::matrix_cast<double>(vf));
static_assert(qkv::proven<check::within(online, exact,
                            qkv::filled<double, 2, 2>(qkv::online_softmax_error<float>(5, 2, 6.0, 5.0) +
                                                      qkv::materialised_softmax_error<double>(5, 6.0, 5.0)))>);
// the trace's output is online_attention's row
static_assert(qkv::online_softmax_blocks<2>(qkv::row(sf, 1), vf).output == qkv::row(online, 1));

// the roundings counted: S + (exp_units + 2) nb + exp_units + 1 = 6 + 4 · 3 + 3 = 21 for S = 6, B = 2
static_assert(qkv::online_softmax_error_units(6, 2, 2) == 21);

}  // namespace
