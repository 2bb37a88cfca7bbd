#!/usr/bin/python3
"""torch_backward.py: PyTorch 1.13 autograd on W7_backward's cells (bench/backward_bench.cpp), for
docs/performance.md's "W7_backward". Run with Debian's Python (python3-torch, PyTorch 1.13):
    /usr/bin/python3 bench/torch_backward.py [repetitions]

Cells, float32, as qkv's:
  W4  attention only: q, k, v 2048 x 64, one head; W5: 1024 x 768, 12 heads of 64 (as
      (12, 1024, 64)); causal and not. PyTorch 1.13's plain matmul-softmax-matmul
      (softmax(q kᵀ * scale + bias) v, bias -inf above the diagonal when causal), the formula of
      its scaled_dot_product_attention documentation; 1.13 has no fused CPU attention backward.
  W3  nn.MultiheadAttention(768, 12, bias=True, batch_first=True) on x 1 x 128 x 768,
      need_weights=False (the layer: projections, heads, output projection).
Steps: forward (under torch.no_grad(), inference's forward), forward_saving (the forward with
autograd recording), backward (out.backward(dO) alone: each call's recorded forward is run but
not counted) and forward_backward (both). Threads: torch.set_num_threads(1) and (2). Each number
is the median of `repetitions` timings (default 7; the repetitions interleaved over the cells),
each timing the mean over enough calls for 0.2 s. Prints one line per cell: name, median
milliseconds of wall time and of the process's CPU time (time.process_time: with 2 threads the
sum of both).
"""
import math
import statistics
import sys
import time

import torch


def timed(fn, min_time=0.2):
    """(wall, CPU) seconds per call: the mean over enough calls for min_time. fn() returns None,
    or a pair (wall, cpu) of the part of the call to count (the backward alone)"""
    fn()  # warm-up
    n, wall, cpu = 0, 0.0, 0.0
    t0 = time.perf_counter()
    while True:
        w0, c0 = time.perf_counter(), time.process_time()
        part = fn()
        w1, c1 = time.perf_counter(), time.process_time()
        if part is None:
            wall += w1 - w0
            cpu += c1 - c0
        else:
            wall += part[0]
            cpu += part[1]
        n += 1
        if time.perf_counter() - t0 >= min_time:
            return wall / n, cpu / n


def backward_timed(forward, backward):
    """a recorded forward (not counted), then the backward (counted)"""
    def fn():
        out = forward()
        w0, c0 = time.perf_counter(), time.process_time()
        backward(out)
        return time.perf_counter() - w0, time.process_time() - c0
    return fn


def attention_cells(name, T, H, d, causal):
    torch.manual_seed(0)
    q = torch.randn(H, T, d, requires_grad=True)
    k = torch.randn(H, T, d, requires_grad=True)
    v = torch.randn(H, T, d, requires_grad=True)
    do = torch.randn(H, T, d)
    scale = 1.0 / math.sqrt(d)
    bias = torch.zeros(T, T)
    if causal:
        bias = bias.masked_fill(torch.ones(T, T).tril().logical_not(), float("-inf"))

    def forward():
        return torch.softmax(q @ k.transpose(-2, -1) * scale + bias, dim=-1) @ v

    def inference():
        with torch.no_grad():
            forward()

    state = {}

    def saving():
        state["out"] = forward()

    def both():
        out = forward()
        out.backward(do)
        q.grad = k.grad = v.grad = None

    def backward(out):
        out.backward(do)
        q.grad = k.grad = v.grad = None

    return {f"{name}/forward": inference, f"{name}/forward_saving": saving,
            f"{name}/backward": backward_timed(forward, backward), f"{name}/forward_backward": both}


def mha_cells():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(768, 12, bias=True, batch_first=True)
    x = torch.randn(1, 128, 768, requires_grad=True)
    dy = torch.randn(1, 128, 768)

    def inference():
        with torch.no_grad():
            mha(x, x, x, need_weights=False)

    def saving():
        mha(x, x, x, need_weights=False)

    def both():
        y, _ = mha(x, x, x, need_weights=False)
        y.backward(dy)
        mha.zero_grad(set_to_none=True)
        x.grad = None

    def forward():
        return mha(x, x, x, need_weights=False)[0]

    def backward(y):
        y.backward(dy)
        mha.zero_grad(set_to_none=True)
        x.grad = None

    return {"W3/forward": inference, "W3/forward_saving": saving, "W3/backward": backward_timed(forward, backward),
            "W3/forward_backward": both}


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    cells = {}
    for causal in (False, True):
        c = "_causal" if causal else ""
        cells.update(attention_cells("W4" + c, 2048, 1, 64, causal))
        cells.update(attention_cells("W5" + c, 1024, 12, 64, causal))
    cells.update(mha_cells())
    print(f"torch {torch.__version__}")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        runs = {name: [] for name in cells}
        for _ in range(reps):  # the repetitions interleaved over the cells: load changes reach all
            for name, fn in cells.items():
                runs[name].append(timed(fn))
        for name in cells:
            wall = statistics.median(r[0] for r in runs[name]) * 1e3
            cpu = statistics.median(r[1] for r in runs[name]) * 1e3
            print(f"torch/{name}/threads:{threads} {wall:.2f} ms (CPU {cpu:.2f} ms)")


if __name__ == "__main__":
    main()
