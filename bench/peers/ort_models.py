#!/usr/bin/python3
"""Builds the ONNX models, inputs and float64 references for bench_ort.js.

usage: ort_models.py --out DIR      (needs Debian's python3-onnx + python3-numpy)

Data: exactly the harness's inputs (harness.cpp make_data: the same xorshift64
generator, seed, fill order and float32 scaling; W1 = the "Illustrated:
Self-Attention" numbers), so ORT computes what the C++ rows compute. Weights
are [d_in, d_out] (Q = X*Wq + bq) and are stored in the models as
initializers (constant: ORT may prepack them at session creation, untimed,
like any inference deployment). The float64 reference of the sampled output
rows {0, n/3, n/2, 2n/3, n-1} is computed here with numpy (same formula as
harness.cpp reference()).

Graphs (all float32, batch 1; every attention op uses its default scale
1/sqrt(head_size) = the harness's 1/sqrt(d_k)):
  W1/W2/W3  mha    X -> MatMul(+Add bias) x3 -> com.microsoft.MultiHeadAttention(num_heads)
                   [-> MatMul + Add output projection (W3)]
  W3        attn   X -> com.microsoft.Attention(packed [Wq|Wk|Wv] [768, 2304], bias [2304], num_heads=12)
                   -> MatMul + Add output projection
  W3        onnx   X -> MatMul+Add x3 -> ONNX Attention (opset 23, 3-D inputs, q/kv_num_heads=12)
                   -> MatMul + Add output projection
  W4/W5     mha    Q, K, V [1, n, heads*64] -> com.microsoft.MultiHeadAttention(num_heads)
  W4/W5     onnx   Q, K, V [1, n, heads*64] -> ONNX Attention (opset 23, q_num_heads = kv_num_heads = heads)
  W4c/W5c   the W4/W5 graphs, causal: MultiHeadAttention unidirectional = 1, Attention is_causal = 1
Writes DIR/manifest.json, DIR/<W>.<graph>.onnx, DIR/<W>.in.bin (float32 inputs,
concatenated), DIR/<W>.ref.bin (float64 reference rows).
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WORKLOADS = {
    #      name        n     d_model heads d_k d_v project bias  out_proj
    "W1": ("tiny",      3,    4,      1,    3,  3,  True,   False, False),
    "W2": ("sentence",  6,    16,     1,    24, 28, True,   False, False),
    "W3": ("bert-base", 128,  768,    12,   64, 64, True,   True,  True),
    "W4": ("long-1h",   2048, 0,      1,    64, 64, False,  False, False),
    "W5": ("long-12h",  1024, 0,      12,   64, 64, False,  False, False),
    # W4 and W5 causal (query i sees keys 0..i; the same inputs): MultiHeadAttention's
    # unidirectional = 1, the ONNX Attention's is_causal = 1
    "W4c": ("long-1h-causal",  2048, 0, 1,  64, 64, False, False, False),
    "W5c": ("long-12h-causal", 1024, 0, 12, 64, 64, False, False, False),
}
CAUSAL = {"W4c", "W5c"}
MASK64 = (1 << 64) - 1
F32 = np.float32


class Rng:
    """harness.cpp's Rng: xorshift64 (13, 7, 17); uniform() in [-1, 1) as float."""

    def __init__(self, seed):
        self.s = seed & MASK64

    def uniform(self, count):
        s, out = self.s, [0] * count
        for i in range(count):
            s ^= (s << 13) & MASK64
            s ^= s >> 7
            s ^= (s << 17) & MASK64
            out[i] = s >> 40
        self.s = s
        # float((s >> 40) * (1.0 / 2^24) * 2.0 - 1.0): exact in double and in float
        return (np.array(out, dtype=np.float64) * (1.0 / (1 << 24)) * 2.0 - 1.0).astype(F32)


def make_data(wid):
    """harness.cpp make_data(): same order of fills, float32 products uniform()*scale."""
    name, n, dm, H, dk, dv, project, bias, out_proj = WORKLOADS[wid]
    qc, vc = H * dk, H * dv
    d = {}
    r = Rng(0x9E3779B97F4A7C15 ^ (n * 131 + H))

    def fill(shape, scale):
        cnt = int(np.prod(shape))
        return (r.uniform(cnt) * F32(scale)).reshape(shape)  # float32 * float32, rounded once

    if wid == "W1":
        d["X"] = np.array([1, 0, 1, 0, 0, 2, 0, 2, 1, 1, 1, 1], F32).reshape(3, 4)
        d["Wk"] = np.array([0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0], F32).reshape(4, 3)
        d["Wq"] = np.array([1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1], F32).reshape(4, 3)
        d["Wv"] = np.array([0, 2, 0, 0, 3, 0, 1, 0, 3, 1, 1, 0], F32).reshape(4, 3)
    elif project:
        ws = F32(1.0) / np.sqrt(F32(dm))  # 1.0f / std::sqrt(float(d_model)), float ops
        d["X"] = fill((n, dm), F32(1.0))
        d["Wq"] = fill((dm, qc), ws)
        d["Wk"] = fill((dm, qc), ws)
        d["Wv"] = fill((dm, vc), ws)
        if bias:
            d["bq"] = fill((qc,), F32(0.1))
            d["bk"] = fill((qc,), F32(0.1))
            d["bv"] = fill((vc,), F32(0.1))
        if out_proj:
            d["Wo"] = fill((vc, dm), F32(1.0) / np.sqrt(F32(vc)))
            if bias:
                d["bo"] = fill((dm,), F32(0.1))
    else:
        d["Q"] = fill((n, qc), F32(1.0))
        d["K"] = fill((n, qc), F32(1.0))
        d["V"] = fill((n, vc), F32(1.0))
    return d


def sample_rows(n):
    rows = []
    for r in (0, n // 3, n // 2, (2 * n) // 3, n - 1):
        if r not in rows:
            rows.append(r)
    return rows


def reference(wid, d, rows):
    """float64, same formula as harness.cpp reference()."""
    name, n, dm, H, dk, dv, project, bias, out_proj = WORKLOADS[wid]
    f = lambda k: d[k].astype(np.float64)
    if project:
        X = f("X")
        Q = X @ f("Wq") + (f("bq") if bias else 0.0)
        K = X @ f("Wk") + (f("bk") if bias else 0.0)
        V = X @ f("Wv") + (f("bv") if bias else 0.0)
    else:
        Q, K, V = f("Q"), f("K"), f("V")
    Q = Q[rows]
    O = np.empty((len(rows), H * dv))
    for h in range(H):
        s = Q[:, h * dk:(h + 1) * dk] @ K[:, h * dk:(h + 1) * dk].T / np.sqrt(float(dk))
        if wid in CAUSAL:  # query rows[r] sees keys 0..rows[r]
            s[np.arange(n)[None, :] > np.array(rows)[:, None]] = -np.inf
        s = np.exp(s - s.max(axis=1, keepdims=True))
        O[:, h * dv:(h + 1) * dv] = (s @ V[:, h * dv:(h + 1) * dv]) / s.sum(axis=1, keepdims=True)
    if out_proj:
        O = O @ f("Wo") + (f("bo") if bias else 0.0)
    return O


# ---------------------------------------------------------------- graphs
def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def model(nodes, inputs, outputs, inits, opset, name):
    g = helper.make_graph(nodes, name, inputs, outputs, [numpy_helper.from_array(a, k) for k, a in inits.items()])
    m = helper.make_model(g, producer_name="attnbench ort_models.py",
                          opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10 if opset >= 21 else 8
    return m


def projections(d, bias, nodes, inits, outs=("q", "k", "v")):
    """MatMul (+ Add) for Q, K, V from X [1, n, d_model]."""
    for w, o in zip(("q", "k", "v"), outs):
        inits["W" + w] = d["W" + w]
        if bias:
            inits["b" + w] = d["b" + w]
            nodes.append(helper.make_node("MatMul", ["X", "W" + w], [o + "_mm"]))
            nodes.append(helper.make_node("Add", [o + "_mm", "b" + w], [o]))
        else:
            nodes.append(helper.make_node("MatMul", ["X", "W" + w], [o]))


def out_projection(d, bias, nodes, inits, src):
    inits["Wo"] = d["Wo"]
    if bias:
        inits["bo"] = d["bo"]
        nodes.append(helper.make_node("MatMul", [src, "Wo"], ["o_mm"]))
        nodes.append(helper.make_node("Add", ["o_mm", "bo"], ["Y"]))
    else:
        nodes.append(helper.make_node("MatMul", [src, "Wo"], ["Y"]))


def build_models(wid, d):
    name, n, dm, H, dk, dv, project, bias, out_proj = WORKLOADS[wid]
    oc = dm if out_proj else H * dv
    models = {}
    if project:
        x_in, y_out = [vi("X", (1, n, dm))], [vi("Y", (1, n, oc))]
        # mha: MatMul(+Add) x3 -> MultiHeadAttention (-> MatMul + Add)
        nodes, inits = [], {}
        projections(d, bias, nodes, inits)
        att = "attn" if out_proj else "Y"
        nodes.append(helper.make_node("MultiHeadAttention", ["q", "k", "v"], [att], domain="com.microsoft",
                                      num_heads=H))
        if out_proj:
            out_projection(d, bias, nodes, inits, att)
        models["mha"] = model(nodes, x_in, y_out, inits, 17, f"{wid}_mha")
        if wid == "W3":
            # attn: com.microsoft.Attention with packed QKV weights [d_in, 3*hidden], bias [3*hidden]
            nodes, inits = [], {}
            inits["Wqkv"] = np.ascontiguousarray(np.concatenate([d["Wq"], d["Wk"], d["Wv"]], axis=1))
            inits["bqkv"] = np.concatenate([d["bq"], d["bk"], d["bv"]])
            nodes.append(helper.make_node("Attention", ["X", "Wqkv", "bqkv"], ["attn"], domain="com.microsoft",
                                          num_heads=H))
            out_projection(d, bias, nodes, inits, "attn")
            models["attn"] = model(nodes, x_in, y_out, inits, 17, f"{wid}_attn")
            # onnx: MatMul+Add x3 -> ONNX Attention-23 (3-D inputs) -> MatMul + Add
            nodes, inits = [], {}
            projections(d, bias, nodes, inits)
            nodes.append(helper.make_node("Attention", ["q", "k", "v"], ["attn"], q_num_heads=H, kv_num_heads=H))
            out_projection(d, bias, nodes, inits, "attn")
            models["onnx"] = model(nodes, x_in, y_out, inits, 23, f"{wid}_onnx")
    else:
        qkv_in = [vi("Q", (1, n, H * dk)), vi("K", (1, n, H * dk)), vi("V", (1, n, H * dv))]
        y_out = [vi("Y", (1, n, oc))]
        causal = {"unidirectional": 1} if wid in CAUSAL else {}
        models["mha"] = model(
            [helper.make_node("MultiHeadAttention", ["Q", "K", "V"], ["Y"], domain="com.microsoft", num_heads=H,
                              **causal)],
            qkv_in, y_out, {}, 17, f"{wid}_mha")
        models["onnx"] = model(
            [helper.make_node("Attention", ["Q", "K", "V"], ["Y"], q_num_heads=H, kv_num_heads=H,
                              **({"is_causal": 1} if wid in CAUSAL else {}))],
            qkv_in, y_out, {}, 23, f"{wid}_onnx")
    return models


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--workloads", default="W1,W2,W3,W4,W5,W4c,W5c")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with open(__file__, "rb") as f:
        builder_sha1 = hashlib.sha1(f.read()).hexdigest()
    manifest = {"builder_sha1": builder_sha1, "onnx": onnx.__version__, "numpy": np.__version__, "workloads": {}}
    for wid in a.workloads.split(","):
        name, n, dm, H, dk, dv, project, bias, out_proj = WORKLOADS[wid]
        d = make_data(wid)
        rows = sample_rows(n)
        ref = reference(wid, d, rows)
        feeds = [("X", d["X"])] if project else [("Q", d["Q"]), ("K", d["K"]), ("V", d["V"])]
        offset, inputs = 0, []
        with open(os.path.join(a.out, f"{wid}.in.bin"), "wb") as f:
            for k, arr in feeds:
                f.write(np.ascontiguousarray(arr, dtype=F32).tobytes())
                inputs.append({"name": k, "dims": [1] + list(arr.shape), "offset": offset, "count": int(arr.size)})
                offset += int(arr.size)
        with open(os.path.join(a.out, f"{wid}.ref.bin"), "wb") as f:
            f.write(np.ascontiguousarray(ref, dtype=np.float64).tobytes())
        files = {}
        for g, m in build_models(wid, d).items():
            fn = f"{wid}.{g}.onnx"
            onnx.save(m, os.path.join(a.out, fn))
            files[g] = fn
        qc, vc = H * dk, H * dv
        pairs = n * (n + 1) / 2 if wid in CAUSAL else n * n  # causal: the keys 0..i of each query
        flops = (2.0 * n * dm * (2 * qc + vc) if project else 0.0) + 2.0 * H * pairs * (dk + dv) + \
                (2.0 * n * vc * dm if out_proj else 0.0)
        manifest["workloads"][wid] = {"name": name, "n": n, "heads": H, "out_cols": dm if out_proj else vc,
                                      "flops": flops, "rows": rows, "inputs": inputs, "models": files}
        print(f"# ort_models: {wid} {name}: {', '.join(files.values())}", file=sys.stderr)
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
