// Failed proofs print their numbers: one case per -DQKV_CASE=n, each a proof that does not
// hold, covering equal, near and within; scalar, matrix and stack; float, double and the exact
// rationals. tests/meson.build lists, per case, the text each compiler must print: the position,
// the actual value, the expected value and the tolerance or bound (core/check.hpp says how).
#include <qkv/core/check.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/exact/rational.hpp>

using qkv::matrix;
using qkv::proven;
using qkv::stack;
namespace check = qkv::check;
using q = qkv::exact::rational<long long>;

// two tokens, x = [[1, 2], [3, 4]] (one per row); their scores x xᵀ:
//   (0,0) 1*1 + 2*2 = 5    (0,1) 1*3 + 2*4 = 11
//   (1,0) 3*1 + 4*2 = 11   (1,1) 3*3 + 4*4 = 25
constexpr matrix<float, 2, 2> x{{{1, 2}, {3, 4}}};
constexpr auto s = qkv::matrix_product_transposed(x, x);

#if QKV_CASE == 1  // equal, scalar, float: 1/3 in float is 0.333333343, six 3s are 0.333332986
static_assert(proven<check::equal(1.0f / 3.0f, 0.333333f)>);
#elif QKV_CASE == 2  // equal, matrix, float: (1, 1) is 25, not 26
static_assert(proven<check::equal(s, matrix<float, 2, 2>{{{5, 11}, {11, 26}}})>);
#elif QKV_CASE == 3  // equal, stack, rational: depth 1, row 0, col 1 is 1/3, not 0.333
constexpr stack<q, 2, 1, 2> thirds{{matrix<q, 1, 2>{{{q(1, 2), q(1, 2)}}},
                                    matrix<q, 1, 2>{{{q(1, 3), q(1, 3)}}}}};
static_assert(proven<check::equal(thirds, stack<q, 2, 1, 2>{{matrix<q, 1, 2>{{{q(1, 2), q(1, 2)}}},
                                                            matrix<q, 1, 2>{{{q(1, 3), q::decimal("0.333")}}}}})>);
#elif QKV_CASE == 4  // near, scalar, float with double: 0.107f is 0.10700000077486038...,
                     // 7.7e-10 away from 0.107, more than 1e-10
static_assert(proven<check::near(0.107f, 0.107, 1e-10)>);
#elif QKV_CASE == 5  // near, matrix, double: 0.1 + 0.2 is 0.30000000000000004
constexpr matrix<double, 1, 2> sums{{{0.1 + 0.2, 0.1 + 0.3}}};
static_assert(proven<check::near(sums, matrix<double, 1, 2>{{{0.3, 0.4}}}, 1e-17)>);
#elif QKV_CASE == 6  // near, stack, rational: depth 0, row 0, col 1: 433/16 is 7/16 from 55/2
constexpr stack<q, 1, 1, 2> st{{matrix<q, 1, 2>{{{q(1), q(433, 16)}}}}};
static_assert(proven<check::near(st, stack<q, 1, 1, 2>{{matrix<q, 1, 2>{{{q(1), q(55, 2)}}}}}, q(1, 4))>);
#elif QKV_CASE == 7  // within, scalar, rational: |433/16 - 55/2| = 7/16 > 1/100
static_assert(proven<check::within(q(433, 16), q(55, 2), q(1, 100))>);
#elif QKV_CASE == 8  // within, matrix, float against double bounds: row 1, col 1 is 25 not 25.5
static_assert(proven<check::within(s, matrix<double, 2, 2>{{{5, 11}, {11, 25.5}}},
                                   matrix<double, 2, 2>{{{0, 0}, {0, 0.25}}})>);
#elif QKV_CASE == 9  // within, stack, double: depth 1, row 0, col 0
constexpr stack<double, 2, 1, 1> d{{matrix<double, 1, 1>{{{1.0}}}, matrix<double, 1, 1>{{{1.0 / 3}}}}};
static_assert(proven<check::within(d, stack<double, 2, 1, 1>{{matrix<double, 1, 1>{{{1.0}}},
                                                             matrix<double, 1, 1>{{{0.3333}}}}},
                                   stack<double, 2, 1, 1>{{matrix<double, 1, 1>{{{0.0}}},
                                                           matrix<double, 1, 1>{{{1e-5}}}}})>);
#endif
