// dispatch_bits.cpp: the bits of every entry point libqkv_kernels forwards (kernels.hpp: the
// attention calls, packed products and decode_attend on each storage type), one
// line per call: "NAME HASH", HASH the FNV-1a hash of the output floats' bits. Compiled three
// times (tests/runtime/meson.build): header-only for -march=x86-64-v3, header-only for
// -march=x86-64-v4, and linked with libqkv_kernels (x86-64-v3 plus -DQKV_RUNTIME_KERNELS);
// check_dispatch_bits.py runs them and compares: the library under QKV_KERNELS=avx2 must print
// the x86-64-v3 program's lines, and by default on an AVX-512 CPU the x86-64-v4 program's.
// The first line says which kernels ran ("kernels avx2 ..."). The inputs are fixed (an LCG), so
// the hashes depend only on the kernels' arithmetic; 1 and 2 threads are both run (same bits).
// An operand packed by the AVX-512 kernels must be refused by the program's own AVX2 code.
// A shape error thrown inside the library must reach the caller as qkv::runtime::shape_error,
// and a forwarded call made inside a pool task must run (inline), not wait for its own pool.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "qkv/runtime/decode.hpp"
#include "qkv/runtime/gemm.hpp"
#include "qkv/runtime/kernels.hpp"
#include "qkv/runtime/multihead.hpp"
#include "qkv/runtime/target.hpp"

namespace rt = qkv::runtime;

namespace {

std::uint64_t hash_floats(const float* p, std::size_t n, std::uint64_t h = 1469598103934665603ull) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, p + i, 4);
    for (int b = 0; b < 4; ++b) {
      h ^= (u >> (8 * b)) & 0xffu;
      h *= 1099511628211ull;
    }
  }
  return h;
}

std::uint64_t hash_of(const rt::dynamic_matrix<float>& m, std::uint64_t h = 1469598103934665603ull) {
  return hash_floats(m.data(), m.size(), h);
}

rt::dynamic_matrix<float> filled(std::size_t rows, std::size_t cols, std::uint32_t seed) {
  rt::dynamic_matrix<float> m(rows, cols);
  std::uint32_t s = seed;
  for (std::size_t i = 0; i < m.size(); ++i) {
    s = s * 1664525u + 1013904223u;  // Numerical Recipes' LCG
    m.data()[i] = static_cast<float>(static_cast<int>(s >> 8) - (1 << 23)) / float(1 << 23);  // [-1, 1)
  }
  return m;
}

rt::linear_weights<float> layer(std::size_t out, std::size_t in, std::uint32_t seed) {
  rt::linear_weights<float> w{filled(out, in, seed), {}, rt::weight_layout::out_in};
  const auto b = filled(1, out, seed + 7);
  w.bias.assign(b.data(), b.data() + out);
  return w;
}

void line(const char* name, std::size_t threads, std::uint64_t h) {
  std::printf("%s threads=%zu %016llx\n", name, threads, static_cast<unsigned long long>(h));
}

/// decode_attend of one new query (8 heads of 64) against a cache of S (300 positions, 2
/// key/value heads of 64), plain and with a window of 100
template <class S>
void decode_lines(const char* name, std::size_t threads) {
  constexpr std::size_t T = 300, H = 8, HK = 2, d = 64;
  const auto k = filled(T, HK * d, 50), v = filled(T, HK * d, 51), q = filled(1, H * d, 52);
  rt::kv_cache<S> cache(1, HK, d, d, T);
  cache.append(0, k.view(), v.view());
  rt::cache_attention_options opt;
  opt.heads = H;
  rt::dynamic_matrix<float> out(1, H * d);
  rt::decode_attend<S>(cache, 0, q.view(), out.view(), opt);
  std::uint64_t h = hash_of(out);
  opt.window = 100;
  rt::decode_attend<S>(cache, 0, q.view(), out.view(), opt);
  line(name, threads, hash_of(out, h));
}

}  // namespace

int main() {
  std::printf("kernels %s (%s; instruction set of this program: %s)\n",
              rt::kernels_name(rt::kernels_in_use()), rt::kernels_reason(), rt::instruction_set);
  // 300 tokens (two key blocks and a remainder), 4 heads of 32, GQA with 2 key/value heads
  constexpr std::size_t T = 300, D = 128, H = 4;
  const auto q = filled(T, D, 1), k = filled(T, D, 2), v = filled(T, D, 3), x = filled(T, D, 4);
  const auto kg = filled(T, D / 2, 5), vg = filled(T, D / 2, 6);
  rt::attention_weights<float> w{layer(D, D, 10), layer(D, D, 20), layer(D, D, 30), layer(D, D, 40)};
  for (std::size_t threads : {1, 2}) {
    rt::set_threads(threads);
    for (bool causal : {false, true}) {
      rt::attention_options<float> opt;
      opt.heads = H;
      opt.causal = causal;
      const std::string c = causal ? "causal " : "full ";
      // multihead_attention, heads side by side, into out
      rt::dynamic_matrix<float> out(T, D);
      rt::multihead_attention<float>(q.view(), k.view(), v.view(), out.view(), opt);
      line((c + "multihead_attention(q, k, v, out)").c_str(), threads, hash_of(out));
      // ... GQA, into a result, and kept weights
      rt::attention_options<float> gqa = opt;
      gqa.kv_heads = 2;
      rt::multihead_result<float> r;
      rt::multihead_attention<float>(q.view(), kg.view(), vg.view(), gqa, r);
      line((c + "multihead_attention(q, k, v, r) gqa").c_str(), threads, hash_of(r.concat));
      gqa.keep_weights = true;
      rt::multihead_attention<float>(q.view(), kg.view(), vg.view(), gqa, r);
      line((c + "multihead_attention(q, k, v, r) gqa keep_weights").c_str(), threads,
           hash_of(r.weights[3], hash_of(r.concat)));
      // heads first: (H T, dh)
      const auto qh = filled(H * T, D / H, 11), kh = filled(H * T, D / H, 12), vh = filled(H * T, D / H, 13);
      rt::dynamic_matrix<float> outh(H * T, D / H);
      rt::multihead_attention<float>(rt::heads_first, qh.view(), kh.view(), vh.view(), outh.view(), opt);
      line((c + "multihead_attention(heads_first)").c_str(), threads, hash_of(outh));
      // attention(): projections on plain and on packed weights, output projection
      rt::multihead_attention<float>(q.view(), k.view(), v.view(), opt, r);  // reuse r's buffers
      const auto a = rt::self_attention(x, w, opt);
      line((c + "self_attention(x, w)").c_str(), threads, hash_of(a.output, hash_of(a.queries)));
      const rt::packed_attention_weights<float> pw(w);
      const auto p = rt::self_attention(x, pw, opt);
      line((c + "self_attention(x, packed w)").c_str(), threads, hash_of(p.output, hash_of(p.queries)));
    }
    // linear on packed weights (matrix_product on a packed_operand)
    const rt::packed_linear<float> pl(w.q);
    rt::dynamic_matrix<float> y;
    rt::linear<float>(x.view(), pl, y);
    line("linear(x, packed w)", threads, hash_of(y));
    decode_lines<float>("decode_attend, float cache", threads);
    decode_lines<rt::bfloat16>("decode_attend, bfloat16 cache", threads);
    decode_lines<rt::float16>("decode_attend, float16 cache", threads);
  }
  // a shape error thrown inside the library reaches the caller with its type
  try {
    rt::attention_options<float> bad;
    bad.heads = 3;  // 128 columns do not split into 3 heads
    rt::dynamic_matrix<float> out(T, D);
    rt::multihead_attention<float>(q.view(), k.view(), v.view(), out.view(), bad);
    std::printf("shape_error not thrown\n");
    return 1;
  } catch (const rt::shape_error&) { std::printf("shape_error caught\n"); }
  // an operand packed by the AVX-512 kernels (panels of 32 floats) is refused by this program's own
  // x86-64-v3 code (panels of 16) with logic_error, never misread; one packed by kernels of this
  // program's width is accepted (nothing printed: the lines above are what the builds compare)
  {
    const rt::packed_operand<float> packed(x.view());
    const bool other = packed.panel_width() != rt::detail::gemm_blocking<float>::nr;
    if (other != (rt::kernels_in_use() == rt::kernel_set::avx512)) {
      std::printf("packed with panels of %zu: not the kernels in use\n", packed.panel_width());
      return 1;
    }
    try {
      (void)rt::detail::packed_panels(packed);
      if (other) {
        std::printf("panels of %zu read as panels of %zu\n", packed.panel_width(),
                    rt::detail::gemm_blocking<float>::nr);
        return 1;
      }
    } catch (const std::logic_error&) {
      if (!other) return 1;
    }
  }
  // a forwarded call from inside a task of the pool it is given runs inline
  rt::set_threads(2);
  std::vector<rt::dynamic_matrix<float>> outs(2, rt::dynamic_matrix<float>(T, D));
  rt::attention_options<float> opt;
  opt.heads = H;
  rt::default_pool().parallel_for(2, [&](std::size_t t) {
    rt::multihead_attention<float>(q.view(), k.view(), v.view(), outs[t].view(), opt, &rt::default_pool());
  });
  line("multihead_attention inside a task", 2, hash_of(outs[1], hash_of(outs[0])));
  return 0;
}
