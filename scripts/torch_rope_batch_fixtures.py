#!/usr/bin/python3
"""torch_rope_batch_fixtures.py: PyTorch's numbers for runtime/rope.hpp and runtime/batch.hpp,
written to tests/data/rope_batch/ (rope.json, rope_attention.json, batch.json).

Run with Debian's Python (it has python3-torch):  /usr/bin/python3 scripts/torch_rope_batch_fixtures.py

PyTorch 1.13 has no rotary-embedding helper, so the formulas are written here in torch as the
models' reference code writes them:
- half_split: Hugging Face transformers, models/llama/modeling_llama.py (LlamaRotaryEmbedding,
  rotate_half, apply_rotary_pos_emb): inv_freq = 1 / base^(arange(0, dim, 2) / dim),
  emb = cat(freqs, freqs), q * cos + rotate_half(q) * sin with rotate_half(x) = cat(-x2, x1);
  GPT-NeoX (models/gpt_neox/modeling_gpt_neox.py) is the same, rotating only the first
  rotary_ndims columns of a head.
- interleaved: GPT-J (models/gptj/modeling_gptj.py: rotate_every_two, apply_rotary_pos_emb with
  sin/cos repeat_interleave(2)), RoFormer's pairs (2i, 2i + 1).
The angles are computed as qkv computes them (rope.hpp): inv_freq and position * inv_freq in
float64, cos and sin in float64 rounded to float32; the rotation then runs in float32 with the
models' formula (two products and a sum per element). Each case also keeps "hf_float32", the
same rotation with Hugging Face's float32 angles, to show how far the two conventions are apart.

batch.json: nn.MultiheadAttention(batch_first=True) over a padded batch with key_padding_mask,
in float64 from float32-drawn numbers (so qkv's float32 and float64 runs start from the same
exact inputs); one sequence fully padded (PyTorch gives NaN there; qkv gives weights 0).
"""
import json
import math
import pathlib

import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "rope_batch"


def tolist(t):
    def conv(v):
        if isinstance(v, list):
            return [conv(e) for e in v]
        return "NaN" if math.isnan(v) else v
    return conv(t.tolist())


def tensor(t):
    t = t.contiguous()
    dtype = {torch.float32: "float32", torch.float64: "float64"}[t.dtype]
    return {"dtype": dtype, "shape": list(t.shape), "data": tolist(t)}


def cos_sin(positions, rotary_dim, base, float32_angles=False):
    """(P, r/2) cos and sin as float32: qkv's (float64 angles) or Hugging Face's (float32)"""
    dt = torch.float32 if float32_angles else torch.float64
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=dt) / rotary_dim))
    freqs = torch.outer(positions.to(dt), inv_freq)
    return freqs.cos().float(), freqs.sin().float()


def rotate_half(x):  # Hugging Face LLaMA / GPT-NeoX
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):  # GPT-J
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rope(x, heads, layout, rotary_dim, cos, sin):
    """x (T, heads * head_dim); each head's first rotary_dim columns rotated, the rest kept"""
    t_len = x.shape[0]
    xh = x.reshape(t_len, heads, -1).transpose(0, 1)  # (H, T, hd)
    rot, rest = xh[..., :rotary_dim], xh[..., rotary_dim:]
    if layout == "half_split":
        c, s = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)  # emb = cat(freqs, freqs)
        rot = rot * c + rotate_half(rot) * s
    else:
        c, s = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
        rot = rot * c + rotate_every_two(rot) * s
    return torch.cat((rot, rest), dim=-1).transpose(0, 1).reshape(t_len, -1)


def rope_cases():
    cases = []
    specs = [  # name, layout, heads, head_dim, rotary_dim, base, first position, rows
        ("half_split, 2 heads of 8, positions 0..5", "half_split", 2, 8, 8, 10000.0, 0, 6),
        ("interleaved, 2 heads of 8, positions 0..5", "interleaved", 2, 8, 8, 10000.0, 0, 6),
        ("half_split, partial rotary 4 of 8 (GPT-NeoX), base 500000, positions 4090..4097", "half_split", 1, 8, 4, 500000.0, 4090, 8),
        ("interleaved, 4 heads of 16, rotary 8, positions 100000..100003", "interleaved", 4, 16, 8, 10000.0, 100000, 4),
        ("half_split, 1 head of 64, positions 8000..8002", "half_split", 1, 64, 64, 10000.0, 8000, 3),
    ]
    for k, (name, layout, heads, hd, r, base, first, rows) in enumerate(specs):
        torch.manual_seed(100 + k)
        x = torch.randn(rows, heads * hd)
        pos = torch.arange(first, first + rows)
        cos, sin = cos_sin(pos, r, base)
        y = apply_rope(x, heads, layout, r, cos, sin)
        c32, s32 = cos_sin(pos, r, base, float32_angles=True)
        y_hf = apply_rope(x, heads, layout, r, c32, s32)
        cases.append({"name": name, "layout": layout, "heads": heads, "head_dim": hd, "rotary_dim": r,
                      "base": base, "position_offset": first, "x": tensor(x), "cos": tensor(cos),
                      "sin": tensor(sin), "rotated": tensor(y), "hf_float32": tensor(y_hf)})
    return cases


def rope_attention_case():
    """one causal self-attention layer with RoPE (LLaMA's order: project, rotate, attend), float64"""
    torch.manual_seed(7)
    t_len, d, heads, hd = 6, 8, 2, 4
    x = torch.randn(t_len, d)
    wq, wk, wv, wo = (torch.randn(d, d) * 0.5 for _ in range(4))
    bq, bk, bv, bo = (torch.rand(d) - 0.5 for _ in range(4))
    x64 = x.double()
    q = x64 @ wq.double().T + bq.double()
    k = x64 @ wk.double().T + bk.double()
    v = x64 @ wv.double().T + bv.double()
    pos = torch.arange(3, 3 + t_len)  # position_offset 3

    def rot64(m):
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        f = torch.outer(pos.double(), inv_freq)
        return apply_rope(m, heads, "half_split", hd, f.cos(), f.sin())

    q, k = rot64(q), rot64(k)
    qh, kh, vh = (m.reshape(t_len, heads, hd).transpose(0, 1) for m in (q, k, v))
    scores = qh @ kh.transpose(1, 2) / math.sqrt(hd)
    causal = torch.triu(torch.ones(t_len, t_len, dtype=torch.bool), 1)
    w = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
    concat = (w @ vh).transpose(0, 1).reshape(t_len, d)
    out = concat @ wo.double().T + bo.double()
    return {"heads": heads, "position_offset": 3, "layout": "half_split", "x": tensor(x),
            "wq": tensor(wq), "wk": tensor(wk), "wv": tensor(wv), "wo": tensor(wo),
            "bq": tensor(bq), "bk": tensor(bk), "bv": tensor(bv), "bo": tensor(bo),
            "queries": tensor(q), "keys": tensor(k), "weights": tensor(w), "output": tensor(out)}


def batch_case():
    torch.manual_seed(11)
    batch, length, embed, heads = 4, 5, 8, 2
    lengths = [5, 3, 1, 0]  # the last sequence is all padding
    mha = torch.nn.MultiheadAttention(embed, heads, bias=True, batch_first=True)
    with torch.no_grad():  # PyTorch's init leaves the biases 0: draw them so that they count
        mha.in_proj_bias.copy_(torch.rand(3 * embed) - 0.5)
        mha.out_proj.bias.copy_(torch.rand(embed) - 0.5)
    x = torch.randn(batch, length, embed)
    padding = torch.tensor([[j >= n for j in range(length)] for n in lengths])
    wq, wk, wv = mha.in_proj_weight.detach().chunk(3)
    bq, bk, bv = mha.in_proj_bias.detach().chunk(3)
    wo, bo = mha.out_proj.weight.detach(), mha.out_proj.bias.detach()
    mha = mha.double().eval()
    with torch.no_grad():
        out, w = mha(x.double(), x.double(), x.double(), key_padding_mask=padding, need_weights=True,
                     average_attn_weights=False)
    return {"heads": heads, "lengths": lengths, "x": tensor(x), "key_padding": padding.int().tolist(),
            "wq": tensor(wq), "wk": tensor(wk), "wv": tensor(wv), "bq": tensor(bq), "bk": tensor(bk),
            "bv": tensor(bv), "wo": tensor(wo), "bo": tensor(bo), "output": tensor(out), "weights": tensor(w)}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    note = "made by scripts/torch_rope_batch_fixtures.py with PyTorch " + torch.__version__
    for name, body in [("rope.json", {"cases": rope_cases()}), ("rope_attention.json", rope_attention_case()),
                       ("batch.json", batch_case())]:
        body = {"note": note, **body}
        (OUT / name).write_text(json.dumps(body, indent=1) + "\n")
        print("wrote", OUT / name)


if __name__ == "__main__":
    main()
