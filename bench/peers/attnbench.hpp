// attnbench.hpp -- the plug-in interface of the attention benchmark harness.
//
// An implementation is one C++ function (or a factory returning a callable)
// registered under a name.  Put it in bench/impls/<name>.cpp (run.sh compiles
// every file there) or pass EXTRA_IMPL_SOURCES=... to run.sh.  See README.md.
//
// Data conventions (all float32, row-major, densely packed, 64-byte aligned):
//   projection workloads (w.project):
//     X  [n, d_model]
//     Wq [d_model, heads*d_k]   Q = X*Wq (+ bq)      (note: x*W, not x*W^T)
//     Wk [d_model, heads*d_k]   K = X*Wk (+ bk)
//     Wv [d_model, heads*d_v]   V = X*Wv (+ bv)
//     bq/bk [heads*d_k], bv [heads*d_v]      (nullptr unless w.bias)
//     Wo [heads*d_v, d_model], bo [d_model]  (nullptr unless w.out_proj)
//   attention-only workloads (!w.project): Q, K [n, heads*d_k], V [n, heads*d_v]
//   Head h owns columns [h*d_k, (h+1)*d_k) of Q/K and [h*d_v, (h+1)*d_v) of V.
//   O_h = softmax(Q_h K_h^T / sqrt(d_k)) V_h  written to columns of O [n, heads*d_v];
//   output = w.out_proj ? O*Wo (+ bo) [n, d_model] : O [n, heads*d_v].
//   No mask (except w.causal: query i sees keys j <= i, the upper triangle masked, as a decoder's
//   prefill; W4c and W5c), no dropout, batch = 1.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace attnbench {

struct Workload {
  const char* id;    // "W1" ...
  const char* name;  // "tiny" ...
  int n;             // tokens (queries == keys)
  int d_model;       // input width of X (projection workloads); 0 otherwise
  int heads;
  int d_k;              // per-head query/key width
  int d_v;              // per-head value width
  bool project;         // Q,K,V are computed from X
  bool bias;            // projections (and the output projection) have biases
  bool out_proj;        // output projection back to d_model
  bool causal = false;  // query i attends to keys 0..i only (W4c, W5c)

  int qk_cols() const { return heads * d_k; }
  int v_cols() const { return heads * d_v; }
  int out_cols() const { return out_proj ? d_model : v_cols(); }
  // 2*m*n*k for every matmul; softmax, scaling and bias adds are not counted.
  double matmul_flops() const {
    double f = 0;
    if (project) f += 2.0 * n * d_model * (2.0 * qk_cols() + v_cols());
    // causal: the n (n + 1) / 2 (query, key) pairs a query sees
    f += 2.0 * heads * (causal ? double(n) * (n + 1) / 2 : double(n) * n) * (d_k + d_v);
    if (out_proj) f += 2.0 * n * double(v_cols()) * d_model;
    return f;
  }
  double softmax_elems() const { return double(heads) * (causal ? double(n) * (n + 1) / 2 : double(n) * n); }
};

struct Inputs {
  const float *X = nullptr, *Wq = nullptr, *Wk = nullptr, *Wv = nullptr;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;
  const float *Wo = nullptr, *bo = nullptr;
  const float *Q = nullptr, *K = nullptr, *V = nullptr;
};

// Computes one forward pass into out [n, w.out_cols()].  Timed.
using Runner = std::function<void(float* out)>;
// Called once per (workload, threads), untimed: may pack weights, allocate
// workspaces, start a thread pool.  Return an empty Runner to skip a workload.
// Runners of different implementations are timed interleaved, so a runner must
// (re)apply any process-global setting it relies on (thread counts ...) itself.
// `threads` is the number of threads the runner may use (1 or 2 here).
using Factory = std::function<Runner(const Workload&, const Inputs&, int threads)>;
// The simple form: everything inside the timed call.
using AttnFn = void (*)(const Workload&, const Inputs&, float* out, int threads);

struct Impl {
  std::string name;
  Factory factory;
  bool validate = true;  // false for diagnostic rows that are not attention
  std::string note;
};

inline std::vector<Impl>& registry() {
  static std::vector<Impl> r;
  return r;
}
struct Registrar {
  explicit Registrar(Impl i) { registry().push_back(std::move(i)); }
};

inline Factory factory_from_fn(AttnFn fn) {
  return [fn](const Workload& w, const Inputs& in, int threads) -> Runner {
    return [fn, w, in, threads](float* out) { fn(w, in, out, threads); };
  };
}

}  // namespace attnbench

#define ATTNBENCH_CAT2(a, b) a##b
#define ATTNBENCH_CAT(a, b) ATTNBENCH_CAT2(a, b)
// ATTNBENCH_REGISTER_FN("mylib", my_fn);                   // AttnFn
// ATTNBENCH_REGISTER_FACTORY("mylib-packed", my_factory);  // Factory
#define ATTNBENCH_REGISTER_FN(NAME, FN, ...)   \
  static ::attnbench::Registrar ATTNBENCH_CAT( \
      attnbench_reg_, __LINE__)(::attnbench::Impl{NAME, ::attnbench::factory_from_fn(FN), ##__VA_ARGS__})
#define ATTNBENCH_REGISTER_FACTORY(NAME, FACTORY, ...) \
  static ::attnbench::Registrar ATTNBENCH_CAT(         \
      attnbench_reg_, __LINE__)(::attnbench::Impl{NAME, ::attnbench::Factory(FACTORY), ##__VA_ARGS__})
