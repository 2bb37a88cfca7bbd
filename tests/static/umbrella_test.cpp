// the umbrella header compiles on its own and gives the whole core
#include <qkv/qkv.hpp>

// softmax([0, 0]) through the umbrella: [1/2, 1/2]
static_assert(qkv::softmax_rows(qkv::matrix<double, 1, 2>{{{0, 0}}}) == qkv::matrix<double, 1, 2>{{{0.5, 0.5}}});

// the online softmax through the umbrella: scores [0, 0] over values [1, 3] in blocks of 1:
// l = 1, then 1 · e^0 + 1 = 2 (rescale 1), o = 1 + 3 = 4, output 4 / 2 = 2
static_assert(qkv::online_softmax_blocks<1>(qkv::matrix<double, 1, 2>{{{0, 0}}}, qkv::matrix<double, 2, 1>{{{1}, {3}}})
                  .output(0, 0) == 2);
