#!/usr/bin/python3
"""torch_backward_fixtures.py: PyTorch 1.13 autograd's gradients of attention, for qkv's run-time
backward (include/qkv/runtime/backward.hpp, multihead_backward.hpp), written to
tests/data/backward/backward_torch.json.

Run with Debian's Python (python3-torch, PyTorch 1.13):
    /usr/bin/python3 scripts/torch_backward_fixtures.py

Two kinds of case, each in float32 and float64 (the inputs drawn in float32 by
torch.manual_seed, so both runs start from the same exact numbers; the float64 case is computed
by autograd in float64, the float32 case in float32):
  - "sdpa": scaled dot-product attention written as PyTorch's documentation of
    scaled_dot_product_attention writes it (1.13 has no fused CPU kernel with a backward):
        out = softmax(q kᵀ * scale + attn_bias) v,   out.backward(d_context)
    attn_bias: 0 or -inf, from causal (upper_left: tril(diagonal=0); lower_right:
    tril(diagonal=S - T)) and key padding (-inf in the padded columns). The gradients
    q.grad, k.grad, v.grad are d_queries, d_keys, d_values.
  - "mha": torch.nn.MultiheadAttention(embed_dim, num_heads, bias=True, batch_first=True),
    self-attention mha(x, x, x, key_padding_mask=..., attn_mask=..., need_weights=False),
    output.backward(d_output): x.grad (d_x), in_proj_weight.grad split in three (d_w_query,
    d_w_key, d_w_value: (out, in) as nn.Linear), in_proj_bias.grad (d_b_*),
    out_proj.weight.grad and out_proj.bias.grad.
No row has every key masked (PyTorch gives NaN there, qkv 0; tests/runtime/backward_test.cpp
checks qkv's zeros).
"""
import json
import math
import pathlib

import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "backward" / "backward_torch.json"


def flat(t):
    """the elements in row order; a float32 tensor's as 9 significant digits (enough to give the
    float32 back exactly: the tests read them as double and round to float), float64's whole"""
    values = t.detach().reshape(-1).tolist()
    if t.dtype == torch.float32:
        return [float(f"{x:.9g}") for x in values]
    return [float(x) for x in values]


def sdpa_case(name, T, S, d, dv, causal, lower_right, padding, dtype, seed):
    torch.manual_seed(seed)
    q32, k32, v32 = torch.randn(T, d), torch.randn(S, d), torch.randn(S, dv)
    do32 = torch.randn(T, dv)
    q, k, v, do = (t.to(dtype).requires_grad_(t is not do32) for t in (q32, k32, v32, do32))
    scale = 1.0 / math.sqrt(d)
    bias = torch.zeros(T, S, dtype=dtype)
    if causal:
        allowed = torch.ones(T, S).tril(diagonal=(S - T) if lower_right else 0).bool()
        bias = bias.masked_fill(~allowed, float("-inf"))
    for j in padding:
        bias[:, j] = float("-inf")
    if dtype == torch.float32:
        scale_t = torch.tensor(1.0, dtype=dtype) / torch.sqrt(torch.tensor(float(d), dtype=dtype))
    else:
        scale_t = torch.tensor(scale, dtype=dtype)
    out = torch.softmax(q @ k.T * scale_t + bias, dim=-1) @ v
    out.backward(do)
    return {
        "name": name, "kind": "sdpa", "dtype": str(dtype).replace("torch.", ""),
        "T": T, "S": S, "d": d, "dv": dv, "causal": causal, "lower_right": lower_right,
        "padding": padding, "scale": float(scale_t),
        "q": flat(q32), "k": flat(k32), "v": flat(v32), "d_context": flat(do32),
        "out": flat(out), "d_queries": flat(q.grad), "d_keys": flat(k.grad), "d_values": flat(v.grad),
    }


def mha_case(name, T, E, H, causal, padding, dtype, seed):
    torch.manual_seed(seed)
    mha = torch.nn.MultiheadAttention(E, H, bias=True, batch_first=True)
    with torch.no_grad():  # non-zero biases (PyTorch initialises them to 0)
        mha.in_proj_bias.copy_(torch.randn(3 * E) * 0.1)
        mha.out_proj.bias.copy_(torch.randn(E) * 0.1)
    x32 = torch.randn(1, T, E)
    dy32 = torch.randn(1, T, E)
    params = {"in_proj_weight": mha.in_proj_weight.detach().clone(), "in_proj_bias": mha.in_proj_bias.detach().clone(),
              "out_proj_weight": mha.out_proj.weight.detach().clone(), "out_proj_bias": mha.out_proj.bias.detach().clone()}
    mha = mha.to(dtype)
    x = x32.to(dtype).requires_grad_(True)
    kpm = None
    if padding:
        kpm = torch.zeros(1, T, dtype=torch.bool)
        for j in padding:
            kpm[0, j] = True
    am = torch.ones(T, T).tril().bool().logical_not() if causal else None
    y, _ = mha(x, x, x, key_padding_mask=kpm, attn_mask=am, need_weights=False)
    y.backward(dy32.to(dtype))
    g_in = mha.in_proj_weight.grad
    g_b = mha.in_proj_bias.grad
    return {
        "name": name, "kind": "mha", "dtype": str(dtype).replace("torch.", ""),
        "T": T, "E": E, "heads": H, "causal": causal, "padding": padding,
        "x": flat(x32), "d_output": flat(dy32),
        "w_query": flat(params["in_proj_weight"][:E]), "w_key": flat(params["in_proj_weight"][E:2 * E]),
        "w_value": flat(params["in_proj_weight"][2 * E:]), "b_query": flat(params["in_proj_bias"][:E]),
        "b_key": flat(params["in_proj_bias"][E:2 * E]), "b_value": flat(params["in_proj_bias"][2 * E:]),
        "w_output": flat(params["out_proj_weight"]), "b_output": flat(params["out_proj_bias"]),
        "output": flat(y),
        "d_x": flat(x.grad), "d_w_query": flat(g_in[:E]), "d_w_key": flat(g_in[E:2 * E]),
        "d_w_value": flat(g_in[2 * E:]), "d_b_query": flat(g_b[:E]), "d_b_key": flat(g_b[E:2 * E]),
        "d_b_value": flat(g_b[2 * E:]), "d_w_output": flat(mha.out_proj.weight.grad),
        "d_b_output": flat(mha.out_proj.bias.grad),
    }


def main():
    cases = []
    for dtype in (torch.float32, torch.float64):
        t = str(dtype).replace("torch.", "")
        cases.append(sdpa_case(f"sdpa {t}: 7 queries, 9 keys, no mask", 7, 9, 8, 6, False, False, [], dtype, 1))
        cases.append(sdpa_case(f"sdpa {t}: 140 x 140, causal", 140, 140, 16, 16, True, False, [], dtype, 2))
        cases.append(sdpa_case(f"sdpa {t}: 40 queries, 70 keys, causal lower_right", 40, 70, 16, 16, True, True, [], dtype, 3))
        cases.append(sdpa_case(f"sdpa {t}: 20 queries, 30 keys, causal upper_left", 20, 30, 16, 8, True, False, [], dtype, 4))
        cases.append(sdpa_case(f"sdpa {t}: key padding", 12, 16, 8, 8, False, False, [3, 14, 15], dtype, 5))
        cases.append(mha_case(f"mha {t}: 6 tokens, 16 features, 4 heads", 6, 16, 4, False, [], dtype, 6))
        cases.append(mha_case(f"mha {t}: 10 tokens, 32 features, 2 heads, causal, key padding", 10, 32, 2, True, [8, 9],
                              dtype, 7))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"torch": torch.__version__, "script": "scripts/torch_backward_fixtures.py",
                               "cases": cases}) + "\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
