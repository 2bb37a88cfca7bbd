// using_namespace_test.cpp: `using namespace qkv;` leaves a learner their variable names.
// qkv once had a function `weights` (an old name of softmax_rows); with it, a variable named
// `weights` next to `using namespace qkv;` at file scope was ambiguous ("reference to 'weights'
// is ambiguous"; inside a namespace of the learner's own the variable hides it). It is gone: the
// softmax of the scores has one name, softmax_rows, and `weights` is the learner's. If a
// function named `weights` (or `queries`, `keys`, `values`) came back into qkv, this file
// would stop compiling. (`scaled` and `context` are the names of qkv's steps, scaled(f, m) and
// context(w, v); a variable of that name at file scope next to `using namespace qkv;` is
// ambiguous, so this learner calls them `s` and `out`.) It is written at file scope, as a learner's first file is (its
// constexpr variables have internal linkage, so other files of the static proofs do not see them).
#include <qkv/qkv.hpp>

using namespace qkv;

// two tokens, width 2, weights (in, out): the learner's own names for every step
constexpr matrix<double, 2, 2> x{{{1, 0}, {1, 1}}};
constexpr matrix<double, 2, 2> wq{{{1, 1}, {0, 1}}};
constexpr matrix<double, 2, 2> wk{{{1, 0}, {1, 1}}};
constexpr matrix<double, 2, 2> wv{{{0, 2}, {1, 0}}};
constexpr auto queries = project(x, wq, in_out);  // [[1, 1], [1, 2]]
constexpr auto keys = project(x, wk, in_out);     // [[1, 0], [2, 1]]
constexpr auto values = project(x, wv, in_out);   // [[0, 2], [1, 2]]
constexpr auto s = scaled_scores(queries, keys);
constexpr auto weights = softmax_rows(s);
constexpr auto out = context(weights, values);

// row 0: q0 = [1, 1] against k0 = [1, 0] and k1 = [2, 1]: scores [1, 3], scaled by 1/sqrt(2):
// [0.70711, 2.12132]; weights [1, e^1.41421] / (1 + e^1.41421) = [0.19557, 0.80443]
// (e^-sqrt(2) = 0.2431167, 1 / 1.2431167 = 0.8044297). Tolerance 1e-15: about ten double
// roundings (sqrt, two divisions, two subtractions, two exps, a sum, two quotients), each within
// half an ulp of a number below 3 (2^-52 * 3 / 2 = 3.3e-16), damped by the softmax's slope (at
// most 1/4 per unit of score): below 1e-15 with room.
static_assert(proven<check::near(weights(0, 0), 0.19557031749304307, 1e-15)>);
static_assert(proven<check::near(weights(0, 1), 0.8044296825069569, 1e-15)>);
// the call computes the same weights, bit for bit, under the learner's names
constexpr auto all = self_attention(x, wq, wk, wv, in_out);
static_assert(proven<check::equal(all.weights, weights)>);
static_assert(proven<check::equal(all.context, out)>);
