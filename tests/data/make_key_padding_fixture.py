#!/usr/bin/python3
"""make_key_padding_fixture.py: PyTorch's nn.MultiheadAttention with key_padding_mask, as
`qkv attend` cases with PyTorch's results, written to tests/data/key_padding_torch.json.

Run with Debian's Python (it has python3-torch):  /usr/bin/python3 tests/data/make_key_padding_fixture.py

Each case is a `qkv attend` case (x, context, wq, wk, wv, bq, bk, bv, wo, bo, heads, tokens,
context_tokens, key_padding) plus "torch": PyTorch's attn_output and its per-head weights
(average_attn_weights=False), computed in float64 from the case's numbers. The weights are drawn
in float32 (torch.manual_seed), so the float32 and the float64 runs of qkv start from the same
exact inputs. tests/cli/attend_learner_test.py checks qkv's outputs against these within a
bound it derives."""
import json
import math
import pathlib

import torch


def tolist(t):
    """nested lists; NaN (PyTorch's fully padded rows) as the string "NaN" (JSON has no NaN)"""
    def conv(v):
        if isinstance(v, list):
            return [conv(e) for e in v]
        return "NaN" if math.isnan(v) else v
    return conv(t.tolist())


def make_case(name, seed, tokens, context_tokens, key_padding, heads=2, embed=8, kdim=None):
    torch.manual_seed(seed)
    t_len, s_len = len(tokens), len(context_tokens) if context_tokens else len(tokens)
    cross = context_tokens is not None
    kdim = kdim or embed
    mha = torch.nn.MultiheadAttention(embed, heads, bias=True, batch_first=True, kdim=kdim, vdim=kdim)
    # biases are zero after PyTorch's init: draw them too, so that they are tested
    with torch.no_grad():
        for p in (mha.in_proj_bias, mha.out_proj.bias):
            if p is not None:
                p.copy_(torch.rand(p.shape) - 0.5)
    x = torch.randn(1, t_len, embed)
    c = torch.randn(1, s_len, kdim) if cross else x
    if mha._qkv_same_embed_dim:
        wq, wk, wv = mha.in_proj_weight.detach().chunk(3)
    else:
        wq, wk, wv = mha.q_proj_weight.detach(), mha.k_proj_weight.detach(), mha.v_proj_weight.detach()
    bq, bk, bv = mha.in_proj_bias.detach().chunk(3)
    wo, bo = mha.out_proj.weight.detach(), mha.out_proj.bias.detach()
    mask = torch.tensor([key_padding])
    m64 = mha.double()
    with torch.no_grad():
        out, w = m64(x.double(), c.double(), c.double(), key_padding_mask=mask, need_weights=True,
                     average_attn_weights=False)
    case = {"x": x[0].tolist()}
    if cross:
        case["context"] = c[0].tolist()
    case.update({"wq": wq.tolist(), "wk": wk.tolist(), "wv": wv.tolist(), "bq": bq.tolist(), "bk": bk.tolist(),
                 "bv": bv.tolist(), "wo": wo.tolist(), "bo": bo.tolist(), "heads": heads, "tokens": tokens})
    if cross:
        case["context_tokens"] = context_tokens
    case["key_padding"] = key_padding
    return {"name": name, "case": case, "torch": {"output": tolist(out[0]), "weights": tolist(w[0])}}


def main():
    cases = [
        # self-attention over "Life is short, eat dessert first" padded to 8 with two [PAD] keys
        make_case("self, two padded keys", 1,
                  ["Life", "is", "short", "eat", "dessert", "first", "[PAD]", "[PAD]"], None,
                  [False, False, False, False, False, False, True, True]),
        # cross-attention: 3 queries over 5 keys of another width (kdim 6), one padded in the middle
        make_case("cross, one padded key in the middle", 2, ["la", "vie", "est"], ["life", "is", "[PAD]", "short", "!"],
                  [False, False, True, False, False], kdim=6),
        # every key padded: PyTorch gives NaN; qkv gives weights 0 and output 0 (docs/cli.md)
        make_case("every key padded", 3, ["a", "b", "c"], None, [True, True, True]),
    ]
    out = pathlib.Path(__file__).with_name("key_padding_torch.json")
    out.write_text(json.dumps({"torch": torch.__version__, "cases": cases}, indent=1) + "\n")
    print(f"wrote {out} ({len(cases)} cases, PyTorch {torch.__version__})")


if __name__ == "__main__":
    main()
