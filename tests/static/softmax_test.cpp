// static proofs of core/softmax.hpp: if this file compiles, they hold.
#include <limits>

#include <qkv/core/check.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/softmax.hpp>

namespace {

using qkv::matrix;
namespace check = qkv::check;
constexpr double inf = std::numeric_limits<double>::infinity();

// softmax of equal logits is uniform: exp(0) / (3 exp(0)) = 1/3 for each
static_assert(qkv::proven<check::near(qkv::softmax_rows(matrix<double, 1, 3>{{{5, 5, 5}}}),
                                      matrix<double, 1, 3>{{{1.0 / 3, 1.0 / 3, 1.0 / 3}}}, 1e-16)>);

// softmax([0, ln 3]) = [1, 3] / 4 = [0.25, 0.75]
static_assert(qkv::proven<check::near(qkv::softmax_rows(matrix<double, 1, 2>{{{0, 1.0986122886681098}}}),
                                      matrix<double, 1, 2>{{{0.25, 0.75}}}, 1e-15)>);

// shifting every score by the same amount changes nothing: softmax(x + c) = softmax(x)
constexpr matrix<double, 2, 3> s{{{1, 2, 3}, {-4, 0, 4}}};
static_assert(qkv::approx_equal(qkv::softmax_rows(s), qkv::softmax_rows(s + qkv::filled<double, 2, 3>(100)), 1e-15));

// rows, columns, all: each row / each column / everything sums to 1
static_assert(qkv::proven<check::near(qkv::row_sums(qkv::softmax_rows(s)), matrix<double, 2, 1>{{{1}, {1}}}, 4e-16)>);
static_assert(qkv::proven<check::near(qkv::column_sums(qkv::softmax_columns(s)), matrix<double, 1, 3>{{{1, 1, 1}}}, 4e-16)>);
static_assert(qkv::proven<check::near(qkv::sum(qkv::softmax_all(s)), 1.0, 1e-15)>);
// softmax over columns is softmax over the rows of the transpose
static_assert(qkv::softmax_columns(s) == qkv::transposed(qkv::softmax_rows(qkv::transposed(s))));

// the stable softmax does not overflow: scores of 1000 (e^1000 overflows double) give [0.5, 0.5]
constexpr matrix<double, 1, 2> huge{{{1000, 1000}}};
static_assert(qkv::softmax_rows(huge) == matrix<double, 1, 2>{{{0.5, 0.5}}});
// ... where the naive formula's sum is already infinite (its weights would be inf / inf = NaN,
// which at compile time does not even evaluate)
static_assert(qkv::naive_exp_row_sums(huge)(0, 0) == inf);
// and for float at 89: e^89 = 4.5e38 > FLT_MAX = 3.4e38
static_assert(qkv::naive_exp_row_sums(matrix<float, 1, 1>{{{89.0f}}})(0, 0) == std::numeric_limits<float>::infinity());
// for small scores the naive and stable softmax agree to rounding
static_assert(qkv::approx_equal(qkv::naive_softmax_rows(s), qkv::softmax_rows(s), 1e-15));

// masks: a -inf score gets weight exactly 0, and the rest renormalise: softmax([0, -inf, 0]) = [.5, 0, .5]
static_assert(qkv::softmax_rows(matrix<double, 1, 3>{{{0, -inf, 0}}}) == matrix<double, 1, 3>{{{0.5, 0, 0.5}}});
// a row with every key masked gets weights 0, not NaN
static_assert(qkv::softmax_rows(matrix<double, 1, 2>{{{-inf, -inf}}}) == matrix<double, 1, 2>{});

// NaN in, NaN out: the whole row
constexpr auto with_nan = qkv::softmax_rows(matrix<double, 1, 3>{{{0, std::numeric_limits<double>::quiet_NaN(), 1}}});
static_assert(with_nan(0, 0) != with_nan(0, 0) && with_nan(0, 2) != with_nan(0, 2));

}  // namespace
