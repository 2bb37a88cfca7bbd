// Square weights (3, 3) read as nn.Linear's (out, in) give x Wᵀ, read as (in, out) give x W:
// project(x, w) without a layout would have to guess, so it does not compile and names
// square_weights_need_a_layout (pass qkv::out_in or qkv::in_out).
#include <qkv/core/attention.hpp>

constexpr qkv::matrix<float, 2, 3> x{{{1, 0, 1}, {0, 2, 0}}};
constexpr qkv::matrix<float, 3, 3> w{{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}}};
constexpr auto q = qkv::project(x, w);
