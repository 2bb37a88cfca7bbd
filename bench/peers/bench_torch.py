#!/usr/bin/python3
"""PyTorch (CPU, float32) peers for the attention workloads W1..W5.

Same protocol and RESULT line format as the C++ harness (harness.cpp), so it
doubles as the template for plugging in any *command*-style implementation:

  RESULT wid impl threads t_min t_med t_max flops heap_peak_bytes cores_used
         frac_adj_peak probe_gflops bg_cores check calls_per_rep reps note

Implementations:
  torch-naive      softmax(Q K^T / sqrt(d_k)) V with torch.matmul + torch.softmax
                   (projections with torch.matmul(X, W) + b), all workloads
  torch-mha        nn.MultiheadAttention(768, 12) forward, default module
                   (batch_first=False -> F.multi_head_attention_forward), W3
  torch-mha-fast   same module with batch_first=True: the 1.13 inference fast
                   path torch._native_multi_head_attention (checked), W3
  torch-sdpa       torch.nn.functional._scaled_dot_product_attention (private in
                   1.13, public from 2.0), W4/W5
  torch-naive[blas=default]   diagnostic, threads=1 only: torch.set_num_threads(1)
                   but OpenBLAS's pool left at its default size
All calls run under torch.inference_mode(); need_weights=False for MHA.
Threads: torch.set_num_threads(T) AND openblas_set_num_threads(T): this torch
(Debian 1.13.1) sends matmuls to OpenBLAS (pthreads), which
torch.set_num_threads does not control.

Run with /usr/bin/python3 (the Debian torch).  Peak heap per call is measured
when libmemtrack.so is LD_PRELOADed (run.sh does that); the FMA probe comes
from libbenchprobe.so ($BENCH_PROBE_LIB).
"""
import argparse
import ctypes
import ctypes.util
import math
import os
import statistics
import sys
import time

import torch

WORKLOADS = {
    #      name        n     d_model heads d_k d_v project bias  out_proj
    "W1": ("tiny",      3,    4,      1,    3,  3,  True,   False, False),
    "W2": ("sentence",  6,    16,     1,    24, 28, True,   False, False),
    "W3": ("bert-base", 128,  768,    12,   64, 64, True,   True,  True),
    "W4": ("long-1h",   2048, 0,      1,    64, 64, False,  False, False),
    "W5": ("long-12h",  1024, 0,      12,   64, 64, False,  False, False),
    # W4 and W5 causal (query i sees keys 0..i): a tenth field
    "W4c": ("long-1h-causal",  2048, 0, 1,  64, 64, False, False, False, True),
    "W5c": ("long-12h-causal", 1024, 0, 12, 64, 64, False, False, False, True),
}


class W:
    def __init__(self, wid):
        (self.name, self.n, self.d_model, self.heads, self.d_k, self.d_v, self.project, self.bias,
         self.out_proj) = WORKLOADS[wid][:9]
        self.causal = len(WORKLOADS[wid]) > 9 and WORKLOADS[wid][9]
        self.id = wid
        self.qc = self.heads * self.d_k
        self.vc = self.heads * self.d_v

    def flops(self):
        f = 0.0
        if self.project:
            f += 2.0 * self.n * self.d_model * (2 * self.qc + self.vc)
        pairs = self.n * (self.n + 1) / 2 if self.causal else self.n * self.n  # causal: keys 0..i
        f += 2.0 * self.heads * pairs * (self.d_k + self.d_v)
        if self.out_proj:
            f += 2.0 * self.n * self.vc * self.d_model
        return f


# ---------------------------------------------------------------- native libs
def load_probe():
    path = os.environ.get("BENCH_PROBE_LIB", "/tmp/bench/build/libbenchprobe.so")
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        print(f"# no FMA probe ({path}); frac_adj/probe columns = nan", file=sys.stderr)
        return None
    lib.bench_fma_probe.restype = ctypes.c_double
    lib.bench_fma_probe.argtypes = [ctypes.c_int, ctypes.c_double]
    return lib.bench_fma_probe


def load_memtrack():
    try:
        me = ctypes.CDLL(None)
        start, stop = me.memtrack_start, me.memtrack_stop
    except (OSError, AttributeError):
        return None
    stop.restype = ctypes.c_longlong
    return start, stop


def load_openblas():
    """The OpenBLAS instance torch's matmuls run on (Debian: libblas.so.3 -> libopenblas.so.0)."""
    with open("/proc/self/maps") as f:
        maps = f.read()
    for line in maps.splitlines():
        if "libopenblas" in line:
            path = line.split()[-1]
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib
    return None


PROBE = load_probe()
MEMTRACK = load_memtrack()
OPENBLAS = load_openblas()
BLAS_DEFAULT_THREADS = OPENBLAS.openblas_get_num_threads() if OPENBLAS else None
TORCH_DEFAULT_THREADS = torch.get_num_threads()


def machine_busy_s():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


class QuietGate:
    """Same as harness.cpp: sleep >= min_gap; the last 100 ms measure other
    processes' CPU use; wait more (100 ms steps) while it exceeds quiet_cores,
    at most max_wait per call and `budget` seconds per process."""

    def __init__(self, min_gap, quiet_cores, max_wait, budget):
        self.min_gap, self.quiet_cores, self.max_wait, self.budget = min_gap, quiet_cores, max_wait, budget
        self.waited_total = 0.0

    def wait(self):
        win = 0.1
        time.sleep(max(0.0, self.min_gap - win))
        waited = 0.0
        while True:
            m0, c0, t0 = machine_busy_s(), time.process_time(), time.perf_counter()
            time.sleep(win)
            m1, c1, t1 = machine_busy_s(), time.process_time(), time.perf_counter()
            others = ((m1 - m0) - (c1 - c0)) / (t1 - t0)
            if others < self.quiet_cores or waited >= self.max_wait or self.waited_total >= self.budget:
                return
            waited += win
            self.waited_total += win


# ---------------------------------------------------------------- inputs
def make_inputs(w, gen):
    t = {}
    if w.id == "W1":  # "Illustrated: Self-Attention" numbers (we keep the 1/sqrt(d_k))
        t["X"] = torch.tensor([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], dtype=torch.float32)
        t["Wk"] = torch.tensor([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], dtype=torch.float32)
        t["Wq"] = torch.tensor([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=torch.float32)
        t["Wv"] = torch.tensor([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], dtype=torch.float32)
    elif w.id == "W3":  # from an nn.MultiheadAttention so that all W3 variants compute the same
        mha = torch.nn.MultiheadAttention(w.d_model, w.heads, bias=True).eval()
        E = w.d_model
        ipw, ipb = mha.in_proj_weight.detach(), mha.in_proj_bias.detach()
        with torch.no_grad():
            ipb.uniform_(-0.1, 0.1, generator=gen)
            mha.out_proj.bias.uniform_(-0.1, 0.1, generator=gen)
        t["X"] = torch.rand(w.n, E, generator=gen) * 2 - 1
        t["Wq"], t["Wk"], t["Wv"] = (ipw[i * E:(i + 1) * E].t().contiguous() for i in range(3))
        t["bq"], t["bk"], t["bv"] = (ipb[i * E:(i + 1) * E].clone() for i in range(3))
        t["Wo"] = mha.out_proj.weight.detach().t().contiguous()
        t["bo"] = mha.out_proj.bias.detach().clone()
        t["mha"] = mha
    elif w.project:
        s = 1.0 / math.sqrt(w.d_model)
        t["X"] = torch.rand(w.n, w.d_model, generator=gen) * 2 - 1
        t["Wq"] = (torch.rand(w.d_model, w.qc, generator=gen) * 2 - 1) * s
        t["Wk"] = (torch.rand(w.d_model, w.qc, generator=gen) * 2 - 1) * s
        t["Wv"] = (torch.rand(w.d_model, w.vc, generator=gen) * 2 - 1) * s
    else:
        t["Q"] = torch.rand(w.n, w.qc, generator=gen) * 2 - 1
        t["K"] = torch.rand(w.n, w.qc, generator=gen) * 2 - 1
        t["V"] = torch.rand(w.n, w.vc, generator=gen) * 2 - 1
    return t


# ---------------------------------------------------------------- implementations
def naive(w, t, dtype=None):
    cv = (lambda x: x.to(dtype)) if dtype is not None else (lambda x: x)
    n, H, dk, dv = w.n, w.heads, w.d_k, w.d_v
    if w.project:
        X = cv(t["X"])
        q, k, v = torch.matmul(X, cv(t["Wq"])), torch.matmul(X, cv(t["Wk"])), torch.matmul(X, cv(t["Wv"]))
        if w.bias:
            q, k, v = q + cv(t["bq"]), k + cv(t["bk"]), v + cv(t["bv"])
    else:
        q, k, v = cv(t["Q"]), cv(t["K"]), cv(t["V"])
    q = q.view(n, H, dk).transpose(0, 1)  # (H, n, d) views of the [n, H*d] layout
    k = k.view(n, H, dk).transpose(0, 1)
    v = v.view(n, H, dv).transpose(0, 1)
    s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dk)
    if w.causal:  # every score computed, the upper triangle masked before the softmax
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.matmul(p, v).transpose(0, 1).reshape(n, H * dv)
    if w.out_proj:
        o = torch.matmul(o, cv(t["Wo"]))
        if w.bias:
            o = o + cv(t["bo"])
    return o


def make_runners(w, t):
    """name -> (callable, validate, note); None callables are skipped."""
    r = {"torch-naive": (lambda: naive(w, t), True, "torch.matmul + torch.softmax, [n,H*d] views")}
    if w.id == "W3":
        mha = t["mha"]
        x_lne = t["X"].view(w.n, 1, w.d_model)  # (L, N, E)
        r["torch-mha"] = (lambda: mha(x_lne, x_lne, x_lne, need_weights=False)[0].view(w.n, w.d_model), True,
                          "nn.MultiheadAttention default (batch_first=False): F.multi_head_attention_forward")
        fast = torch.nn.MultiheadAttention(w.d_model, w.heads, bias=True, batch_first=True).eval()
        fast.load_state_dict(mha.state_dict())
        x_nle = t["X"].view(1, w.n, w.d_model)
        r["torch-mha-fast"] = (lambda: fast(x_nle, x_nle, x_nle, need_weights=False)[0].view(w.n, w.d_model), True,
                               "nn.MultiheadAttention batch_first=True: torch._native_multi_head_attention")
    if not w.project and hasattr(torch.nn.functional, "_scaled_dot_product_attention"):
        sdpa = torch.nn.functional._scaled_dot_product_attention
        n, H, d = w.n, w.heads, w.d_k

        def run_sdpa():
            q = t["Q"].view(n, H, d).transpose(0, 1)
            k = t["K"].view(n, H, d).transpose(0, 1)
            v = t["V"].view(n, H, w.d_v).transpose(0, 1)
            o = sdpa(q, k, v, None, 0.0, False, w.causal)[0]  # is_causal: W4c, W5c
            return o.transpose(0, 1).reshape(n, H * w.d_v)
        r["torch-sdpa"] = (run_sdpa, True, "F._scaled_dot_product_attention (1.13 private API, math path)")
    return r


def check_fast_path(fn):
    """True if calling fn goes through torch._native_multi_head_attention."""
    orig = torch._native_multi_head_attention
    hits = []

    def spy(*a, **k):
        hits.append(1)
        return orig(*a, **k)
    torch._native_multi_head_attention = spy
    try:
        fn()
    finally:
        torch._native_multi_head_attention = orig
    return bool(hits)


# ---------------------------------------------------------------- protocol
def set_threads(T, blas_threads):
    torch.set_num_threads(T)
    if OPENBLAS is not None and blas_threads is not None:
        OPENBLAS.openblas_set_num_threads(blas_threads)


def bench_workload(w, T, args, gate):
    gen = torch.Generator().manual_seed(1234 + w.n)
    t = make_inputs(w, gen)
    with torch.inference_mode():
        ref = naive(w, t, dtype=torch.float64)
        ref_max = max(float(ref.abs().max()), 1e-30)
        slots = []
        runners = make_runners(w, t)
        variants = [(name, fn, val, note, T) for name, (fn, val, note) in runners.items()]
        if T == 1 and w.id in ("W3", "W4", "W5", "W4c", "W5c") and OPENBLAS is not None:
            fn, val, note = runners["torch-naive"]
            variants.append(("torch-naive[blas=default]", fn, val,
                             f"diagnostic: torch.set_num_threads(1), OpenBLAS pool left at {BLAS_DEFAULT_THREADS}",
                             BLAS_DEFAULT_THREADS))
        for name, fn, validate, note, blas_t in variants:
            if args.impls and name not in args.impls:
                continue
            set_threads(T, blas_t)
            y = fn()  # warm-up (lazy init outside the memory window)
            del y
            heap = -1
            if MEMTRACK:
                MEMTRACK[0]()
                y = fn()
                heap = MEMTRACK[1]()
                del y
            y = fn()
            if validate:
                err = float((y.to(torch.float64) - ref).abs().max()) / ref_max
                check = ("ok " if err < 2e-4 else "FAIL ") + f"{err:.1e}"
            else:
                check = "n/a"
            if name == "torch-mha-fast" and not check_fast_path(fn):
                note += " [FAST PATH NOT TAKEN]"
            del y
            # calibrate calls per repetition
            t0 = time.perf_counter()
            fn()
            one = max(time.perf_counter() - t0, 1e-9)
            for _ in range(6):
                calls = max(1, math.ceil(args.rep_ms * 1e-3 / one))
                m = min(calls, 64)
                t0 = time.perf_counter()
                for _ in range(m):
                    fn()
                est = (time.perf_counter() - t0) / m
                if 0.7 * one < est < 1.4 * one:
                    break
                one = est
            slots.append(dict(name=name, fn=fn, blas_t=blas_t, calls=calls, heap=heap, check=check, note=note,
                              t=[], cpu=[], frac=[], probe=[], bg=[]))
        for r in range(args.reps):
            for k in range(len(slots)):
                s = slots[(k + r) % len(slots)]
                fn, calls = s["fn"], s["calls"]
                set_threads(T, s["blas_t"])
                gate.wait()
                probe = PROBE(T, args.probe_ms * 1e-3) if PROBE else float("nan")
                for _ in range(max(1, calls // 8) if calls > 1 else 0):  # none if one call fills a rep
                    fn()
                m0, c0, t0 = machine_busy_s(), time.process_time(), time.perf_counter()
                for _ in range(calls):
                    fn()
                t1, c1, m1 = time.perf_counter(), time.process_time(), machine_busy_s()
                per = (t1 - t0) / calls
                s["t"].append(per)
                s["cpu"].append((c1 - c0) / (t1 - t0))
                s["bg"].append(max(0.0, ((m1 - m0) - (c1 - c0)) / (t1 - t0)))
                s["probe"].append(probe)
                s["frac"].append(w.flops() / per * 1e-9 / probe)
    for s in slots:
        med = statistics.median
        print("RESULT\t" + "\t".join(str(x) for x in (
            w.id, s["name"], T, f"{min(s['t']):.6e}", f"{med(s['t']):.6e}", f"{max(s['t']):.6e}",
            f"{w.flops():.6e}", s["heap"], f"{med(s['cpu']):.3f}", f"{med(s['frac']):.4f}",
            f"{med(s['probe']):.2f}", f"{med(s['bg']):.2f}", s["check"], s["calls"], args.reps, s["note"])),
            flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="W1,W2,W3,W4,W5,W4c,W5c")
    ap.add_argument("--impls", default="", help="comma list; default all")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rep-ms", type=float, default=40)
    ap.add_argument("--gap-ms", type=float, default=100)
    ap.add_argument("--probe-ms", type=float, default=20)
    ap.add_argument("--quiet-cores", type=float, default=0.3)
    ap.add_argument("--quiet-max-ms", type=float, default=1000)
    ap.add_argument("--quiet-budget-s", type=float, default=30)
    ap.add_argument("--info", action="store_true", help="print thread/BLAS facts and exit")
    args = ap.parse_args()
    args.reps = max(5, args.reps)
    args.impls = [x for x in args.impls.split(",") if x]
    corename = OPENBLAS.openblas_get_corename().decode() if OPENBLAS else "none"
    print(f"# torch {torch.__version__}: default intra-op threads {TORCH_DEFAULT_THREADS}, "
          f"OpenBLAS core {corename} default threads {BLAS_DEFAULT_THREADS}, "
          f"memtrack {'on' if MEMTRACK else 'off'}, probe {'on' if PROBE else 'off'}", flush=True)
    if args.info:
        print(torch.__config__.parallel_info())
        return
    gate = QuietGate(args.gap_ms * 1e-3, args.quiet_cores, args.quiet_max_ms * 1e-3, args.quiet_budget_s)
    for T in [int(x) for x in args.threads.split(",")]:
        for wid in args.workloads.split(","):
            bench_workload(W(wid), T, args, gate)
    print(f"# quiet-gate: waited {gate.waited_total:.1f} s extra for other processes (< {args.quiet_cores:.2f} cores)")


if __name__ == "__main__":
    main()
