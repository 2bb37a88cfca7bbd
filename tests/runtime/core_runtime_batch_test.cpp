// core_runtime_batch_test.cpp: the constexpr core's padded batch (core/batch.hpp) against the
// runtime's batch_attention (runtime/batch.hpp) on the same inputs: the padded positions behave
// the same (padding keys weigh exactly 0 in both, padded query rows are computed over the real
// keys in both, a sequence with no real key gets weights 0 and context 0 in both, and the
// runtime's output projection then gives b_o), and every other number agrees within a derived
// bound (the two paths sum in their own orders).
#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include <doctest/doctest.h>

#include <qkv/core/batch.hpp>
#include <qkv/runtime/batch.hpp>

namespace rt = qkv::runtime;

namespace {

constexpr std::size_t B = 3, N = 4, d = 3, dk = 2, dv = 2;
constexpr std::array<std::size_t, B> lengths{4, 2, 0};

/// inputs in [-1, 1], as exact binary fractions
constexpr double input(std::size_t k, std::size_t salt) {
  return double(static_cast<int>((k * 37 + salt * 11) % 17) - 8) / 8.0;
}

struct inputs {
  qkv::stack<double, B, N, d> x{};
  qkv::matrix<double, dk, d> wq{}, wk{};
  qkv::matrix<double, dv, d> wv{};
  constexpr inputs() {
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t k = 0; k < N * d; ++k) x[b].v[k] = input(k + 20 * b, 1);
    for (std::size_t k = 0; k < dk * d; ++k) wq.v[k] = input(k, 2), wk.v[k] = input(k, 3);
    for (std::size_t k = 0; k < dv * d; ++k) wv.v[k] = input(k, 4);
  }
};

}  // namespace

TEST_CASE("the core's padded batch and the runtime's batch_attention treat padded positions the same") {
  constexpr inputs in;
  constexpr auto core = qkv::batch_self_attention(in.x, lengths, in.wq, in.wk, in.wv, qkv::out_in);

  rt::attention_weights<double> w;
  w.q = {rt::to_dynamic(in.wq), {}};
  w.k = {rt::to_dynamic(in.wk), {}};
  w.v = {rt::to_dynamic(in.wv), {}};
  std::vector<rt::dynamic_matrix<double>> xs;
  std::vector<rt::batch_sequence<double>> seqs;
  for (std::size_t b = 0; b < B; ++b) xs.push_back(rt::to_dynamic(in.x[b]));
  for (std::size_t b = 0; b < B; ++b) {
    std::vector<unsigned char> pad(N, 0);
    for (std::size_t j = lengths[b]; j < N; ++j) pad[j] = 1;
    seqs.push_back({xs[b].view(), std::nullopt, pad});
  }
  rt::attention_options<double> opt;  // one head, scale 1/sqrt(2), keep_weights
  opt.keep_weights = true;
  const auto r = rt::batch_attention<double>(std::span<const rt::batch_sequence<double>>(seqs), w, opt);
  REQUIRE(r.size() == B);

  // The tolerance: |x|, |W| <= 1 and d = 3, so |q|, |k|, |v| <= 3 and each path's q, k, v are within
  // gamma_3 3 = 3e-15 of exact; a score (2 terms, |q·k| <= 18) within gamma_2 18 + 2 (3 x 3e-15)
  // = 2.2e-14, scaled by 1/sqrt(2): 1.6e-14 (+ a rounding of the scale, 2u 13 = 3e-15); the
  // weights within 2 x 1.9e-14 + (2 (2 + 26) + 4) u = 4.5e-14 relative; the context (4 terms,
  // weights summing to 1, |v| <= 3) within 3 x 4.5e-14 + 3e-15 + gamma_4 3 = 1.4e-13. Each path
  // within that of the exact value: 3e-13 between them, 5e-13 with room for the weights' sum.
  const double tolerance = 5e-13;
  for (std::size_t b = 0; b < B; ++b) {
    INFO("sequence " << b << ", length " << lengths[b]);
    const auto& c = core.sequence[b];
    REQUIRE(r[b].weights.size() == 1);
    for (std::size_t i = 0; i < N; ++i) {
      for (std::size_t j = 0; j < N; ++j) {
        if (j >= lengths[b]) {  // a padding key: exactly 0 in both, whatever the query row
          CHECK(c.weights(i, j) == 0.0);
          CHECK(r[b].weights[0](i, j) == 0.0);
        } else {  // padded query rows (i >= length) included: computed in both
          CHECK(std::fabs(c.weights(i, j) - r[b].weights[0](i, j)) <= tolerance);
        }
      }
      for (std::size_t k = 0; k < dv; ++k) CHECK(std::fabs(c.context(i, k) - r[b].output(i, k)) <= tolerance);
    }
  }
  // the sequence with no real key: weights 0 and context 0 in both, exactly
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t k = 0; k < dv; ++k) {
      CHECK(core.sequence[2].context(i, k) == 0.0);
      CHECK(r[2].output(i, k) == 0.0);
    }

  // with an output projection the runtime gives such a row b_o (the core has no output projection)
  w.o = rt::linear_weights<double>{rt::dynamic_matrix<double>(2, dv, 0.5), {0.25, -0.75}};
  const auto ro = rt::batch_attention<double>(std::span<const rt::batch_sequence<double>>(seqs), w, opt);
  for (std::size_t i = 0; i < N; ++i) {
    CHECK(ro[2].output(i, 0) == 0.25);
    CHECK(ro[2].output(i, 1) == -0.75);
  }
}
