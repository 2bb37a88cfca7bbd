// first_proof_test.cpp: the two-token example of docs/proofs.md, "Write your own proof".
// The page quotes this file; building the static proofs builds it, so the page's code compiles.
#include <qkv/core/attention.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/softmax.hpp>

namespace first_proof {

using qkv::matrix;
using qkv::proven;
namespace check = qkv::check;

// two tokens of width 2, one per row
constexpr matrix<float, 2, 2> x{{{1, 0},
                                 {1, 1}}};
// weights in the (in, out) layout: Q = x Wq
constexpr matrix<float, 2, 2> wq{{{1, 1}, {0, 1}}};
constexpr matrix<float, 2, 2> wk{{{1, 0}, {1, 1}}};
constexpr matrix<float, 2, 2> wv{{{0, 2}, {1, 0}}};

constexpr auto q = qkv::project(x, wq, qkv::in_out);  // (2, 2)
constexpr auto k = qkv::project(x, wk, qkv::in_out);
constexpr auto v = qkv::project(x, wv, qkv::in_out);
// [1, 0] Wq = [1, 1]      [1, 1] Wq = [1 + 0, 1 + 1] = [1, 2]
static_assert(proven<check::equal(q, matrix<float, 2, 2>{{{1, 1}, {1, 2}}})>);
// [1, 0] Wk = [1, 0]      [1, 1] Wk = [1 + 1, 0 + 1] = [2, 1]
static_assert(proven<check::equal(k, matrix<float, 2, 2>{{{1, 0}, {2, 1}}})>);
// [1, 0] Wv = [0, 2]      [1, 1] Wv = [0 + 1, 2 + 0] = [1, 2]
static_assert(proven<check::equal(v, matrix<float, 2, 2>{{{0, 2}, {1, 2}}})>);

// scores q kᵀ: [1, 1].[1, 0] = 1   [1, 1].[2, 1] = 3   [1, 2].[1, 0] = 1   [1, 2].[2, 1] = 4
constexpr auto s = qkv::scores(q, k);
static_assert(proven<check::equal(s, matrix<float, 2, 2>{{{1, 3}, {1, 4}}})>);

// Tolerances: a float carries 24 bits, about 7 decimal digits; each step below rounds a few
// times values no larger than 3, each rounding off by at most half an ulp (1.2e-7 at 2 to 4),
// so 1e-6 holds them with room and still catches a wrong digit in the 6th place.
// scaled by 1/sqrt(d_k), d_k = 2 (q's width): 1/sqrt(2) = 0.70710678, 3/sqrt(2) = 2.12132034
constexpr auto scaled = qkv::scaled_scores(q, k);
static_assert(proven<check::near(scaled(0, 1), 2.1213203435596424, 1e-6)>);

// softmax of each row. Row 1: [0.7071, 2.8284], a difference of 3/sqrt(2) = 2.1213, so
// weight(1, 0) = 1 / (1 + e^2.1213) = 1 / (1 + 8.3421) = 0.10704180 and weight(1, 1) = 0.89295820
constexpr auto weights = qkv::softmax_rows(scaled);
static_assert(proven<check::near(weights(1, 0), 0.10704180146517044, 1e-6) &&
                     check::near(weights(1, 1), 0.8929581985348296, 1e-6)>);

// context = weights v: row 1 = 0.1070 [0, 2] + 0.8930 [1, 2] = [0.8930, 2]
constexpr auto context = qkv::context(weights, v);
static_assert(proven<check::near(context, matrix<double, 2, 2>{{{0.8044296825069569, 2}, {0.8929581985348296, 2}}}, 1e-6)>);

}  // namespace first_proof
