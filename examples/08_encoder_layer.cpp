// 08_encoder_layer.cpp: one transformer encoder layer, then a stack, equal to PyTorch's nn.TransformerEncoderLayer.
//
// Tutorial 000 ends with the road from self-attention to a transformer. This walks it:
//   torch.manual_seed(0)
//   layer = nn.TransformerEncoderLayer(d_model=4, nhead=2, dim_feedforward=8, dropout=0.0, batch_first=True)
//   x = torch.randn(1, 3, 4)
//   layer(x)                                            # one layer
//   nn.TransformerEncoder(layer, num_layers=2)(x)       # a stack of two copies, no final norm
// The weights come from qkv's PyTorch-compatible generator after the same seed, drawn in the
// order nn.TransformerEncoderLayer draws them (self_attn's initialisation, then linear1, then
// linear2; the LayerNorms start at weight 1, bias 0), so they are PyTorch's to the bit. The layer
// (post-norm: h = norm1(x + sa(x)), out = norm2(h + ff(h))) runs in the compiler and its output
// is proven against PyTorch's float64 result, within a bound derived from float32 rounding
// (core/encoder_bounds.hpp). The walkthrough then runs the same constexpr functions at a
// realistic size at run time: d_model 512, 8 heads, dim_feedforward 2048, 64 tokens. PyTorch's numbers come from
// scripts/fixtures/encoder_fixtures.py (tests/data/encoder/example_08.json).
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>
#include <algorithm>

#include <qkv/core/check.hpp>
#include <qkv/core/encoder.hpp>
#include <qkv/core/encoder_bounds.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/io/print.hpp>

#include "say.hpp"  // say(): printf-style lines through std::cout (qkv explain captures it)

namespace qkv::examples::encoder_layer {

namespace check = qkv::check;
using qkv::matrix;

/// @brief nn.TransformerEncoderLayer(D, H, F)'s parameters as its __init__ draws them, in place:
///   self_attn = nn.MultiheadAttention(D, H): out_proj = Linear(D, D) draws its weight and bias,
///               then _reset_parameters: xavier_uniform_(in_proj_weight), both biases set to 0
///   linear1 = nn.Linear(D, F), linear2 = nn.Linear(F, D): kaiming_uniform_ weight, uniform_ bias
///   norm1, norm2 = nn.LayerNorm(D): weight 1, bias 0 (no draws)
template <class T, std::size_t D, std::size_t H, std::size_t F>
constexpr void draw_encoder_layer(qkv::torch::generator& gen, qkv::encoder_layer_parameters<T, D, H, F>& p) {
  gen.linear_(std::span<T>(p.out_proj_weight.v), std::span<T>(p.out_proj_bias.v), D);
  gen.xavier_uniform_(std::span<T>(p.in_proj_weight.v), D, 3 * D);
  p.in_proj_bias = {};
  p.out_proj_bias = {};
  gen.linear_(std::span<T>(p.linear1_weight.v), std::span<T>(p.linear1_bias.v), D);
  gen.linear_(std::span<T>(p.linear2_weight.v), std::span<T>(p.linear2_bias.v), F);
  p.norm1 = {};
  p.norm2 = {};
}

// ---------------------------------------------------------------------------------------------
// the small layer, in the compiler

struct seeded_case {
  qkv::encoder_layer_parameters<float, 4, 2, 8> layer;
  matrix<float, 3, 4> x;
};

// torch.manual_seed(0); layer = ...; x = torch.randn(1, 3, 4)
constexpr seeded_case small = [] {
  seeded_case c;
  qkv::torch::generator gen{0};
  draw_encoder_layer(gen, c.layer);
  c.x = gen.randn<float, 3, 4>();
  return c;
}();

// the weights are PyTorch's, bit for bit (layer.state_dict(), the first and last element of each
// tensor: a draw out of order would move them all)
static_assert(small.layer.in_proj_weight(0, 0) == 0.22242416441440582f && small.layer.in_proj_weight(11, 3) == 0.14188958704471588f);
static_assert(small.layer.out_proj_weight(0, 0) == -0.003743410110473633f && small.layer.out_proj_weight(3, 3) == 0.018521785736083984f);
static_assert(small.layer.linear1_weight(0, 0) == 0.31018829345703125f && small.layer.linear1_bias(0, 7) == -0.38567835092544556f);
static_assert(small.layer.linear2_weight(0, 0) == -0.01948065310716629f && small.layer.linear2_bias(0, 3) == -0.02556956559419632f);
static_assert(small.layer.in_proj_bias == matrix<float, 1, 12>{} && small.layer.norm1.weight == qkv::filled<float, 1, 4>(1));
// self_attn's draws are exactly those of nn.MultiheadAttention(4, 2) (core/torch.hpp)
static_assert([] {
  qkv::torch::generator gen{0};
  const auto mha = gen.multihead_attention<float, 4, 2>();
  return mha.in_proj_weight == small.layer.in_proj_weight && mha.out_proj_weight == small.layer.out_proj_weight;
}());
// x = torch.randn(1, 3, 4), drawn after the layer
static_assert(small.x == matrix<float, 3, 4>{{{-1.3360486030578613f, 0.8870960474014282f, 0.7679574489593506f, 0.05711299926042557f},
                                              {0.22395838797092438f, 0.551964282989502f, -0.5787979960441589f, 0.0177221167832613f},
                                              {0.13182635605335236f, 1.0197668075561523f, -0.4468388855457306f, 0.4520224630832672f}}});

// the layer, every step kept
constexpr qkv::encoder_options<float> options{};  // relu, post-norm, eps 1e-5, no mask
constexpr auto layer = qkv::encoder_layer_steps(small.x, small.layer, options);

// By hand, the shapes: [q k v] = x W_inᵀ is (3, 12), split into three (3, 4), two heads of 2
// columns each; each head's weights are (3, 3) and every row sums to 1 (within 3 roundings)
static_assert(proven<check::near(qkv::row_sums(layer.attention.weights[0]), qkv::filled<float, 3, 1>(1), 3 * 0x1p-24f)>);
// post-norm ends with norm2 (weight 1, bias 0): every output row has mean 0 and variance 1 - eps/var,
// so its 4 values sum to 0 (within 4 roundings of values below 2: 4 * 2 * 2^-24 = 5e-7)
static_assert(proven<check::near(qkv::row_sums(layer.output), matrix<float, 3, 1>{}, 5e-7f)>);

// PyTorch's float64 output (the same float32 weights and x, converted), layer(x.double()):
constexpr matrix<double, 3, 4> torch_layer_output{{{-1.5481367479897932, 1.117764472320686, 0.5765762424387557, -0.14620396676964856},
                                                   {0.4863696913794265, 1.0057169533768706, -1.6512464887042377, 0.15915984394794064},
                                                   {-0.1260937199889217, 1.2567835253725361, -1.5048469489491645, 0.3741571435655501}}};
// our float32 output is within B_float32 + B_float64 of it: B_float32 bounds our rounding,
// B_float64 PyTorch's own, each derived step by step (core/encoder_bounds.hpp: the projections'
// gamma(K+1) sum |x||W|, the softmax's and LayerNorm's first-order sensitivities)
constexpr auto layer_bound = qkv::bounds::encoder_layer_error<float>(layer, small.layer, options).output +
                             qkv::bounds::encoder_layer_error<double>(layer, small.layer, options).output;
static_assert(proven<check::within(layer.output, torch_layer_output, layer_bound)>);
// the bound is below 1e-4 here (worst cases all); the actual difference is about 1e-7
static_assert(qkv::max_abs_difference(layer_bound, matrix<double, 3, 4>{}) < 1e-4);

// a stack of two: nn.TransformerEncoder(layer, 2) deep-copies the layer, so both start the same
constexpr auto stack = qkv::encoder_steps(small.x, qkv::clones<2>(small.layer), options);
static_assert(stack.layers[0].output == layer.output);
constexpr matrix<double, 3, 4> torch_stack_output{{{-1.3792972800755205, 1.3893480095980504, 0.2840637623575841, -0.2941144918801136},
                                                   {0.6476344157144738, 0.8879213525398494, -1.6658785407024896, 0.1303227724481663},
                                                   {0.15857701159482898, 1.1548294068551022, -1.5997487014702598, 0.28634228302032844}}};
// the second layer's input carries the first one's error bound, which it passes on
constexpr auto stack_bound = qkv::bounds::encoder_error<float>(stack, qkv::clones<2>(small.layer), options) +
                             qkv::bounds::encoder_error<double>(stack, qkv::clones<2>(small.layer), options);
static_assert(proven<check::within(stack.output, torch_stack_output, stack_bound)>);

// ---------------------------------------------------------------------------------------------
// a realistic size at run time: d_model 512, 8 heads, dim_feedforward 2048, 64 tokens

namespace realistic {

constexpr std::size_t T_len = 64, D = 512, H = 8, F = 2048;

// PyTorch's float64 results (layer(x.double()) and the 2-layer stack's), rows 0 and 1, columns 0..7
constexpr matrix<double, 2, 8> torch_layer_rows{{{-0.7392940635264824, -0.04186834740728978, -0.8618934700516637, 1.2449855090512452,
                                                  0.9599435756555198, 2.86301303180518, -0.36799357522237636, -1.5704204095363645},
                                                 {1.2242408499493798, 0.33762574389586214, 0.533178915030931, 0.6113226105276913,
                                                  -1.1733929100129519, 0.95211338905373, -1.3831375643895156, -0.6037828355825363}}};
constexpr matrix<double, 1, 8> torch_layer_last_row{{{-0.6315637695300493, -0.9447093117499197, -0.9826243745167293,
                                                      -0.7756665918774429, -1.3766271838913913, -0.37686155483804723,
                                                      -1.5966788474447091, -0.1542866251931822}}};
constexpr matrix<double, 2, 8> torch_stack_rows{{{-0.6143843029841471, -0.36090613050722237, -1.1827567045921716, 1.1183633439089762,
                                                  1.0728960527929017, 2.927770897486183, -0.11672337332048202, -0.979221560972896},
                                                 {1.1163131077754125, 0.3841156540699258, 0.3488054507632493, 0.5692156973070754,
                                                  -1.25223986667949, 0.7384579708289455, -1.343951086052538, -0.42921239578795756}}};

/// the largest |ours - PyTorch float64| over the given rows (row0 .. row0 + R - 1, columns 0 .. C - 1)
template <std::size_t R, std::size_t C>
inline double max_difference(const matrix<float, T_len, D>& ours, std::size_t row0, const matrix<double, R, C>& torch) {
  double worst = 0;
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) worst = std::max(worst, std::abs(double(ours(row0 + i, j)) - torch(i, j)));
  return worst;
}

struct state {  // 12.6 MB of weights and 8 MB of steps: on the heap
  qkv::encoder_layer_parameters<float, D, H, F> layer;
  matrix<float, T_len, D> x;
  qkv::encoder_layer_result<float, T_len, D, H, F> first, second;
};

inline void walkthrough() {
  // the weights and x drawn as PyTorch draws them (at run time: 3.1 million numbers), then the
  // same constexpr functions as above, run at run time; nn.TransformerEncoder(layer, 2) runs two
  // copies of the layer, so the stack is the same layer applied twice
  auto s = std::make_unique<state>();
  qkv::torch::generator gen{0};
  draw_encoder_layer(gen, s->layer);
  gen.normal_(std::span<float>(s->x.v), 0.0, 1.0);  // torch.randn(1, 64, 512)
  const matrix<bool, 1, T_len> no_padding{};
  qkv::encoder_layer_into(s->x, s->layer, options, no_padding, s->first);
  qkv::encoder_layer_into(s->first.output, s->layer, options, no_padding, s->second);
  const auto& l = s->first.output;
  say("At run time: nn.TransformerEncoderLayer(512, 8, 2048), 64 tokens, weights and x from manual_seed(0), float32:\n");
  say("  max |ours - PyTorch float64|, layer output rows 0, 1 and 63 (24 values): %.3g\n",
              std::max(max_difference(l, 0, torch_layer_rows), max_difference(l, T_len - 1, torch_layer_last_row)));
  say("  max |ours - PyTorch float64|, 2-layer stack rows 0 and 1 (16 values):      %.3g\n",
              max_difference(s->second.output, 0, torch_stack_rows));
  say("  output[0, :4] = [%.7f, %.7f, %.7f, %.7f]\n", double(l(0, 0)), double(l(0, 1)), double(l(0, 2)), double(l(0, 3)));
}

}  // namespace realistic

inline void walkthrough() {
  using qkv::io::torch_str;
  std::cout << "A transformer encoder layer, proven at compile time against PyTorch\n\n"
            << "torch.manual_seed(0)\n"
            << "layer = nn.TransformerEncoderLayer(d_model=4, nhead=2, dim_feedforward=8, dropout=0.0, batch_first=True)\n"
            << "x = torch.randn(1, 3, 4)\n" << torch_str(small.x) << "\n\n"
            << "self_attn.in_proj_weight (xavier_uniform_)\n" << torch_str(small.layer.in_proj_weight) << "\n"
            << "linear1.weight\n" << torch_str(small.layer.linear1_weight) << "\n\n"
            << "q, k, v = x W_inᵀ split in three; head 0 weights softmax(q_0 k_0ᵀ / sqrt 2)\n"
            << torch_str(layer.attention.weights[0]) << "\n"
            << "sa(x) = concat(heads) W_outᵀ + b_out\n" << torch_str(layer.attention_output) << "\n"
            << "h = norm1(x + sa(x))\n" << torch_str(layer.hidden) << "\n"
            << "ff(h) = linear2(relu(linear1(h)))\n" << torch_str(layer.feed_forward.output) << "\n"
            << "layer(x) = norm2(h + ff(h))\n" << torch_str(layer.output) << "\n"
            << "(PyTorch float64: within " << qkv::max_abs_difference(layer_bound, matrix<double, 3, 4>{})
            << ", a derived bound; the difference is " << qkv::max_abs_difference(qkv::matrix_cast<double>(layer.output), torch_layer_output)
            << ")\n\n"
            << "nn.TransformerEncoder(layer, num_layers=2)(x)\n" << torch_str(stack.output) << "\n\n";
  realistic::walkthrough();
}

}  // namespace qkv::examples::encoder_layer

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain encoder_layer --html FILE): the small layer step by step; the
// proofs are this file's static_asserts (scripts/page_notes.py)
namespace qkv::examples::encoder_layer {

template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  p.with_truth();  // its matrices without a how are exact inputs: the page shows the 50-digit truth
  const auto& a = layer.attention;
  const auto tok = Page::labels("x", 3), d4 = Page::labels("d", 4);
  // Step 1: the input and the weights. torch.manual_seed(0) draws the layer's weights in the
  // order nn.TransformerEncoderLayer draws them, then x = torch.randn(1, 3, 4): 3 tokens of
  // d_model 4. in_proj_weight stacks W_q, W_k and W_v (12, 4); the biases of the attention and
  // the LayerNorms' bias start at 0, their weight at 1.
  p.step(1);
  p.matrix("small.x", small.x).rows(tok).cols(d4);
  p.matrix("small.layer.in_proj_weight", small.layer.in_proj_weight);
  p.matrix("W_q", qkv::block<4, 4>(small.layer.in_proj_weight, 0, 0)).hidden();
  p.matrix("W_k", qkv::block<4, 4>(small.layer.in_proj_weight, 4, 0)).hidden();
  p.matrix("W_v", qkv::block<4, 4>(small.layer.in_proj_weight, 8, 0)).hidden();
  p.matrix("small.layer.out_proj_weight", small.layer.out_proj_weight);
  p.matrix("small.layer.out_proj_bias", small.layer.out_proj_bias);
  p.matrix("small.layer.linear1_weight", small.layer.linear1_weight);
  p.matrix("small.layer.linear1_bias", small.layer.linear1_bias);
  p.matrix("small.layer.linear2_weight", small.layer.linear2_weight);
  p.matrix("small.layer.linear2_bias", small.layer.linear2_bias);
  p.matrix("small.layer.norm1.weight", small.layer.norm1.weight).hidden();
  p.matrix("small.layer.norm1.bias", small.layer.norm1.bias).hidden();
  p.matrix("small.layer.norm2.weight", small.layer.norm2.weight).hidden();
  p.matrix("small.layer.norm2.bias", small.layer.norm2.bias).hidden();
  // Step 2: queries, keys and values. [q k v] = x W_inᵀ is (3, 12), split into three (3, 4);
  // each is two heads of 2 columns.
  p.step(2);
  p.matrix("queries", a.queries).rows(tok).how(how::dot("small.x", "W_q", 4));
  p.matrix("keys", a.keys).rows(tok).how(how::dot("small.x", "W_k", 4));
  p.matrix("values", a.values).rows(tok).how(how::dot("small.x", "W_v", 4));
  // Step 3: two heads. nn.MultiheadAttention divides the queries by sqrt(d_model / heads) =
  // sqrt(2) BEFORE the product; head h takes columns 2h and 2h + 1 of the scaled queries, keys
  // and values: its scores (q_h / sqrt(2)) k_hᵀ are already scaled (scaled_scores: the same, no
  // mask here), its weights softmax(scaled) with every row summing to 1, and its context weights v_h (3, 2).
  p.step(3);
  using T = std::remove_cvref_t<decltype(a.queries(0, 0))>;
  p.matrix("queries / sqrt(2)", qkv::divided(a.queries, qkv::sqrt(T(2)))).rows(tok)
      .how(how::divided("queries", double(qkv::sqrt(T(2))), "1/sqrt(2): d_model 4 over 2 heads, applied to the queries"));
  std::vector<std::string> heads;
  for (std::size_t h = 0; h < 2; ++h) {
    const std::string n = "[" + std::to_string(h) + "]";
    p.matrix("scores" + n, a.scores[h]).rows(tok).cols(tok).how(how::dot("queries / sqrt(2)", "keys", 2, 2 * h, 2 * h));
    p.matrix("scaled_scores" + n, a.scaled_scores[h]).rows(tok).cols(tok)
        .how(how::scaled("scores" + n, 1, "1: the queries were divided by sqrt(2) before the product"));
    p.matrix("layer.attention.weights" + n, a.weights[h]).rows(tok).cols(tok).how(how::softmax("scaled_scores" + n));
    p.matrix("context" + n, a.context[h]).rows(tok).how(how::matmul("layer.attention.weights" + n, "values", 3, 0, 0, 2 * h));
    heads.push_back("layer.attention.weights" + n);
  }
  p.heatmap("the weights of each head (rows: queries, columns: keys)", heads);
  // Step 4: the heads' contexts side by side, (3, 4), through the output projection:
  // sa(x) = concat W_outᵀ + b_out.
  p.step(4);
  p.matrix("concat", a.concat).rows(tok).how(how::hconcat("context[0]", "context[1]"));  // the contexts side by side
  p.matrix("layer.attention_output", layer.attention_output).rows(tok)
      .how(how::dot("concat", "small.layer.out_proj_weight", 4, 0, 0, "small.layer.out_proj_bias"));
  // Step 5: the residual connection and norm1 (post-norm): h = norm1(x + sa(x)).
  p.step(5);
  p.matrix("layer.first_sum", layer.first_sum).rows(tok).how(how::add("small.x", "layer.attention_output"));
  p.matrix("layer.hidden", layer.hidden).rows(tok)
      .how(how::layer_norm("layer.first_sum", double(options.layer_norm_eps), "small.layer.norm1.weight", "small.layer.norm1.bias"));
  // Step 6: the feed-forward block: ff(h) = linear2(relu(linear1(h))), (3, 4) -> (3, 8) -> (3, 4).
  p.step(6);
  p.matrix("linear1(h)", layer.feed_forward.hidden).rows(tok)
      .how(how::dot("layer.hidden", "small.layer.linear1_weight", 4, 0, 0, "small.layer.linear1_bias"));
  p.matrix("relu", layer.feed_forward.activated).rows(tok).how(how::relu("linear1(h)"));
  p.matrix("layer.feed_forward.output", layer.feed_forward.output).rows(tok)
      .how(how::dot("relu", "small.layer.linear2_weight", 8, 0, 0, "small.layer.linear2_bias"));
  // Step 7: the second residual connection and norm2: layer(x) = norm2(h + ff(h)), proven against
  // PyTorch's float64 output within the derived bound; then the stack of two layers.
  p.step(7);
  p.matrix("layer.second_sum", layer.second_sum).rows(tok).how(how::add("layer.hidden", "layer.feed_forward.output"));
  p.matrix("layer.output", layer.output).rows(tok)
      .how(how::layer_norm("layer.second_sum", double(options.layer_norm_eps), "small.layer.norm2.weight", "small.layer.norm2.bias"))
      .proven(torch_layer_output, "torch_layer_output (PyTorch, float64)", -1);
  p.matrix("stack.output", stack.output).rows(tok).proven(torch_stack_output, "torch_stack_output (PyTorch, float64)", -1);
}

}  // namespace qkv::examples::encoder_layer

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::encoder_layer::walkthrough(); }
#endif
