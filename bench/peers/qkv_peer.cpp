// bench/peers/qkv_peer.cpp: the peer harness's qkv implementation (bench/peers/, copied from
// the harness's impls_qkv/qkv.cpp), through qkv's public API only: W4/W5 through
// rt::multihead_attention (each head's k and v packed once per task, its query rows in blocks of
// at most rt::stream_query_block, one pool dispatch). Not built by meson: scripts/peers.sh
// passes it to bench/peers/run.sh as EXTRA_IMPL_SOURCES (docs/performance.md, "Method").
// qkv peer: the qkv library's runtime path (header-only C++20, <qkv/runtime/runtime.hpp>), called
// the way the project's own bench/attention_bench.cpp calls it. A FACTORY (untimed setup):
//
//  * W1-W3 (projections): the harness's weights are [d_in, d_out] (Q = X*Wq + bq), which is
//    qkv's weight_layout::in_out, so they are copied as they are (no transpose) into
//    rt::linear_weights and packed once into rt::packed_attention_weights (as an inference
//    engine lays out its weights; the peers keep theirs as given). The heap column therefore
//    includes the packed copy of the weights (W3: 4 x 768 x 768 floats, ~9 MiB). The timed call is
//    rt::attention(X, X, packed, {heads, scale = 1/sqrt(d_k), keep_weights = false}, result):
//    Q/K/V projections with bias in one parallel_for, the streaming (flash-style) attention
//    over heads x query blocks, the output projection with bias (W3); then result.output is
//    copied into the harness's buffer (n x out_cols floats; qkv writes into its own
//    attention_result, reused across calls).
//  * W4/W5 (attention only; W4c/W5c causal): the streaming path on views of the harness's
//    Q/K/V, written straight into the harness's output: rt::multihead_attention(q, k, v, out,
//    {heads, scale, causal}) (exactly bench/attention_bench.cpp's qkv_impl): tasks of heads x
//    parts, each packing its head's k and v once into its thread's panels and running its rows
//    in query blocks of <= 512; causal skips the key blocks a query block cannot see.
//  * Threads: rt::set_threads(threads) on the library's one pool at the start of every call
//    (a no-op when the size is unchanged; idle workers spin for at most 200 µs, then sleep).
//
// Build (run.sh): EXTRA_IMPL_SOURCES=impls_qkv/qkv.cpp
//   EXTRA_IMPL_CXXFLAGS="-I<qkv>/include -ffp-contract=off"   (this file only), or
//   EXTRA_CXXFLAGS="-I<qkv>/include -ffp-contract=off"        (every object: the peers too)
// -ffp-contract=off is qkv's own build setting (its kernels request their FMAs explicitly).
// run.sh already compiles with -O3 -march=native -std=c++20; qkv needs C++20 and an -march with
// AVX2+FMA; -march=native gives AVX-512 where the CPU has it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include <qkv/runtime/runtime.hpp>

#include "attnbench.hpp"

namespace {
namespace rt = qkv::runtime;
using attnbench::Inputs;
using attnbench::Runner;
using attnbench::Workload;

// a harness weight [d_in, d_out] (+ bias [d_out]) as qkv's in_out linear layer (a copy)
rt::linear_weights<float> in_out(const float* W, const float* b, int d_in, int d_out) {
  rt::linear_weights<float> l;
  l.weight = rt::matrixf(std::size_t(d_in), std::size_t(d_out));
  std::memcpy(l.weight.data(), W, sizeof(float) * std::size_t(d_in) * std::size_t(d_out));
  if (b) l.bias.assign(b, b + d_out);
  l.layout = rt::weight_layout::in_out;
  return l;
}

struct Projected {  // W1-W3: everything one call needs, made once per (workload, threads)
  rt::packed_attention_weights<float> packed;
  rt::attention_options<float> opt;
  rt::multihead_result<float> result;
};

Runner qkv_factory(const Workload& w, const Inputs& in, int threads) {
  const std::size_t n = std::size_t(w.n), H = std::size_t(w.heads);
  const std::size_t qc = std::size_t(w.qk_cols()), vc = std::size_t(w.v_cols());
  const float scale = 1.0f / std::sqrt(float(w.d_k));
  const std::size_t T = std::size_t(threads);
  rt::set_threads(T);
  if (w.project) {
    // packed one layer at a time (what packed_attention_weights(attention_weights) does per
    // layer), so the unpacked copies do not all live at once in the heap column's window
    auto st = std::make_shared<Projected>();
    st->packed.q = rt::packed_linear<float>(in_out(in.Wq, in.bq, w.d_model, int(qc)));
    st->packed.k = rt::packed_linear<float>(in_out(in.Wk, in.bk, w.d_model, int(qc)));
    st->packed.v = rt::packed_linear<float>(in_out(in.Wv, in.bv, w.d_model, int(vc)));
    if (w.out_proj) st->packed.o.emplace(in_out(in.Wo, in.bo, int(vc), w.d_model));
    st->opt.heads = H;
    st->opt.scale = scale;
    st->opt.keep_weights = false;  // the streaming path: no n x n scores kept
    const rt::matrix_view<const float> x{in.X, n, std::size_t(w.d_model), std::size_t(w.d_model), 1};
    const std::size_t out_count = n * std::size_t(w.out_cols());
    return [st, x, T, out_count](float* out) {
      rt::set_threads(T);
      rt::attention(x, x, st->packed, st->opt, st->result);
      std::memcpy(out, st->result.output.data(), sizeof(float) * out_count);
    };
  }
  const rt::matrix_view<const float> q{in.Q, n, qc, qc, 1}, k{in.K, n, qc, qc, 1}, v{in.V, n, vc, vc, 1};
  rt::attention_options<float> opt;
  opt.heads = H;
  opt.scale = scale;
  opt.causal = w.causal;  // W4c, W5c
  return [q, k, v, n, vc, opt, T](float* out) {
    rt::set_threads(T);
    const rt::matrix_view<float> o{out, n, vc, vc, 1};
    // the public multi-head attention on Q, K, V: one pool dispatch, each head's k and v
    // packed once and shared by its query blocks
    rt::multihead_attention(q, k, v, o, opt);
  };
}

}  // namespace

ATTNBENCH_REGISTER_FACTORY(
    "qkv", qkv_factory, true,
    "qkv runtime path: weights packed once (in_out layout), rt::attention streaming (W1-W3); "
    "rt::multihead_attention on the harness's Q, K, V (W4/W5, W4c/W5c causal); rt::set_threads");
