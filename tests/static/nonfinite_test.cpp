// static proofs of the NaN and infinity policy in the core (docs/numerics.md, "NaN and infinity
// in attention"): if this file compiles, they hold, on g++ and clang++-16. Only what both
// compilers evaluate is here: clang refuses arithmetic that yields or reads a NaN, g++ a float
// overflow, so NaN and inf enter as given scores or values, never through a product.
// tests/runtime/nonfinite_test.cpp runs the same functions on NaN tokens at run time.
#include <cstddef>
#include <limits>

#include <qkv/core/attention.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/softmax.hpp>

namespace {

using qkv::matrix;
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

template <std::size_t R, std::size_t C>
constexpr bool row_is_nan(const matrix<double, R, C>& m, std::size_t i) {
  for (std::size_t j = 0; j < C; ++j)
    if (m(i, j) == m(i, j)) return false;
  return true;
}

// a NaN score anywhere in a row makes the whole row NaN; the other row is untouched
constexpr matrix<double, 2, 3> with_nan{{{1, nan, 2}, {0, 0, 0}}};
static_assert(row_is_nan(qkv::softmax_rows(with_nan), 0));
static_assert(qkv::softmax_rows(with_nan)(1, 0) == qkv::softmax_rows(with_nan)(1, 2));
constexpr matrix<double, 1, 3> nan_first{{{nan, 1, 2}}};
static_assert(row_is_nan(qkv::softmax_rows(nan_first), 0));

// a +inf score: inf - inf has no value, so the row is NaN (as PyTorch's softmax gives)
static_assert(row_is_nan(qkv::softmax_rows(matrix<double, 1, 3>{{{1, inf, 2}}}), 0));

// a -inf score is masked-like: weight exactly 0, the others as if it were absent:
// softmax([-inf, 0, 0]) = [0, 1/2, 1/2]
static_assert(qkv::softmax_rows(matrix<double, 1, 3>{{{-inf, 0, 0}}}) == matrix<double, 1, 3>{{{0, 0.5, 0.5}}});
// every score -inf (a fully masked row): weights 0, not 0/0
static_assert(qkv::softmax_rows(matrix<double, 1, 2>{{{-inf, -inf}}}) == matrix<double, 1, 2>{{{0, 0}}});

// attention, causal, 3 tokens; q = k = (1, 0), (0, 1), (1, 1); the future value (token 2) is NaN
// for queries 0 and 1, which cannot see it: their context is the clean run's, bit for bit
// (context() would give 0 * NaN = NaN there); query 2 sees it: NaN in that column only
constexpr matrix<double, 3, 2> qk{{{1, 0}, {0, 1}, {1, 1}}};
constexpr matrix<double, 3, 2> v_clean{{{1, 2}, {3, 4}, {5, 6}}};
constexpr matrix<double, 3, 2> v_bad{{{1, 2}, {3, 4}, {nan, 6}}};
constexpr qkv::attention_options<double> causal{qkv::scaling<double>::none(), true};
constexpr auto clean = qkv::attend_projected(qk, qk, v_clean, causal);
constexpr auto bad = qkv::attend_projected(qk, qk, v_bad, causal);
static_assert(bad.context(0, 0) == clean.context(0, 0) && bad.context(0, 1) == clean.context(0, 1));
static_assert(bad.context(1, 0) == clean.context(1, 0) && bad.context(1, 1) == clean.context(1, 1));
static_assert(bad.context(2, 0) != bad.context(2, 0));    // NaN
static_assert(bad.context(2, 1) == clean.context(2, 1));  // the other column is untouched
// query 0 sees only key 0: its context is value 0 exactly (weight 1)
static_assert(clean.context(0, 0) == 1 && clean.context(0, 1) == 2);

// an infinite value a query attends to: that element is the infinity (weights are positive);
// +inf meeting -inf gives NaN
constexpr matrix<double, 3, 2> v_inf{{{inf, 2}, {-inf, 4}, {5, 6}}};
constexpr auto with_inf = qkv::attend_projected(qk, qk, v_inf, causal);
static_assert(with_inf.context(0, 0) == inf);                         // sees key 0 only
static_assert(with_inf.context(1, 0) != with_inf.context(1, 0));      // +inf and -inf: NaN
static_assert(with_inf.context(1, 1) == clean.context(1, 1));

// a NaN score among the visible keys (given as a score: a NaN product is refused by clang):
// the weights row is NaN, and attended_context makes the context row NaN without reading values
constexpr matrix<double, 2, 2> scores{{{0, nan}, {0, -inf}}};
constexpr auto w = qkv::softmax_rows(scores);
constexpr auto ctx = qkv::attended_context(scores, w, matrix<double, 2, 1>{{{1}, {nan}}});
static_assert(ctx(0, 0) != ctx(0, 0));
static_assert(ctx(1, 0) == 1);  // key 1 is -inf for query 1: skipped, its NaN value unread

}  // namespace
