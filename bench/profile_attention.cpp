// bench/profile_attention.cpp: W3, W4 or W5 called N times the way bench/peers/qkv_peer.cpp
// calls qkv (weights packed once; W4/W5 through rt::detail::attend_heads_streaming, each head's
// k and v packed once per task), or W3att: W3's attention alone (12 heads of 128 x 64 through
// detail::attend_rows_streaming, as attention() runs them, on one thread); random inputs,
// nothing else: a program to profile, not a benchmark. Built by meson with -Dbench=true as
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
    std::fprintf(stderr, "usage: profile_attention W3|W3att|W4|W5 THREADS CALLS\n");
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
    rt::multihead_result<float> r;
    for (int it = 0; it < iters; ++it) { rt::attention<float>(x.view(), x.view(), p, opt, r); sum += r.output(3, 5); }
  } else if (w == "W3att") {
    auto q = rnd(128, 768, 6), k = rnd(128, 768, 7), v = rnd(128, 768, 8);
    rt::matrixf o(128, 768);
    const rt::matrix_view<const float> qc(q.view()), kc(k.view()), vc(v.view());
    for (int it = 0; it < iters; ++it) {
      for (std::size_t h = 0; h < 12; ++h)
        rt::detail::attend_rows_streaming<float>(rt::column_block(qc, h * 64, 64), rt::column_block(kc, h * 64, 64),
                                                 rt::column_block(vc, h * 64, 64), rt::column_block(o.view(), h * 64, 64),
                                                 0.125f, {}, 0, 128);
      sum += o(3, 5);
    }
  } else {
    const std::size_t n = w == "W4" ? 2048 : 1024, H = w == "W4" ? 1 : 12, dk = 64;
    auto q = rnd(n, H * dk, 6), k = rnd(n, H * dk, 7), v = rnd(n, H * dk, 8);
    rt::matrixf o(n, H * dk);
    for (int it = 0; it < iters; ++it) {
      rt::detail::attend_heads_streaming<float>(q.view(), k.view(), v.view(), o.view(), H, 0.125f, {},
                                                &rt::default_pool(), [](std::size_t, std::size_t, std::size_t) {});
      sum += o(3, 5);
    }
  }
  std::printf("%s %g\n", w.c_str(), sum);
}
