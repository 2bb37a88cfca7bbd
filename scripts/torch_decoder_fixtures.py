#!/usr/bin/python3
"""torch_decoder_fixtures.py: PyTorch's numbers for the decoder pieces of qkv's runtime path
(lower-right causal masks, sliding windows, ALiBi, additive biases, grouped-query attention, the
KV cache with float32 and bfloat16 storage), written to tests/data/decoder/*.json.

Run with Debian's Python (python3-torch, PyTorch 1.13):
    /usr/bin/python3 scripts/torch_decoder_fixtures.py

PyTorch 1.13 has no grouped-query or lower-right helpers (torch.nn.attention.bias.causal_lower_right
and scaled_dot_product_attention(enable_gqa=True) came with PyTorch 2.x), so the reference is the
formula of PyTorch's documentation of scaled_dot_product_attention written out in torch:
    attn = softmax(q kᵀ * scale + attn_bias) v
with attn_bias built explicitly:
  - causal upper_left: 0 where j <= i, -inf elsewhere (torch.ones(T, S).tril(diagonal=0));
  - causal lower_right: torch.ones(T, S).tril(diagonal=S - T), as PyTorch 2's CausalBias
    _lower_right builds it (the diagonal offset S - T);
  - sliding window w: -inf where j <= p - w (Mistral's sliding_window, ONNX Runtime
    GroupQueryAttention's local_window_size), p = i or i + S - T;
  - ALiBi: m_h * (j - p), m_h from get_slopes of Press et al.'s reference implementation
    (github.com/ofirpress/attention_with_linear_biases), copied below;
  - grouped-query: K and V heads repeated with torch.repeat_interleave(x, H // H_kv, dim=head),
    as PyTorch 2's enable_gqa and LLaMA's repeat_kv do.
Inputs are drawn in float32 (torch.manual_seed), the reference computed in float64 from them, so
qkv's float32 and float64 runs start from the same exact numbers; the tests derive the bound.
A query row with every key masked would be NaN in PyTorch (qkv gives 0): the cases avoid them.
"""
import json
import math
import pathlib

import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "decoder"


def get_slopes(n):
    """Press et al.'s reference implementation (attention_with_linear_biases, fairseq
    TransformerDecoder): slopes of the power of two just below n, then every other slope of 2n"""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]
    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest) + get_slopes(2 * closest)[0::2][: n - closest]


def attn_bias(H, T, S, causal, lower_right, window, alibi, bias):
    """(H, T, S) float64: the explicit mask and bias added to the scaled scores"""
    ninf = float("-inf")
    b = torch.zeros(H, T, S, dtype=torch.float64)
    off = S - T if lower_right else 0
    i = torch.arange(T).view(T, 1)
    j = torch.arange(S).view(1, S)
    p = i + off
    if alibi:
        m = torch.tensor(get_slopes(H), dtype=torch.float32).view(H, 1, 1)
        # qkv computes float(m) * float(j - p) in the element type: the same product in float64
        b = b + m.double() * (j - p).double()
    if bias is not None:
        b = b + bias.double()
    keep = torch.ones(T, S, dtype=torch.bool)
    if causal:
        keep = keep & (j <= p)
    if window:
        keep = keep & (j > p - window)
    return b.masked_fill(~keep, ninf)


def reference(q, k, v, H, HK, scale, ab):
    """q (T, H d), k (S, HK d), v (S, HK dv) -> (T, H dv) in float64"""
    T, S = q.shape[0], k.shape[0]
    d, dv = q.shape[1] // H, v.shape[1] // HK
    qh = q.double().view(T, H, d).transpose(0, 1)
    kh = torch.repeat_interleave(k.double().view(S, HK, d).transpose(0, 1), H // HK, dim=0)
    vh = torch.repeat_interleave(v.double().view(S, HK, dv).transpose(0, 1), H // HK, dim=0)
    w = torch.softmax(qh @ kh.transpose(1, 2) * scale + ab, dim=-1)
    assert not torch.isnan(w).any(), "a fully masked row (PyTorch NaN, qkv 0): choose another case"
    return (w @ vh).transpose(0, 1).reshape(T, H * dv)


def case(name, seed, H, HK, d, T, S, causal=False, lower_right=False, window=0, alibi=False, with_bias=False):
    torch.manual_seed(seed)
    q = torch.randn(T, H * d) * 0.7
    k = torch.randn(S, HK * d) * 0.7
    v = torch.randn(S, HK * d)
    bias = None
    if with_bias:
        bias = torch.randn(H, T, S)
        bias[torch.rand(H, T, S) < 0.2] = float("-inf")
        bias[:, :, 0] = 0.5  # every row keeps key 0
    scale = 1 / math.sqrt(d)  # qkv's default: 1/sqrt(d) in the element type, here d = 4, 8, 16: exact
    ab = attn_bias(H, T, S, causal, lower_right, window, alibi, bias)
    out = reference(q, k, v, H, HK, scale, ab)
    c = {"name": name, "heads": H, "kv_heads": HK, "d_head": d, "causal": causal,
         "alignment": "lower_right" if lower_right else "upper_left", "window": window, "alibi": alibi,
         "q": q.tolist(), "k": k.tolist(), "v": v.tolist(), "output": out.tolist()}
    if bias is not None:
        c["bias"] = [[x if math.isfinite(x) else "-inf" for x in row] for row in bias.reshape(H * T, S).tolist()]
    return c


def decode_case(seed, H, HK, d, T):
    """token-by-token decoding: the full causal attention of T tokens, with K and V as stored in
    float32 and as rounded to bfloat16 and float16 by PyTorch (.to(torch.bfloat16))"""
    torch.manual_seed(seed)
    q = torch.randn(T, H * d) * 0.7
    k = torch.randn(T, HK * d) * 0.7
    v = torch.randn(T, HK * d)
    ab = attn_bias(H, T, T, True, False, 0, False, None)
    scale = 1 / math.sqrt(d)
    c = {"heads": H, "kv_heads": HK, "d_head": d, "q": q.tolist(), "k": k.tolist(), "v": v.tolist(),
         "output": reference(q, k, v, H, HK, scale, ab).tolist()}
    for dt, key in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16")):
        c["output_" + key] = reference(q, k.to(dt).float(), v.to(dt).float(), H, HK, scale, ab).tolist()
    return c


def conversions():
    """float32 values and PyTorch's bfloat16 and float16 bits for them (round to nearest even)"""
    torch.manual_seed(7)
    vals = (torch.randn(200) * torch.exp2(torch.randint(-30, 30, (200,)).float())).tolist()
    vals += [1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 65504.0, 65519.0, 65520.0,
             2.0 ** -24, 2.0 ** -25, 1.5 * 2 ** -25, 2.0 ** -14, 3.3895313892515355e38, -0.0, 0.0]
    x = torch.tensor(vals, dtype=torch.float32)
    bf = x.to(torch.bfloat16).view(torch.int16).int() & 0xFFFF
    hf = x.to(torch.float16).view(torch.int16).int() & 0xFFFF
    return {"float32": x.tolist(), "bfloat16_bits": bf.tolist(), "float16_bits": hf.tolist()}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    cases = [
        case("lower_right_gqa", 1, H=4, HK=2, d=8, T=3, S=11, causal=True, lower_right=True),
        case("upper_left", 2, H=2, HK=2, d=8, T=5, S=9, causal=True),
        case("window_mqa", 3, H=4, HK=1, d=8, T=12, S=12, causal=True, window=4),
        case("window_lower_right", 4, H=2, HK=1, d=8, T=4, S=40, causal=True, lower_right=True, window=5),
        case("alibi_six_heads", 5, H=6, HK=3, d=4, T=10, S=10, causal=True, alibi=True),
        case("bias_per_head", 6, H=2, HK=2, d=8, T=4, S=6, with_bias=True),
        case("long_gqa_alibi", 8, H=2, HK=1, d=4, T=140, S=140, causal=True, alibi=True),
    ]
    doc = {"generator": "scripts/torch_decoder_fixtures.py", "torch": torch.__version__, "cases": cases,
           "decode": decode_case(9, H=2, HK=1, d=8, T=130), "conversions": conversions()}
    (OUT / "decoder_torch.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print("wrote", OUT / "decoder_torch.json")


if __name__ == "__main__":
    main()
