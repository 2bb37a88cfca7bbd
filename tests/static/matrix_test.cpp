// static proofs of core/matrix.hpp: if this file compiles, they hold.
#include <qkv/core/check.hpp>
#include <qkv/core/matrix.hpp>

namespace {

using qkv::matrix;
namespace check = qkv::check;

// tutorial 000's inputs and key weights
constexpr matrix<double, 3, 4> x{{{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}}};
constexpr matrix<double, 4, 3> w_key{{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}, {1, 1, 0}}};

// --- shape and access ---
static_assert(x.rows() == 3 && x.cols() == 4 && x.size() == 12);
static_assert(x(1, 1) == 2 && x(2, 3) == 1 && x(0, 1) == 0);
static_assert(x.v[4 + 1] == 2);  // row-major: (1, 1) is element 1 * 4 + 1
static_assert(matrix<int, 2, 2>{} == matrix<int, 2, 2>{{{0, 0}, {0, 0}}});  // zero-initialised

// --- transposed: (3, 4) -> (4, 3), element (i, j) moves to (j, i) ---
constexpr auto xt = qkv::transposed(x);
static_assert(xt.rows() == 4 && xt.cols() == 3);
static_assert(xt(3, 1) == x(1, 3) && xt(0, 2) == x(2, 0));
static_assert(qkv::transposed(xt) == x);

// --- matrix_product, hand arithmetic (tutorial 000, "Obtaining the keys"):
// [1,0,1,0] . columns of w_key = [0+0+0+0, 0+0+1+0, 1+0+0+0] = [0, 1, 1]
// [0,2,0,2] . ...              = [0+2+0+2, 0+2+0+2, 0+0+0+0] = [4, 4, 0]
// [1,1,1,1] . ...              = [0+1+0+1, 0+1+1+1, 1+0+0+0] = [2, 3, 1]
static_assert(qkv::proven<check::equal(qkv::matrix_product(x, w_key),
                                       matrix<double, 3, 3>{{{0, 1, 1}, {4, 4, 0}, {2, 3, 1}}})>);
// a bᵀ without the transpose equals the product with it
static_assert(qkv::matrix_product_transposed(x, x) == qkv::matrix_product(x, qkv::transposed(x)));
// (1, 4) . (4, 1): 1*1 + 0*0 + 1*1 + 0*0 = 2
static_assert(qkv::dot(qkv::row(x, 0), qkv::row(x, 0)) == 2);
static_assert(qkv::matrix_product(qkv::identity<double, 3>(), x) == x);

// --- element-wise ---
// row 1 of x + x = [0, 4, 0, 4]; x - x = 0; 2 x = x + x
static_assert(qkv::row(x + x, 1) == matrix<double, 1, 4>{{{0, 4, 0, 4}}});
static_assert(x - x == matrix<double, 3, 4>{});
static_assert(2.0 * x == x + x && (x + x) / 2.0 == x);
// hadamard: row 2 of x∘x = [1, 1, 1, 1]; map squares every element: row 1 -> [0, 4, 0, 4]
static_assert(qkv::hadamard(x, x) == qkv::map(x, [](double e) { return e * e; }));
static_assert(qkv::row(qkv::hadamard(x, x), 1) == matrix<double, 1, 4>{{{0, 4, 0, 4}}});
static_assert(-x + x == matrix<double, 3, 4>{});
// bias: [0, 1, 1] + [10, 20, 30] = [10, 21, 31]
static_assert(qkv::row(qkv::add_row_vector(qkv::matrix_product(x, w_key),
                                           matrix<double, 1, 3>{{{10, 20, 30}}}), 0) ==
              matrix<double, 1, 3>{{{10, 21, 31}}});

// --- rows, columns, blocks, concatenation ---
static_assert(qkv::column(x, 1) == matrix<double, 3, 1>{{{0}, {2}, {1}}});
static_assert(qkv::block<2, 2>(x, 1, 1) == matrix<double, 2, 2>{{{2, 0}, {1, 1}}});
static_assert(qkv::hconcat(qkv::block<3, 2>(x, 0, 0), qkv::block<3, 2>(x, 0, 2)) == x);
static_assert(qkv::vconcat(qkv::block<1, 4>(x, 0, 0), qkv::block<2, 4>(x, 1, 0)) == x);
static_assert(qkv::row_vector<int, 3>{{{1, 2, 3}}}[2] == 3);

// --- sums: column sums of x = [1+0+1, 0+2+1, 1+0+1, 0+2+1] = [2, 3, 2, 3]; row sums = [2, 4, 4]
static_assert(qkv::column_sums(x) == matrix<double, 1, 4>{{{2, 3, 2, 3}}});
static_assert(qkv::row_sums(x) == matrix<double, 3, 1>{{{2}, {4}, {4}}});
static_assert(qkv::sum(x) == 10);

// --- stacks: (2, 3, 4); sum over the first axis of [x, x] is 2x; hconcat gives (3, 8)
constexpr qkv::stack<double, 2, 3, 4> xx{{x, x}};
static_assert(xx(1, 2, 3) == 1 && xx.depth() == 2);
static_assert(qkv::sum(xx) == 2.0 * x);
static_assert(qkv::hconcat(xx) == qkv::hconcat(x, x));

// --- approximate comparison: 0.1 + 0.2 is not 0.3 in double, but within 1e-15 of it
constexpr matrix<double, 1, 1> point3{{{0.1 + 0.2}}};
static_assert(!(point3 == matrix<double, 1, 1>{{{0.3}}}));
static_assert(qkv::approx_equal(point3, matrix<double, 1, 1>{{{0.3}}}, 1e-15));
static_assert(!qkv::approx_equal(point3, matrix<double, 1, 1>{{{0.3}}}, 1e-17));
static_assert(qkv::max_abs_difference(x, x) == 0);
static_assert(qkv::proven<check::near(0.1 + 0.2, 0.3, 1e-15)>);

// --- what must not compile: shapes that do not fit (the messages are checked by tests/compile_fail)
template <class A, class B>
concept multipliable = requires(A a, B b) { qkv::matrix_product(a, b); };
template <class A, class B>
concept addable = requires(A a, B b) { a + b; };
template <class A, class B>
concept side_by_side = requires(A a, B b) { qkv::hconcat(a, b); };

static_assert(multipliable<matrix<double, 3, 4>, matrix<double, 4, 3>>);
static_assert(!multipliable<matrix<double, 3, 4>, matrix<double, 3, 4>>);
static_assert(!multipliable<matrix<double, 3, 4>, matrix<double, 2, 5>>);
static_assert(addable<matrix<float, 2, 3>, matrix<float, 2, 3>>);
static_assert(!addable<matrix<float, 2, 3>, matrix<float, 3, 2>>);
static_assert(!side_by_side<matrix<float, 2, 3>, matrix<float, 3, 3>>);
template <std::size_t BR, std::size_t BC, class M>
concept has_block = requires(M m) { qkv::block<BR, BC>(m, 0, 0); };
static_assert(has_block<3, 1, matrix<int, 3, 3>> && !has_block<4, 1, matrix<int, 3, 3>>);

}  // namespace
