// Example 09's constexpr flash attention (core/online_softmax.hpp, key blocks of 2) against the
// runtime's streaming path (runtime/attention.hpp) on the same case: tutorial 001's sentence.
// Tolerances are derived, not fitted: each path is within its own online-softmax bound
// (qkv::online_softmax_error, the derivation in the header and on docs/examples/09) of the exact
// softmax(s) v of its inputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

#include <qkv/core/bounds.hpp>
#include <qkv/runtime/runtime.hpp>

#define QKV_EXAMPLE_NO_MAIN
#include "../../examples/09_flash_attention.cpp"

namespace rt = qkv::runtime;
namespace flash = qkv::examples::flash;

namespace {

constexpr std::size_t S = 6, Dv = 28;

/// the range of row i of the scores and the largest |v| of column c
double row_range(const qkv::matrix<float, 6, 6>& s, std::size_t i) {
  double hi = s(i, 0), lo = s(i, 0);
  for (std::size_t j = 1; j < S; ++j) {
    hi = std::max(hi, double(s(i, j)));
    lo = std::min(lo, double(s(i, j)));
  }
  return hi - lo;
}
double column_max(std::size_t c) {
  double m = 0;
  for (std::size_t j = 0; j < S; ++j) m = std::max(m, std::fabs(double(flash::attn.values(j, c))));
  return m;
}

}  // namespace

TEST_CASE("the runtime's streaming path on example 09's scores agrees with the constexpr blocks of 2") {
  // the same scaled scores and values: q = the scores (6, 6), k = the identity, scale 1, so the
  // runtime's q kᵀ is the scores exactly (each sum is s_ij · 1 plus products with 0)
  rt::dynamic_matrix<float> q(flash::attn.scaled_scores), k(qkv::identity<float, 6>()), v(flash::attn.values),
      out(S, Dv);
  rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), out.view(), 1.0f);
  for (std::size_t i = 0; i < S; ++i)
    for (std::size_t c = 0; c < Dv; ++c) {
      const double range = row_range(flash::attn.scaled_scores, i), vmax = column_max(c);
      // the runtime reads these 6 keys in one block (runtime::key_block = 128), the example in 3;
      // vexp is within 1 ulp (2u), as math.hpp's exp: exp_units = 2 for both
      const double bound = qkv::online_softmax_error<float>(S, rt::key_block, range, vmax) +
                           qkv::online_softmax_error<float>(S, flash::B, range, vmax);
      INFO("query " << i << ", column " << c);
      CHECK(std::fabs(double(out(i, c)) - double(flash::flash_context(i, c))) <= bound);
    }
}

TEST_CASE("the runtime's streaming path from q, k and v agrees with example 09 within the scores' rounding") {
  // the natural call: q, k, v and the scale 1/sqrt(24). The scores now round differently: the
  // example divides the float q·k by float(sqrt(24)) (2 roundings: the sqrt and the division), the
  // runtime multiplies its fma-summed q·k by float(1/sqrt(24)) (3: sqrt, 1/x, the product). Both
  // sums of 24 products are within gamma_24 sum_k |q_ik| |k_jk| of the exact q·k, so
  //   |s_rt - s_ex| <= 2 gamma_24 sum |q||k| / sqrt(24) (1 + 4u) + 5u |s| (1 + gamma_24)  = ds_ij.
  // A score error ds moves each weight by at most w_j (ds_j + sum_k w_k ds_k) <= 2 w_j ds_max
  // (first order; bounds::softmax_rows_error's 1% covers the second order for ds < 1e-3), so the
  // output by at most 2 ds_max sum_j w_j |v_jc| <= 2 ds_max max_j |v_jc|.
  rt::dynamic_matrix<float> q(flash::attn.queries), k(flash::attn.keys), v(flash::attn.values), out(S, Dv);
  const float scale = rt::default_scale<float>(24);
  rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), out.view(), scale);
  const double u = 0x1p-24, g24 = qkv::bounds::gamma<float>(24);
  for (std::size_t i = 0; i < S; ++i) {
    double ds = 0;
    for (std::size_t j = 0; j < S; ++j) {
      double qk = 0;
      for (std::size_t x = 0; x < 24; ++x) qk += std::fabs(double(q(i, x))) * std::fabs(double(k(j, x)));
      const double e = 2 * g24 * qk / std::sqrt(24.0) * (1 + 4 * u) +
                       5 * u * std::fabs(double(flash::attn.scaled_scores(i, j))) * (1 + g24);
      ds = std::max(ds, e);
    }
    REQUIRE(ds < 1e-3);
    const double range = row_range(flash::attn.scaled_scores, i);
    for (std::size_t c = 0; c < Dv; ++c) {
      const double vmax = column_max(c);
      const double bound = qkv::online_softmax_error<float>(S, rt::key_block, range + 2 * ds, vmax) +
                           qkv::online_softmax_error<float>(S, flash::B, range, vmax) + 1.01 * 2 * ds * vmax;
      INFO("query " << i << ", column " << c << ", ds " << ds);
      CHECK(std::fabs(double(out(i, c)) - double(flash::flash_context(i, c))) <= bound);
    }
  }
}

TEST_CASE(
    "a key masked at run time is skipped by the streaming path, as a -inf score by the constexpr step") {
  // key 'dessert' (index 4) masked for every query: the runtime's allowed flags against the
  // example's scores with -inf in column 4 (the same inputs otherwise; the identity trick above)
  auto masked_scores = flash::attn.scaled_scores;
  for (std::size_t i = 0; i < S; ++i) masked_scores(i, 4) = -std::numeric_limits<float>::infinity();
  const auto expected = qkv::online_attention<flash::B>(masked_scores, flash::attn.values);
  rt::dynamic_matrix<float> q(flash::attn.scaled_scores), k(qkv::identity<float, 6>()), v(flash::attn.values),
      out(S, Dv);
  rt::mask_matrix allowed(S, S, 1);
  for (std::size_t i = 0; i < S; ++i) allowed(i, 4) = 0;
  const rt::attention_mask mask{false, &allowed};
  rt::scaled_dot_product_attention<float>(q.view(), k.view(), v.view(), out.view(), 1.0f, mask);
  for (std::size_t i = 0; i < S; ++i) {
    double hi = -1e30, lo = 1e30;  // the range of the 5 unmasked scores
    for (std::size_t j = 0; j < S; ++j)
      if (j != 4) {
        hi = std::max(hi, double(masked_scores(i, j)));
        lo = std::min(lo, double(masked_scores(i, j)));
      }
    for (std::size_t c = 0; c < Dv; ++c) {
      const double vmax = column_max(c);
      const double bound = qkv::online_softmax_error<float>(S, rt::key_block, hi - lo, vmax) +
                           qkv::online_softmax_error<float>(S, flash::B, hi - lo, vmax);
      INFO("query " << i << ", column " << c);
      CHECK(std::fabs(double(out(i, c)) - double(expected(i, c))) <= bound);
    }
  }
}
