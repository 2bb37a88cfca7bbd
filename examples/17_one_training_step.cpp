// 17_one_training_step.cpp: chapter four: one training step of a one-layer transformer, proven at compile time.
//
// Example 15 showed how W_q, W_k and W_v get their gradients from an upstream dO. A model that
// learns gets dO from a loss: it predicts the next token, the cross-entropy of its prediction
// is the loss, and the gradient flows from the loss back through every piece to every weight,
// which then moves against its gradient. This example does all of it in the compiler, on a
// model small enough that every number can be printed and checked:
//   vocabulary 4 ("a b c d"), T = 3 tokens, d_model 4, one causal head (d_k = 4), no layer norm,
//   no feed-forward: the least that is still a transformer layer (embeddings, attention, a
//   residual, an output projection, a loss). Layer norm and the FFN have their forward proven
//   in example 08; their backwards are not needed to see attention learn, and leaving them out
//   keeps each gradient a short sum a learner can follow.
//
//   x      = tok[ids] + pos            nn.Embedding(4, 4), nn.Embedding(3, 4)        (3, 4)
//   q,k,v  = x W_qᵀ, x W_kᵀ, x W_vᵀ    nn.Linear(4, 4, bias=False) x 3              (3, 4)
//   P      = softmax(causal(q kᵀ / sqrt(4)))                                           (3, 3)
//   h      = x + P v                   the residual                                    (3, 4)
//   logits = h W_headᵀ + b_head        nn.Linear(4, 4)                                 (3, 4)
//   loss   = F.cross_entropy(logits, targets), the mean over the 3 positions
//
// The batch: "a b a" (ids 0 1 0), each position predicting the next token of "a b a b"
// (targets 1 0 1). The weights are drawn by PyTorch's generator after torch.manual_seed(17) in
// the order PyTorch's modules draw them (core/torch.hpp); the model is computed in float32 and
// in double, backward through every piece (core/cross_entropy.hpp, core/linear_backward.hpp,
// core/attention_backward.hpp, core/embedding_backward.hpp), and one torch.optim.SGD(lr=0.1)
// step is taken (core/sgd.hpp). Every gradient and every updated weight is proven within a
// derived bound of PyTorch 1.13's float64 autograd (tests/data/training/torch_one_step.hpp,
// made by scripts/fixtures/torch_one_step.py), the exact identities with ==, and the SGD
// update bit for bit PyTorch's float32 one given PyTorch's gradients.
#include <cstddef>
#include <iostream>
#include <string>
#include <vector>

#include <qkv/core/adamw.hpp>
#include <qkv/core/attention.hpp>
#include <qkv/core/attention_backward.hpp>
#include <qkv/core/backward_bounds.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/cross_entropy.hpp>
#include <qkv/core/embedding_backward.hpp>
#include <qkv/core/linear_backward.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/sequence.hpp>
#include <qkv/core/sgd.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/io/print.hpp>

#include "../tests/data/training/torch_one_step.hpp"

namespace qkv::examples::one_training_step {

namespace check = qkv::check;
namespace pt = qkv_test::torch_one_step;
using qkv::matrix;

template <std::size_t R, std::size_t C>
constexpr matrix<double, R, C> m(const double (&a)[R][C]) {
  return matrix<double, R, C>(a);
}

// ---------------------------------------------------------------------------------------------
// Step 1: the model's weights, drawn as PyTorch draws them. torch.manual_seed(17), then the
// modules in order: nn.Embedding(4, 4) (16 normal draws), nn.Embedding(3, 4) (12), three
// nn.Linear(4, 4, bias=False) (16 kaiming-uniform draws each, in [-1/2, 1/2]: 1/sqrt(4)) and
// nn.Linear(4, 4) (16 weight draws, then 4 bias draws in [-1/2, 1/2]).
template <class F>
struct parameters {
  matrix<F, 4, 4> tok;     // (vocabulary, d_model)
  matrix<F, 3, 4> pos;     // (T, d_model): learned positions
  matrix<F, 4, 4> W_q, W_k, W_v;  // nn.Linear: (out, in)
  matrix<F, 4, 4> W_head;  // (vocabulary, d_model)
  matrix<F, 1, 4> b_head;  // (1, vocabulary)
};
constexpr parameters<float> init = [] {
  qkv::torch::generator gen{17};
  parameters<float> p;
  p.tok = gen.embedding<float, 4, 4>();
  p.pos = gen.embedding<float, 3, 4>();
  p.W_q = gen.linear<float, 4, 4>(qkv::torch::bias::none).weight;
  p.W_k = gen.linear<float, 4, 4>(qkv::torch::bias::none).weight;
  p.W_v = gen.linear<float, 4, 4>(qkv::torch::bias::none).weight;
  const auto head = gen.linear<float, 4, 4>();
  p.W_head = head.weight;
  p.b_head = head.bias;
  return p;
}();
// the same bits as PyTorch's modules, every one of the 108 parameters
static_assert(proven<check::equal(qkv::matrix_cast<double>(init.tok), m(pt::init_tok))>);
static_assert(proven<check::equal(qkv::matrix_cast<double>(init.pos), m(pt::init_pos))>);
static_assert(proven<check::equal(qkv::matrix_cast<double>(init.W_q), m(pt::init_W_q))>);
static_assert(proven<check::equal(qkv::matrix_cast<double>(init.W_k), m(pt::init_W_k))>);
static_assert(proven<check::equal(qkv::matrix_cast<double>(init.W_v), m(pt::init_W_v))>);
static_assert(proven<check::equal(qkv::matrix_cast<double>(init.W_head), m(pt::init_W_head))>);
static_assert(proven<check::equal(qkv::matrix_cast<double>(init.b_head), m(pt::init_b_head))>);
// kaiming_uniform_(a = sqrt(5)) on fan_in 4 draws in [-1/2, 1/2] (bound sqrt(3) sqrt(2/6) / 2)
static_assert([] {
  for (const auto& w : {init.W_q, init.W_k, init.W_v, init.W_head})
    for (float e : w.v)
      if (!(e >= -0.5f && e <= 0.5f)) return false;
  return true;
}());

template <class F>
constexpr parameters<F> init_in = {qkv::matrix_cast<F>(init.tok),    qkv::matrix_cast<F>(init.pos),
                                   qkv::matrix_cast<F>(init.W_q),    qkv::matrix_cast<F>(init.W_k),
                                   qkv::matrix_cast<F>(init.W_v),    qkv::matrix_cast<F>(init.W_head),
                                   qkv::matrix_cast<F>(init.b_head)};

// the batch: "a b a" predicting "b a b"
constexpr matrix<int, 1, 3> ids{{{0, 1, 0}}};
constexpr matrix<int, 1, 3> targets{{{1, 0, 1}}};

// ---------------------------------------------------------------------------------------------
// Step 2: the forward pass, every intermediate kept: the embeddings looked up and added, one
// causal head (scores / sqrt(4) = scores / 2, an exact halving), the residual, the logits, the
// loss.
template <class F>
struct forward_pass {
  matrix<F, 3, 4> x;                         // tok[ids] + pos
  qkv::attention_result<F, 3, 3, 4, 4> attention;
  matrix<F, 3, 4> h;                         // x + context
  matrix<F, 3, 4> logits;                    // h W_headᵀ + b_head
  qkv::cross_entropy_result<F, 3, 4> loss;  // softmax(logits), the losses, their mean
};
template <class F>
constexpr qkv::attention_options<F> causal{qkv::scaling<F>::divide_by_sqrt_dk(), true};
template <class F>
constexpr forward_pass<F> forward(const parameters<F>& p) {
  forward_pass<F> f;
  f.x = qkv::embed(p.tok, ids) + p.pos;
  f.attention = qkv::self_attention(f.x, p.W_q, p.W_k, p.W_v, qkv::out_in, causal<F>);
  f.h = f.x + f.attention.context;
  f.logits = qkv::project(f.h, p.W_head, p.b_head, qkv::out_in);
  f.loss = qkv::cross_entropy(f.logits, targets);
  return f;
}
template <class F>
constexpr auto fwd = forward(init_in<F>);

// Step 3: the backward pass, from the loss to every parameter, each step the backward of one
// forward step in reverse order (PyTorch's grad_fn's in brackets):
//   d_logits = (softmax(logits) - onehot(targets)) / 3     (NllLossBackward0, LogSoftmaxBackward0)
//   d_W_head = d_logitsᵀ h,  d_b_head = colsum(d_logits),  d_h = d_logits W_head   (AddmmBackward0)
//   d_context = d_h, and x gets d_h directly                          (AddBackward0: the residual)
//   attention: dP, D, dS, d_scores = dS / 2, dQ, dK, dV                (example 15's steps)
//   d_W_q = dQᵀ x ...,  d_x = d_h + dQ W_q + dK W_k + dV W_v        (MmBackward0, AddBackward0)
//   d_tok = embed_backward(d_x, ids),  d_pos = d_x                    (EmbeddingBackward0)
template <class F>
struct gradients {
  matrix<F, 3, 4> d_logits;
  matrix<F, 4, 4> d_W_head;
  matrix<F, 1, 4> d_b_head;
  matrix<F, 3, 4> d_h;
  qkv::self_attention_gradients<F, 3, 4, 4, 4, 4, 4, 4, 4, 3, 3, 4, 4> attention;
  matrix<F, 3, 4> d_x;
  parameters<F> d;  // every parameter's gradient, in the parameters' shapes
};
template <class F>
constexpr gradients<F> backward(const parameters<F>& p, const forward_pass<F>& f) {
  gradients<F> g;
  g.d_logits = qkv::cross_entropy_backward(f.loss.probabilities, targets);
  const auto head = qkv::project_backward(f.h, p.W_head, p.b_head, g.d_logits, qkv::out_in);
  g.d_W_head = head.d_w;
  g.d_b_head = head.d_b;
  g.d_h = head.d_x;
  g.attention = qkv::self_attention_backward(f.x, p.W_q, p.W_k, p.W_v, qkv::out_in, f.attention, g.d_h, causal<F>);
  g.d_x = g.d_h + g.attention.d_x;
  g.d = {qkv::embed_backward<4>(g.d_x, ids), g.d_x, g.attention.d_w_query, g.attention.d_w_key,
         g.attention.d_w_value, g.d_W_head, g.d_b_head};
  return g;
}
template <class F>
constexpr auto grad = backward(init_in<F>, fwd<F>);

// Step 4: one step of torch.optim.SGD(lr=0.1): every parameter W <- fl(W - 0.1 dW).
template <class F>
constexpr parameters<F> sgd(const parameters<F>& p, const parameters<F>& d, F lr) {
  return {qkv::sgd_step(p.tok, d.tok, lr),       qkv::sgd_step(p.pos, d.pos, lr),
          qkv::sgd_step(p.W_q, d.W_q, lr),       qkv::sgd_step(p.W_k, d.W_k, lr),
          qkv::sgd_step(p.W_v, d.W_v, lr),       qkv::sgd_step(p.W_head, d.W_head, lr),
          qkv::sgd_step(p.b_head, d.b_head, lr)};
}
template <class F>
constexpr auto stepped = sgd(init_in<F>, grad<F>.d, F(0.1));

// =============================================================================================
// The bounds (core/bounds.hpp's standard model: every operation rounds once, |d| <= u, u = 2^-24
// for float, 2^-53 for double; gamma(n) = n u / (1 - n u)). Each value computed in F is within
// e_F of the truth, and PyTorch's float64 value within e_double (PyTorch's sums run in other
// orders, which the bounds allow: a bound on a sum of n products holds for every order), so
// |ours - PyTorch's| <= e_F + e_double. The true values are stood in for by this file's double
// values (within 1e-13 of the truth: the bounds below evaluated in double); the bounds are first
// order, and 1e-6 relative on top covers the rest (both(), as example 15).
// The forward, step by step (|.| of the true values, all elementwise):
//   x = fl(tok + pos)           e_x = u |x|                (the draws are exact in both)
//   q = x W_qᵀ (k, v alike)     product_error(x, e_x, W_qᵀ, 0)
//   scores = q kᵀ               product_error(q, e_q, kᵀ, e_kᵀ); / 2 is exact: e_scores / 2
//   P = softmax(causal(.))      bounds::softmax_rows_error on each row's unmasked scores (a
//                               masked weight is exactly 0 in both: bound 0)
//   context = P v               product_error(P, e_P, v, e_v)
//   h = fl(x + context)         e_x + e_c + u (|h| + e_x + e_c)
//   logits = fl(h W_headᵀ) + b  one sum of 5 terms: gamma(5) ((|h| + e_h) |W|ᵀ + |b|) + e_h |W|ᵀ
//   p = softmax(logits)         bounds::softmax_rows_error(logits, p, e_logits)
//   l_i = log s_i - (z_t - m)   an error e_z in the logits moves l_i by sum_j |p_j - [j = t]| e_zj
//                               (its derivative); the roundings: each exp term (2 + range) u
//                               relative (as softmax_rows_error), the sum of 4 terms 3 u more, the
//                               log 2 u |log s|, z_t - m u |z_t - m|, the subtraction u |l_i|;
//                               1.01 for the second order
//   loss = (l_1 + l_2 + l_3) / 3   (sum e_l + gamma(3) sum (|l| + e_l)) / 3
// The backward:
//   d_logits = fl(fl(p - y) / 3)   t = p - y: e_t = e_p + u (|t| + e_p); e = (e_t + u (|t| + e_t)) / 3
//   d_W_head = d_logitsᵀ h     transposed_product_error(d_logits, e, h, e_h)
//   d_b_head = colsum          product_error(ones(1, 3), 0, d_logits, e)
//   d_h = d_logits W_head      product_error(d_logits, e, W_head, 0)
//   attention                  bounds::attention_backward_error(P, e_P, v, e_v, k, e_k, q, e_q,
//                              d_h, e_dh, s = 1/2, r = 0: dividing by fl(sqrt 4) = 2 is exact)
//   d_W_q = dQᵀ x (k, v)       transposed_product_error(dQ, e_dQ, x, e_x)
//   d_x = fl(d_h + fl(fl(dQ W_q + dK W_k) + dV W_v))   bounds::sum3_error of the three products,
//                              then one addition: e_dh + e_3 + u (|d_x| + e_dh + e_3)
//   d_tok = embed_backward(d_x)   the rows of e_dx added the same way, plus u (|d_tok| + that)
//                              for the one addition (token "a" is at positions 0 and 2)
//   d_pos = d_x                e_dx (a copy)
// The step: fl(W - lr g) rounds once (fma); float32's lr is 0.1f, 1.49e-9 above 0.1:
//   e_W' = 0.101 e_g + |0.1f - 0.1| |g| + u (|W'| + 0.101 e_g)
namespace bound {
template <class F>
struct errors {
  matrix<double, 3, 4> x, q, k, v;
  matrix<double, 3, 3> weights;
  matrix<double, 3, 4> context, h, logits, probabilities;
  matrix<double, 3, 1> losses;
  double loss = 0;
  matrix<double, 3, 4> d_logits;
  matrix<double, 3, 4> d_h;
  qkv::bounds::attention_backward_errors<3, 3, 4, 4> attention;
  matrix<double, 3, 4> d_x;
  parameters<double> d;        // the parameters' gradients
  parameters<double> stepped;  // the parameters after the SGD step
};

template <std::size_t R, std::size_t C>
constexpr matrix<double, R, C> both(const matrix<double, R, C>& b, const matrix<double, R, C>& b64) {
  return qkv::map(b + b64, [](double e) { return e * (1 + 1e-6); });
}
constexpr double both(double b, double b64) { return (b + b64) * (1 + 1e-6); }

/// the scores a causal row's softmax sees: a masked (-inf) score replaced by the row's maximum,
/// so that softmax_rows_error's range is the unmasked scores' (its weight is 0 and stays 0)
constexpr matrix<double, 3, 3> unmasked(const matrix<double, 3, 3>& s) {
  matrix<double, 3, 3> out = s;
  for (std::size_t i = 0; i < 3; ++i) {
    double hi = s(i, 0);
    for (std::size_t j = 1; j <= i; ++j) hi = s(i, j) > hi ? s(i, j) : hi;
    for (std::size_t j = i + 1; j < 3; ++j) out(i, j) = hi;
  }
  return out;
}

template <class F>
constexpr double e_step_lr() {
  const double lr = double(F(0.1));
  return lr > 0.1 ? lr - 0.1 : 0.1 - lr;
}
template <class F, std::size_t R, std::size_t C>
constexpr matrix<double, R, C> e_step(const matrix<double, R, C>& w_new, const matrix<double, R, C>& g,
                                      const matrix<double, R, C>& e_g) {
  const double u = qkv::bounds::unit_roundoff<F>();
  return qkv::scaled(0.101, e_g) + qkv::scaled(e_step_lr<F>(), qkv::bounds::abs(g)) +
         qkv::scaled(u, qkv::bounds::abs(w_new) + qkv::scaled(0.101, e_g));
}

template <class F>
constexpr errors<F> derive() {
  using qkv::matrix_product;
  using qkv::scaled;
  using qkv::transposed;
  using qkv::bounds::abs;
  using qkv::bounds::gamma;
  using qkv::bounds::product_error;
  const double u = qkv::bounds::unit_roundoff<F>();
  const auto& p = init_in<double>;
  const auto& f = fwd<double>;
  const auto& g = grad<double>;
  const auto& a = f.attention;
  const matrix<double, 4, 4> zero44{};
  errors<F> e;
  // the forward
  e.x = scaled(u, abs(f.x));
  e.q = product_error<F>(f.x, e.x, transposed(p.W_q), zero44);
  e.k = product_error<F>(f.x, e.x, transposed(p.W_k), zero44);
  e.v = product_error<F>(f.x, e.x, transposed(p.W_v), zero44);
  auto e_scaled = qkv::divided(product_error<F>(a.queries, e.q, transposed(a.keys), transposed(e.k)), 2.0);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = i + 1; j < 3; ++j) e_scaled(i, j) = 0;
  e.weights = qkv::bounds::softmax_rows_error<F>(unmasked(a.scaled_scores), a.weights, e_scaled);
  e.context = product_error<F>(a.weights, e.weights, a.values, e.v);
  e.h = e.x + e.context + scaled(u, abs(f.h) + e.x + e.context);
  {
    const auto H = abs(f.h) + e.h;
    const auto W = transposed(abs(p.W_head));
    const auto b = abs(p.b_head);
    const auto hw = matrix_product(H, W);
    const auto ew = matrix_product(e.h, W);
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 4; ++j) e.logits(i, j) = gamma<F>(5) * (hw(i, j) + b(0, j)) + ew(i, j);
  }
  e.probabilities = qkv::bounds::softmax_rows_error<F>(f.logits, f.loss.probabilities, e.logits);
  double sum_l = 0, sum_abs = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t t = std::size_t(targets(0, i));
    double hi = f.logits(i, 0), lo = f.logits(i, 0), moved = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      hi = f.logits(i, j) > hi ? f.logits(i, j) : hi;
      lo = f.logits(i, j) < lo ? f.logits(i, j) : lo;
      const double d = f.loss.probabilities(i, j) - (j == t ? 1.0 : 0.0);
      moved += (d < 0 ? -d : d) * e.logits(i, j);
    }
    const double log_s = f.loss.losses(i, 0) + (f.logits(i, t) - hi);  // l = log s - (z_t - m)
    const double zt_m = hi - f.logits(i, t);
    const double rounding = (2 + (hi - lo) + 3) * u + 2 * u * log_s + u * zt_m + u * f.loss.losses(i, 0);
    e.losses(i, 0) = 1.01 * (moved + rounding);
    sum_l += e.losses(i, 0);
    sum_abs += f.loss.losses(i, 0) + e.losses(i, 0);
  }
  e.loss = (sum_l + gamma<F>(3) * sum_abs) / 3;
  // the backward
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      const double t = f.loss.probabilities(i, j) - (j == std::size_t(targets(0, i)) ? 1.0 : 0.0);
      const double at = t < 0 ? -t : t;
      const double e_t = e.probabilities(i, j) + u * (at + e.probabilities(i, j));
      e.d_logits(i, j) = (e_t + u * (at + e_t)) / 3;
    }
  e.d.W_head = qkv::bounds::transposed_product_error<F>(g.d_logits, e.d_logits, f.h, e.h);
  e.d.b_head = product_error<F>(qkv::filled<double, 1, 3>(1.0), matrix<double, 1, 3>{}, g.d_logits, e.d_logits);
  e.d_h = product_error<F>(g.d_logits, e.d_logits, p.W_head, zero44);
  e.attention = qkv::bounds::attention_backward_error<F>(a.weights, e.weights, a.values, e.v, a.keys, e.k, a.queries,
                                                         e.q, g.d_h, e.d_h, 0.5, 0.0);
  const auto& ea = e.attention;
  const auto& ga = g.attention.attention;
  e.d.W_q = qkv::bounds::transposed_product_error<F>(ga.d_queries, ea.d_queries, f.x, e.x);
  e.d.W_k = qkv::bounds::transposed_product_error<F>(ga.d_keys, ea.d_keys, f.x, e.x);
  e.d.W_v = qkv::bounds::transposed_product_error<F>(ga.d_values, ea.d_values, f.x, e.x);
  const auto e3 = qkv::bounds::sum3_error<F>(
      matrix_product(ga.d_queries, p.W_q), product_error<F>(ga.d_queries, ea.d_queries, p.W_q, zero44),
      matrix_product(ga.d_keys, p.W_k), product_error<F>(ga.d_keys, ea.d_keys, p.W_k, zero44),
      matrix_product(ga.d_values, p.W_v), product_error<F>(ga.d_values, ea.d_values, p.W_v, zero44));
  e.d_x = e.d_h + e3 + scaled(u, abs(g.d_x) + e.d_h + e3);
  const auto added = qkv::embed_backward<4>(e.d_x, ids);
  e.d.tok = added + scaled(u, abs(g.d.tok) + added);
  e.d.pos = e.d_x;
  // the step
  const auto& s = stepped<double>;
  e.stepped = {e_step<F>(s.tok, g.d.tok, e.d.tok),          e_step<F>(s.pos, g.d.pos, e.d.pos),
               e_step<F>(s.W_q, g.d.W_q, e.d.W_q),          e_step<F>(s.W_k, g.d.W_k, e.d.W_k),
               e_step<F>(s.W_v, g.d.W_v, e.d.W_v),          e_step<F>(s.W_head, g.d.W_head, e.d.W_head),
               e_step<F>(s.b_head, g.d.b_head, e.d.b_head)};
  return e;
}
constexpr auto f32 = derive<float>();
constexpr auto f64 = derive<double>();
}  // namespace bound

// ---------------------------------------------------------------------------------------------
// Step 5: the forward, proven within its bounds of PyTorch's float64 (and float32) forward.
// x row 0 = tok[a] + pos[0] = [-1.046191 + 1.800436, 1.230521 + 0.009574, 1.866212 + 0.153447,
// -0.343533 - 2.663088] = [0.754245, 1.240095, 2.019660, -3.006621]: one rounding, within u |x|
static_assert(proven<check::within(fwd<float>.x, m(pt::x_f64), bound::both(bound::f32.x, bound::f64.x))>);
// (PyTorch's float32 x is the same one rounding of the same sum: the same bits)
static_assert(proven<check::equal(qkv::matrix_cast<double>(fwd<float>.x), m(pt::x_f32))>);
// causal: query 0 sees key 0 alone, with weight exactly 1 (e^0 / (e^0 + 0 + 0)); the future
// keys weigh exactly 0
static_assert(proven<check::equal(fwd<float>.attention.weights, matrix<float, 3, 3>{{{1, 0, 0},
                                                                                   {fwd<float>.attention.weights(1, 0), fwd<float>.attention.weights(1, 1), 0},
                                                                                   {fwd<float>.attention.weights(2, 0), fwd<float>.attention.weights(2, 1), fwd<float>.attention.weights(2, 2)}}})>);
static_assert(proven<check::within(fwd<float>.attention.weights, m(pt::weights_f64),
                                   bound::both(bound::f32.weights, bound::f64.weights))>);
static_assert(proven<check::within(fwd<float>.attention.context, m(pt::context_f64),
                                   bound::both(bound::f32.context, bound::f64.context))>);
static_assert(proven<check::within(fwd<float>.h, m(pt::h_f64), bound::both(bound::f32.h, bound::f64.h))>);
static_assert(proven<check::within(fwd<float>.logits, m(pt::logits_f64), bound::both(bound::f32.logits, bound::f64.logits))>);
static_assert(proven<check::within(fwd<float>.loss.probabilities, m(pt::probabilities_f64),
                                   bound::both(bound::f32.probabilities, bound::f64.probabilities))>);
// the loss: position 0 gives its target "b" p = 0.2098813, so l_0 = -log 0.2098813 = 1.561213;
// l_1 = -log 0.4061117 = 0.901127 ("a" after "a b"), l_2 = -log 0.2111693 = 1.555095; the mean
// (1.561213 + 0.901127 + 1.555095) / 3 = 4.017435 / 3 = 1.339145, a little under log 4 = 1.386,
// the loss of a model that guesses the 4 tokens uniformly
static_assert(proven<check::within(fwd<float>.loss.loss, pt::loss_f64, bound::both(bound::f32.loss, bound::f64.loss))>);
static_assert(proven<check::within(fwd<double>.loss.loss, pt::loss_f64, bound::both(bound::f64.loss, bound::f64.loss))>);

// ---------------------------------------------------------------------------------------------
// Step 6: the loss's gradient, d_logits = (softmax(logits) - onehot(targets)) / 3: the model's
// belief minus the truth. Row 0 (target "b"): ([0.2806273, 0.2098813, 0.1042077, 0.4052836] -
// [0, 1, 0, 0]) / 3 = [0.0935425, -0.2633729, 0.0347359, 0.1350945]: the target's logit is pushed
// up (a step against the gradient raises it), every other one down, each by its probability.
static_assert(proven<check::within(grad<float>.d_logits, m(pt::d_logits_f64),
                                   bound::both(bound::f32.d_logits, bound::f64.d_logits))>);
static_assert(proven<check::within(grad<double>.d_logits, m(pt::d_logits_f64),
                                   bound::both(bound::f64.d_logits, bound::f64.d_logits))>);
// Each row of d_logits sums to 0 exactly in real numbers, for any logits (the p's sum to 1, the
// one-hot row to 1). Computed: the float32 probabilities of the computed logits z are within
// e_p = softmax_rows_error(z, p, 0) of softmax(z) (no input error: the identity holds for
// the logits as computed), each d_logits within e = (e_t + u (|t| + e_t)) / 3 of (softmax(z) -
// y) / 3 (t = p - y, e_t = e_p + u (|t| + e_p)), and the float32 sum of the 4 within
// sum e + gamma(3) sum (|d| + e) of 0. Measured: -3.7e-8, 1.5e-8, 1.1e-8.
/// sum_j e(i, j) for row i: how far the float32 d_logits row's exact sum can be from 0
constexpr double row_sum_error(std::size_t i) {
  const auto z = qkv::matrix_cast<double>(fwd<float>.logits);
  const auto p = qkv::matrix_cast<double>(fwd<float>.loss.probabilities);
  const double u = qkv::bounds::unit_roundoff<float>();
  const auto e_p = qkv::bounds::softmax_rows_error<float>(z, p, matrix<double, 3, 4>{});
  double sum = 0;
  for (std::size_t j = 0; j < 4; ++j) {
    const double t = p(i, j) - (j == std::size_t(targets(0, i)) ? 1.0 : 0.0), at = t < 0 ? -t : t;
    const double e_t = e_p(i, j) + u * (at + e_p(i, j));
    sum += (e_t + u * (at + e_t)) / 3;
  }
  return sum;
}
constexpr double row_size(std::size_t i) {
  double s = 0;
  for (std::size_t j = 0; j < 4; ++j) s += grad<float>.d_logits(i, j) < 0 ? -grad<float>.d_logits(i, j) : grad<float>.d_logits(i, j);
  return s;
}
constexpr bool rows_sum_to_zero = [] {
  for (std::size_t i = 0; i < 3; ++i) {
    float sum = 0;
    for (std::size_t j = 0; j < 4; ++j) sum += grad<float>.d_logits(i, j);
    const double bound = row_sum_error(i) + qkv::bounds::gamma<float>(3) * row_size(i);
    if (!(sum <= bound && -sum <= bound)) return false;
  }
  return true;
}();
static_assert(rows_sum_to_zero);

// Step 7: the output projection, logits = h W_headᵀ + b_head (AddmmBackward0):
// d_W_head = d_logitsᵀ h (4, 4): (1, 0) = sum_i d_logits(i, 1) h(i, 0) = -0.2633729 0.846113 +
// 0.0868063 (-1.088072) - 0.2629435 0.5214929 = -0.222843 - 0.094452 - 0.137123 = -0.454418;
// d_b_head = the column sums of d_logits: (1) = -0.2633729 + 0.0868063 - 0.2629435 = -0.4395102;
// d_h = d_logits W_head (3, 4): (0, 0) = 0.0935425 (-0.4933239) - 0.2633729 (-0.2394933) +
// 0.0347359 0.4054924 + 0.1350945 (-0.1979792) = -0.046147 + 0.063076 + 0.014085 - 0.026746 = 0.004268
static_assert(proven<check::within(grad<float>.d_W_head, m(pt::d_W_head_f64),
                                   bound::both(bound::f32.d.W_head, bound::f64.d.W_head))>);
static_assert(proven<check::within(grad<float>.d_b_head, m(pt::d_b_head_f64),
                                   bound::both(bound::f32.d.b_head, bound::f64.d.b_head))>);
static_assert(proven<check::within(grad<float>.d_h, m(pt::d_h_f64), bound::both(bound::f32.d_h, bound::f64.d_h))>);
// PyTorch's own float32 gradients are within the same bounds of its float64 ones
static_assert(proven<check::within(m(pt::d_W_head_f32), m(pt::d_W_head_f64), bound::both(bound::f32.d.W_head, bound::f64.d.W_head))>);
// the bias's gradient sums to 0, as each row of d_logits does: raising all 4 biases together
// changes no probability. sum_j d_b(j) = sum_i (row i of d_logits summed), each within
// row_sum_error(i) of 0; each column sum rounds twice (gamma(2) sum_i |d_logits(i, j)|), and
// the 4 are added here in double (gamma_double(3) of the same)
static_assert([] {
  const auto& d = grad<float>.d_b_head;
  const double s = double(d(0, 0)) + double(d(0, 1)) + double(d(0, 2)) + double(d(0, 3));
  double bound = 0;
  for (std::size_t i = 0; i < 3; ++i)
    bound += row_sum_error(i) + (qkv::bounds::gamma<float>(2) + qkv::bounds::gamma<double>(3)) * row_size(i);
  return s <= bound && -s <= bound;
}());

// Step 8: the gradient flows into attention: d_context = d_h (the residual passes the same
// gradient to x and to the attention's output), then example 15's steps with the causal mask.
// Query 0 has one key with weight 1: D_0 = dP_00 1 = dP_00, so dS row 0 = 1 (dP_00 - D_0) = 0
// exactly, and so is d_queries row 0: position 0 cannot learn where to look, it has nowhere else.
// Masked scores get exactly 0 (the future keys had no part in the loss).
static_assert(proven<check::equal(qkv::row(grad<float>.attention.attention.d_scores, 0), matrix<float, 1, 3>{})>);
static_assert(proven<check::equal(qkv::row(grad<float>.attention.attention.d_queries, 0), matrix<float, 1, 4>{})>);
static_assert(grad<float>.attention.attention.d_scores(1, 2) == 0.0f);
// Row 1: dP_10 = -0.1164366, dP_11 = 0.1119620 (dP = d_h vᵀ); D_1 = 0.5702658 (-0.1164366) +
// 0.4297342 0.1119620 = -0.066400 + 0.048114 = -0.018286; dS_10 = 0.5702658 (-0.1164366 + 0.018286)
// = -0.055972 and dS_11 = 0.4297342 (0.1119620 + 0.018286) = 0.055972: two weights, opposite
// gradients; d_scores = dS / 2 = [-0.027986, 0.027986]
static_assert(proven<check::within(grad<float>.attention.attention.d_weights, m(pt::d_weights_f64),
                                   bound::both(bound::f32.attention.d_weights, bound::f64.attention.d_weights))>);
static_assert(proven<check::within(grad<float>.attention.attention.d_scores, m(pt::d_scores_f64),
                                   bound::both(bound::f32.attention.d_scores, bound::f64.attention.d_scores))>);
static_assert(proven<check::within(grad<float>.attention.attention.d_queries, m(pt::d_queries_f64),
                                   bound::both(bound::f32.attention.d_queries, bound::f64.attention.d_queries))>);
static_assert(proven<check::within(grad<float>.attention.attention.d_keys, m(pt::d_keys_f64),
                                   bound::both(bound::f32.attention.d_keys, bound::f64.attention.d_keys))>);
static_assert(proven<check::within(grad<float>.attention.attention.d_values, m(pt::d_values_f64),
                                   bound::both(bound::f32.attention.d_values, bound::f64.attention.d_values))>);
// key 2 is seen by query 2 alone: dV row 2 = P_22 d_h row 2, one product each:
// dV(2, 0) = 0.1677219 0.0371795 = 0.0062358
static_assert([] {
  for (std::size_t c = 0; c < 4; ++c)
    if (grad<float>.attention.attention.d_values(2, c) != fwd<float>.attention.weights(2, 2) * grad<float>.d_h(2, c))
      return false;
  return true;
}());
// through the projections: d_W_q = dQᵀ x, d_W_k = dKᵀ x, d_W_v = dVᵀ x (nn.Linear's (out, in))
static_assert(proven<check::within(grad<float>.d.W_q, m(pt::d_W_q_f64), bound::both(bound::f32.d.W_q, bound::f64.d.W_q))>);
static_assert(proven<check::within(grad<float>.d.W_k, m(pt::d_W_k_f64), bound::both(bound::f32.d.W_k, bound::f64.d.W_k))>);
static_assert(proven<check::within(grad<float>.d.W_v, m(pt::d_W_v_f64), bound::both(bound::f32.d.W_v, bound::f64.d.W_v))>);
static_assert(proven<check::within(grad<double>.d.W_q, m(pt::d_W_q_f64), bound::both(bound::f64.d.W_q, bound::f64.d.W_q))>);
static_assert(proven<check::within(grad<double>.d.W_k, m(pt::d_W_k_f64), bound::both(bound::f64.d.W_k, bound::f64.d.W_k))>);
static_assert(proven<check::within(grad<double>.d.W_v, m(pt::d_W_v_f64), bound::both(bound::f64.d.W_v, bound::f64.d.W_v))>);
static_assert(proven<check::within(m(pt::d_W_q_f32), m(pt::d_W_q_f64), bound::both(bound::f32.d.W_q, bound::f64.d.W_q))>);
static_assert(proven<check::within(m(pt::d_W_k_f32), m(pt::d_W_k_f64), bound::both(bound::f32.d.W_k, bound::f64.d.W_k))>);
static_assert(proven<check::within(m(pt::d_W_v_f32), m(pt::d_W_v_f64), bound::both(bound::f32.d.W_v, bound::f64.d.W_v))>);

// Step 9: the embeddings. x = tok[ids] + pos gets d_x = d_h (the residual) + dQ W_q + dK W_k +
// dV W_v (the three projections). The positions' table gets d_x itself; the tokens' table gets
// each row of d_x at the row of its token: "a" is at positions 0 and 2, so
// d_tok row a = d_x row 0 + d_x row 2 = [-0.1075454 + 0.0376999, -0.0390515 - 0.0295666,
// 0.0253742 + 0.0268735, -0.0116249 + 0.0316477] = [-0.0698456, -0.0686181, 0.0522477, 0.0200228],
// bit for bit; "b" gets d_x row 1; "c" and "d" are not in the batch and get exactly 0.
static_assert(proven<check::equal(qkv::row(grad<float>.d.tok, 0), qkv::row(grad<float>.d_x, 0) + qkv::row(grad<float>.d_x, 2))>);
static_assert(proven<check::equal(qkv::row(grad<float>.d.tok, 1), qkv::row(grad<float>.d_x, 1))>);
static_assert(proven<check::equal(qkv::row(grad<float>.d.tok, 2), matrix<float, 1, 4>{})>);
static_assert(proven<check::equal(qkv::row(grad<float>.d.tok, 3), matrix<float, 1, 4>{})>);
static_assert(proven<check::equal(grad<float>.d.pos, grad<float>.d_x)>);
static_assert(proven<check::within(grad<float>.d_x, m(pt::d_x_f64), bound::both(bound::f32.d_x, bound::f64.d_x))>);
static_assert(proven<check::within(grad<float>.d.tok, m(pt::d_tok_f64), bound::both(bound::f32.d.tok, bound::f64.d.tok))>);
static_assert(proven<check::within(grad<float>.d.pos, m(pt::d_pos_f64), bound::both(bound::f32.d.pos, bound::f64.d.pos))>);
static_assert(proven<check::within(grad<double>.d.tok, m(pt::d_tok_f64), bound::both(bound::f64.d.tok, bound::f64.d.tok))>);
static_assert(proven<check::within(m(pt::d_tok_f32), m(pt::d_tok_f64), bound::both(bound::f32.d.tok, bound::f64.d.tok))>);

// Step 10: the SGD step, W <- W - 0.1 dW for all 108 parameters. W_q(0, 0) = -0.2822167 -
// 0.1 0.0601250 = -0.2882292; b_head(1) = 0.3045433 - 0.1 (-0.4395102) = 0.3484943: the bias of
// the most wanted token ("b") goes up. Within the bounds of PyTorch's float64 step:
static_assert(proven<check::within(stepped<float>.tok, m(pt::sgd_tok_f64), bound::both(bound::f32.stepped.tok, bound::f64.stepped.tok))>);
static_assert(proven<check::within(stepped<float>.pos, m(pt::sgd_pos_f64), bound::both(bound::f32.stepped.pos, bound::f64.stepped.pos))>);
static_assert(proven<check::within(stepped<float>.W_q, m(pt::sgd_W_q_f64), bound::both(bound::f32.stepped.W_q, bound::f64.stepped.W_q))>);
static_assert(proven<check::within(stepped<float>.W_k, m(pt::sgd_W_k_f64), bound::both(bound::f32.stepped.W_k, bound::f64.stepped.W_k))>);
static_assert(proven<check::within(stepped<float>.W_v, m(pt::sgd_W_v_f64), bound::both(bound::f32.stepped.W_v, bound::f64.stepped.W_v))>);
static_assert(proven<check::within(stepped<float>.W_head, m(pt::sgd_W_head_f64),
                                   bound::both(bound::f32.stepped.W_head, bound::f64.stepped.W_head))>);
static_assert(proven<check::within(stepped<float>.b_head, m(pt::sgd_b_head_f64),
                                   bound::both(bound::f32.stepped.b_head, bound::f64.stepped.b_head))>);
static_assert(proven<check::within(stepped<double>.W_q, m(pt::sgd_W_q_f64), bound::both(bound::f64.stepped.W_q, bound::f64.stepped.W_q))>);
static_assert(proven<check::within(stepped<double>.tok, m(pt::sgd_tok_f64), bound::both(bound::f64.stepped.tok, bound::f64.stepped.tok))>);
// The update itself is PyTorch's bit for bit: qkv::sgd_step (one fma, one rounding) applied to
// PyTorch's own float32 gradients gives PyTorch's float32 parameters after opt.step(), all 108.
// (Our float32 gradients are not PyTorch's bits: its sums run in other orders; both are within
// the bounds above.)
template <std::size_t R, std::size_t C>
constexpr bool pytorch_step(const matrix<float, R, C>& w, const double (&g)[R][C], const double (&after)[R][C]) {
  return qkv::sgd_step(w, qkv::matrix_cast<float>(m(g)), 0.1f) == qkv::matrix_cast<float>(m(after));
}
static_assert(pytorch_step(init.tok, pt::d_tok_f32, pt::sgd_tok_f32) && pytorch_step(init.pos, pt::d_pos_f32, pt::sgd_pos_f32));
static_assert(pytorch_step(init.W_q, pt::d_W_q_f32, pt::sgd_W_q_f32) && pytorch_step(init.W_k, pt::d_W_k_f32, pt::sgd_W_k_f32));
static_assert(pytorch_step(init.W_v, pt::d_W_v_f32, pt::sgd_W_v_f32));
static_assert(pytorch_step(init.W_head, pt::d_W_head_f32, pt::sgd_W_head_f32));
static_assert(pytorch_step(init.b_head, pt::d_b_head_f32, pt::sgd_b_head_f32));
// and the model learned: the same batch's loss after the step is 0.956932 (float32 and double),
// down from 1.339145 (PyTorch: 0.9569320356283222 in float64)
constexpr auto loss_after = forward(stepped<float>).loss.loss;
static_assert(loss_after < fwd<float>.loss.loss && forward(stepped<double>).loss.loss < fwd<double>.loss.loss);

// ---------------------------------------------------------------------------------------------
// Step 11: the same gradients, one step of torch.optim.AdamW(lr=0.01) instead (weight decay
// 0.01, betas (0.9, 0.999), eps 1e-8; core/adamw.hpp). On the first step its moments are m =
// 0.1 g and v = 0.001 g^2, the bias corrections divide them by 0.1 and 0.001, and each weight
// moves by lr g / (|g| + eps) after a decay by 1 - lr wd = 0.9999: by about 0.01 against the
// sign of its gradient, however small the gradient. W_q(0, 0) = -0.2822167 0.9999 - 0.01
// 0.0601250 / (0.0601250 + 1e-8) = -0.2821884 - 0.0100000 = -0.2921884. d_tok's rows "c" and
// "d" are exactly 0: those rows only decay.
template <class F>
constexpr parameters<F> adamw(const parameters<F>& p, const parameters<F>& d) {
  const auto one = []<std::size_t R, std::size_t C>(const matrix<F, R, C>& w, const matrix<F, R, C>& g) {
    return qkv::adamw_step(qkv::adamw_parameter<F, R, C>{w}, g, {.lr = 0.01}).w;
  };
  return {one(p.tok, d.tok), one(p.pos, d.pos), one(p.W_q, d.W_q), one(p.W_k, d.W_k),
          one(p.W_v, d.W_v), one(p.W_head, d.W_head), one(p.b_head, d.b_head)};
}
template <class F>
constexpr auto adamw_stepped = adamw(init_in<F>, grad<F>.d);
static_assert(proven<check::equal(qkv::row(adamw_stepped<float>.tok, 2), qkv::map(qkv::row(init.tok, 2), [](float w) { return float(w * 0.9999f); }))>);
// The scalars the step hands its float32 kernels (adamw_step_scalars, the page's input): 1 - lr wd
// = 1 - 0.0001 = 0.9999 -> float 0.9999f; bc1 = 1 - 0.9 = 0.09999999999999998 (double), -(0.01 /
// bc1) = -0.10000000000000002 -> float -0.1f (float's ulp at 0.1 is 7.5e-9, the difference 2e-17)
static_assert(qkv::adamw_step_scalars<float>({.lr = 0.01}, 1).decay == 0.9999f &&
              qkv::adamw_step_scalars<float>({.lr = 0.01}, 1).step_size == -0.1f);
// The bound. In real numbers the step is W (1 - lr wd) - lr r, r = g / (|g| + eps), |r| < 1.
// The gradient's error e_g moves r by at most eps e_g / ((|g| - e_g + eps)(|g| + eps)) when
// e_g < |g| (r's slope is eps / (|g| + eps)^2: tiny unless |g| is near eps; every gradient here
// is 0 exactly or above 1e-4), and by nothing when g = 0 exactly (e_g = 0). The roundings,
// counted from adamw.hpp's code: m = fl(fl(0.1) g) 2 u; v = fl(fl(0.001) g g) 3 u; its sqrt
// 1.5 u + u; / fl(sqrt(bc2)) 2 u; + fl(eps) 2 u: the denominator 6.5 u; the quotient u; the
// step size lr / bc1 (lr's representation, the division, the cast) 3 u; its product u: 13.5 u
// relative on lr r, so 14 u lr |r|. The decay: the cast of 0.9999 and the product, 2 u |W|; the
// last addition u |W'|. 1% on top for the second order.
namespace bound {
template <class F, std::size_t R, std::size_t C>
constexpr matrix<double, R, C> e_adamw(const matrix<double, R, C>& w, const matrix<double, R, C>& w_new,
                                       const matrix<double, R, C>& g, const matrix<double, R, C>& e_g) {
  const double u = qkv::bounds::unit_roundoff<F>(), lr = 0.01, eps = 1e-8;
  matrix<double, R, C> e;
  for (std::size_t k = 0; k < R * C; ++k) {
    const double ag = g.v[k] < 0 ? -g.v[k] : g.v[k], eg = e_g.v[k];
    const double moved = eg == 0 ? 0 : eg < ag ? eps * eg / ((ag - eg + eps) * (ag + eps)) : (eg / eps < 2 ? eg / eps : 2);
    const double aw = w.v[k] < 0 ? -w.v[k] : w.v[k], awn = w_new.v[k] < 0 ? -w_new.v[k] : w_new.v[k];
    e.v[k] = 1.01 * (lr * moved + 14 * u * lr * (ag / (ag + eps)) + 2 * u * aw + u * awn);
  }
  return e;
}
template <class F>
constexpr parameters<double> adamw_errors(const errors<F>& e) {
  const auto& p = init_in<double>;
  const auto& g = grad<double>.d;
  const auto& s = adamw_stepped<double>;
  return {e_adamw<F>(p.tok, s.tok, g.tok, e.d.tok),          e_adamw<F>(p.pos, s.pos, g.pos, e.d.pos),
          e_adamw<F>(p.W_q, s.W_q, g.W_q, e.d.W_q),          e_adamw<F>(p.W_k, s.W_k, g.W_k, e.d.W_k),
          e_adamw<F>(p.W_v, s.W_v, g.W_v, e.d.W_v),          e_adamw<F>(p.W_head, s.W_head, g.W_head, e.d.W_head),
          e_adamw<F>(p.b_head, s.b_head, g.b_head, e.d.b_head)};
}
constexpr auto adamw32 = adamw_errors(f32);
constexpr auto adamw64 = adamw_errors(f64);
}  // namespace bound
static_assert(proven<check::within(adamw_stepped<float>.tok, m(pt::adamw_tok_f64), bound::both(bound::adamw32.tok, bound::adamw64.tok))>);
static_assert(proven<check::within(adamw_stepped<float>.pos, m(pt::adamw_pos_f64), bound::both(bound::adamw32.pos, bound::adamw64.pos))>);
static_assert(proven<check::within(adamw_stepped<float>.W_q, m(pt::adamw_W_q_f64), bound::both(bound::adamw32.W_q, bound::adamw64.W_q))>);
static_assert(proven<check::within(adamw_stepped<float>.W_k, m(pt::adamw_W_k_f64), bound::both(bound::adamw32.W_k, bound::adamw64.W_k))>);
static_assert(proven<check::within(adamw_stepped<float>.W_v, m(pt::adamw_W_v_f64), bound::both(bound::adamw32.W_v, bound::adamw64.W_v))>);
static_assert(proven<check::within(adamw_stepped<float>.W_head, m(pt::adamw_W_head_f64),
                                   bound::both(bound::adamw32.W_head, bound::adamw64.W_head))>);
static_assert(proven<check::within(adamw_stepped<float>.b_head, m(pt::adamw_b_head_f64),
                                   bound::both(bound::adamw32.b_head, bound::adamw64.b_head))>);
static_assert(proven<check::within(adamw_stepped<double>.W_q, m(pt::adamw_W_q_f64), bound::both(bound::adamw64.W_q, bound::adamw64.W_q))>);
// and bit for bit: qkv::adamw_step on PyTorch's own gradients gives PyTorch's parameters after
// opt.step(), all 108, in float32 and in float64 (the operations in PyTorch's order, adamw.hpp)
template <class F, std::size_t R, std::size_t C>
constexpr bool pytorch_adamw(const matrix<float, R, C>& w, const double (&g)[R][C], const double (&after)[R][C]) {
  return qkv::adamw_step(qkv::adamw_parameter<F, R, C>{qkv::matrix_cast<F>(w)}, qkv::matrix_cast<F>(m(g)), {.lr = 0.01}).w ==
         qkv::matrix_cast<F>(m(after));
}
static_assert(pytorch_adamw<float>(init.tok, pt::d_tok_f32, pt::adamw_tok_f32) && pytorch_adamw<float>(init.pos, pt::d_pos_f32, pt::adamw_pos_f32));
static_assert(pytorch_adamw<float>(init.W_q, pt::d_W_q_f32, pt::adamw_W_q_f32) && pytorch_adamw<float>(init.W_k, pt::d_W_k_f32, pt::adamw_W_k_f32));
static_assert(pytorch_adamw<float>(init.W_v, pt::d_W_v_f32, pt::adamw_W_v_f32) && pytorch_adamw<float>(init.W_head, pt::d_W_head_f32, pt::adamw_W_head_f32));
static_assert(pytorch_adamw<float>(init.b_head, pt::d_b_head_f32, pt::adamw_b_head_f32));
static_assert(pytorch_adamw<double>(init.tok, pt::d_tok_f64, pt::adamw_tok_f64) && pytorch_adamw<double>(init.pos, pt::d_pos_f64, pt::adamw_pos_f64));
static_assert(pytorch_adamw<double>(init.W_q, pt::d_W_q_f64, pt::adamw_W_q_f64) && pytorch_adamw<double>(init.W_k, pt::d_W_k_f64, pt::adamw_W_k_f64));
static_assert(pytorch_adamw<double>(init.W_v, pt::d_W_v_f64, pt::adamw_W_v_f64) && pytorch_adamw<double>(init.W_head, pt::d_W_head_f64, pt::adamw_W_head_f64));
static_assert(pytorch_adamw<double>(init.b_head, pt::d_b_head_f64, pt::adamw_b_head_f64));
// the loss went down less than with SGD's step (1.2386, PyTorch's 1.238550498490268): every
// weight moved by about 0.01, where SGD moved the large gradients' weights by up to 0.11
constexpr auto loss_after_adamw = forward(adamw_stepped<float>).loss.loss;
static_assert(loss_after_adamw < fwd<float>.loss.loss && loss_after_adamw > loss_after);

// ---------------------------------------------------------------------------------------------
// the trace

inline void walkthrough() {
  using qkv::io::torch_str;
  const auto& f = fwd<float>;
  const auto& g = grad<float>;
  std::cout << "One training step of a one-layer causal transformer (float32), torch.manual_seed(17)\n"
            << "batch: \"a b a\" (ids 0 1 0) predicting \"b a b\" (targets 1 0 1)\n\n"
            << "x = tok[ids] + pos =\n" << torch_str(f.x) << "\n"
            << "attention weights (causal) =\n" << torch_str(f.attention.weights) << "\n"
            << "h = x + context =\n" << torch_str(f.h) << "\n"
            << "logits = h @ W_head.T + b_head =\n" << torch_str(f.logits) << "\n"
            << "softmax(logits) =\n" << torch_str(f.loss.probabilities) << "\n"
            << "loss = F.cross_entropy(logits, targets) = " << f.loss.loss << "\n\n"
            << "d_logits = (softmax(logits) - onehot(targets)) / 3 =\n" << torch_str(g.d_logits) << "\n"
            << "d_W_head = d_logits.T @ h =\n" << torch_str(g.d_W_head) << "\n"
            << "d_b_head = d_logits.sum(0) =\n" << torch_str(g.d_b_head) << "\n"
            << "d_h = d_logits @ W_head =\n" << torch_str(g.d_h) << "\n"
            << "d_scores =\n" << torch_str(g.attention.attention.d_scores) << "\n"
            << "d_W_q =\n" << torch_str(g.d.W_q) << "\n"
            << "d_W_k =\n" << torch_str(g.d.W_k) << "\n"
            << "d_W_v =\n" << torch_str(g.d.W_v) << "\n"
            << "d_x = d_h + d_x (attention) =\n" << torch_str(g.d_x) << "\n"
            << "d_tok =\n" << torch_str(g.d.tok) << "\n\n"
            << "after SGD(lr=0.1): W_q =\n" << torch_str(stepped<float>.W_q) << "\n"
            << "loss before " << f.loss.loss << ", after " << loss_after << "\n\n"
            << "after AdamW(lr=0.01) instead: W_q =\n" << torch_str(adamw_stepped<float>.W_q) << "\n"
            << "loss after " << loss_after_adamw << "\n";
}

}  // namespace qkv::examples::one_training_step

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain one_training_step --html FILE): the forward, each cell by its
// sum, then the gradient flowing back from the loss to every weight, each product's cells
// explained; the proofs are this file's static_asserts (scripts/page_notes.py).
namespace qkv::examples::one_training_step {

template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  const std::vector<std::string> words{"a", "b", "a"};
  const std::vector<std::string> vocabulary{"a", "b", "c", "d"};
  const auto& f = fwd<float>;
  const auto& g = grad<float>;
  const auto& a = g.attention.attention;
  p.with_truth();  // its matrices without a how are exact inputs, or marked derived()
  p.step(1);
  p.matrix("tok", init.tok).rows(vocabulary).caption("tok: nn.Embedding(4, 4), (vocabulary, d_model)");
  p.matrix("pos", init.pos).caption("pos: nn.Embedding(3, 4), one row per position");
  p.matrix("W_q", init.W_q).caption("W_q: nn.Linear(4, 4, bias=False), (out, in)");
  p.matrix("W_k", init.W_k).caption("W_k");
  p.matrix("W_v", init.W_v).caption("W_v");
  p.matrix("W_head", init.W_head).rows(vocabulary).caption("W_head: nn.Linear(4, 4), (vocabulary, d_model)");
  p.matrix("b_head", init.b_head).cols(vocabulary).caption("b_head");
  p.step(2);
  p.matrix("ids", qkv::matrix_cast<float>(ids)).cols(words).hidden();  // the token ids 0, 1, 0 (a, b, a)
  p.matrix("tok[ids]", qkv::embed(init.tok, ids)).rows(words).caption("tok[ids]: the rows of a, b, a")
      .how(how::embedding("tok", "ids"));
  p.matrix("x", f.x).rows(words).how(how::add("tok[ids]", "pos"));
  p.matrix("queries", f.attention.queries).rows(words).how(how::dot("x", "W_q", 4));
  p.matrix("keys", f.attention.keys).rows(words).how(how::dot("x", "W_k", 4));
  p.matrix("values", f.attention.values).rows(words).how(how::dot("x", "W_v", 4));
  p.matrix("scores", f.attention.scores).rows(words).cols(words).how(how::dot("queries", "keys", 4));
  p.matrix("scaled_scores", f.attention.scaled_scores).rows(words).cols(words)
      .how(how::scaled("scores", 0.5, "1 / sqrt(4) = 1/2", "causal: the key comes after the query"));
  p.matrix("weights", f.attention.weights).rows(words).cols(words).how(how::softmax("scaled_scores"));
  p.heatmap("the causal weights", {"weights"});
  p.matrix("context", f.attention.context).rows(words).how(how::matmul("weights", "values", 3));
  p.matrix("h", f.h).rows(words).how(how::add("x", "context"));
  p.matrix("logits", f.logits).rows(words).cols(vocabulary).how(how::dot("h", "W_head", 4, 0, 0, "b_head"));
  p.matrix("probabilities", f.loss.probabilities).rows(words).cols(vocabulary).how(how::softmax("logits"));
  p.step(3);
  p.step(4);
  p.step(5);
  p.matrix("targets", qkv::matrix_cast<float>(targets)).cols(words).hidden();  // the ids 1, 0, 1 (b, a, b)
  p.matrix("losses", f.loss.losses).rows(words).caption("-log p(target) at each position; the loss is their mean")
      .how(how::cross_entropy_losses("logits", "targets"));
  p.step(6);
  // d_logits as cross_entropy_backward computes it, fl(fl(p - [j == t]) / 3): two steps on the page
  using F = std::remove_cvref_t<decltype(f.logits(0, 0))>;
  matrix<F, 3, 4> minus_onehot{};
  for (std::size_t i = 0; i < 3; ++i) minus_onehot(i, std::size_t(targets(0, i))) = F(-1);
  p.matrix("-onehot(targets)", minus_onehot).rows(words).cols(vocabulary).hidden();
  p.matrix("probabilities - onehot(targets)", f.loss.probabilities + minus_onehot).rows(words).cols(vocabulary)
      .how(how::add("probabilities", "-onehot(targets)")).hidden();
  p.matrix("d_logits", g.d_logits).rows(words).cols(vocabulary).caption("(probabilities - onehot(targets)) / 3")
      .how(how::divided("probabilities - onehot(targets)", 3, "3 positions: the loss is their mean"));
  p.step(7);
  p.matrix("d_logits.T", qkv::transposed(g.d_logits)).rows(vocabulary).cols(words).how(how::transposed("d_logits"));
  p.matrix("d_W_head", g.d_W_head).rows(vocabulary).how(how::matmul("d_logits.T", "h", 3));
  p.matrix("d_b_head", g.d_b_head).cols(vocabulary).caption("the column sums of d_logits")
      .how(how::column_sums("d_logits"));
  p.matrix("d_h", g.d_h).rows(words).how(how::matmul("d_logits", "W_head", 4));
  p.step(8);
  p.matrix("d_weights", a.d_weights).rows(words).cols(words).how(how::dot("d_h", "values", 4));
  p.matrix("D", qkv::row_dots(a.d_weights, f.attention.weights)).rows(words).how(how::row_dot("d_weights", "weights", 3));
  p.matrix("d_scaled_scores", a.d_scaled_scores).rows(words).cols(words)
      .how(how::softmax_backward("weights", "d_weights", "D", "causal: the key comes after the query"));
  p.matrix("d_scores", a.d_scores).rows(words).cols(words).caption("d_scaled_scores / 2")
      .how(how::scaled("d_scaled_scores", 0.5, "1/2, the forward's scale"));
  p.matrix("d_queries", a.d_queries).rows(words).how(how::matmul("d_scores", "keys", 3));
  p.matrix("d_scores.T", qkv::transposed(a.d_scores)).rows(words).cols(words).how(how::transposed("d_scores"));
  p.matrix("d_keys", a.d_keys).rows(words).how(how::matmul("d_scores.T", "queries", 3));
  p.matrix("weights.T", qkv::transposed(f.attention.weights)).rows(words).cols(words).how(how::transposed("weights"));
  p.matrix("d_values", a.d_values).rows(words).how(how::matmul("weights.T", "d_h", 3));
  p.matrix("d_queries.T", qkv::transposed(a.d_queries)).cols(words).how(how::transposed("d_queries"));
  p.matrix("d_W_q", g.d.W_q).how(how::matmul("d_queries.T", "x", 3))
      .proven(m(pt::d_W_q_f64), "PyTorch float64's W_q.weight.grad",
              qkv::max_abs_difference(bound::both(bound::f32.d.W_q, bound::f64.d.W_q), matrix<double, 4, 4>{}),
              "the largest element of its derived bound (step 8)");
  p.matrix("d_keys.T", qkv::transposed(a.d_keys)).cols(words).how(how::transposed("d_keys"));
  p.matrix("d_W_k", g.d.W_k).how(how::matmul("d_keys.T", "x", 3));
  p.matrix("d_values.T", qkv::transposed(a.d_values)).cols(words).how(how::transposed("d_values"));
  p.matrix("d_W_v", g.d.W_v).how(how::matmul("d_values.T", "x", 3));
  p.step(9);
  // d_x = d_h + ((d_queries W_q + d_keys W_k) + d_values W_v): project_backward's d_x per
  // projection, summed as self_attention_backward sums them, then the residual's d_h
  p.matrix("d_queries W_q", qkv::matrix_product(a.d_queries, init_in<float>.W_q)).rows(words).hidden()
      .how(how::matmul("d_queries", "W_q", 4));
  p.matrix("d_keys W_k", qkv::matrix_product(a.d_keys, init_in<float>.W_k)).rows(words).hidden()
      .how(how::matmul("d_keys", "W_k", 4));
  p.matrix("d_values W_v", qkv::matrix_product(a.d_values, init_in<float>.W_v)).rows(words).hidden()
      .how(how::matmul("d_values", "W_v", 4));
  p.matrix("d_queries W_q + d_keys W_k", qkv::matrix_product(a.d_queries, init_in<float>.W_q) +
                                             qkv::matrix_product(a.d_keys, init_in<float>.W_k))
      .rows(words).hidden().how(how::add("d_queries W_q", "d_keys W_k"));
  p.matrix("d_x (attention)", g.attention.d_x).rows(words).hidden()
      .how(how::add("d_queries W_q + d_keys W_k", "d_values W_v"));
  p.matrix("d_x", g.d_x).rows(words).caption("d_h + d_queries W_q + d_keys W_k + d_values W_v")
      .how(how::add("d_h", "d_x (attention)"));
  p.matrix("d_tok", g.d.tok).rows(vocabulary).caption("row a = d_x rows 1 and 3 added; c and d: 0")
      .how(how::embedding_backward("d_x", "ids"));
  p.matrix("d_pos", g.d.pos).caption("d_x itself").how(how::block("d_x", 0));
  p.step(10);
  p.matrix("W_q after SGD", stepped<float>.W_q).caption("W_q - 0.1 d_W_q, one rounding")
      .how(how::sgd("W_q", "d_W_q", 0.1f));
  p.matrix("b_head after SGD", stepped<float>.b_head).cols(vocabulary).how(how::sgd("b_head", "d_b_head", 0.1f));
  // the forward again from every parameter after the step (hidden: the page shows its probabilities)
  const auto f2 = forward(stepped<float>);
  const auto& s2 = stepped<float>;
  p.matrix("tok after SGD", s2.tok).rows(vocabulary).hidden().how(how::sgd("tok", "d_tok", 0.1f));
  p.matrix("pos after SGD", s2.pos).hidden().how(how::sgd("pos", "d_pos", 0.1f));
  p.matrix("W_k after SGD", s2.W_k).hidden().how(how::sgd("W_k", "d_W_k", 0.1f));
  p.matrix("W_v after SGD", s2.W_v).hidden().how(how::sgd("W_v", "d_W_v", 0.1f));
  p.matrix("W_head after SGD", s2.W_head).rows(vocabulary).hidden().how(how::sgd("W_head", "d_W_head", 0.1f));
  p.matrix("tok[ids] after SGD", qkv::embed(s2.tok, ids)).rows(words).hidden().how(how::embedding("tok after SGD", "ids"));
  p.matrix("x after SGD", f2.x).rows(words).hidden().how(how::add("tok[ids] after SGD", "pos after SGD"));
  p.matrix("queries after SGD", f2.attention.queries).rows(words).hidden().how(how::dot("x after SGD", "W_q after SGD", 4));
  p.matrix("keys after SGD", f2.attention.keys).rows(words).hidden().how(how::dot("x after SGD", "W_k after SGD", 4));
  p.matrix("values after SGD", f2.attention.values).rows(words).hidden().how(how::dot("x after SGD", "W_v after SGD", 4));
  p.matrix("scores after SGD", f2.attention.scores).rows(words).cols(words).hidden()
      .how(how::dot("queries after SGD", "keys after SGD", 4));
  p.matrix("scaled_scores after SGD", f2.attention.scaled_scores).rows(words).cols(words).hidden()
      .how(how::scaled("scores after SGD", 0.5, "1 / sqrt(4) = 1/2", "causal: the key comes after the query"));
  p.matrix("weights after SGD", f2.attention.weights).rows(words).cols(words).hidden()
      .how(how::softmax("scaled_scores after SGD"));
  p.matrix("context after SGD", f2.attention.context).rows(words).hidden()
      .how(how::matmul("weights after SGD", "values after SGD", 3));
  p.matrix("h after SGD", f2.h).rows(words).hidden().how(how::add("x after SGD", "context after SGD"));
  p.matrix("logits after SGD", f2.logits).rows(words).cols(vocabulary).hidden()
      .how(how::dot("h after SGD", "W_head after SGD", 4, 0, 0, "b_head after SGD"));
  p.matrix("probabilities after SGD", f2.loss.probabilities).rows(words).cols(vocabulary)
      .how(how::softmax("logits after SGD"));
  p.step(11);
  // AdamW's options are Python doubles; the step hands its kernels 8 float32 scalars made from
  // them (adamw_step_scalars): the page's input, which a learner may edit
  const auto sc = qkv::adamw_step_scalars<float>({.lr = 0.01}, 1);
  p.matrix("AdamW's scalars", matrix<float, 1, 8>{{{sc.decay, sc.beta1, sc.alpha1, sc.beta2, sc.value2, sc.step_size,
                                                  sc.bc2_sqrt, sc.eps}}})
      .cols({"1 - lr wd", "beta1", "1 - beta1", "beta2", "1 - beta2", "-lr / bc1", "sqrt(bc2)", "eps"})
      .caption("AdamW's scalars on step 1 (lr 0.01, betas 0.9, 0.999, eps 1e-8, weight_decay 0.01), in float32");
  p.matrix("W_q after AdamW", adamw_stepped<float>.W_q).caption("W_q 0.9999 - 0.01 g / (|g| + 1e-8)")
      .how(how::adamw("W_q", "d_W_q", "AdamW's scalars"));
}

}  // namespace qkv::examples::one_training_step

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::one_training_step::walkthrough(); }
#endif
