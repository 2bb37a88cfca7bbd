// decode_bench.cpp: W6_decode, one decoding step of a LLaMA-style layer against its KV cache,
// and the machine's memory bandwidth measured in the same run (a STREAM-style triad).
//
//   W6_decode  one new query token, 32 query heads and 8 key/value heads of 128, a cache of
//              4096 positions: per step the keys and values of one layer are read once,
//              8 x 4096 x (128 + 128) x sizeof(storage) bytes = 32 MiB (float32), 16 MiB (bfloat16)
// A step of a real model reads one layer's cache after another, never the same one twice in a
// row: the benchmark walks QKV_W6_LAYERS layers (default 32: 1 GiB of float32 cache, 512 MiB of
// bfloat16, more than this machine's last-level cache), one layer per step, so the cache comes
// from memory as it would.
// Names: W6_decode/<impl>/threads:<n>, impl
//   qkv_f32, qkv_bf16   runtime::decode_attend (kv_cache.hpp) on a float32 / bfloat16 cache
//   plain_f32           plain loops (each query head reads its K/V head again), threads over heads
//   openblas_f32        per query head: cblas_sgemv for the scores (K q) and for the output (Vᵀ p),
//                       a plain softmax between; OpenBLAS's own threads
//   triad               a[i] = b[i] + s c[i] over 3 arrays of 64 Mi floats (768 MiB), split over
//                       the threads; STREAM counts 3 x 4 bytes per element (no write-allocate)
//   read                a[i] + b[i] + c[i] summed over the same 3 arrays (768 MiB), read only,
//                       split over the threads: the ceiling of a kernel that only reads, as the decode step does
//                       (the triad also writes, and its write-allocate reads a line it does not count)
// Counters: GB_s = bytes read from the cache (or the triad's 12 bytes per element, the read's 12)
// per second, 1e9 bytes; of_triad = GB_s / the triad's GB_s at the same thread count, of_read =
// GB_s / the read stream's, both measured before the benchmarks in this run (main). docs/performance.md, "W6_decode", has the command and numbers.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <qkv/runtime/runtime.hpp>

#ifdef QKV_BENCH_OPENBLAS
#include <cblas.h>
#endif

namespace rt = qkv::runtime;

namespace {

constexpr std::size_t H = 32, HK = 8, D = 128, S = 4096;

std::size_t layers() {
  const char* e = std::getenv("QKV_W6_LAYERS");
  const long n = e ? std::atol(e) : 32;
  return n > 0 ? std::size_t(n) : 32;
}

void set_threads(int n) {
  rt::default_pool().resize(std::size_t(n));
#ifdef QKV_BENCH_OPENBLAS
  openblas_set_num_threads(n);
#endif
}

/// uniform numbers in [-1, 1) from a 64-bit LCG: filling a GiB with std::normal_distribution would take longer than the run
std::vector<float> numbers(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n);
  for (auto& v : x) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    v = float(std::int32_t(seed >> 32)) * 0x1p-31f;
  }
  return x;
}

/// the layers' caches, made once per storage type (the same keys and values in every layer)
template <rt::storage_type St>
rt::kv_cache<St>& cache() {
  static std::unique_ptr<rt::kv_cache<St>> c = [] {
    auto p = std::make_unique<rt::kv_cache<St>>(layers(), HK, D, D, S);
    const auto k = numbers(S * HK * D, 1), v = numbers(S * HK * D, 2);
    const rt::matrix_view<const float> kv{k.data(), S, HK * D, HK * D, 1}, vv{v.data(), S, HK * D, HK * D, 1};
    for (std::size_t l = 0; l < layers(); ++l) p->append(l, kv, vv);
    return p;
  }();
  return *c;
}

std::map<int, double>& triad_gbs() {
  static std::map<int, double> m;
  return m;
}

std::map<int, double>& read_gbs() {
  static std::map<int, double> m;
  return m;
}

/// of_triad and of_read of a benchmark that moved `gbs` GB/s on `threads` threads
void ratios(benchmark::State& state, int threads, double gbs) {
  state.counters["GB_s"] = gbs;
  if (triad_gbs().count(threads)) state.counters["of_triad"] = gbs / triad_gbs()[threads];
  if (read_gbs().count(threads)) state.counters["of_read"] = gbs / read_gbs()[threads];
}

constexpr std::size_t triad_n = std::size_t(64) << 20;

/// one triad pass over the three arrays, split in `threads` parts; seconds
double triad_once(std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c,
                  int threads) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t parts = std::size_t(threads) * 8;
  rt::default_pool().parallel_for(parts, [&](std::size_t t) {
    const std::size_t i0 = triad_n * t / parts, i1 = triad_n * (t + 1) / parts;
    float* pa = a.data();
    const float* pb = b.data();
    const float* pc = c.data();
    for (std::size_t i = i0; i < i1; ++i) pa[i] = pb[i] + 3.0f * pc[i];
  });
  benchmark::ClobberMemory();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// one read-only pass: the sum of the three arrays, read side by side as the triad reads (three
/// streams: this machine's cores read more with several streams than with one), split in
/// `threads` parts, 4 accumulators so the adds never wait on each other; seconds
double read_once(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c,
                 int threads) {
  using V = rt::simd<float>;
  constexpr std::size_t W = rt::lanes<float>;
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t parts = std::size_t(threads) * 8;
  std::vector<float> sums(parts);
  rt::default_pool().parallel_for(parts, [&](std::size_t t) {
    const std::size_t i0 = triad_n * t / parts / (4 * W) * (4 * W),
                      i1 = triad_n * (t + 1) / parts / (4 * W) * (4 * W);
    V s[4] = {V(0.0f), V(0.0f), V(0.0f), V(0.0f)};
    const float *pa = a.data(), *pb = b.data(), *pc = c.data();
    for (std::size_t i = i0; i < i1; i += 4 * W)
      for (std::size_t r = 0; r < 4; ++r) {
        const std::size_t x = i + r * W;
        s[r] += V(pa + x, rt::stdx::element_aligned) + V(pb + x, rt::stdx::element_aligned) +
                V(pc + x, rt::stdx::element_aligned);
      }
    sums[t] = rt::stdx::reduce((s[0] + s[1]) + (s[2] + s[3]));
  });
  benchmark::DoNotOptimize(sums.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct triad_arrays {
  std::vector<float> a, b, c;
  triad_arrays() : a(triad_n, 0.0f), b(triad_n, 1.0f), c(triad_n, 2.0f) {}
};

/// the best of 10 triad passes (STREAM reports the best), GB/s
double measure_triad(int threads) {
  set_threads(threads);
  triad_arrays t;
  double best = 1e30;
  for (int r = 0; r < 10; ++r) best = std::min(best, triad_once(t.a, t.b, t.c, threads));
  return 12.0 * double(triad_n) / best / 1e9;
}

/// the best of 10 read-only passes, GB/s
double measure_read(int threads) {
  set_threads(threads);
  triad_arrays t;
  double best = 1e30;
  for (int r = 0; r < 10; ++r) best = std::min(best, read_once(t.a, t.b, t.c, threads));
  return 12.0 * double(triad_n) / best / 1e9;
}

void read(benchmark::State& state) {
  const int threads = int(state.range(0));
  set_threads(threads);
  triad_arrays t;
  double seconds = 0;
  for (auto _ : state) seconds += read_once(t.a, t.b, t.c, threads);
  ratios(state, threads, 12.0 * double(triad_n) * double(state.iterations()) / seconds / 1e9);
}

void triad(benchmark::State& state) {
  const int threads = int(state.range(0));
  set_threads(threads);
  triad_arrays t;
  double seconds = 0;
  for (auto _ : state) seconds += triad_once(t.a, t.b, t.c, threads);
  ratios(state, threads, 12.0 * double(triad_n) * double(state.iterations()) / seconds / 1e9);
}

/// a step: q (1, H D) against layer l, out (1, H D)
template <class Step>
void decode(benchmark::State& state, double bytes_per_step, Step step) {
  const int threads = int(state.range(0));
  set_threads(threads);
  const auto q = numbers(H * D, 3);
  std::vector<float> out(H * D);
  const std::size_t L = layers();
  for (std::size_t l = 0; l < L; ++l) step(l, q.data(), out.data());  // warm up: pages, threads, buffers
  std::size_t l = 0;
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    step(l, q.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    l = (l + 1) % L;
  }
  ratios(state, threads, bytes_per_step * double(state.iterations()) / seconds / 1e9);
}

template <rt::storage_type St>
void qkv_decode(benchmark::State& state) {
  auto& c = cache<St>();
  rt::cache_attention_options opt;
  opt.heads = H;
  decode(state, double(HK * S * 2 * D * sizeof(St)), [&](std::size_t l, const float* q, float* out) {
    rt::decode_attend(c, l, rt::matrix_view<const float>{q, 1, H * D, H * D, 1},
                      rt::matrix_view<float>{out, 1, H * D, H * D, 1}, opt);
  });
}

/// softmax of x[0..n) in place, plain loops
void plain_softmax(float* x, std::size_t n) {
  float m = x[0];
  for (std::size_t j = 1; j < n; ++j) m = std::max(m, x[j]);
  float sum = 0;
  for (std::size_t j = 0; j < n; ++j) sum += x[j] = std::exp(x[j] - m);
  for (std::size_t j = 0; j < n; ++j) x[j] /= sum;
}

void plain_decode(benchmark::State& state) {
  auto& c = cache<float>();
  const float scale = 1 / std::sqrt(float(D));
  decode(state, double(HK * S * 2 * D * sizeof(float)), [&](std::size_t l, const float* q, float* out) {
    rt::default_pool().parallel_for(H, [&](std::size_t h) {
      thread_local std::vector<float> p(S);
      const auto k = c.keys(l, h / (H / HK)), v = c.values(l, h / (H / HK));
      for (std::size_t j = 0; j < S; ++j) {
        float acc = 0;
        for (std::size_t x = 0; x < D; ++x) acc += q[h * D + x] * k.data[j * D + x];
        p[j] = acc * scale;
      }
      plain_softmax(p.data(), S);
      float* o = out + h * D;
      for (std::size_t x = 0; x < D; ++x) o[x] = 0;
      for (std::size_t j = 0; j < S; ++j)
        for (std::size_t x = 0; x < D; ++x) o[x] += p[j] * v.data[j * D + x];
    });
  });
}

#ifdef QKV_BENCH_OPENBLAS
void openblas_decode(benchmark::State& state) {
  auto& c = cache<float>();
  const float scale = 1 / std::sqrt(float(D));
  std::vector<float> p(S);
  decode(state, double(HK * S * 2 * D * sizeof(float)), [&](std::size_t l, const float* q, float* out) {
    for (std::size_t h = 0; h < H; ++h) {
      const auto k = c.keys(l, h / (H / HK)), v = c.values(l, h / (H / HK));
      cblas_sgemv(CblasRowMajor, CblasNoTrans, int(S), int(D), scale, k.data, int(D), q + h * D, 1, 0.0f,
                  p.data(), 1);
      plain_softmax(p.data(), S);
      cblas_sgemv(CblasRowMajor, CblasTrans, int(S), int(D), 1.0f, v.data, int(D), p.data(), 1, 0.0f,
                  out + h * D, 1);
    }
  });
}
#endif

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (int t : {1, 2}) {
    triad_gbs()[t] = measure_triad(t);
    read_gbs()[t] = measure_read(t);
  }
  const auto reg = [](const char* name, void (*f)(benchmark::State&), bool two = true) {
    auto* b = benchmark::RegisterBenchmark(name, f)->ArgName("threads")->Arg(1);
    if (two) b->Arg(2);
    b->UseRealTime()->Unit(benchmark::kMicrosecond);
  };
  reg("W6_triad", triad);
  reg("W6_read", read);
  reg("W6_decode/qkv_f32", qkv_decode<float>);
  reg("W6_decode/qkv_bf16", qkv_decode<rt::bfloat16>);
  reg("W6_decode/plain_f32", plain_decode);
#ifdef QKV_BENCH_OPENBLAS
  reg("W6_decode/openblas_f32", openblas_decode);
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
