// static proofs of core/layers.hpp and encoder.hpp: if this file compiles, they hold.
#include <limits>

#include <qkv/core/check.hpp>
#include <qkv/core/encoder.hpp>
#include <qkv/core/layers.hpp>
#include <qkv/core/masks.hpp>
#include <qkv/core/matrix.hpp>

namespace {

using qkv::matrix;
namespace check = qkv::check;

// --- linear, activations ----------------------------------------------------------------------

// x Wᵀ + b with x = [1, 2], W rows [1, 0], [0, 1], [1, 1], b = [0.5, 0, -1]:
//   [1 + 0.5, 2 + 0, 1 + 2 - 1] = [1.5, 2, 2]
static_assert(qkv::linear(matrix<double, 1, 2>{{{1, 2}}}, matrix<double, 3, 2>{{{1, 0}, {0, 1}, {1, 1}}},
                          matrix<double, 1, 3>{{{0.5, 0, -1}}}) == matrix<double, 1, 3>{{{1.5, 2, 2}}});
// relu [-1, 0, 2] = [0, 0, 2]; relu(-0.0) is +0 (not -0)
static_assert(qkv::relu(matrix<double, 1, 3>{{{-1, 0, 2}}}) == matrix<double, 1, 3>{{{0, 0, 2}}});
static_assert(qkv::detail::to_bits(qkv::relu(-0.0)) == 0);
// gelu(0) = 0; gelu(1) = 1/2 (1 + erf(1/sqrt 2)) = 1/2 (1 + 0.6826894921370859) = 0.8413447460685429
// (the normal CDF at 1); gelu(-1) = -1/2 (1 - 0.6826894921370859) = -0.15865525393145707
static_assert(qkv::gelu(0.0) == 0.0);
static_assert(qkv::proven<check::near(qkv::gelu(1.0), 0.8413447460685429, 2e-16)>);
static_assert(qkv::proven<check::near(qkv::gelu(-1.0), -0.15865525393145707, 1e-16)>);
// gelu(x) -> x for large x (erf -> 1) and -> 0 for very negative x
static_assert(qkv::gelu(10.0) == 10.0 && qkv::gelu(-10.0) > -1e-20);
static_assert(qkv::proven<check::near(qkv::gelu(1.0f), 0.84134475f, 6e-8f)>);

// --- LayerNorm: the biased variance -----------------------------------------------------------

// [1, 2, 3, 4]: mean 2.5; deviations -1.5, -0.5, 0.5, 1.5; squares 2.25 + 0.25 + 0.25 + 2.25 = 5;
// the variance is 5 / 4 = 1.25 (biased; torch.var's default would be 5 / 3). With eps = 0:
// normalized = deviations / sqrt(1.25) = [-1.3416407864998738, -0.4472135954999579, ...]
constexpr auto ln = qkv::layer_norm_steps(matrix<double, 1, 4>{{{1, 2, 3, 4}}}, qkv::layer_norm_parameters<double, 4>{}, 0.0);
static_assert(ln.mean(0, 0) == 2.5 && ln.variance(0, 0) == 1.25);
static_assert(qkv::proven<check::near(ln.output, matrix<double, 1, 4>{{{-1.3416407864998738, -0.4472135954999579,
                                                                        0.4472135954999579, 1.3416407864998738}}}, 2e-16)>);
// affine: weight [2, 2, 2, 2], bias [1, 1, 1, 1] gives 2 n + 1; with the default eps 1e-5,
// n_0 = -1.5 / sqrt(1.25 + 1e-5) = -1.5 / 1.1180384609... = -1.3416354199689269, so
// 2 n_0 + 1 = -1.6832708399378538 (eps moved it by about eps / (2 var) = 4e-6 relative)
constexpr qkv::layer_norm_parameters<double, 4> affine{qkv::filled<double, 1, 4>(2), qkv::filled<double, 1, 4>(1)};
static_assert(qkv::proven<check::near(qkv::layer_norm(matrix<double, 1, 4>{{{1, 2, 3, 4}}}, affine)(0, 0),
                                      -1.6832708399378538, 1e-15)>);
// a constant row has variance 0: normalized 0 (not NaN), thanks to eps
static_assert(qkv::layer_norm(matrix<double, 1, 3>{{{7, 7, 7}}}) == matrix<double, 1, 3>{});

// --- an encoder layer by hand -----------------------------------------------------------------
// d = 2, 1 head, f = 2. W_q = W_k = identity, W_v = 0 with bias [1, 2], so every value is
// [1, 2]; out_proj, linear1, linear2 identity, all other biases 0; LayerNorm eps 0.
constexpr auto hand_layer = [] {
  qkv::encoder_layer_parameters<double, 2, 1, 2> p;
  p.in_proj_weight = matrix<double, 6, 2>{{{1, 0}, {0, 1}, {1, 0}, {0, 1}, {0, 0}, {0, 0}}};
  p.in_proj_bias = matrix<double, 1, 6>{{{0, 0, 0, 0, 1, 2}}};
  p.out_proj_weight = qkv::identity<double, 2>();
  p.linear1_weight = qkv::identity<double, 2>();
  p.linear2_weight = qkv::identity<double, 2>();
  return p;
}();
constexpr matrix<double, 2, 2> hx{{{1, -1}, {3, 1}}};

// pre-norm, relu: norm1(x): [1, -1] has mean 0 and variance 1, [3, 1] mean 2 and variance 1,
// both give [1, -1]. q = k = [1, -1]: scores (q / sqrt 2) . k = 2 / sqrt 2 = sqrt 2, all equal,
// so the weights are 1/2 each and the context is the value [1, 2] on both rows.
// h = x + [1, 2] = [[2, 1], [4, 3]]; norm2(h) = [1, -1] on both rows; relu: [1, 0];
// out = h + [1, 0] = [[3, 1], [5, 3]], exactly
constexpr qkv::encoder_options<double> pre_relu{qkv::activation::relu, true, 0.0, false};
constexpr auto pre = qkv::encoder_layer_steps(hx, hand_layer, pre_relu);
static_assert(pre.attention_input == matrix<double, 2, 2>{{{1, -1}, {1, -1}}});
static_assert(qkv::proven<check::near(pre.attention.scores(0, 0, 1), 1.4142135623730951, 3e-16)>);
static_assert(pre.attention.weights[0] == matrix<double, 2, 2>{{{0.5, 0.5}, {0.5, 0.5}}});
static_assert(pre.hidden == matrix<double, 2, 2>{{{2, 1}, {4, 3}}});
static_assert(pre.output == matrix<double, 2, 2>{{{3, 1}, {5, 3}}});

// the same with gelu: ff = [gelu(1), gelu(-1)] = [0.8413447460685429, -0.15865525393145707];
// out = h + ff = [[2.8413447460685429, 0.8413447460685429], [4.841344746068543, 2.841344746068543]]
constexpr auto pre_gelu = qkv::encoder_layer(hx, hand_layer, {qkv::activation::gelu, true, 0.0, false});
static_assert(qkv::proven<check::near(pre_gelu, matrix<double, 2, 2>{{{2.8413447460685429, 0.8413447460685429},
                                                                     {4.841344746068543, 2.841344746068543}}}, 1e-15)>);

// causal: query 0 sees key 0 only (weight 1); padding key 1: both queries see key 0 only
static_assert(qkv::encoder_layer_steps(hx, hand_layer, {qkv::activation::relu, true, 0.0, true}).attention.weights[0] ==
              matrix<double, 2, 2>{{{1, 0}, {0.5, 0.5}}});
static_assert(qkv::encoder_layer_steps(hx, hand_layer, pre_relu, matrix<bool, 1, 2>{{{false, true}}}).attention.weights[0] ==
              matrix<double, 2, 2>{{{1, 0}, {1, 0}}});
// causal and key 0 padding: query 0 has no allowed key. Its weights are 0 (not NaN, as in
// PyTorch), its attention output is out_proj's bias (0 here), so h row 0 = x row 0 = [1, -1];
// query 1 sees key 1 only: h row 1 = [3, 1] + [1, 2] = [4, 3]. Then norm2 gives [1, -1] on both
// rows, relu [1, 0], out = h + [1, 0] = [[2, -1], [5, 3]]
constexpr auto empty_row = qkv::encoder_layer_steps(hx, hand_layer, {qkv::activation::relu, true, 0.0, true},
                                                    matrix<bool, 1, 2>{{{true, false}}});
static_assert(qkv::fully_masked_rows(empty_row.allowed) == matrix<bool, 2, 1>{{{true}, {false}}});
static_assert(empty_row.attention.weights[0] == matrix<double, 2, 2>{{{0, 0}, {0, 1}}});
static_assert(empty_row.first_sum == matrix<double, 2, 2>{{{1, -1}, {4, 3}}});
static_assert(empty_row.output == matrix<double, 2, 2>{{{2, -1}, {5, 3}}});

// every value is [1, 2], so masking changes the weights but not the output here
static_assert(qkv::encoder_layer(hx, hand_layer, {qkv::activation::relu, true, 0.0, true}) == pre.output);

// post-norm, relu: sa(x) = [1, 2] on both rows (the values are [1, 2] whatever the weights);
// x + sa = [[2, 1], [4, 3]]; norm1: [1, -1] on both rows (mean 1.5 / 3.5, variance 0.25);
// ff: relu([1, -1]) = [1, 0]; h + ff = [2, -1]: mean 0.5, variance 2.25, sigma 1.5;
// norm2 = [1.5, -1.5] / 1.5 = [1, -1] (1/1.5 is rounded: within 2 ulp)
constexpr auto post = qkv::encoder_layer_steps(hx, hand_layer, {qkv::activation::relu, false, 0.0, false});
static_assert(post.first_sum == matrix<double, 2, 2>{{{2, 1}, {4, 3}}});
static_assert(post.hidden == matrix<double, 2, 2>{{{1, -1}, {1, -1}}});
static_assert(post.second_sum == matrix<double, 2, 2>{{{2, -1}, {2, -1}}});
static_assert(qkv::proven<check::near(post.output, matrix<double, 2, 2>{{{1, -1}, {1, -1}}}, 3e-16)>);

// a stack of two copies (nn.TransformerEncoder clones its layer), pre-norm: layer 2 takes
// [[3, 1], [5, 3]]; norm1: [1, -1] on both rows, sa [1, 2], h = [[4, 3], [6, 5]], norm2 [1, -1],
// ff [1, 0]: [[5, 3], [7, 5]]
constexpr auto two = qkv::encoder_steps(hx, qkv::clones<2>(hand_layer), pre_relu);
static_assert(two.layers[0].output == pre.output);
static_assert(two.output == matrix<double, 2, 2>{{{5, 3}, {7, 5}}});

// float: the same layer in float32 gives the same exact numbers
static_assert(qkv::encoder_layer(qkv::matrix_cast<float>(hx), [] {
  qkv::encoder_layer_parameters<float, 2, 1, 2> p;
  p.in_proj_weight = qkv::matrix_cast<float>(hand_layer.in_proj_weight);
  p.in_proj_bias = qkv::matrix_cast<float>(hand_layer.in_proj_bias);
  p.out_proj_weight = p.linear1_weight = p.linear2_weight = qkv::identity<float, 2>();
  return p;
}(), {qkv::activation::relu, true, 0.0f, false}) == matrix<float, 2, 2>{{{3, 1}, {5, 3}}});

}  // namespace
