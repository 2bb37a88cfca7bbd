// The runtime encoder (runtime/encoder.hpp) against the constexpr one (core/encoder.hpp) and
// against PyTorch 1.13's fixtures (tests/data/encoder/), float32 and float64.
//
// Tolerances: the runtime path is another computation of the same function in the same
// precision; its GEMM sums in another order (with fused multiply-adds, fewer roundings: the
// standard model's gamma(K) holds for any order), and it scales the raw scores by 1/sqrt(dh)
// rounded once where the core divides the queries by fl(sqrt(dh)): two roundings per scaled
// score either way (tested below: the factor is correctly rounded), so it obeys the same
// derivation as the core (core/encoder_bounds.hpp). Hence |runtime - core| <= 2 B and
// |runtime - PyTorch float64| <= B + B_float64(PyTorch), B evaluated on the core's trace.
// LayerNorm, ReLU and GELU are the core's own code: on the same input they give the same bits.
// One caveat, small against the bound's 1% margin: the derivation takes exp within 1 ulp (2u);
// the runtime's vexp is measured within 1.01 ulp (runtime/exp.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include <qkv/core/encoder.hpp>
#include <qkv/core/encoder_bounds.hpp>
#include <qkv/runtime/encoder.hpp>

#include "../support/encoder_fixture.hpp"

namespace {

using qkv::matrix;
using qkv::testing::encoder_fixture;
namespace rt = qkv::runtime;

// One vocabulary (issue 27): the runtime's encoder types carry the core's names, and the names
// core and runtime share are one type each. The old names stay for one release as deprecated
// aliases of the new types (g++ warns where they are used, hence the pragma; clang 16 does not
// warn on deprecated alias templates).
static_assert(std::is_same_v<rt::rope_layout, qkv::rope_layout>);
static_assert(std::is_same_v<rt::weight_layout, qkv::weight_layout>);
static_assert(qkv::rope_layout{} == qkv::rope_layout::half_split &&
              rt::rope_options{}.layout == qkv::rope_layout{});
static_assert(qkv::out_in_t::layout == rt::weight_layout::out_in &&
              qkv::in_out_t::layout == rt::weight_layout::in_out &&
              qkv::columns_t::layout == rt::weight_layout::out_in);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static_assert(std::is_same_v<rt::attention_result<float>, rt::multihead_result<float>>);
static_assert(std::is_same_v<rt::encoder_config, rt::encoder_options>);
static_assert(std::is_same_v<rt::encoder_layer_weights<double>, rt::encoder_layer_parameters<double>>);
static_assert(std::is_same_v<rt::encoder_layer_trace<float>, rt::encoder_layer_result<float>>);
#pragma GCC diagnostic pop

template <class T, std::size_t R, std::size_t C>
void expect_within(const rt::dynamic_matrix<T>& actual, const matrix<double, R, C>& expected,
                   const matrix<double, R, C>& bound, const std::string& what) {
  REQUIRE(actual.rows() == R);
  REQUIRE(actual.cols() == C);
  const auto w = qkv::testing::compare_within(actual, expected, bound);
  INFO(what << ": max difference " << w.worst << ", at most " << w.worst_ratio << " of its bound");
  CHECK(w.outside == 0);
}

template <class T, std::size_t N, std::size_t D, std::size_t H, std::size_t F, std::size_t L>
void check_case(const std::string& name) {
  const encoder_fixture fx(name);
  qkv::encoder_parameters<T, D, H, F, L> p;
  qkv::encoder_parameters<double, D, H, F, L> p64;
  std::vector<rt::encoder_layer_parameters<T>> layers;
  for (std::size_t l = 0; l < L; ++l) {
    p.layers[l] = fx.layer<T, D, H, F>(l);
    p64.layers[l] = fx.layer<double, D, H, F>(l);
    layers.push_back(rt::to_runtime(p.layers[l]));
  }
  const auto x = fx.get<T, N, D>(fx.json().at("x"), "x");
  const auto o = fx.options<T>();
  const auto padding = fx.padding<N>();
  const auto core = qkv::encoder_steps(x, p, o, padding);
  const auto core64 = qkv::encoder_steps(qkv::matrix_cast<double>(x), p64, fx.options<double>(), padding);

  rt::encoder_run_options run;
  run.keep_weights = true;  // every step kept, as the fixture has them
  if (fx.json().at("config").contains("key_padding")) {
    run.key_padding = std::vector<unsigned char>(N);
    for (std::size_t j = 0; j < N; ++j) (*run.key_padding)[j] = padding.v[j];
  }
  std::vector<rt::encoder_layer_result<T>> traces;
  rt::encoder(rt::dynamic_matrix<T>(x), layers, rt::to_runtime_options(p.layers[0], o), run, traces);
  REQUIRE(traces.size() == L);

  matrix<double, N, D> e_in{}, e64_in{};
  for (std::size_t l = 0; l < L; ++l) {
    const auto e = qkv::bounds::encoder_layer_error<T>(core.layers[l], p.layers[l], o, e_in);
    const auto e64 = qkv::bounds::encoder_layer_error<double>(core64.layers[l], p64.layers[l],
                                                              fx.options<double>(), e64_in);
    const std::string at = name + (sizeof(T) == 4 ? " float32" : " float64") + " layer " + std::to_string(l);
    // against the constexpr path: 2 B
    expect_within(traces[l].attention.output, qkv::matrix_cast<double>(core.layers[l].attention_output),
                  e.attention_output + e.attention_output, at + " runtime vs core attention_output");
    expect_within(traces[l].output, qkv::matrix_cast<double>(core.layers[l].output), e.output + e.output,
                  at + " runtime vs core output");
    // against PyTorch's float64 run: B + B_float64
    expect_within(traces[l].output, fx.get<double, N, D>(fx.expected("float64", l, "output"), "output"),
                  e.output + e64.output, at + " runtime vs PyTorch output");
    // the masked weights are exactly 0 on both paths
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < N; ++i)
        for (std::size_t j = 0; j < N; ++j)
          if (!core.layers[l].allowed(i, j)) CHECK(traces[l].attention.weights[h](i, j) == T(0));
    e_in = e.output;
    e64_in = e64.output;
  }
}

}  // namespace

TEST_CASE_TEMPLATE("the runtime encoder layer equals the constexpr one and PyTorch's within derived bounds",
                   T, float, double) {
  SUBCASE("post-norm, relu") { check_case<T, 5, 8, 2, 16, 1>("post_norm_relu"); }
  SUBCASE("post-norm, gelu, causal") { check_case<T, 5, 8, 2, 16, 1>("post_norm_gelu_causal"); }
  SUBCASE("pre-norm, relu, key padding") { check_case<T, 5, 8, 2, 16, 1>("pre_norm_relu_padding"); }
  SUBCASE("pre-norm, gelu, causal and padding, 4 heads") {
    check_case<T, 5, 8, 4, 16, 1>("pre_norm_gelu_causal_padding");
  }
  SUBCASE("two layers, post-norm, gelu, padding") {
    check_case<T, 6, 8, 2, 16, 2>("post_norm_gelu_padding_two_layers");
  }
  SUBCASE("two layers, pre-norm, relu, causal") {
    check_case<T, 6, 8, 2, 16, 2>("pre_norm_relu_causal_two_layers");
  }
}

TEST_CASE_TEMPLATE("the score scale 1/sqrt(head dim) is rounded once, to the nearest", T, float, double) {
  // For every head dimension up to 4096: no neighbour of the factor is nearer to 1/sqrt(n) than
  // the factor itself, measured in 50 digits (Boost.Multiprecision). 1/sqrt(n) is irrational or
  // exact, so there are no ties.
  using big = boost::multiprecision::cpp_bin_float_50;
  for (std::size_t n = 1; n <= 4096; ++n) {
    const T c = rt::detail::reciprocal_sqrt_rounded_once<T>(n);
    const big exact = big(1) / boost::multiprecision::sqrt(big(n));
    const big off = abs(big(c) - exact);
    const big below = abs(big(std::nextafter(c, T(0))) - exact);
    const big above = abs(big(std::nextafter(c, std::numeric_limits<T>::infinity())) - exact);
    INFO("n = " << n);
    CHECK(off <= below);
    CHECK(off <= above);
  }
}

TEST_CASE("the runtime LayerNorm gives the constexpr LayerNorm's bits") {
  const matrix<float, 2, 5> x{
      {{1.5f, -2.25f, 0.125f, 7.0f, 3.3f}, {1e3f, 1e3f + 1, 1e3f - 1, 999.5f, 1000.25f}}};
  qkv::layer_norm_parameters<float, 5> p;
  p.weight = matrix<float, 1, 5>{{{1.0f, 0.5f, 2.0f, -1.0f, 0.25f}}};
  p.bias = matrix<float, 1, 5>{{{0.1f, 0.2f, 0.3f, 0.4f, 0.5f}}};
  const auto core = qkv::layer_norm(x, p);
  rt::dynamic_matrix<float> out;
  rt::layer_norm<float>(rt::dynamic_matrix<float>(x).view(), std::vector<float>(p.weight.v, p.weight.v + 5),
                        std::vector<float>(p.bias.v, p.bias.v + 5), 1e-5f, out);
  CHECK(out.to_fixed<2, 5>() == core);
}

TEST_CASE_TEMPLATE(
    "the encoder's key padding gives the bits of attention() with the (T, T) allowed matrix it stands for", T,
    float, double) {
  // the layer passes its T flags as attention_options::key_padding; the attention step must be
  // what it was when the layer built allowed(i, j) = !key_padding[j]: attention() on the layer's
  // attention input with that matrix, bit for bit, kept or streamed; the rest of the layer only
  // reads that output. The fixture with causal masking and padding, then 200 tokens of it
  // (several query blocks, a key block and a half), padded from token 150 on and every 7th
  const encoder_fixture fx("pre_norm_gelu_causal_padding");
  const auto w = rt::to_runtime(fx.layer<T, 8, 4, 16>(0));
  const auto c = rt::to_runtime_options(fx.layer<T, 8, 4, 16>(0), fx.options<T>());
  const auto padding = fx.padding<5>();
  for (const std::size_t n : {std::size_t(5), std::size_t(200)}) {
    rt::dynamic_matrix<T> x(fx.get<T, 5, 8>(fx.json().at("x"), "x"));
    std::vector<unsigned char> pad(5);
    for (std::size_t j = 0; j < 5; ++j) pad[j] = padding.v[j];
    if (n == 200) {
      rt::dynamic_matrix<T> big(n, 8);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < 8; ++k) big(i, k) = x(i % 5, k) + T(0.01) * T(i / 5);
      x = big;
      pad.assign(n, 0);
      for (std::size_t j = 0; j < n; ++j) pad[j] = j >= 150 || j % 7 == 3;
    }
    REQUIRE(std::find(pad.begin(), pad.end(), 1) != pad.end());
    for (const bool keep : {true, false}) {
      CAPTURE(n);
      CAPTURE(keep);
      rt::encoder_run_options run;
      run.key_padding = pad;
      run.keep_weights = keep;
      rt::encoder_layer_result<T> tr;
      rt::encoder_layer(x, w, c, run, tr);
      rt::attention_options<T> opt;
      opt.heads = c.nhead;
      opt.scale = rt::detail::reciprocal_sqrt_rounded_once<T>(c.d_model / c.nhead);
      opt.causal = c.causal;
      opt.keep_weights = keep;
      opt.allowed = rt::mask_matrix(n, n, 1);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) (*opt.allowed)(i, j) = pad[j] ? 0 : 1;
      const auto want =
          rt::attention(tr.attention_input, tr.attention_input, rt::detail::split_in_proj(w, c.d_model), opt);
      REQUIRE(want.output.rows() == n);
      CHECK(std::memcmp(want.output.data(), tr.attention.output.data(), want.output.size() * sizeof(T)) == 0);
      CHECK(std::memcmp(want.concat.data(), tr.attention.concat.data(), want.concat.size() * sizeof(T)) == 0);
      if (keep)
        for (std::size_t h = 0; h < c.nhead; ++h) {
          CHECK(std::memcmp(want.weights[h].data(), tr.attention.weights[h].data(), n * n * sizeof(T)) == 0);
          for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < n; ++j)
              if (pad[j]) CHECK(tr.attention.weights[h](i, j) == T(0));
        }
    }
  }
}

TEST_CASE("the runtime encoder names the field and both shapes of a mismatch") {
  const encoder_fixture fx("post_norm_relu");
  auto w = rt::to_runtime(fx.layer<float, 8, 2, 16>(0));
  const auto c = rt::to_runtime_options(fx.layer<float, 8, 2, 16>(0), fx.options<float>());
  rt::encoder_layer_result<float> tr;
  const rt::dynamic_matrix<float> x(fx.get<float, 5, 8>(fx.json().at("x"), "x"));
  SUBCASE("a linear1 weight of the wrong shape") {
    w.linear1_weight = rt::dynamic_matrix<float>(16, 7);
    CHECK_THROWS_WITH(rt::encoder_layer(x, w, c, {}, tr),
                      "linear1.weight is 16x7 but dim_feedforward x d_model is 16x8");
  }
  SUBCASE("x of the wrong width") {
    CHECK_THROWS_WITH(rt::encoder_layer(rt::dynamic_matrix<float>(5, 6), w, c, {}, tr),
                      "x is 5x6 but d_model is 8 (x must be T x d_model)");
  }
  SUBCASE("a key-padding mask of the wrong length") {
    rt::encoder_run_options run;
    run.key_padding = std::vector<unsigned char>(4);
    CHECK_THROWS_WITH(rt::encoder_layer(x, w, c, run, tr), "key_padding has 4 flags but x has 5 tokens");
  }
  SUBCASE("nhead that does not divide d_model") {
    auto c3 = c;
    c3.nhead = 3;
    CHECK_THROWS_WITH(rt::encoder_layer(x, w, c3, {}, tr), "nhead 3 does not divide d_model 8");
  }
}

TEST_CASE("the deprecated to_runtime_config gives what to_runtime_options gives, for one release") {
  // the fixture's pre-norm GELU causal layer: every setting differs from the defaults
  const encoder_fixture fx("pre_norm_gelu_causal_padding");
  const auto p = fx.layer<float, 8, 4, 16>(0);
  const rt::encoder_options c = rt::to_runtime_options(p, fx.options<float>());
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const rt::encoder_options old = rt::to_runtime_config(p, fx.options<float>());
#pragma GCC diagnostic pop
  CHECK(c.d_model == 8);
  CHECK(c.nhead == 4);
  CHECK(c.dim_feedforward == 16);
  CHECK(c.act == qkv::activation::gelu);
  CHECK(c.norm_first);
  CHECK(c.causal);
  CHECK(c.layer_norm_eps == double(fx.options<float>().layer_norm_eps));
  CHECK((old.d_model == c.d_model && old.nhead == c.nhead && old.dim_feedforward == c.dim_feedforward &&
         old.act == c.act && old.norm_first == c.norm_first && old.causal == c.causal &&
         old.layer_norm_eps == c.layer_norm_eps));
}
