#!/usr/bin/python3
"""torch_decode_rope_fixture.py: PyTorch's numbers for `qkv decode` with `rope`, written to
tests/data/decode_rope/decode_rope.json (tests/cli/decode_rope_test.py reads it).

Run with Debian's Python (it has python3-torch):  /usr/bin/python3 scripts/torch_decode_rope_fixture.py

One decoder layer's projections q (T, H d), k and v (T, H_kv d), drawn in float32 (24 tokens, 4
query heads on 2 key/value heads of 8), and two rotations:
  - half_split (LLaMA), base 10000, the whole head, tokens at positions 0..23;
  - interleaved (GPT-J), base 500000, rotary_dim 4 of 8, tokens at positions 4090..4113.
PyTorch 1.13 has no RoPE helper: the formulas are scripts/torch_rope_batch_fixtures.py's (Hugging
Face's rotate_half / GPT-J's rotate_every_two, cited there), imported from it, with the angles as
qkv computes them (float64, cos and sin rounded to float32) and the rotation in float32, so
"q_rotated" / "k_rotated" are the float32 numbers qkv's rotation should give (the test checks
that, bit for bit). Then causal attention with grouped-query heads in float64 on those rotated q
and k, with the keys and values as each cache storage keeps them (rotated k and v rounded by
torch's .to(bfloat16 / float16), as kv_cache rounds them on append): "output_float32",
"output_bfloat16", "output_float16", (T, H d) each.
"""
import json
import math
import pathlib
import sys

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from torch_rope_batch_fixtures import apply_rope, cos_sin, tensor  # noqa: E402

OUT = HERE.parent / "tests" / "data" / "decode_rope"


def causal_gqa(q, k, v, heads, kv_heads):
    """float64 causal attention, query head h on key/value head h / (heads / kv_heads)"""
    t_len, d = q.shape[0], q.shape[1] // heads
    dv = v.shape[1] // kv_heads
    out = torch.empty(t_len, heads * dv, dtype=torch.float64)
    mask = torch.triu(torch.ones(t_len, t_len, dtype=torch.bool), 1)
    for h in range(heads):
        g = h // (heads // kv_heads)
        s = q[:, h * d:(h + 1) * d] @ k[:, g * d:(g + 1) * d].T / math.sqrt(d)
        w = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
        out[:, h * dv:(h + 1) * dv] = w @ v[:, g * dv:(g + 1) * dv]
    return out


def main():
    torch.manual_seed(23)
    t_len, heads, kv_heads, d = 24, 4, 2, 8
    q = torch.randn(t_len, heads * d)
    k = torch.randn(t_len, kv_heads * d)
    v = torch.randn(t_len, kv_heads * d)
    cases = []
    for layout, base, rotary_dim, first in [("half_split", 10000.0, 8, 0), ("interleaved", 500000.0, 4, 4090)]:
        pos = torch.arange(first, first + t_len)
        cos, sin = cos_sin(pos, rotary_dim, base)
        qr = apply_rope(q, heads, layout, rotary_dim, cos, sin)
        kr = apply_rope(k, kv_heads, layout, rotary_dim, cos, sin)
        case = {"rope": {"layout": layout, "base": base, "rotary_dim": rotary_dim, "position_offset": first},
                "q_rotated": tensor(qr), "k_rotated": tensor(kr)}
        for name, dt in [("float32", torch.float32), ("bfloat16", torch.bfloat16), ("float16", torch.float16)]:
            ks, vs = kr.to(dt).double(), v.to(dt).double()
            case["output_" + name] = tensor(causal_gqa(qr.double(), ks, vs, heads, kv_heads))
        cases.append(case)
    body = {"note": "made by scripts/torch_decode_rope_fixture.py with PyTorch " + torch.__version__,
            "heads": heads, "kv_heads": kv_heads, "q": tensor(q), "k": tensor(k), "v": tensor(v), "cases": cases}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "decode_rope.json").write_text(json.dumps(body) + "\n")
    print("wrote", OUT / "decode_rope.json")


if __name__ == "__main__":
    main()
