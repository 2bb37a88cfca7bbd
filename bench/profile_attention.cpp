// bench/profile_attention.cpp: W3, W4, W5, W4c or W5c (causal) called N times the way
// bench/peers/qkv_peer.cpp calls qkv, through the public API only (weights packed once; W4/W5
// through rt::multihead_attention, each head's k and v packed once per task), or W3att: W3's
// attention alone (12 heads of 128 x 64 through rt::multihead_attention, as attention() runs
// them, on one thread: no pool); random inputs, nothing else: a program to profile, not a
// benchmark. Built by meson with -Dbench=true as
// qkv_profile_attention (docs/performance-log.md, "Where the time goes", has the commands):
//   g++ -std=c++20 -O3 -march=native -ffp-contract=off -g -Iinclude -pthread
//       bench/profile_attention.cpp -o profile_attention       (one command line)
//   perf record -e cpu-clock -F 5000 ./profile_attention W4 1 60     (workload, threads, calls)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <random>
#include <string>
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
int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: profile_attention W3|W3att|W4|W5|W4c|W5c THREADS CALLS\n");
    return 2;
  }
  std::string w = argv[1];
  std::size_t T = std::atoi(argv[2]);
  int iters = std::atoi(argv[3]);
  rt::set_threads(T);
  double sum = 0;
  if (w == "W3") {
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
    for (int it = 0; it < iters; ++it) {
      rt::attention(x.view(), x.view(), p, opt, r);
      sum += r.output(3, 5);
    }
  } else if (w == "W3att") {
    auto q = rnd(128, 768, 6), k = rnd(128, 768, 7), v = rnd(128, 768, 8);
    rt::matrixf o(128, 768);
    rt::attention_options<float> opt;
    opt.heads = 12;
    opt.scale = 0.125f;
    for (int it = 0; it < iters; ++it) {
      rt::multihead_attention(q.view(), k.view(), v.view(), o.view(), opt, nullptr);
      sum += o(3, 5);
    }
  } else {
    const bool w4 = w == "W4" || w == "W4c";
    const std::size_t n = w4 ? 2048 : 1024, H = w4 ? 1 : 12, dk = 64;
    auto q = rnd(n, H * dk, 6), k = rnd(n, H * dk, 7), v = rnd(n, H * dk, 8);
    rt::matrixf o(n, H * dk);
    rt::attention_options<float> opt;
    opt.heads = H;
    opt.scale = 0.125f;
    opt.causal = w.back() == 'c';
    for (int it = 0; it < iters; ++it) {
      rt::multihead_attention(q.view(), k.view(), v.view(), o.view(), opt);
      sum += o(3, 5);
    }
  }
  std::printf("%s %g\n", w.c_str(), sum);
}
