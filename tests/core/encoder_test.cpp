// The constexpr encoder (core/encoder.hpp) run at run time against PyTorch 1.13's
// nn.TransformerEncoderLayer / nn.TransformerEncoder (tests/data/encoder/, made by
// scripts/fixtures/encoder_fixtures.py), float32 and float64, every layer's steps.
//
// Tolerances: |ours - PyTorch float64| <= B_ours + B_torch, where B_ours bounds our rounding
// error (core/encoder_bounds.hpp, derived step by step from the standard model, evaluated on
// our own trace in the precision we computed in) and B_torch bounds PyTorch's float64 run's
// own rounding (the same derivation with u = 2^-53: its GEMMs sum in another order, but every
// order obeys the same gamma(K) bound). Both runs start from the same numbers (the fixture
// draws everything in float32), so nothing else separates them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include <qkv/core/encoder.hpp>
#include <qkv/core/encoder_bounds.hpp>
#include <qkv/core/masks.hpp>

#include "../support/encoder_fixture.hpp"

namespace {

using qkv::matrix;
using qkv::testing::encoder_fixture;

/// every element of actual within its bound of expected; reports the worst ratio as llm.c does
template <class T, std::size_t R, std::size_t C>
double expect_rows_within(const matrix<T, R, C>& actual, const matrix<double, R, C>& expected,
                          const matrix<double, R, C>& bound, const std::string& what) {
  const auto w = qkv::testing::compare_within(actual, expected, bound);
  INFO(what << ": max difference " << w.worst << ", at most " << w.worst_ratio << " of its bound");
  CHECK(w.outside == 0);
  return w.worst_ratio;
}

template <std::size_t R, std::size_t C>
matrix<double, R, C> plus(const matrix<double, R, C>& a, const matrix<double, R, C>& b) {
  return a + b;
}

/// one fixture through our stack in T, every layer's steps against PyTorch's float64 run
template <class T, std::size_t N, std::size_t D, std::size_t H, std::size_t F, std::size_t L>
void check_case(const std::string& name) {
  const encoder_fixture fx(name);
  qkv::encoder_parameters<T, D, H, F, L> p;
  qkv::encoder_parameters<double, D, H, F, L> p64;
  for (std::size_t l = 0; l < L; ++l) {
    p.layers[l] = fx.layer<T, D, H, F>(l);
    p64.layers[l] = fx.layer<double, D, H, F>(l);
  }
  const auto x = fx.get<T, N, D>(fx.json().at("x"), "x");
  const auto o = fx.options<T>();
  const auto o64 = fx.options<double>();
  const auto padding = fx.padding<N>();
  const auto r = qkv::encoder_steps(x, p, o, padding);
  // PyTorch's own float64 rounding, bounded on our float64 trace (the same numbers to ~1e-15)
  const auto r64 = qkv::encoder_steps(qkv::matrix_cast<double>(x), p64, o64, padding);
  matrix<double, N, D> ours{}, theirs{};
  for (std::size_t l = 0; l < L; ++l) {
    const auto e = qkv::bounds::encoder_layer_error<T>(r.layers[l], p.layers[l], o, ours);
    const auto e64 = qkv::bounds::encoder_layer_error<double>(r64.layers[l], p64.layers[l], o64, theirs);
    const std::string at =
        name + " (" + (sizeof(T) == 4 ? "float32" : "float64") + ") layer " + std::to_string(l);
    const auto want = [&](const char* field) {
      return fx.get<double, N, D>(fx.expected("float64", l, field), field);
    };
    expect_rows_within(r.layers[l].attention_output, want("attention_output"),
                       plus(e.attention_output, e64.attention_output), at + " attention_output");
    expect_rows_within(r.layers[l].hidden, want("hidden"), plus(e.hidden, e64.hidden), at + " hidden");
    expect_rows_within(r.layers[l].feed_forward.output, want("feed_forward_output"),
                       plus(e.feed_forward_output, e64.feed_forward_output), at + " feed_forward_output");
    const double ratio =
        expect_rows_within(r.layers[l].output, want("output"), plus(e.output, e64.output), at + " output");
    std::printf("%-48s output within %.3g of its bound (bound %.3g)\n", at.c_str(), ratio,
                qkv::max_abs_difference(plus(e.output, e64.output), matrix<double, N, D>{}));
    // the attention weights of every head: each weight is a softmax; a masked key gets exactly 0
    const auto w =
        fx.get<double, H * N, N>(fx.expected("float64", l, "attention_weights"), "attention_weights");
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < N; ++i)
        for (std::size_t j = 0; j < N; ++j) {
          if (!r.layers[l].allowed(i, j)) {
            CHECK(r.layers[l].attention.weights(h, i, j) == T(0));
            CHECK(w(h * N + i, j) == 0.0);
          }
        }
    ours = e.output;
    theirs = e64.output;
  }
  CHECK(r.output == r.layers[L - 1].output);
}

/// PyTorch's float32 run against its float64 run, within B_float32 + B_float64 of the same
/// derivation: the bounds hold for PyTorch's algorithms too, not only ours
template <std::size_t N, std::size_t D, std::size_t H, std::size_t F, std::size_t L>
void check_torch_float32(const std::string& name) {
  const encoder_fixture fx(name);
  qkv::encoder_parameters<float, D, H, F, L> p;
  for (std::size_t l = 0; l < L; ++l) p.layers[l] = fx.layer<float, D, H, F>(l);
  const auto r = qkv::encoder_steps(fx.get<float, N, D>(fx.json().at("x"), "x"), p, fx.options<float>(),
                                    fx.padding<N>());
  const auto e32 = qkv::bounds::encoder_error<float>(r, p, fx.options<float>());
  const auto e64 = qkv::bounds::encoder_error<double>(r, p, fx.options<float>());
  expect_rows_within(fx.get<float, N, D>(fx.expected("float32", std::size_t(-1), "output"), "output"),
                     fx.get<double, N, D>(fx.expected("float64", std::size_t(-1), "output"), "output"),
                     plus(plus(e32, e32), e64), name + ": PyTorch float32 against PyTorch float64");
}

}  // namespace

TEST_CASE_TEMPLATE("an encoder layer equals nn.TransformerEncoderLayer within derived bounds", T, float,
                   double) {
  SUBCASE("post-norm, relu, no mask") { check_case<T, 5, 8, 2, 16, 1>("post_norm_relu"); }
  SUBCASE("post-norm, gelu, causal") { check_case<T, 5, 8, 2, 16, 1>("post_norm_gelu_causal"); }
  SUBCASE("pre-norm, relu, key padding") { check_case<T, 5, 8, 2, 16, 1>("pre_norm_relu_padding"); }
  SUBCASE("pre-norm, gelu, causal and key padding, 4 heads") {
    check_case<T, 5, 8, 4, 16, 1>("pre_norm_gelu_causal_padding");
  }
}

TEST_CASE_TEMPLATE("a stack of two layers equals nn.TransformerEncoder within derived bounds", T, float,
                   double) {
  SUBCASE("post-norm, gelu, key padding") {
    check_case<T, 6, 8, 2, 16, 2>("post_norm_gelu_padding_two_layers");
  }
  SUBCASE("pre-norm, relu, causal") { check_case<T, 6, 8, 2, 16, 2>("pre_norm_relu_causal_two_layers"); }
}

TEST_CASE("PyTorch's own float32 runs are within the derived bounds of its float64 runs") {
  check_torch_float32<5, 8, 2, 16, 1>("post_norm_relu");
  check_torch_float32<5, 8, 2, 16, 1>("post_norm_gelu_causal");
  check_torch_float32<5, 8, 2, 16, 1>("pre_norm_relu_padding");
  check_torch_float32<5, 8, 4, 16, 1>("pre_norm_gelu_causal_padding");
  check_torch_float32<6, 8, 2, 16, 2>("post_norm_gelu_padding_two_layers");
  check_torch_float32<6, 8, 2, 16, 2>("pre_norm_relu_causal_two_layers");
}

TEST_CASE("padding tokens do not change the real tokens' outputs") {
  // the same 3 real tokens alone, and followed by 2 padding tokens of any content
  const encoder_fixture fx("pre_norm_relu_padding");
  const auto p = fx.layer<double, 8, 2, 16>(0);
  const auto x = fx.get<double, 5, 8>(fx.json().at("x"), "x");
  const auto o = fx.options<double>();
  const auto padded = qkv::encoder_layer(x, p, o, fx.padding<5>());
  const auto alone = qkv::encoder_layer(qkv::block<3, 8>(x, 0, 0), p, o);
  auto other = x;
  for (std::size_t j = 0; j < 8; ++j) other(3, j) = other(4, j) = 1e3 * double(j + 1);
  const auto padded_other = qkv::encoder_layer(other, p, o, fx.padding<5>());
  // the real rows: the same sums of the same products; the masked terms are exact zeros, and
  // x + 0 == x, so the bits agree
  CHECK(qkv::block<3, 8>(padded, 0, 0) == alone);
  CHECK(qkv::block<3, 8>(padded_other, 0, 0) == alone);
}
