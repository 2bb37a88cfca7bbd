#!/usr/bin/python3
"""Turns the PEAK / RESULT / DIAG / META lines of a benchmark run into Markdown.

usage: report.py [--out baseline.md] LOGFILE...
Prints the main table (plus limits) to stdout; with --out also writes the full
report (header, machine, tables, diagnostics, notes).
"""
import argparse
import collections
import statistics
import sys

WORKLOADS = {  # id: (label, shape, softmax elements, score-matrix bytes per head, heads)
    "W1": ("tiny", "3 tokens, d_model 4 -> d_k=d_v=3, 1 head, Q/K/V projections (no bias)", 9, 36, 1),
    "W2": ("sentence", "6 tokens x 16, d_q=d_k=24, d_v=28, 1 head, Q/K/V projections (no bias)", 36, 144, 1),
    "W3": ("bert-base", "seq 128, hidden 768, 12 heads x 64, Q/K/V projections + bias, output projection + bias",
           196608, 65536, 12),
    "W4": ("long-1h", "seq 2048, 1 head, d=64, attention only (Q, K, V given)", 4194304, 16 << 20, 1),
    "W5": ("long-12h", "seq 1024, 12 heads x 64, attention only (Q, K, V given)", 12582912, 4 << 20, 12),
    "W4c": ("long-1h-causal", "W4, causal (query i sees keys 0..i)", 2098176, 16 << 20, 1),
    "W5c": ("long-12h-causal", "W5, causal (query i sees keys 0..i)", 6297600, 4 << 20, 12),
}
KNOWN_ORDER = ["eigen", "openblas", "torch-naive", "torch-mha", "torch-mha-fast", "torch-sdpa", "ort"]
TINY = {"W1", "W2"}


def fmt_bytes(b):
    b = float(b)
    if b < 0:
        return "-"
    if b < 1024:
        return f"{b:.0f} B"
    if b < 1 << 20:
        return f"{b / 1024:.1f} KiB"
    return f"{b / (1 << 20):.1f} MiB"


def fmt_time(s, wid):
    if wid in TINY:
        return f"{s * 1e9:,.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    return f"{s * 1e3:.2f} ms"


def fmt_si(x):
    for unit, f in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= f:
            return f"{x / f:.3g} {unit}"
    return f"{x:.0f}"


def parse(files):
    peaks, results, diags, meta = [], [], [], collections.OrderedDict()
    for fn in files:
        with open(fn, errors="replace") as f:
            for line in f:
                p = line.rstrip("\n").split("\t")
                if p[0] == "PEAK" and len(p) >= 7:
                    peaks.append(dict(kind=p[1], T=int(p[2]), min=float(p[3]), med=float(p[4]), max=float(p[5]),
                                      unit=p[6]))
                elif p[0] == "RESULT" and len(p) >= 17:
                    results.append(dict(wid=p[1], impl=p[2], T=int(p[3]), tmin=float(p[4]), tmed=float(p[5]),
                                        tmax=float(p[6]), flops=float(p[7]), heap=int(p[8]), cores=float(p[9]),
                                        frac_adj=float(p[10]), probe=float(p[11]), bg=float(p[12]), check=p[13],
                                        calls=int(p[14]), reps=int(p[15]), note=p[16]))
                elif p[0] == "DIAG" and len(p) >= 3:
                    diags.append(p[1:])
                elif p[0] == "META" and len(p) >= 3:
                    meta[p[1]] = p[2]
    return peaks, results, diags, meta


def peak_for(peaks, results):
    """Best FMA rate seen at each thread count: peak.cpp reps and every adjacent probe."""
    best = {}
    for p in peaks:
        if p["kind"] == "fma_fp32":
            best[p["T"]] = max(best.get(p["T"], 0.0), p["max"])
    for r in results:
        if r["probe"] == r["probe"]:  # not nan
            best[r["T"]] = max(best.get(r["T"], 0.0), r["probe"])
    return best


def is_diag(r):
    return r["note"].startswith("diagnostic")


def order_key(r):
    name = r["impl"]
    if is_diag(r):
        rank = 100
    elif name in KNOWN_ORDER:
        rank = 10 + KNOWN_ORDER.index(name)
    else:
        rank = 0  # new implementations first
    return (r["wid"], rank, name, r["T"])


def limits_table(peaks, best):
    """One row per (limit, threads); with several peak.cpp passes, the pass with the best median."""
    groups = collections.OrderedDict()
    for p in peaks:
        groups.setdefault((p["kind"], p["T"]), []).append(p)
    out = ["| Limit | Threads | Min | Median | Max | Unit | Passes |", "|---|---:|---:|---:|---:|---|---:|"]
    rank = {"fma_fp32": 0, "triad_L2": 1, "triad_L3": 2, "triad_DRAM": 3}
    for (kind, T), ps in sorted(groups.items(), key=lambda kv: (rank.get(kv[0][0], 9), kv[0][0], kv[0][1])):
        p = max(ps, key=lambda q: q["med"])
        out.append(f"| {kind} | {T} | {p['min']:.1f} | {p['med']:.1f} | {p['max']:.1f} | {p['unit']} | {len(ps)} |")
    return out


def peak_line(best):
    if not best:
        return "No FMA peak measured: '% of peak' is empty."
    return ("Peak used for '% of peak' (best fp32 FMA rate seen in this run, peak.cpp or any adjacent probe): " +
            ", ".join(f"{T} thread{'s' if T > 1 else ''}: {v:.1f} GFLOP/s (= {v / T / 32:.2f} GHz x 32 flop/cycle/core)"
                      for T, v in sorted(best.items())) + ".")


def main_table(results, best):
    out = ["| Workload | Implementation | Thr | Median time | Min - max | GFLOP/s | % of peak | % of adj. peak |"
           " Cores used | Other load | Heap peak/call | Check |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    flagged = False
    for r in sorted(results, key=order_key):
        gf = r["flops"] / r["tmed"] * 1e-9
        pk = best.get(r["T"])
        frac = f"{100 * gf / pk:.1f}" if pk else "-"
        adj = f"{100 * r['frac_adj']:.1f}" if r["frac_adj"] == r["frac_adj"] else "-"
        bg = f"{r['bg']:.2f}"
        if r["bg"] > 0.5:
            bg += " *"
            flagged = True
        name = r["impl"] + (" (diag)" if is_diag(r) and "diag" not in r["impl"] else "")
        gfs = f"{gf:.3f}" if gf < 1 else f"{gf:.1f}"
        out.append(f"| {r['wid']} {WORKLOADS.get(r['wid'], ('',))[0]} | {name} | {r['T']} | "
                   f"{fmt_time(r['tmed'], r['wid'])} | {fmt_time(r['tmin'], r['wid'])} - {fmt_time(r['tmax'], r['wid'])} | "
                   f"{gfs} | {frac} | {adj} | {r['cores']:.2f} | {bg} | {fmt_bytes(r['heap'])} | {r['check']} |")
    if flagged:
        out.append("")
        out.append("\\* other processes used more than half a core during the timed repetitions (median): "
                   "treat that row's absolute times with care; '% of adj. peak' is normalised by an FMA probe run "
                   "right before each repetition.")
    return out


def workload_table():
    out = ["| Id | Name | Shape | Softmax elements/call | Naive score matrix |", "|---|---|---|---:|---:|"]
    for wid, (name, shape, sm, sbytes, heads) in WORKLOADS.items():
        mat = fmt_bytes(sbytes) + (f" per head ({fmt_bytes(sbytes * heads)} all heads)" if heads > 1 else "")
        out.append(f"| {wid} | {name} | {shape} | {sm:,} | {mat} |")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--notes", help="Markdown file appended as the notes section")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    peaks, results, diags, meta = parse(a.files)
    best = peak_for(peaks, results)
    table = main_table(results, best)
    print("\n".join(table))
    print()
    print(peak_line(best))
    if not a.out:
        return
    flops = {r["wid"]: r["flops"] for r in results}
    doc = ["# Attention peers and physical limits -- baseline", ""]
    for k, v in meta.items():
        doc.append(f"- **{k}**: {v}")
    doc += ["", "## Workloads (batch 1, float32)", ""] + workload_table()
    doc.append("")
    doc.append("Matmul FLOP per call (2*m*n*k for every matmul; softmax, scaling and bias adds not counted): " +
               ", ".join(f"{w} {fmt_si(f)}" for w, f in sorted(flops.items())) + ".")
    doc += ["", "## Results", "",
            "Median over the repetitions (each repetition = mean of a batch of calls lasting >= 40 ms; >= 5 "
            "repetitions). GFLOP/s from the median time. '% of peak': median GFLOP/s over the run's best FMA rate "
            "at that thread count. '% of adj. peak': median over repetitions of (repetition GFLOP/s / FMA probe run "
            "just before it, same thread count). 'Cores used': process CPU time / wall time during the "
            "repetitions (spinning pool threads count). 'Other load': cores used by other processes meanwhile. "
            "'Heap peak/call': high-water mark of malloc'd bytes during the setup and two calls (torch: one call, "
            "its output tensor included; C++ impls write into a caller-provided output). 'Check': max |error| "
            "relative to max |ref| on sampled rows vs a float64 reference.", ""]
    doc += table
    doc += ["", peak_line(best)]
    doc += ["", "## Physical limits (peak.cpp)", "",
            "fp32 FMA: 12 independent vfmadd231ps ymm chains per thread (Zen3: 2 FMA pipes x 8 lanes x 2 flop = "
            "32 flop/cycle/core). Triad a = b + s*c, STREAM byte count (12 B/element; write-allocate traffic not "
            "counted), footprints 0.4 MiB (L2), 12 MiB (L3), 768 MiB (DRAM). Threads pinned to CPU 0..T-1. "
            "peak.cpp runs at the start and at the end of run.sh; each row shows the pass with the better median "
            "(other jobs on the machine can only lower these numbers).", ""]
    doc += limits_table(peaks, best)
    if diags:
        doc += ["", "## Diagnostics", "", "| Item | Setting | Result |", "|---|---|---|"]
        for d in diags:
            doc.append("| " + " | ".join(d[:3] + [""] * (3 - len(d[:3]))) + " |")
    if a.notes:
        with open(a.notes) as f:
            doc += ["", f.read().rstrip()]
    with open(a.out, "w") as f:
        f.write("\n".join(doc) + "\n")


if __name__ == "__main__":
    sys.exit(main())
