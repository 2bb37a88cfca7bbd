// train_bench.cpp: W8_train, one training step of `qkv train`'s models (runtime/trainer.hpp):
// forward, cross-entropy, backward and AdamW on a batch of 64, at 1 and 2 threads.
//
//   reverse   d_model 32, 2 heads, d_ff 64, 1 layer, pre-norm, context 8 (qkv train reverse)
//   sort      the same with 2 layers (qkv train sort)
//   text      d_model 64, 2 heads, d_ff 128, 2 layers, context 32, the characters of
//             docs/design.md (qkv train text reads all of docs/*.md; the step is the same)
// Names: W8_train/<task>/threads:<n>; items_per_second = training steps per second.
// Counter step_MiB: the heap the trainer holds after its first step (its caches, gradients and
// optimiser state), beyond the model's own parameters, measured by counting operator new.
// scripts/fixtures/train_torch.py --time times PyTorch 1.13 on the reverse model.
// docs/performance.md, "W8_train", has the numbers.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <string>

#include <qkv/runtime/trainer.hpp>

namespace heap {
std::atomic<long long> live{0};
}
// the header read and the free in one out-of-line function (as backward_bench.cpp: inlined,
// g++ warns -Wmismatched-new-delete)
[[gnu::noinline]] void release(void* p) noexcept {
  if (!p) return;
  char* base = static_cast<char*>(p) - 16;
  heap::live -= static_cast<long long>(*reinterpret_cast<std::size_t*>(base));
  std::free(base);
}
void* operator new(std::size_t n) {
  void* p = std::malloc(n + 16);
  if (!p) throw std::bad_alloc();
  *static_cast<std::size_t*>(p) = n;
  heap::live += static_cast<long long>(n);
  return static_cast<char*>(p) + 16;
}
void operator delete(void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void* operator new(std::size_t n, std::align_val_t a) {
  const std::size_t al = static_cast<std::size_t>(a) < 16 ? 16 : static_cast<std::size_t>(a);
  void* raw = std::malloc(n + 2 * al);
  if (!raw) throw std::bad_alloc();
  const auto base = reinterpret_cast<std::uintptr_t>(raw) + al;
  const auto aligned = (base + al - 1) / al * al;
  reinterpret_cast<void**>(aligned)[-1] = raw;
  reinterpret_cast<std::size_t*>(aligned)[-2] = n;
  heap::live += static_cast<long long>(n);
  return reinterpret_cast<void*>(aligned);
}
void operator delete(void* p, std::align_val_t) noexcept {
  if (!p) return;
  heap::live -= static_cast<long long>(reinterpret_cast<std::size_t*>(p)[-2]);
  std::free(reinterpret_cast<void**>(p)[-1]);
}
void operator delete(void* p, std::size_t, std::align_val_t a) noexcept { operator delete(p, a); }

namespace rt = qkv::runtime;

namespace {

rt::training_task task_of(int which) {
  if (which < 2)
    return rt::training_task::digits(which == 0 ? rt::task_kind::reverse : rt::task_kind::sort, 4);
  std::ifstream in(QKV_SOURCE_DIR "/docs/design.md", std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return rt::training_task::text(s.str(), 32);
}

void W8_train(benchmark::State& state, int which) {
  const std::size_t threads = static_cast<std::size_t>(state.range(0));
  rt::thread_pool pool(threads);
  rt::transformer_options o;
  o.d_model = which == 2 ? 64 : 32;
  o.d_ff = which == 2 ? 128 : 64;
  o.heads = 2;
  o.layers = which == 0 ? 1 : 2;
  rt::adamw_options a;
  a.beta2 = 0.98;
  const long long before = heap::live;
  rt::trainer<float> tr(task_of(which), o, 0, 64, a);
  const double parameters_mib = double(tr.model().size() * sizeof(float)) / (1 << 20);
  tr.step(&pool);
  const double held = double(heap::live - before) / (1 << 20) - parameters_mib;
  for (auto _ : state) benchmark::DoNotOptimize(tr.step(&pool));
  state.SetItemsProcessed(state.iterations());
  state.counters["step_MiB"] = held;
  state.counters["parameters"] = double(tr.model().size());
}

}  // namespace

BENCHMARK_CAPTURE(W8_train, reverse, 0)
    ->Name("W8_train/reverse")
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime();
BENCHMARK_CAPTURE(W8_train, sort, 1)
    ->Name("W8_train/sort")
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime();
BENCHMARK_CAPTURE(W8_train, text, 2)
    ->Name("W8_train/text")
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime();

BENCHMARK_MAIN();
