// harness.cpp -- runs every registered attention implementation on the
// workloads W1..W5 and prints one RESULT line per (workload, impl, threads).
//
// Protocol per (workload, threads):
//   1. for each impl: memtrack window around factory() + two calls
//      (= peak heap bytes the implementation allocated), then validation of
//      sampled output rows against a float64 reference;
//   2. calibrate calls-per-repetition so one repetition lasts >= --rep-ms;
//   3. REPS rounds; in each round every impl (order rotated per round) gets:
//      quiet gate (sleep >= --gap-ms, longer while other processes are busy;
//      also lets other libraries' spinning pool threads go idle),
//      FMA probe (--probe-ms, same thread count), untimed warm-up calls
//      (1/8 of a repetition; none when a single call fills a repetition),
//      one timed repetition (wall time and process CPU time).
// Output line (tab separated), read by report.py:
//   RESULT wid impl threads t_min t_med t_max flops heap_peak_bytes
//          cores_used frac_adj_peak probe_gflops bg_cores check calls_per_rep reps note
// (times in seconds per call; medians over the repetitions; bg_cores = CPU
// used by other processes during the timed repetitions, from /proc/stat)
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "attnbench.hpp"

extern "C" {
void memtrack_start(void);
long long memtrack_stop(void);
double bench_fma_probe(int threads, double seconds);
}

namespace {
using namespace attnbench;

const Workload kWorkloads[] = {
    // id   name        n     d_model heads d_k d_v project bias  out_proj
    {"W1", "tiny", 3, 4, 1, 3, 3, true, false, false},
    {"W2", "sentence", 6, 16, 1, 24, 28, true, false, false},
    {"W3", "bert-base", 128, 768, 12, 64, 64, true, true, true},
    {"W4", "long-1h", 2048, 0, 1, 64, 64, false, false, false},
    {"W5", "long-12h", 1024, 0, 12, 64, 64, false, false, false},
    // W4, W5 causal (decoder prefill): the same inputs, query i sees keys 0..i
    {"W4c", "long-1h-causal", 2048, 0, 1, 64, 64, false, false, false, true},
    {"W5c", "long-12h-causal", 1024, 0, 12, 64, 64, false, false, false, true},
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
void sleep_s(double s) {
  if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}
// Busy CPU seconds of the whole machine so far (all CPUs, from /proc/stat).
double machine_busy_s() {
  static const double hz = double(sysconf(_SC_CLK_TCK));
  FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return 0;
  unsigned long long v[10] = {};
  int got = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                        &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
  std::fclose(f);
  if (got < 8) return 0;
  // user nice system [idle iowait] irq softirq steal
  return double(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz;
}

struct AlignedBuf {
  float* p = nullptr;
  size_t n = 0;
  AlignedBuf() = default;
  explicit AlignedBuf(size_t count) : n(count) {
    size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
    p = static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
  }
  AlignedBuf(AlignedBuf&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; }
  AlignedBuf& operator=(AlignedBuf&& o) noexcept {
    std::swap(p, o.p);
    std::swap(n, o.n);
    return *this;
  }
  ~AlignedBuf() { std::free(p); }
};

struct Rng {
  unsigned long long s;
  float uniform() {  // [-1, 1)
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return float((s >> 40) * (1.0 / (1ull << 24)) * 2.0 - 1.0);
  }
};

struct Data {
  AlignedBuf X, Wq, Wk, Wv, bq, bk, bv, Wo, bo, Q, K, V;
  Inputs in;
};

void fill(AlignedBuf& b, size_t count, Rng& r, float scale) {
  b = AlignedBuf(count);
  for (size_t i = 0; i < count; ++i) b.p[i] = r.uniform() * scale;
}

Data make_data(const Workload& w) {
  Data d;
  Rng r{0x9E3779B97F4A7C15ull ^ (unsigned long long)(w.n * 131 + w.heads)};
  if (std::strcmp(w.id, "W1") == 0) {
    // The "Illustrated: Self-Attention" numbers: 3 inputs of width 4,
    // key/query/value weights 4x3 (the article omits the 1/sqrt(d_k); we keep it).
    static const float X[] = {1, 0, 1, 0, 0, 2, 0, 2, 1, 1, 1, 1};
    static const float Wk[] = {0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0};
    static const float Wq[] = {1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1};
    static const float Wv[] = {0, 2, 0, 0, 3, 0, 1, 0, 3, 1, 1, 0};
    auto cp = [](AlignedBuf& b, const float* src, size_t cnt) {
      b = AlignedBuf(cnt);
      std::memcpy(b.p, src, cnt * sizeof(float));
    };
    cp(d.X, X, 12), cp(d.Wq, Wq, 12), cp(d.Wk, Wk, 12), cp(d.Wv, Wv, 12);
  } else if (w.project) {
    const float ws = 1.0f / std::sqrt(float(w.d_model));
    fill(d.X, size_t(w.n) * w.d_model, r, 1.0f);
    fill(d.Wq, size_t(w.d_model) * w.qk_cols(), r, ws);
    fill(d.Wk, size_t(w.d_model) * w.qk_cols(), r, ws);
    fill(d.Wv, size_t(w.d_model) * w.v_cols(), r, ws);
    if (w.bias) {
      fill(d.bq, w.qk_cols(), r, 0.1f), fill(d.bk, w.qk_cols(), r, 0.1f);
      fill(d.bv, w.v_cols(), r, 0.1f);
    }
    if (w.out_proj) {
      fill(d.Wo, size_t(w.v_cols()) * w.d_model, r, 1.0f / std::sqrt(float(w.v_cols())));
      if (w.bias) fill(d.bo, w.d_model, r, 0.1f);
    }
  } else {
    fill(d.Q, size_t(w.n) * w.qk_cols(), r, 1.0f);
    fill(d.K, size_t(w.n) * w.qk_cols(), r, 1.0f);
    fill(d.V, size_t(w.n) * w.v_cols(), r, 1.0f);
  }
  d.in = Inputs{d.X.p, d.Wq.p, d.Wk.p, d.Wv.p, d.bq.p, d.bk.p, d.bv.p, d.Wo.p, d.bo.p, d.Q.p, d.K.p, d.V.p};
  return d;
}

// float64 reference for the output rows in `rows`.
std::vector<std::vector<double>> reference(const Workload& w, const Inputs& in,
                                           const std::vector<int>& rows) {
  const int n = w.n, H = w.heads, dk = w.d_k, dv = w.d_v, qc = w.qk_cols(), vc = w.v_cols();
  std::vector<double> Q, K(size_t(n) * qc), V(size_t(n) * vc);
  auto proj = [&](const float* W, const float* b, int cols, std::vector<double>& out,
                  const std::vector<int>& rr) {
    out.assign(size_t(n) * cols, 0.0);
    for (int i : rr)
      for (int c = 0; c < cols; ++c) {
        double s = b ? b[c] : 0.0;
        for (int k = 0; k < w.d_model; ++k)
          s += double(in.X[size_t(i) * w.d_model + k]) * W[size_t(k) * cols + c];
        out[size_t(i) * cols + c] = s;
      }
  };
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  if (w.project) {
    proj(in.Wq, in.bq, qc, Q, rows);
    proj(in.Wk, in.bk, qc, K, all);
    proj(in.Wv, in.bv, vc, V, all);
  } else {
    Q.assign(in.Q, in.Q + size_t(n) * qc);
    K.assign(in.K, in.K + size_t(n) * qc);
    V.assign(in.V, in.V + size_t(n) * vc);
  }
  std::vector<std::vector<double>> res;
  std::vector<double> s(n), o(vc);
  for (int i : rows) {
    for (int h = 0; h < H; ++h) {
      double mx = -1e300;
      for (int j = 0; j < n; ++j) {
        if (w.causal && j > i) {  // masked: weight 0
          s[j] = -INFINITY;
          continue;
        }
        double a = 0;
        for (int c = 0; c < dk; ++c) a += Q[size_t(i) * qc + h * dk + c] * K[size_t(j) * qc + h * dk + c];
        s[j] = a / std::sqrt(double(dk));
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int j = 0; j < n; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int c = 0; c < dv; ++c) {
        double a = 0;
        for (int j = 0; j < n; ++j) a += s[j] * V[size_t(j) * vc + h * dv + c];
        o[h * dv + c] = a / sum;
      }
    }
    if (w.out_proj) {
      std::vector<double> y(w.d_model);
      for (int c = 0; c < w.d_model; ++c) {
        double a = in.bo ? in.bo[c] : 0.0;
        for (int k = 0; k < vc; ++k) a += o[k] * in.Wo[size_t(k) * w.d_model + c];
        y[c] = a;
      }
      res.push_back(y);
    } else {
      res.push_back(o);
    }
  }
  return res;
}

// The gap before each repetition: sleeps >= min_gap; its last 100 ms are a
// window in which the CPU use of *other* processes is measured; while that is
// above quiet_cores, keep waiting in 100 ms windows (at most max_wait per call
// and `budget` seconds per process).  Lets other libraries' spinning pool
// threads go idle and catches quiet moments on a shared machine.
struct QuietGate {
  double min_gap, quiet_cores, max_wait, budget;
  double waited_total = 0;
  void wait() {
    const double win = 0.1;
    sleep_s(std::max(0.0, min_gap - win));
    double waited = 0;
    for (;;) {
      double m0 = machine_busy_s(), c0 = cpu_s(), t0 = now_s();
      sleep_s(win);
      double m1 = machine_busy_s(), c1 = cpu_s(), t1 = now_s();
      double others = ((m1 - m0) - (c1 - c0)) / (t1 - t0);
      if (others < quiet_cores || waited >= max_wait || waited_total >= budget) break;
      waited += win, waited_total += win;
    }
  }
};

std::string fmt_err(double e) {
  char b[48];
  std::snprintf(b, sizeof b, "%.1e", e);
  return b;
}

struct Args {
  std::vector<std::string> workloads, impls;
  std::vector<int> threads{1, 2};
  int reps = 7;
  double rep_s = 0.04, gap_s = 0.1, probe_s = 0.02;
  double quiet_cores = 0.3, quiet_max_s = 1.0, quiet_budget_s = 30;
  bool list = false;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string t;
  while (std::getline(ss, t, ','))
    if (!t.empty()) v.push_back(t);
  return v;
}

bool wanted(const std::vector<std::string>& sel, const std::string& x) {
  return sel.empty() || std::find(sel.begin(), sel.end(), x) != sel.end();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct Slot {
  const Impl* impl;
  Runner run;
  AlignedBuf out;
  long long heap = -1;
  std::string check;
  long calls = 1;
  std::vector<double> t, cpu, frac, probe, bg;
};

void bench_one(const Workload& w, int T, const Args& a, std::vector<const Impl*> impls, QuietGate& gate) {
  Data data = make_data(w);
  const int n = w.n, oc = w.out_cols();
  std::vector<int> rows;
  for (int r : {0, n / 3, n / 2, (2 * n) / 3, n - 1})
    if (std::find(rows.begin(), rows.end(), r) == rows.end()) rows.push_back(r);
  auto ref = reference(w, data.in, rows);
  double ref_max = 1e-30;
  for (auto& r : ref)
    for (double x : r) ref_max = std::max(ref_max, std::fabs(x));

  std::vector<Slot> slots;
  for (const Impl* im : impls) {
    Slot s{im, {}, AlignedBuf(size_t(n) * oc)};
    std::fill(s.out.p, s.out.p + s.out.n, std::nanf(""));
    memtrack_start();
    s.run = im->factory(w, data.in, T);
    if (s.run) s.run(s.out.p), s.run(s.out.p);
    s.heap = memtrack_stop();
    if (!s.run) continue;
    if (im->validate) {
      double err = 0;
      for (size_t k = 0; k < rows.size(); ++k)
        for (int c = 0; c < oc; ++c) {
          double v = s.out.p[size_t(rows[k]) * oc + c];
          err = std::isfinite(v) ? std::max(err, std::fabs(v - ref[k][c])) : INFINITY;
        }
      double rel = err / ref_max;
      s.check = (rel < 2e-4 ? "ok " : "FAIL ") + fmt_err(rel);
    } else {
      s.check = "n/a";
    }
    slots.push_back(std::move(s));
  }
  // calibrate calls per repetition
  for (auto& s : slots) {
    s.run(s.out.p);
    double t0 = now_s();
    s.run(s.out.p);
    double one = std::max(now_s() - t0, 1e-9);
    for (int it = 0; it < 6; ++it) {
      s.calls = std::max(1L, long(std::ceil(a.rep_s / one)));
      t0 = now_s();
      for (long k = 0; k < std::min(s.calls, 64L); ++k) s.run(s.out.p);
      double est = (now_s() - t0) / std::min(s.calls, 64L);
      if (est > 0.7 * one && est < 1.4 * one) break;
      one = est;
    }
  }
  for (int r = 0; r < a.reps; ++r) {
    for (size_t k = 0; k < slots.size(); ++k) {
      Slot& s = slots[(k + r) % slots.size()];
      gate.wait();
      double probe = bench_fma_probe(T, a.probe_s);
      // warm caches / wake pools, except when one call alone fills a repetition
      long warm = s.calls > 1 ? std::max(1L, s.calls / 8) : 0;
      for (long i = 0; i < warm; ++i) s.run(s.out.p);
      double m0 = machine_busy_s(), c0 = cpu_s(), t0 = now_s();
      for (long i = 0; i < s.calls; ++i) s.run(s.out.p);
      double t1 = now_s(), c1 = cpu_s(), m1 = machine_busy_s();
      double per = (t1 - t0) / s.calls;
      s.t.push_back(per);
      s.cpu.push_back((c1 - c0) / (t1 - t0));
      s.bg.push_back(std::max(0.0, ((m1 - m0) - (c1 - c0)) / (t1 - t0)));
      s.probe.push_back(probe);
      s.frac.push_back(w.matmul_flops() / per * 1e-9 / probe);
    }
  }
  for (auto& s : slots) {
    auto tt = s.t;
    std::sort(tt.begin(), tt.end());
    std::printf("RESULT\t%s\t%s\t%d\t%.6e\t%.6e\t%.6e\t%.6e\t%lld\t%.3f\t%.4f\t%.2f\t%.2f\t%s\t%ld\t%d\t%s\n",
                w.id, s.impl->name.c_str(), T, tt.front(), median(s.t), tt.back(), w.matmul_flops(), s.heap,
                median(s.cpu), median(s.frac), median(s.probe), median(s.bg), s.check.c_str(), s.calls,
                a.reps, s.impl->note.c_str());
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--workloads")
      a.workloads = split(val());
    else if (k == "--impls")
      a.impls = split(val());
    else if (k == "--threads") {
      a.threads.clear();
      for (auto& t : split(val())) a.threads.push_back(std::atoi(t.c_str()));
    } else if (k == "--reps")
      a.reps = std::max(5, std::atoi(val().c_str()));
    else if (k == "--rep-ms")
      a.rep_s = std::atof(val().c_str()) * 1e-3;
    else if (k == "--gap-ms")
      a.gap_s = std::atof(val().c_str()) * 1e-3;
    else if (k == "--probe-ms")
      a.probe_s = std::atof(val().c_str()) * 1e-3;
    else if (k == "--quiet-cores")
      a.quiet_cores = std::atof(val().c_str());
    else if (k == "--quiet-max-ms")
      a.quiet_max_s = std::atof(val().c_str()) * 1e-3;
    else if (k == "--quiet-budget-s")
      a.quiet_budget_s = std::atof(val().c_str());
    else if (k == "--list")
      a.list = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--workloads W1,..] [--impls a,b] [--threads 1,2] [--reps N>=5]\n"
                   "          [--rep-ms MS] [--gap-ms MS] [--probe-ms MS] [--quiet-cores C]\n"
                   "          [--quiet-max-ms MS] [--quiet-budget-s S] [--list]\n",
                   argv[0]);
      return 2;
    }
  }
  std::vector<const Impl*> impls;
  if (!a.impls.empty()) {  // keep the requested order
    for (auto& name : a.impls) {
      bool found = false;
      for (auto& im : registry())
        if (im.name == name) impls.push_back(&im), found = true;
      if (!found) {
        std::fprintf(stderr, "unknown impl '%s'\n", name.c_str());
        return 2;
      }
    }
  } else {
    for (auto& im : registry()) impls.push_back(&im);
    std::sort(impls.begin(), impls.end(), [](auto* x, auto* y) { return x->name < y->name; });
  }
  if (a.list) {
    for (auto* im : impls) std::printf("%s\t%s\n", im->name.c_str(), im->note.c_str());
    for (auto& w : kWorkloads)
      std::printf(
          "%s\t%s\tn=%d d_model=%d heads=%d d_k=%d d_v=%d project=%d bias=%d out_proj=%d flops=%.0f\n", w.id,
          w.name, w.n, w.d_model, w.heads, w.d_k, w.d_v, w.project, w.bias, w.out_proj, w.matmul_flops());
    return 0;
  }
  std::printf("# attn_bench: reps=%d rep>=%.0fms gap=%.0fms probe=%.0fms impls=", a.reps, a.rep_s * 1e3,
              a.gap_s * 1e3, a.probe_s * 1e3);
  for (auto* im : impls) std::printf("%s ", im->name.c_str());
  std::printf("\n");
  QuietGate gate{a.gap_s, a.quiet_cores, a.quiet_max_s, a.quiet_budget_s};
  for (int T : a.threads)
    for (auto& w : kWorkloads)
      if (wanted(a.workloads, w.id)) bench_one(w, T, a, impls, gate);
  std::printf("# quiet-gate: waited %.1f s extra for other processes (< %.2f cores)\n", gate.waited_total,
              a.quiet_cores);
  return 0;
}
