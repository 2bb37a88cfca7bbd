// pool_bench.cpp: what one parallel_for costs on a 2-thread pool when its tasks do nothing, so
// that only the hand-over is timed: back to back (gap 0) and after `gap` microseconds of work on
// the caller alone, with the pool's spin at 0 (workers sleep at once) and at the default 200 us.
// Manual time: only the parallel_for call is timed, not the gap. docs/performance.md, "The pool's
// spin", has the numbers and the command:
//   ./build-bench/bench/qkv_pool_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstddef>

#include <qkv/runtime/thread_pool.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

/// keep the caller busy (not asleep) for `us` microseconds, as a kernel's serial part would
void busy_for(double us) {
  const auto start = clock_type::now();
  while (std::chrono::duration<double, std::micro>(clock_type::now() - start).count() < us) {}
}

// args: gap in microseconds, spin in microseconds
void parallel_for_two_tasks(benchmark::State& state) {
  const auto gap = double(state.range(0));
  qkv::runtime::thread_pool pool(2);
  pool.set_spin(std::chrono::microseconds(state.range(1)));
  std::atomic<std::size_t> ran{0};
  for (auto _ : state) {
    busy_for(gap);
    const auto start = clock_type::now();
    pool.parallel_for(2, [&](std::size_t) { ran.fetch_add(1, std::memory_order_relaxed); });
    state.SetIterationTime(std::chrono::duration<double>(clock_type::now() - start).count());
  }
  benchmark::DoNotOptimize(ran.load());
}

}  // namespace

BENCHMARK(parallel_for_two_tasks)
    ->ArgNames({"gap_us", "spin_us"})
    ->ArgsProduct({{0, 100, 300, 1000}, {0, 200}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
