// generator_bench.cpp: throughput of qkv::torch::generator at run time (core/torch.hpp).
//
// The budgets (issue 3): at least 100 million float32 rand values and 30 million randn values per
// second on one core. Each benchmark fills a buffer the way PyTorch's kernel does (rand: one draw
// per float; randn: 16-element Box-Muller blocks with the AVX2 Cephes polynomials) and reports
// items (values) per second. std::mt19937's raw draws are the yardstick for the engine.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include <qkv/core/torch.hpp>

namespace {

constexpr std::size_t n = std::size_t{1} << 20;  // 4 MB of float32: bigger than L2, like a real tensor

void bm_engine_raw_draws(benchmark::State& state) {
  qkv::torch::generator g{123};
  std::vector<std::uint32_t> out(n);
  for (auto _ : state) {
    for (auto& x : out) x = g.random();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(bm_engine_raw_draws);

void bm_std_mt19937_raw_draws(benchmark::State& state) {
  std::mt19937 g{123};
  std::vector<std::uint32_t> out(n);
  for (auto _ : state) {
    for (auto& x : out) x = g();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(bm_std_mt19937_raw_draws);

template <class T>
void bm_rand(benchmark::State& state) {
  qkv::torch::generator g{123};
  std::vector<T> out(n);
  for (auto _ : state) {
    g.uniform_(std::span<T>(out));
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(bm_rand<float>)->Name("rand float32");
BENCHMARK(bm_rand<double>)->Name("rand float64");

// uniform_(-b, b): the fused multiply-add per element (nn.Linear's weights)
template <class T>
void bm_uniform_range(benchmark::State& state) {
  qkv::torch::generator g{123};
  std::vector<T> out(n);
  for (auto _ : state) {
    g.uniform_(std::span<T>(out), -0.036, 0.036);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(bm_uniform_range<float>)->Name("uniform_(-b, b) float32");

template <class T>
void bm_randn(benchmark::State& state) {
  qkv::torch::generator g{123};
  std::vector<T> out(n);
  for (auto _ : state) {
    g.normal_(std::span<T>(out));
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(bm_randn<float>)->Name("randn float32");
BENCHMARK(bm_randn<double>)->Name("randn float64");

// the element-wise path (fewer than 16 elements): randn(5) over and over
void bm_randn_small(benchmark::State& state) {
  qkv::torch::generator g{123};
  float out[5];
  for (auto _ : state) {
    g.normal_(std::span<float>(out));
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 5));
}
BENCHMARK(bm_randn_small)->Name("randn(5) float32, element-wise");

}  // namespace

BENCHMARK_MAIN();
