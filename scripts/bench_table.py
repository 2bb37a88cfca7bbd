#!/usr/bin/env python3
"""bench_table.py [build-bench/bench-results.json]: the medians of a scripts/bench.sh run as the
markdown table of docs/performance.md: per workload and implementation, wall time and CPU time
(the calling thread's) per call, GFLOP/s from the wall time, W4's peak extra memory, and the
ratios the runtime issue sets targets for."""
import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "build-bench/bench-results.json"
runs = json.load(open(path))["benchmarks"]
med = {}
for b in runs:
    if b.get("aggregate_name") != "median":
        continue
    name = b["run_name"].replace("/real_time", "")
    med[name] = b


def fmt_time(us):
    if us < 1000:
        return f"{us:.3g} µs"
    return f"{us / 1000:.3g} ms"


def per_call_us(b, key):
    unit = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b["time_unit"]]
    return b[key] * unit


print("| benchmark | wall / call | CPU / call | GFLOP/s (wall) | W4 peak extra |")
print("|---|---|---|---|---|")
for name, b in sorted(med.items()):
    if name.startswith("exp/"):
        continue
    wall, cpu = per_call_us(b, "real_time"), per_call_us(b, "cpu_time")
    mem = f"{b['peak_extra_MiB']:.2f} MiB" if "peak_extra_MiB" in b else ""
    print(f"| {name} | {fmt_time(wall)} | {fmt_time(cpu)} | {b.get('GFLOP/s', 0):.1f} | {mem} |")

print()
print("| exp kernel | elements/s |")
print("|---|---|")
for name, b in sorted(med.items()):
    if name.startswith("exp/"):
        print(f"| {name} | {b['items_per_second'] / 1e9:.3f} G/s |")


def ratio(a, b, key="real_time"):
    if a in med and b in med:
        return med[b][key] / med[a][key]
    return float("nan")


print()
print("| target | wall-time ratio | CPU-time ratio |")
print("|---|---|---|")
rows = [
    ("W3 qkv vs openblas, 1 thread (>= 1.0)", "W3_bert_layer/qkv/threads:1", "W3_bert_layer/openblas/threads:1"),
    ("W4 qkv vs openblas, 1 thread (>= 2.0)", "W4_long_2048/qkv/threads:1", "W4_long_2048/openblas/threads:1"),
    ("W5 qkv vs openblas, 1 thread (>= 2.0)", "W5_long_multihead_1024/qkv/threads:1", "W5_long_multihead_1024/openblas/threads:1"),
    ("W3 qkv 2 threads vs 1 thread (>= 1.6)", "W3_bert_layer/qkv/threads:2", "W3_bert_layer/qkv/threads:1"),
    ("W3 qkv_unpacked vs openblas, 1 thread", "W3_bert_layer/qkv_unpacked/threads:1", "W3_bert_layer/openblas/threads:1"),
    ("W4 qkv 2 threads vs 1 thread", "W4_long_2048/qkv/threads:2", "W4_long_2048/qkv/threads:1"),
    ("W5 qkv 2 threads vs 1 thread", "W5_long_multihead_1024/qkv/threads:2", "W5_long_multihead_1024/qkv/threads:1"),
]
for label, a, b in rows:
    print(f"| {label} | {ratio(a, b):.2f}x | {ratio(a, b, 'cpu_time'):.2f}x |")
if "exp/vexp" in med and "exp/stdx" in med:
    # items_per_second is computed from CPU time; the wall-time ratio from the times per pass
    r = med["exp/vexp"]["items_per_second"] / med["exp/stdx"]["items_per_second"]
    print(f"| vexp vs stdx::exp throughput (>= 5) | {ratio('exp/vexp', 'exp/stdx'):.2f}x | {r:.2f}x |")

print()
print("| target | wall / call | CPU / call |")
print("|---|---|---|")
for label, name in [("W1 qkv, 1 thread (<= 0.25 µs)", "W1_illustrated/qkv/threads:1"),
                    ("W2 qkv, 1 thread (<= 1.5 µs)", "W2_sentence/qkv/threads:1")]:
    if name in med:
        b = med[name]
        print(f"| {label} | {per_call_us(b, 'real_time'):.3f} µs | {per_call_us(b, 'cpu_time'):.3f} µs |")
