// proof.cpp: a learner's proof with nothing but the single header (scripts/amalgamate.py), as
// pasted into Compiler Explorer or a gist: tutorial 000's keys, scores and softmax, checked by
// the compiler. tests/single_include/check_single_header.py compiles and runs it with the header
// alone in a fresh folder, with g++ and clang++-16.
#include <cstdio>

#include "qkv.hpp"

constexpr qkv::matrix<double, 3, 4> x{{{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}}};
constexpr qkv::matrix<double, 4, 3> w_query{{{1, 0, 1}, {1, 0, 0}, {0, 0, 1}, {0, 1, 1}}};
constexpr qkv::matrix<double, 4, 3> w_key{{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}, {1, 1, 0}}};

// x @ w_key: [0, 2, 0, 2] x w_key = [0+2+0+2, 0+2+0+2, 0+0+0+0] = [4, 4, 0]
constexpr auto keys = qkv::project(x, w_key, qkv::in_out);
static_assert(keys(1, 0) == 4 && keys(1, 1) == 4 && keys(1, 2) == 0);

// query 0 = [1, 0, 1, 0] x w_query = [1+0, 0+0, 1+1] = [1, 0, 2]; against keys [0, 1, 1],
// [4, 4, 0], [2, 3, 1]: [0+0+2, 4+0+0, 2+0+2] = [2, 4, 4] (small integers: exact)
constexpr auto queries = qkv::project(x, w_query, qkv::in_out);
constexpr auto scores = qkv::matrix_product_transposed(queries, keys);  // Q Kᵀ
static_assert(scores(0, 0) == 2 && scores(0, 1) == 4 && scores(0, 2) == 4);

// softmax [2, 4, 4] = [e^-2, 1, 1] / (2 + e^-2): 1 / (1 + 2 e^2) = 0.063378938333037621...
// (40 digits, rounded to double). qkv::exp is within 1 ulp (2u relative, u = 2^-53), the
// 3-term sum adds 2u and the division u: within 5u relative of a weight < 1, 5 * 2^-53 =
// 5.6e-16 < 1e-15
constexpr auto weights = qkv::softmax_rows(scores);
static_assert(qkv::proven<qkv::check::near(weights(0, 0), 0.063378938333037621, 1e-15)>);
static_assert(qkv::proven<qkv::check::near(weights(0, 1), 0.46831053083348118, 1e-15)>);

int main() {
  std::printf("qkv single header: keys(1) = [%g, %g, %g], weights(0, 0) = %.17g, proven at compile time\n",
              keys(1, 0), keys(1, 1), keys(1, 2), weights(0, 0));
}
