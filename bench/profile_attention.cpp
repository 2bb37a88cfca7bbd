// bench/profile_attention.cpp: W3, W4 or W5 called N times the way bench/peers/qkv_peer.cpp
// calls qkv (weights packed once; W4/W5 heads x rt::stream_split blocks of attend_rows_streaming),
// random inputs, nothing else: a program to profile, not a benchmark. Not built by meson
// (docs/performance.md, "Where the time goes" has the commands):
//   g++ -std=c++20 -O3 -march=x86-64-v3 -ffp-contract=off -g -Iinclude -pthread
//       bench/profile_attention.cpp -o profile_attention       (one command line)
//   valgrind --tool=callgrind ./profile_attention W4 1 1     (workload, threads, calls)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <random>
#include <string>
#include <qkv/runtime/runtime.hpp>
namespace rt = qkv::runtime;
static rt::matrixf rnd(std::size_t r, std::size_t c, unsigned seed, float a = 1.0f) {
  rt::matrixf m(r, c); std::mt19937 g(seed); std::uniform_real_distribution<float> u(-a, a);
  for (std::size_t i = 0; i < r; ++i) for (std::size_t j = 0; j < c; ++j) m(i, j) = u(g);
  return m;
}
static rt::linear_weights<float> lin(std::size_t din, std::size_t dout, unsigned s) {
  rt::linear_weights<float> l; l.weight = rnd(din, dout, s, 0.05f); l.bias.assign(dout, 0.01f);
  l.layout = rt::weight_layout::in_out; return l;
}
int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: profile_attention W3|W4|W5 THREADS CALLS\n");
    return 2;
  }
  std::string w = argv[1]; std::size_t T = std::atoi(argv[2]); int iters = std::atoi(argv[3]);
  rt::set_threads(T);
  double sum = 0;
  if (w == "W3") {
    auto x = rnd(128, 768, 1);
    rt::packed_attention_weights<float> p;
    p.q = rt::packed_linear<float>(lin(768, 768, 2)); p.k = rt::packed_linear<float>(lin(768, 768, 3));
    p.v = rt::packed_linear<float>(lin(768, 768, 4)); p.o.emplace(lin(768, 768, 5));
    rt::attention_options<float> opt; opt.heads = 12; opt.scale = 0.125f; opt.keep_weights = false;
    rt::attention_result<float> r;
    for (int it = 0; it < iters; ++it) { rt::attention<float>(x.view(), x.view(), p, opt, r); sum += r.output(3, 5); }
  } else {
    const std::size_t n = w == "W4" ? 2048 : 1024, H = w == "W4" ? 1 : 12, dk = 64;
    auto q = rnd(n, H * dk, 6), k = rnd(n, H * dk, 7), v = rnd(n, H * dk, 8);
    rt::matrixf o(n, H * dk);
    const float scale = 0.125f;
    for (int it = 0; it < iters; ++it) {
      const rt::stream_split split(n, H, T);
      const std::size_t blocks = split.blocks;
      rt::default_pool().parallel_for(H * blocks, [&](std::size_t t) {
        const std::size_t h = t / blocks, b = t % blocks;
        const std::size_t i0 = split.begin(b), i1 = split.end(b);
        rt::detail::attend_rows_streaming<float>(rt::column_block(q.view(), h * dk, dk), rt::column_block(k.view(), h * dk, dk),
                                                 rt::column_block(v.view(), h * dk, dk), rt::column_block(o.view(), h * dk, dk),
                                                 scale, {}, i0, i1);
      });
      sum += o(3, 5);
    }
  }
  std::printf("%s %g\n", w.c_str(), sum);
}
