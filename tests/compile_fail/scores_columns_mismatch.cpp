// Queries of width 3 against keys of width 2: a query cannot be compared with a key, and the
// message speaks of their columns (queries_and_keys_have_the_same_columns, QueryCols = 3,
// KeyCols = 2), not of a matrix product's inner dimensions.
#include <qkv/core/attention.hpp>

constexpr qkv::matrix<float, 2, 3> q{{{1, 0, 1}, {0, 1, 0}}};
constexpr qkv::matrix<float, 4, 2> k{{{1, 0}, {0, 1}, {1, 1}, {2, 0}}};
constexpr auto s = qkv::scores(q, k);
