// backward_bench.cpp: W7_backward, the run-time attention backward (runtime/backward.hpp,
// multihead_backward.hpp) beside the forward it belongs to, at 1 and 2 threads.
//
//   W4      attention only: q, k, v 2048 x 64, one head (causal and not)
//   W5      attention only: q, k, v 1024 x 768, 12 heads of 64 (causal and not)
//   W3      the BERT layer: x 128 x 768, 12 heads of 64, Q/K/V and output projections with bias
// Names: W7_backward/<workload>[_causal]/<step>/threads:<n>, step
//   forward           qkv's own forward: W4/W5 detail::attend_heads_streaming (the path of
//                     scaled_dot_product_attention and of attention_bench's W4/W5), W3
//                     attention() with keep_weights = false (streaming)
//   forward_saving    attention_forward_for_backward (the forward that saves the row statistics)
//   backward          attention_backward alone (from the saved forward)
//   forward_backward  forward_saving + backward: one training step's attention
// Counter extra_MiB (backward): the most heap memory attention_backward holds at once beyond its
// inputs and its (pre-sized) gradients, measured once on a fresh thread with a fresh pool, so
// that thread-local tiles and packing space are counted. bench/torch_backward.py times PyTorch
// 1.13 autograd on the same cells. docs/performance.md, "W7_backward", has the numbers.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <qkv/runtime/backward.hpp>
#include <qkv/runtime/multihead_backward.hpp>
#include <qkv/runtime/runtime.hpp>

// heap accounting (as attention_bench.cpp's): every operator new in this program is counted
namespace heap {
std::atomic<long long> live{0}, peak{0};
inline void add(long long n) {
  const long long now = live.fetch_add(n) + n;
  long long p = peak.load();
  while (now > p && !peak.compare_exchange_weak(p, now)) {}
}
}  // namespace heap

// the header read and the free in one out-of-line function: inlined into a delete of a small
// array, g++ -O3 warns of the read before it (-Warray-bounds, -Wmismatched-new-delete)
[[gnu::noinline]] void release(void* p) noexcept {
  if (!p) return;
  char* base = static_cast<char*>(p) - 16;
  heap::add(-static_cast<long long>(*reinterpret_cast<std::size_t*>(base)));
  std::free(base);
}

void* operator new(std::size_t n) {
  void* p = std::malloc(n + 16);
  if (!p) throw std::bad_alloc();
  *static_cast<std::size_t*>(p) = n;
  heap::add(static_cast<long long>(n));
  return static_cast<char*>(p) + 16;
}
void operator delete(void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void* operator new(std::size_t n, std::align_val_t a) {
  const std::size_t al = std::max<std::size_t>(static_cast<std::size_t>(a), 16);
  void* raw = std::malloc(n + al + 16);
  if (!raw) throw std::bad_alloc();
  auto addr = (reinterpret_cast<std::uintptr_t>(raw) + 16 + al - 1) / al * al;
  reinterpret_cast<void**>(addr)[-1] = raw;
  reinterpret_cast<std::size_t*>(addr)[-2] = n;
  heap::add(static_cast<long long>(n));
  return reinterpret_cast<void*>(addr);
}
void operator delete(void* p, std::align_val_t) noexcept {
  if (!p) return;
  heap::add(-static_cast<long long>(reinterpret_cast<std::size_t*>(p)[-2]));
  std::free(reinterpret_cast<void**>(p)[-1]);
}
void operator delete(void* p, std::size_t, std::align_val_t a) noexcept { operator delete(p, a); }
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete[](void* p, std::align_val_t a) noexcept { operator delete(p, a); }
void operator delete[](void* p, std::size_t, std::align_val_t a) noexcept { operator delete(p, a); }

namespace {

namespace rt = qkv::runtime;
using matrixf = rt::dynamic_matrix<float>;

matrixf random(std::size_t r, std::size_t c, unsigned seed, float sigma = 1) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0, sigma);
  matrixf m(r, c);
  for (std::size_t k = 0; k < m.size(); ++k) m.data()[k] = d(g);
  return m;
}

enum class step { forward, forward_saving, backward, forward_backward };

/// W4 (heads = 1, T = 2048, d = 64) and W5 (heads = 12, T = 1024, d = 768)
void attention_only(benchmark::State& state, std::size_t T, std::size_t d, std::size_t heads, bool causal,
                    step what) {
  const std::size_t threads = std::size_t(state.range(0));
  const matrixf q = random(T, d, 1), k = random(T, d, 2), v = random(T, d, 3), d_out = random(T, d, 4);
  const float scale = 0.125f;
  rt::attention_mask mask;
  mask.causal = causal;
  matrixf out(T, d);
  rt::attention_statistics<float> stats;
  rt::attention_gradients<float> g;
  rt::thread_pool pool(threads);
  const auto forward = [&] {
    rt::detail::attend_heads_streaming<float>(q.view(), k.view(), v.view(), out.view(), heads, scale, mask,
                                              &pool, [](std::size_t, std::size_t, std::size_t) {});
  };
  const auto saving = [&] {
    rt::attention_forward_for_backward<float>(q.view(), k.view(), v.view(), out.view(), heads, scale, mask,
                                              stats, &pool);
  };
  const auto backward = [&](rt::thread_pool* p) {
    rt::attention_backward<float>(q.view(), k.view(), v.view(), out.view(), d_out.view(), heads, scale, mask,
                                  stats, g, p);
  };
  saving();
  backward(&pool);               // sizes the gradients
  if (what == step::backward) {  // extra memory, on a fresh thread with a fresh pool
    long long extra = 0;
    std::thread([&] {
      rt::thread_pool fresh(threads);
      const long long before = heap::live.load();
      heap::peak.store(before);
      backward(&fresh);
      extra = heap::peak.load() - before;
    }).join();
    state.counters["extra_MiB"] = double(extra) / (1 << 20);
  }
  for (auto _ : state) {
    switch (what) {
      case step::forward: forward(); break;
      case step::forward_saving: saving(); break;
      case step::backward: backward(&pool); break;
      case step::forward_backward:
        saving();
        backward(&pool);
        break;
    }
    benchmark::DoNotOptimize(g.d_queries.data());
    benchmark::DoNotOptimize(out.data());
  }
}

/// W3: the BERT layer
void bert_layer(benchmark::State& state, step what) {
  const std::size_t threads = std::size_t(state.range(0)), T = 128, E = 768;
  const matrixf x = random(T, E, 1), dy = random(T, E, 2);
  rt::attention_weights<float> w;
  unsigned seed = 3;
  for (auto* l : {&w.q, &w.k, &w.v}) {
    l->weight = random(E, E, seed++, 1 / std::sqrt(float(E)));
    l->bias = std::vector<float>(E, 0.01f);
  }
  w.o =
      rt::linear_weights<float>{random(E, E, seed++, 1 / std::sqrt(float(E))), std::vector<float>(E, 0.01f)};
  rt::attention_options<float> opt;
  opt.heads = 12;
  opt.keep_weights = false;
  rt::multihead_result<float> r, plain;
  rt::attention_statistics<float> stats;
  rt::attention_gradients<float> g;
  rt::thread_pool pool(threads);
  const auto saving = [&] { rt::attention_forward_for_backward<float>(x.view(), w, opt, r, stats, &pool); };
  const auto backward = [&](rt::thread_pool* p) {
    rt::attention_backward<float>(x.view(), w, opt, r, stats, dy.view(), g, p);
  };
  saving();
  backward(&pool);
  rt::attention<float>(x.view(), x.view(), w, opt, plain, &pool);
  if (what == step::backward) {
    long long extra = 0;
    std::thread([&] {
      rt::thread_pool fresh(threads);
      const long long before = heap::live.load();
      heap::peak.store(before);
      backward(&fresh);
      extra = heap::peak.load() - before;
    }).join();
    state.counters["extra_MiB"] = double(extra) / (1 << 20);
  }
  for (auto _ : state) {
    switch (what) {
      case step::forward: rt::attention<float>(x.view(), x.view(), w, opt, plain, &pool); break;
      case step::forward_saving: saving(); break;
      case step::backward: backward(&pool); break;
      case step::forward_backward:
        saving();
        backward(&pool);
        break;
    }
    benchmark::DoNotOptimize(g.d_x.data());
    benchmark::DoNotOptimize(r.output.data());
  }
}

int register_all() {
  const std::pair<const char*, step> steps[] = {{"forward", step::forward},
                                                {"forward_saving", step::forward_saving},
                                                {"backward", step::backward},
                                                {"forward_backward", step::forward_backward}};
  for (const bool causal : {false, true})
    for (const auto& [sname, s] : steps) {
      const std::string c = causal ? "_causal" : "";
      benchmark::RegisterBenchmark(
          ("W7_backward/W4" + c + "/" + sname).c_str(),
          [causal, s = s](benchmark::State& st) { attention_only(st, 2048, 64, 1, causal, s); })
          ->ArgName("threads")
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(
          ("W7_backward/W5" + c + "/" + sname).c_str(),
          [causal, s = s](benchmark::State& st) { attention_only(st, 1024, 768, 12, causal, s); })
          ->ArgName("threads")
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  for (const auto& [sname, s] : steps)
    benchmark::RegisterBenchmark((std::string("W7_backward/W3/") + sname).c_str(),
                                 [s = s](benchmark::State& st) { bert_layer(st, s); })
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
