// bench/w3_timing.cpp: W3 (BERT layer: 128 tokens, hidden 768, 12 heads) timed the way
// bench/peers/qkv_peer.cpp calls qkv (rt::attention, weights packed once), one 128 x 768 x 768
// projection (rt::linear with a packed_linear), and, in the same process, the zmm FMA peak
// (12 independent vfmadd231ps chains in assembly; AVX-512 builds only). Built by meson with
// -Dbench=true as qkv_w3_timing (the project's -O2; docs/performance-log.md, "W3: the GEMM
// micro-kernel, measured again", used -O3 -march=native):
//   g++ -std=c++20 -O3 -march=native -ffp-contract=off -pthread -Iinclude bench/w3_timing.cpp -o w3_timing
//   ./w3_timing [repetitions of 20 calls] [1|2|all threads]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>
#include <algorithm>
#include <qkv/runtime/runtime.hpp>
namespace rt = qkv::runtime;
static rt::matrixf rnd(std::size_t r, std::size_t c, unsigned seed, float a = 1.0f) {
  rt::matrixf m(r, c);
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-a, a);
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = 0; j < c; ++j) m(i, j) = u(g);
  return m;
}
static rt::linear_weights<float> lin(std::size_t din, std::size_t dout, unsigned s) {
  rt::linear_weights<float> l;
  l.weight = rnd(din, dout, s, 0.05f);
  l.bias.assign(dout, 0.01f);
  l.layout = rt::weight_layout::in_out;
  return l;
}
template <class F>
static double med_ms(F f, int reps, int inner) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto a = std::chrono::steady_clock::now();
    for (int i = 0; i < inner; ++i) f();
    auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::milli>(b - a).count() / inner);
  }
  std::sort(t.begin(), t.end());
  std::printf("   [min %.3f] ", t[0]);
  return t[t.size() / 2];
}
static double peak() {  // 12 independent zmm fma chains in asm
#if defined(__AVX512F__)
  constexpr long steps = 1 << 22;
  auto a0 = std::chrono::steady_clock::now();
  asm volatile(
      "vxorps %%xmm0,%%xmm0,%%xmm0\n"
      "mov %0, %%rax\n"
      "1:\n"
      "vfmadd231ps %%zmm0,%%zmm0,%%zmm2\n vfmadd231ps %%zmm0,%%zmm0,%%zmm3\n vfmadd231ps "
      "%%zmm0,%%zmm0,%%zmm4\n"
      "vfmadd231ps %%zmm0,%%zmm0,%%zmm5\n vfmadd231ps %%zmm0,%%zmm0,%%zmm6\n vfmadd231ps "
      "%%zmm0,%%zmm0,%%zmm7\n"
      "vfmadd231ps %%zmm0,%%zmm0,%%zmm8\n vfmadd231ps %%zmm0,%%zmm0,%%zmm9\n vfmadd231ps "
      "%%zmm0,%%zmm0,%%zmm10\n"
      "vfmadd231ps %%zmm0,%%zmm0,%%zmm11\n vfmadd231ps %%zmm0,%%zmm0,%%zmm12\n vfmadd231ps "
      "%%zmm0,%%zmm0,%%zmm13\n"
      "dec %%rax\n jnz 1b\n vzeroupper\n" ::"r"(steps)
      : "rax", "xmm0", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm12", "xmm13");
  auto b0 = std::chrono::steady_clock::now();
  return double(steps) * 12 * 2 * 16 / std::chrono::duration<double>(b0 - a0).count() / 1e9;
#else
  return 0;  // no zmm probe without AVX-512
#endif
}
int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  std::string what = argc > 2 ? argv[2] : "all";
  auto x = rnd(128, 768, 1);
  rt::packed_attention_weights<float> p;
  p.q = rt::packed_linear<float>(lin(768, 768, 2));
  p.k = rt::packed_linear<float>(lin(768, 768, 3));
  p.v = rt::packed_linear<float>(lin(768, 768, 4));
  p.o.emplace(lin(768, 768, 5));
  rt::attention_options<float> opt;
  opt.heads = 12;
  opt.scale = 0.125f;
  opt.keep_weights = false;
  rt::multihead_result<float> r;
  const double flops = 4.0 * 2 * 128 * 768 * 768 + 12.0 * 2 * 2 * 128 * 128 * 64;
  double pk = peak();
  std::printf("%s peak %.1f GFLOP/s\n", rt::instruction_set, pk);
  for (int T : {1, 2}) {
    if (what != "all" && what != std::to_string(T)) continue;
    rt::set_threads(T);
    for (int i = 0; i < 5; ++i) rt::attention<float>(x.view(), x.view(), p, opt, r);
    double ms = med_ms([&] { rt::attention<float>(x.view(), x.view(), p, opt, r); }, reps, 20);
    std::printf("W3 %dthr %.3f ms  %.1f GFLOP/s  %.1f%% of %d x peak(1thr)\n", T, ms, flops / ms / 1e6,
                100 * flops / ms / 1e6 / pk / T, T);
    // GEMM only: 128x768 by packed 768x768 (one projection)
    rt::matrixf y;
    double g = med_ms([&] { rt::linear<float>(x.view(), p.q, y); }, reps, 60);
    std::printf("  gemm 128x768x768 %dthr %.3f ms %.1f GFLOP/s %.1f%% of %d x peak(1thr)\n", T, g,
                2.0 * 128 * 768 * 768 / g / 1e6, 100 * 2.0 * 128 * 768 * 768 / g / 1e6 / pk / T, T);
  }
  std::printf("check %.9g %.9g\n", r.output(3, 5), r.output(100, 700));
}
