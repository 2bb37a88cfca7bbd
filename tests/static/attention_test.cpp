// static proofs of core/attention.hpp and core/multihead.hpp: if this file compiles, they hold.
#include <limits>

#include <qkv/core/attention.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/multihead.hpp>

namespace {

using qkv::matrix;
namespace check = qkv::check;

constexpr matrix<double, 3, 4> x{{{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}}};
constexpr matrix<double, 4, 3> w_in_out{{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}, {1, 1, 0}}};
constexpr auto w_out_in = qkv::transposed(w_in_out);  // (3, 4), nn.Linear's layout

// the three layouts give the same projection, bit for bit: the same sums in the same order
static_assert(qkv::project(x, w_in_out, qkv::in_out) == qkv::project(x, w_out_in, qkv::out_in));
static_assert(qkv::project(qkv::transposed(x), w_out_in, qkv::columns) == qkv::project(x, w_out_in));
// with a bias: [0, 1, 1] + [1, 1, 1] = [1, 2, 2]
static_assert(qkv::row(qkv::project(x, w_out_in, matrix<double, 1, 3>{{{1, 1, 1}}}), 0) ==
              matrix<double, 1, 3>{{{1, 2, 2}}});

// scaling: scores / sqrt(4) = scores / 2; none leaves them; multiply_by(0.5) halves them
constexpr matrix<double, 2, 2> sc{{{2, 4}, {6, 8}}};
static_assert(qkv::scale(sc, qkv::scaling<double>::divide_by_sqrt_dk(), 4) == matrix<double, 2, 2>{{{1, 2}, {3, 4}}});
static_assert(qkv::scale(sc, qkv::scaling<double>::none(), 4) == sc);
static_assert(qkv::scale(sc, qkv::scaling<double>::multiply_by(0.5), 99) == matrix<double, 2, 2>{{{1, 2}, {3, 4}}});
static_assert(qkv::scale(sc, qkv::scaling<double>::divide_by(2), 99) == matrix<double, 2, 2>{{{1, 2}, {3, 4}}});

// a causal mask: query 0 sees key 0 only, so its weight on key 0 is 1 and its context is value 0
constexpr auto causal = qkv::self_attention(x, w_out_in, w_out_in, w_out_in, qkv::out_in,
                                            {qkv::scaling<double>::none(), true});
static_assert(causal.weights(0, 0) == 1 && causal.weights(0, 1) == 0 && causal.weights(0, 2) == 0);
static_assert(qkv::row(causal.context, 0) == qkv::row(causal.values, 0));
static_assert(causal.scaled_scores(0, 2) == -std::numeric_limits<double>::infinity());
// the raw score is kept unmasked: q0 = [0, 1, 1], k2 = [2, 3, 1], q0 . k2 = 0 + 3 + 1 = 4
static_assert(causal.scores(0, 2) == 4);

// a boolean mask with every key of a row disallowed gives weights 0 and context 0
constexpr matrix<bool, 2, 2> allowed{{{true, false}, {false, false}}};
static_assert(qkv::softmax_rows(qkv::masked(sc, allowed)) == matrix<double, 2, 2>{{{1, 0}, {0, 0}}});

// cross-attention: 3 queries over 2 keys gives (3, 2) weights and (3, d_v) context
constexpr matrix<double, 2, 4> c{{{1, 1, 0, 0}, {0, 0, 1, 1}}};
constexpr auto cross = qkv::cross_attention(x, c, w_out_in, w_out_in, w_out_in, qkv::out_in);
static_assert(cross.weights.rows() == 3 && cross.weights.cols() == 2 && cross.context.cols() == 3);
static_assert(qkv::proven<check::near(qkv::row_sums(cross.weights), matrix<double, 3, 1>{{{1}, {1}, {1}}}, 4e-16)>);

// weighted values summed over their first index are the context, to the bit
constexpr auto self = qkv::self_attention(x, w_out_in, w_out_in, w_out_in, qkv::out_in);
static_assert(qkv::sum(qkv::weighted_values(self.weights, self.values)) == self.context);

// multi-head: with 1 head it is plain attention; with heads of width 2, the scale is 1/sqrt(2)
static_assert(qkv::multihead_self_attention<1>(x, w_out_in, w_out_in, w_out_in, qkv::out_in).concat == self.context);
constexpr matrix<double, 4, 4> w4 = qkv::identity<double, 4>();
constexpr auto two = qkv::multihead_self_attention<2>(x, w4, w4, w4, qkv::out_in);
// head 1 sees columns 2 and 3 of x: q = k = v = [[1, 0], [0, 2], [1, 1]]; score(1, 1) = 0 + 4 = 4
static_assert(two.scores(1, 1, 1) == 4 && two.scaled_scores(1, 1, 1) == 4 / qkv::sqrt(2.0));
static_assert(qkv::block<3, 2>(two.concat, 0, 2) == two.context[1]);
static_assert(qkv::output_projection(two, w4) == two.concat);

// what must not compile: weights whose input width is not the tokens' width, heads that do not
// divide the width
template <class X, class W>
concept projectable = requires(X x, W w) { qkv::project(x, w); };
static_assert(projectable<matrix<float, 3, 4>, matrix<float, 5, 4>>);
static_assert(!projectable<matrix<float, 3, 4>, matrix<float, 4, 5>>);
template <std::size_t H, class M>
concept splittable = requires(M m) { qkv::split_heads<H>(m); };
static_assert(splittable<3, matrix<float, 2, 6>> && !splittable<4, matrix<float, 2, 6>>);
// square weights need a layout (x Wᵀ and x W both fit); a non-square W (d_out, d_in) reads one way
static_assert(!projectable<matrix<float, 3, 4>, matrix<float, 4, 4>>);
static_assert(qkv::project(x, w_out_in, qkv::out_in) == self.queries);

// scaled_scores(q, k): scores / sqrt(d_k) with d_k from q's width, the same bits as the long way
constexpr matrix<float, 2, 3> q3{{{1, 0.5f, 2}, {0, 1, 3}}};
constexpr matrix<float, 4, 3> k3{{{1, 0, 1}, {2, 1, 0}, {0.25f, 1, 1}, {3, 3, 3}}};
static_assert(qkv::scaled_scores(q3, k3) ==
              qkv::scale(qkv::scores(q3, k3), qkv::scaling<float>::divide_by_sqrt_dk(), 3));
// q3 row 0 . k3 row 1 = 1*2 + 0.5*1 + 2*0 = 2.5; / sqrt(3) = 1.4433756729740644 (float: 1.44337571)
static_assert(qkv::proven<check::near(qkv::scaled_scores(q3, k3)(0, 1), 1.4433756729740644, 1.2e-7)>);
// a number given as the scale is a multiplier, as in the runtime's attention_options
static_assert(qkv::scale(qkv::scores(q3, k3), qkv::attention_options<float>{.scale = 0.5f}.scale, 3)(0, 1) == 1.25f);

}  // namespace
