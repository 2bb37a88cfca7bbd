// the umbrella header compiles on its own and gives the whole core
#include <qkv/qkv.hpp>

// softmax([0, 0]) through the umbrella: [1/2, 1/2]
static_assert(qkv::softmax_rows(qkv::matrix<double, 1, 2>{{{0, 0}}}) == qkv::matrix<double, 1, 2>{{{0.5, 0.5}}});
