// attention_bench.cpp: the runtime path against plain loops, Eigen and OpenBLAS on the five
// workloads of the runtime issue, at 1 and 2 threads; and the vector exp against stdx::exp.
//
//   W1_illustrated          tutorial 000: x 3x4, W 4x3 (in, out), unscaled, projections + attention
//   W2_sentence             tutorial 001: x 6x16, Wq, Wk 24x16, Wv 28x16, scale 1/sqrt(24)
//   W3_bert_layer           128 tokens, hidden 768, 12 heads of 64: Q/K/V with bias, attention,
//                           output projection with bias
//   W4_long_2048            attention only: Q, K, V 2048x64, one head
//   W5_long_multihead_1024  attention only: Q, K, V 1024x768, 12 heads of 64
//   W4c_long_2048_causal    W4, causal (decoder prefill, chapter two)
//   W5c_long_multihead_1024_causal  W5, causal
// The attention-only workloads call the public runtime::multihead_attention (out only, heads
// side by side); nothing here reaches into rt::detail. The causal ones count the products of
// the keys each query sees (T (T + 1) / 2 pairs per head), so their GFLOP/s is work done; the
// peers compute every score and mask the upper triangle (-inf before the softmax), as a library
// without a causal kernel does.
// Names: <workload>/<impl>/threads:<n>; impl qkv (weights packed once, before the timed loop, as
// an inference engine does and as the peers lay out theirs), qkv_unpacked (W1-W3: the weights
// packed on every call), qkv_obvious / qkv_obvious_packed / qkv_keep_steps (W1-W3: the docs'
// first call, self_attention(x, w, {.heads}), a new result per call: on the weights as given, on
// packed_attention_weights, and keeping every step), qkv_heads_first (W4/W5: the (H, T, d)
// layout), naive, eigen, openblas. Counters: GFLOP/s (2 flops per multiply-add of the
// products; softmax not counted) and, for W4, peak_extra_MiB: the most heap memory the call
// holds at once beyond its inputs and output, measured on fresh threads (scripts/bench.sh).
// Every implementation allocates its buffers before the timed loop (first-touch page faults would be timed otherwise).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <experimental/simd>
#include <functional>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <qkv/runtime/runtime.hpp>

#ifdef QKV_BENCH_EIGEN
#include <Eigen/Dense>
#endif
#ifdef QKV_BENCH_OPENBLAS
#include <cblas.h>
#endif

// ---------------------------------------------------------------------------------------------
// heap accounting, for W4's peak extra memory: every operator new in this program is counted

namespace heap {
std::atomic<long long> live{0}, peak{0};
inline void add(long long n) {
  const long long now = live.fetch_add(n) + n;
  long long p = peak.load();
  while (now > p && !peak.compare_exchange_weak(p, now)) {}
}
}  // namespace heap

void* operator new(std::size_t n) {
  void* p = std::malloc(n + 16);
  if (!p) throw std::bad_alloc();
  *static_cast<std::size_t*>(p) = n;
  heap::add(static_cast<long long>(n));
  return static_cast<char*>(p) + 16;
}
void operator delete(void* p) noexcept {
  if (!p) return;
  char* base = static_cast<char*>(p) - 16;
  heap::add(-static_cast<long long>(*reinterpret_cast<std::size_t*>(base)));
  std::free(base);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
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
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete[](void* p, std::size_t) noexcept { operator delete(p); }
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete[](void* p, std::align_val_t a) noexcept { operator delete(p, a); }
void operator delete[](void* p, std::size_t, std::align_val_t a) noexcept { operator delete(p, a); }

namespace {

namespace rt = qkv::runtime;
using matrixf = rt::matrixf;

matrixf random(std::size_t r, std::size_t c, unsigned seed, float sigma = 1) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0, sigma);
  matrixf m(r, c);
  for (std::size_t k = 0; k < m.size(); ++k) m.data()[k] = d(g);
  return m;
}

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0, 0.02f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// one workload: inputs (x, or q/k/v for attention only), weights, and its flop count
struct workload {
  std::size_t T, S, d_in, dq, dv, d_out, heads;
  bool project;  // with Q/K/V projections (else q, k, v are the inputs)
  bool bias, out_proj;
  rt::weight_layout layout;
  float scale;
  matrixf x, q, k, v;  // x for projections; q, k, v for attention only
  rt::attention_weights<float> w;
  bool causal = false;  // W4c, W5c: query i sees keys 0..i

  double flops() const {
    double f = 0;
    if (project) f += 2.0 * T * d_in * (dq + dq + dv);
    // all heads: scores and weights . values (causal: the T (T + 1) / 2 pairs a query sees)
    f += 2.0 * (causal ? double(T) * double(T + 1) / 2 : double(T) * S) * (dq + dv);
    if (out_proj) f += 2.0 * T * dv * d_out;
    return f;
  }
};

workload make(int id) {
  workload w{};
  const bool causal = id == 6 || id == 7;  // W4c, W5c: W4 and W5, causal
  if (causal) id -= 2;
  switch (id) {
    case 1:
      w = {3, 3, 4, 3, 3, 3, 1, true, false, false, rt::weight_layout::in_out, 1.0f, {}, {}, {}, {}, {}};
      break;
    case 2:
      w = {6,  6,  16, 24, 28, 28, 1, true, false, false, rt::weight_layout::out_in, 1 / std::sqrt(24.0f),
           {}, {}, {}, {}, {}};
      break;
    case 3:
      w = {128,    128, 768, 768, 768, 768, 12, true, true, true, rt::weight_layout::out_in,
           0.125f, {},  {},  {},  {},  {}};
      break;
    case 4:
      w = {2048,   2048, 64, 64, 64, 64, 1, false, false, false, rt::weight_layout::out_in,
           0.125f, {},   {}, {}, {}, {}};
      break;
    case 5:
      w = {1024,   1024, 768, 768, 768, 768, 12, false, false, false, rt::weight_layout::out_in,
           0.125f, {},   {},  {},  {},  {}};
      break;
  }
  if (w.project) {
    w.x = random(w.T, w.d_in, 1);
    const bool oi = w.layout == rt::weight_layout::out_in;
    auto lin = [&](std::size_t out, std::size_t in, unsigned seed) {
      rt::linear_weights<float> l;
      l.weight = oi ? random(out, in, seed, 1 / std::sqrt(float(in)))
                    : random(in, out, seed, 1 / std::sqrt(float(in)));
      l.layout = w.layout;
      if (w.bias) l.bias = random_vector(out, seed + 100);
      return l;
    };
    w.w.q = lin(w.dq, w.d_in, 2);
    w.w.k = lin(w.dq, w.d_in, 3);
    w.w.v = lin(w.dv, w.d_in, 4);
    if (w.out_proj) w.w.o = lin(w.d_out, w.dv, 5);
  } else {
    w.q = random(w.T, w.dq, 6);
    w.k = random(w.S, w.dq, 7);
    w.v = random(w.S, w.dv, 8);
  }
  w.causal = causal;
  return w;
}

const char* workload_name(int id) {
  static const char* names[] = {"",
                                "W1_illustrated",
                                "W2_sentence",
                                "W3_bert_layer",
                                "W4_long_2048",
                                "W5_long_multihead_1024",
                                "W4c_long_2048_causal",
                                "W5c_long_multihead_1024_causal"};
  return names[id];
}

// ---------------------------------------------------------------------------------------------
// the implementations: each makes a callable that runs the workload once, buffers made up front

/// qkv: the runtime path, streaming (output only, like every peer here)
struct qkv_impl {
  const workload& w;
  rt::packed_attention_weights<float> packed;  // weights packed once, as the peers lay theirs out up front
  rt::multihead_result<float> r;
  rt::attention_options<float> opt;
  matrixf out;
  explicit qkv_impl(const workload& wl) : w(wl), packed(wl.w), out(wl.T, wl.dv) {
    opt.heads = w.heads;
    opt.scale = w.scale;
    opt.causal = w.causal;
    opt.keep_weights = false;
  }
  void operator()() { (*this)(&rt::default_pool()); }
  void operator()(rt::thread_pool* pool) {
    if (w.project) {
      rt::attention(w.x.view(), w.x.view(), packed, opt, r, pool);
      benchmark::DoNotOptimize(r.output.data());
    } else {
      // the public multi-head attention on Q, K, V: one pool dispatch, each head's k and v
      // packed once per task (runtime/multihead.hpp)
      rt::multihead_attention(w.q.view(), w.k.view(), w.v.view(), out.view(), opt, pool);
      benchmark::DoNotOptimize(out.data());
    }
  }
};

/// qkv_unpacked: the same call with the weights as given (linear_weights), packed on every call
/// as a one-off call would: W1-W3 only, what packing the weights once saves
struct qkv_unpacked_impl {
  const workload& w;
  rt::multihead_result<float> r;
  rt::attention_options<float> opt;
  explicit qkv_unpacked_impl(const workload& wl) : w(wl) {
    opt.heads = w.heads;
    opt.scale = w.scale;
    opt.keep_weights = false;
  }
  void operator()() {
    rt::attention(w.x.view(), w.x.view(), w.w, opt, r);
    benchmark::DoNotOptimize(r.output.data());
  }
};

/// the obvious calls (issue 32, item 2): what the docs show first, a new result per call.
/// qkv_obvious: `rt::self_attention(x, w, {.heads, .scale})` on the weights as given (packed on
/// every call); qkv_obvious_packed: the same call on packed_attention_weights made once;
/// qkv_keep_steps: the learner's call, `.keep_weights = true` (the old default). W1-W3
template <int Kind>  // 0 obvious, 1 obvious_packed, 2 keep_steps
struct qkv_obvious_impl {
  const workload& w;
  rt::packed_attention_weights<float> packed;
  explicit qkv_obvious_impl(const workload& wl) : w(wl) {
    if constexpr (Kind == 1) packed = rt::packed_attention_weights<float>(wl.w);
  }
  void operator()() {
    if constexpr (Kind == 0) {
      const auto r = rt::self_attention(w.x, w.w, {.heads = w.heads, .scale = w.scale});
      benchmark::DoNotOptimize(r.output.data());
    } else if constexpr (Kind == 1) {
      const auto r = rt::self_attention(w.x, packed, {.heads = w.heads, .scale = w.scale});
      benchmark::DoNotOptimize(r.output.data());
    } else {
      const auto r = rt::self_attention(w.x, w.w, {.heads = w.heads, .scale = w.scale, .keep_weights = true});
      benchmark::DoNotOptimize(r.output.data());
    }
  }
};
using qkv_obvious = qkv_obvious_impl<0>;
using qkv_obvious_packed = qkv_obvious_impl<1>;
using qkv_keep_steps = qkv_obvious_impl<2>;

/// qkv_heads_first (W4/W5 and causal): multihead_attention on the (H, T, d) layout, the same
/// numbers as qkv's q, k, v with the heads moved first before the timed loop
struct qkv_heads_first_impl {
  const workload& w;
  rt::attention_options<float> opt;
  matrixf q, k, v, out;
  static matrixf first(const matrixf& m, std::size_t heads) {
    const std::size_t t = m.rows(), d = m.cols() / heads;
    matrixf r(heads * t, d);
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t i = 0; i < t; ++i)
        for (std::size_t c = 0; c < d; ++c) r(h * t + i, c) = m(i, h * d + c);
    return r;
  }
  explicit qkv_heads_first_impl(const workload& wl)
      : w(wl),
        q(first(wl.q, wl.heads)),
        k(first(wl.k, wl.heads)),
        v(first(wl.v, wl.heads)),
        out(wl.heads * wl.T, wl.dv / wl.heads) {
    opt.heads = w.heads;
    opt.scale = w.scale;
    opt.causal = w.causal;
  }
  void operator()() {
    rt::multihead_attention(rt::heads_first, q.view(), k.view(), v.view(), out.view(), opt);
    benchmark::DoNotOptimize(out.data());
  }
};

/// naive: plain loops in the textbook order, std::exp, one thread
struct naive_impl {
  const workload& w;
  matrixf q, k, v, s, ctx, out;
  explicit naive_impl(const workload& wl) : w(wl), s(wl.T, wl.S), ctx(wl.T, wl.dv) {
    if (w.project) q = matrixf(w.T, w.dq), k = matrixf(w.S, w.dq), v = matrixf(w.S, w.dv);
    if (w.out_proj) out = matrixf(w.T, w.d_out);
  }
  static void linear(const matrixf& x, const rt::linear_weights<float>& l, matrixf& y) {
    const bool oi = l.layout == rt::weight_layout::out_in;
    for (std::size_t i = 0; i < x.rows(); ++i)
      for (std::size_t j = 0; j < y.cols(); ++j) {
        float acc = l.bias.empty() ? 0.0f : l.bias[j];
        for (std::size_t c = 0; c < x.cols(); ++c) acc += x(i, c) * (oi ? l.weight(j, c) : l.weight(c, j));
        y(i, j) = acc;
      }
  }
  void operator()() {
    const matrixf* Q = &w.q;
    const matrixf* K = &w.k;
    const matrixf* V = &w.v;
    if (w.project) {
      linear(w.x, w.w.q, q);
      linear(w.x, w.w.k, k);
      linear(w.x, w.w.v, v);
      Q = &q, K = &k, V = &v;
    }
    const std::size_t dh = w.dq / w.heads, dvh = w.dv / w.heads;
    for (std::size_t h = 0; h < w.heads; ++h) {
      for (std::size_t i = 0; i < w.T; ++i) {
        float m = -INFINITY;
        for (std::size_t j = 0; j < w.S; ++j) {
          if (w.causal && j > i) {  // masked: weight 0
            s(i, j) = -INFINITY;
            continue;
          }
          float acc = 0;
          for (std::size_t c = 0; c < dh; ++c) acc += (*Q)(i, h * dh + c) * (*K)(j, h * dh + c);
          s(i, j) = acc * w.scale;
          m = std::max(m, s(i, j));
        }
        float sum = 0;
        for (std::size_t j = 0; j < w.S; ++j) sum += (s(i, j) = std::exp(s(i, j) - m));
        for (std::size_t j = 0; j < w.S; ++j) s(i, j) /= sum;
        for (std::size_t c = 0; c < dvh; ++c) {
          float acc = 0;
          for (std::size_t j = 0; j < w.S; ++j) acc += s(i, j) * (*V)(j, h * dvh + c);
          ctx(i, h * dvh + c) = acc;
        }
      }
    }
    if (w.out_proj) linear(ctx, *w.w.o, out);
    benchmark::DoNotOptimize(ctx.data());
    benchmark::DoNotOptimize(out.data());
  }
};

#ifdef QKV_BENCH_EIGEN
/// Eigen 3.4: row-major float matrices, products with noalias, a row softmax on contiguous rows
struct eigen_impl {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Vec = Eigen::Matrix<float, 1, Eigen::Dynamic>;
  const workload& w;
  M x, wq, wk, wv, wo, q, k, v, s, ctx, out;
  Vec bq, bk, bv, bo;
  static M from(const matrixf& m) {
    M r(m.rows(), m.cols());
    for (std::size_t i = 0; i < m.rows(); ++i)
      for (std::size_t j = 0; j < m.cols(); ++j) r(i, j) = m(i, j);
    return r;
  }
  static Vec vec(const std::vector<float>& b, std::size_t n) {
    Vec r = Vec::Zero(n);
    for (std::size_t j = 0; j < b.size(); ++j) r(j) = b[j];
    return r;
  }
  explicit eigen_impl(const workload& wl) : w(wl) {
    if (w.project) {
      // stored (in, out) here so that every product is a plain X W
      auto io = [&](const rt::linear_weights<float>& l) {
        return l.layout == rt::weight_layout::out_in ? M(from(l.weight).transpose()) : from(l.weight);
      };
      x = from(w.x);
      wq = io(w.w.q), wk = io(w.w.k), wv = io(w.w.v);
      bq = vec(w.w.q.bias, w.dq), bk = vec(w.w.k.bias, w.dq), bv = vec(w.w.v.bias, w.dv);
      if (w.out_proj) wo = io(*w.w.o), bo = vec(w.w.o->bias, w.d_out);
      q.resize(w.T, w.dq), k.resize(w.S, w.dq), v.resize(w.S, w.dv);
    } else {
      q = from(w.q), k = from(w.k), v = from(w.v);
    }
    s.resize(w.T, w.S);
    ctx.resize(w.T, w.dv);
    if (w.out_proj) out.resize(w.T, w.d_out);
  }
  void operator()() {
    if (w.project) {
      q.noalias() = x * wq;
      q.rowwise() += bq;
      k.noalias() = x * wk;
      k.rowwise() += bk;
      v.noalias() = x * wv;
      v.rowwise() += bv;
    }
    const Eigen::Index dh = Eigen::Index(w.dq / w.heads), dvh = Eigen::Index(w.dv / w.heads);
    for (Eigen::Index h = 0; h < Eigen::Index(w.heads); ++h) {
      s.noalias() = (q.middleCols(h * dh, dh) * k.middleCols(h * dh, dh).transpose()) * w.scale;
      if (w.causal)  // the upper triangle masked before the softmax
        for (Eigen::Index i = 0; i < s.rows(); ++i) s.row(i).tail(s.cols() - i - 1).setConstant(-INFINITY);
      for (Eigen::Index i = 0; i < s.rows(); ++i) {  // contiguous rows: vectorised exp
        auto row = s.row(i).array();
        row = (row - row.maxCoeff()).exp();
        row /= row.sum();
      }
      ctx.middleCols(h * dvh, dvh).noalias() = s * v.middleCols(h * dvh, dvh);
    }
    if (w.out_proj) {
      out.noalias() = ctx * wo;
      out.rowwise() += bo;
    }
    benchmark::DoNotOptimize(ctx.data());
    benchmark::DoNotOptimize(out.data());
  }
};
#endif

#ifdef QKV_BENCH_OPENBLAS
/// OpenBLAS 0.3.21: cblas_sgemm for every product, the softmax in a scalar std::exp loop
struct openblas_impl {
  const workload& w;
  matrixf q, k, v, s, ctx, out;
  explicit openblas_impl(const workload& wl) : w(wl), s(wl.T, wl.S), ctx(wl.T, wl.dv) {
    if (w.project) q = matrixf(w.T, w.dq), k = matrixf(w.S, w.dq), v = matrixf(w.S, w.dv);
    if (w.out_proj) out = matrixf(w.T, w.d_out);
  }
  static void linear(const matrixf& x, const rt::linear_weights<float>& l, matrixf& y) {
    const int M = int(x.rows()), N = int(y.cols()), K = int(x.cols());
    float beta = 0;
    if (!l.bias.empty()) {
      for (int i = 0; i < M; ++i) std::copy(l.bias.begin(), l.bias.end(), y.row(std::size_t(i)));
      beta = 1;
    }
    const bool oi = l.layout == rt::weight_layout::out_in;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, oi ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, x.data(), K,
                l.weight.data(), int(l.weight.cols()), beta, y.data(), N);
  }
  void operator()() {
    const matrixf* Q = &w.q;
    const matrixf* K = &w.k;
    const matrixf* V = &w.v;
    if (w.project) {
      linear(w.x, w.w.q, q);
      linear(w.x, w.w.k, k);
      linear(w.x, w.w.v, v);
      Q = &q, K = &k, V = &v;
    }
    const int T = int(w.T), S = int(w.S), dh = int(w.dq / w.heads), dvh = int(w.dv / w.heads);
    for (int h = 0; h < int(w.heads); ++h) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, S, dh, w.scale, Q->data() + h * dh,
                  int(Q->cols()), K->data() + h * dh, int(K->cols()), 0.0f, s.data(), S);
      for (int i = 0; i < T; ++i) {
        float* row = s.row(std::size_t(i));
        if (w.causal) std::fill(row + i + 1, row + S, -INFINITY);  // masked before the softmax
        const float m = *std::max_element(row, row + S);
        float sum = 0;
        for (int j = 0; j < S; ++j) sum += (row[j] = std::exp(row[j] - m));
        const float inv = 1.0f / sum;
        for (int j = 0; j < S; ++j) row[j] *= inv;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, dvh, S, 1.0f, s.data(), S,
                  V->data() + h * dvh, int(V->cols()), 0.0f, ctx.data() + h * dvh, int(ctx.cols()));
    }
    if (w.out_proj) linear(ctx, *w.w.o, out);
    benchmark::DoNotOptimize(ctx.data());
    benchmark::DoNotOptimize(out.data());
  }
};
#endif

void set_threads(int n) {
  rt::set_threads(std::size_t(n));
#ifdef QKV_BENCH_EIGEN
  Eigen::setNbThreads(n);
#endif
#ifdef QKV_BENCH_OPENBLAS
  openblas_set_num_threads(n);
#endif
}

template <class Impl>
void run(benchmark::State& state, int id, bool memory) {
  const int threads = int(state.range(0));
  static const workload* loads[8] = {};
  if (!loads[id]) loads[id] = new workload(make(id));
  const workload& w = *loads[id];
  set_threads(threads);
  Impl impl(w);
  impl();  // warm up: thread-local buffers, pages, the pool's threads
  for (auto _ : state) impl();
  state.counters["GFLOP/s"] =
      benchmark::Counter(w.flops() / 1e9, benchmark::Counter::kIsIterationInvariantRate);
#ifdef QKV_BENCH_EIGEN
  // Eigen allocates with malloc (its aligned_malloc), which the operator new count above cannot
  // see: its figure would be wrong, so none is reported (its scores are T x S, 16 MiB, by construction)
  if constexpr (std::is_same_v<Impl, eigen_impl>) memory = false;
#endif
  if (memory) {
    // the buffers an implementation makes up front (the T x S scores of the peers) count as
    // extra too: measure what constructing it plus one call holds beyond the inputs
    const long long before = heap::live.load();
    heap::peak.store(before);
    double held = 0;
    {
      std::thread fresh([&] {
        rt::thread_pool pool{std::size_t(threads)};
        const long long b2 = heap::live.load();
        heap::peak.store(b2);
        Impl fresh_impl(w);
        if constexpr (std::is_same_v<Impl, qkv_impl>)
          fresh_impl(&pool);  // on this thread's own pool, so that its threads' buffers are counted
        else
          fresh_impl();
        // minus the output itself (T x d_v floats), which every implementation must hold
        held = double(heap::peak.load() - b2 - (long long)(w.T * w.dv * sizeof(float))) / (1024.0 * 1024.0);
      });
      fresh.join();
    }
    state.counters["peak_extra_MiB"] = held;
  }
}

// ---------------------------------------------------------------------------------------------
// the vector exp against stdx::exp and std::exp: 4096 floats in [-20, 5], elements per second

std::vector<float> exp_input() {
  std::vector<float> in(4096);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = -20.0f + 25.0f * float(i) / float(in.size());
  return in;
}

void exp_vexp(benchmark::State& state) {
  const auto in = exp_input();
  std::vector<float> out(in.size());
  for (auto _ : state) {
    rt::vexp(in.data(), out.data(), in.size());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(std::int64_t(state.iterations()) * std::int64_t(in.size()));
}

void exp_stdx(benchmark::State& state) {
  namespace stdx = std::experimental;
  using V = stdx::native_simd<float>;
  const auto in = exp_input();
  std::vector<float> out(in.size());
  for (auto _ : state) {
    for (std::size_t i = 0; i < in.size(); i += V::size())
      stdx::exp(V(in.data() + i, stdx::element_aligned)).copy_to(out.data() + i, stdx::element_aligned);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(std::int64_t(state.iterations()) * std::int64_t(in.size()));
}

void exp_std(benchmark::State& state) {
  const auto in = exp_input();
  std::vector<float> out(in.size());
  for (auto _ : state) {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = std::exp(in[i]);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(std::int64_t(state.iterations()) * std::int64_t(in.size()));
}

// the ceiling: this build's fp32 fma throughput on one thread, 12 independent chains of
// rt::fmadd on simd<float> (8 lanes with AVX2, 16 with AVX-512); GFLOP/s = 2 flops per lane
void fma_peak(benchmark::State& state) {
  using V = rt::simd<float>;
  V acc[12];
  for (auto& a : acc) a = V(1e-3f);
  const V x(0.999f), y(1e-3f);
  constexpr std::int64_t steps = 1 << 16;
  for (auto _ : state) {
    for (std::int64_t s = 0; s < steps; ++s)
#pragma GCC unroll 12
      for (auto& a : acc) a = rt::fmadd(x, a, y);
    benchmark::DoNotOptimize(acc);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(double(steps) * 12 * 2 * double(rt::lanes<float>) / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

int register_all() {
  for (int id = 1; id <= 7; ++id) {
    const std::string n = workload_name(id);
    const bool mem = id == 4 || id == 6;
    benchmark::RegisterBenchmark((n + "/qkv").c_str(),
                                 [id, mem](benchmark::State& s) { run<qkv_impl>(s, id, mem); })
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    if (id <= 3)
      benchmark::RegisterBenchmark((n + "/qkv_unpacked").c_str(),
                                   [id, mem](benchmark::State& s) { run<qkv_unpacked_impl>(s, id, mem); })
          ->ArgName("threads")
          ->Arg(1)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    if (id >= 4)
      benchmark::RegisterBenchmark((n + "/qkv_heads_first").c_str(),
                                   [id](benchmark::State& s) { run<qkv_heads_first_impl>(s, id, false); })
          ->ArgName("threads")
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    if (id <= 3) {
      benchmark::RegisterBenchmark((n + "/qkv_obvious").c_str(),
                                   [id, mem](benchmark::State& s) { run<qkv_obvious>(s, id, mem); })
          ->ArgName("threads")
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark((n + "/qkv_obvious_packed").c_str(),
                                   [id, mem](benchmark::State& s) { run<qkv_obvious_packed>(s, id, mem); })
          ->ArgName("threads")
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark((n + "/qkv_keep_steps").c_str(),
                                   [id, mem](benchmark::State& s) { run<qkv_keep_steps>(s, id, mem); })
          ->ArgName("threads")
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
    benchmark::RegisterBenchmark((n + "/naive").c_str(),
                                 [id, mem](benchmark::State& s) { run<naive_impl>(s, id, mem); })
        ->ArgName("threads")
        ->Arg(1)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
#ifdef QKV_BENCH_EIGEN
    benchmark::RegisterBenchmark((n + "/eigen").c_str(),
                                 [id, mem](benchmark::State& s) { run<eigen_impl>(s, id, mem); })
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
#endif
#ifdef QKV_BENCH_OPENBLAS
    benchmark::RegisterBenchmark((n + "/openblas").c_str(),
                                 [id, mem](benchmark::State& s) { run<openblas_impl>(s, id, mem); })
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
#endif
  }
  benchmark::RegisterBenchmark("exp/vexp", exp_vexp);
  benchmark::RegisterBenchmark("exp/stdx", exp_stdx);
  benchmark::RegisterBenchmark("exp/std", exp_std);
  benchmark::RegisterBenchmark("peak/fma", fma_peak);
  // which kernels the float attention ran: libqkv_kernels' avx2 or avx512, or header-only
  benchmark::AddCustomContext(
      "qkv kernels", std::string(rt::kernels_name(rt::kernels_in_use())) + " (" + rt::kernels_reason() + ")");
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
