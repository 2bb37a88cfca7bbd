// An upstream gradient of the wrong shape: the context is 3 x 2 (3 queries, d_v = 2) and d_context
// is 2 x 3. The backward does not compile, and the message names both shapes through
// d_context_has_the_shape_of_the_context (Tq = 3, Dv = 2, DR = 2, DC = 3).
#include <qkv/core/attention.hpp>
#include <qkv/core/attention_backward.hpp>

constexpr qkv::matrix<double, 3, 2> q{{{1, 0}, {0, 1}, {1, 1}}};
constexpr auto r = qkv::attend_projected(q, q, q, qkv::attention_options<double>{});
constexpr auto g = qkv::attention_backward(r, qkv::matrix<double, 2, 3>{});
