#!/usr/bin/env python3
"""Write the seed corpus of the fuzz targets into fuzz/corpus/ (committed; run again to refresh)."""
import json
import os
import struct

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    os.makedirs(os.path.join(here, target), exist_ok=True)
    with open(os.path.join(here, target, name), "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


texts = ["let's tokenize something?", "Crème brûlée, ΟΔΟΣ İstanbul", "中文分词 한국어 日本語",
         "emoji 😀👍🏽 [CLS] a[MASK]b [cls]", "tab\tnew\nline\x00\x01\u200b\ufffd",
         "a" * 120, "z\u0301\u0323\u0308 ǖ ﬁ Ω", "$100 @ 5% ^x^ `y` ~z~ |p| {b} [c] <a>"]
for i, t in enumerate(texts):
    put("wordpiece", f"text{i}", t)
put("wordpiece", "invalid", b"ab\xff\xc3(\xed\xa0\x80\xf4\x90\x80\x80")

# bert_encoding: flags byte (truncation, padding, flavor, pair), max_length byte, text 0xFF pair
for i, (flags, max_length) in enumerate([(0x21, 8), (0x22, 12), (0x23, 6), (0x25, 16), (0x29, 9), (0x31, 5),
                                         (0x01, 4), (0x03, 8), (0x24, 3), (0x21, 2)]):
    a, b = texts[i % len(texts)], texts[(i + 3) % len(texts)]
    put("bert_encoding", f"case{i}", bytes([flags, max_length]) + a.encode() + b"\xff" + b.encode())

put("vocab", "small", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n,\n!\n##s\nw\n##o\n##r\n##l\n##d\n")
put("vocab", "crlf", "[UNK]\r\n[CLS]\r\n[SEP]\r\nun\r\n##aff\r\n##able\r\n中\r\n")
put("vocab", "dup", "[UNK]\n[CLS]\n[SEP]\na\na\n")
put("vocab", "nounk", "[CLS]\n[SEP]\na\n")
put("vocab", "blank", "[UNK]\n\n[CLS]\n[SEP]\n")
put("vocab", "latin1", b"[UNK]\n[CLS]\n[SEP]\ncaf\xe9\n")


def safetensors(header, data):
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data


f32 = struct.pack("<4f", 1.0, -2.5, 0.125, 3.0)
put("safetensors", "f32", safetensors({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, f32))
put("safetensors", "mixed", safetensors({
    "__metadata__": {"format": "pt"},
    "h": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
    "b": {"dtype": "BF16", "shape": [2], "data_offsets": [4, 8]},
    "d": {"dtype": "F64", "shape": [1], "data_offsets": [8, 16]},
    "i": {"dtype": "I32", "shape": [1, 1], "data_offsets": [16, 20]},
    "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [20, 20]},
    "s": {"dtype": "F32", "shape": [], "data_offsets": [20, 24]},
    "q": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [24, 26]}},
    struct.pack("<2H", 0x3C00, 0xC000) + struct.pack("<2H", 0x3F80, 0x4000) + struct.pack("<d", 0.1)
    + struct.pack("<i", -7) + struct.pack("<f", 2.0) + b"\x38\x40"))
put("safetensors", "overlap", safetensors({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                          "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, f32[:8]))
put("safetensors", "truncated", safetensors({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, f32[:15]))
put("safetensors", "badlen", struct.pack("<Q", 1 << 40) + b"{}")

# attend and encode cases: every case of tests/cli/attend/ (good and bad), and small encoder cases
import glob
import random

attend_dir = os.path.join(os.path.dirname(here), "..", "tests", "cli", "attend")
for path in sorted(glob.glob(os.path.join(attend_dir, "*.json"))):
    name = os.path.basename(path)[:-5]
    if os.path.getsize(path) <= 4096:  # the length the fuzzer runs with
        with open(path, "rb") as f:
            put("attend_case", name, f.read())
put("attend_case", "non_finite_everywhere", json.dumps({
    "dtype": "float64", "x": [["NaN", 1], ["Infinity", "-Infinity"]], "context": [[1, 2], [3, 4], [5, 6]],
    "wq": [[1, 0], [0, 1]], "wk": [[1, "NaN"], [0, 1]], "wv": [[1, 0], [0, 1]], "bq": [0, "Infinity"],
    "heads": 2, "wo": [[1, 0], [0, 1]], "bo": [0, 0], "allowed": [[True, False, True], [False, False, False]],
    "scale": 0.5, "weight_layout": "in_out"}))

rnd = random.Random(14)


def matrix(rows, cols):
    return [[round(rnd.uniform(-1, 1), 3) for _ in range(cols)] for _ in range(rows)]


def encoder_case(d, heads, ff, tokens, layers, **config):
    layer = lambda: {  # noqa: E731
        "self_attn.in_proj_weight": matrix(3 * d, d), "self_attn.in_proj_bias": matrix(1, 3 * d)[0],
        "self_attn.out_proj.weight": matrix(d, d), "self_attn.out_proj.bias": matrix(1, d)[0],
        "linear1.weight": matrix(ff, d), "linear1.bias": matrix(1, ff)[0],
        "linear2.weight": matrix(d, ff), "linear2.bias": matrix(1, d)[0],
        "norm1.weight": [1.0] * d, "norm1.bias": [0.0] * d, "norm2.weight": [1.0] * d, "norm2.bias": [0.0] * d}
    c = {"d_model": d, "nhead": heads, "dim_feedforward": ff}
    c.update(config)
    return {"x": matrix(tokens, d), "config": c, "layers": [layer() for _ in range(layers)]}


put("encode_case", "post_norm_relu", json.dumps(encoder_case(2, 1, 3, 2, 1)))
put("encode_case", "pre_norm_gelu_causal", json.dumps(encoder_case(2, 2, 2, 3, 1, activation="gelu", norm_first=True, causal=True)))
put("encode_case", "padding_two_layers", json.dumps(dict(encoder_case(2, 1, 2, 2, 2, key_padding=[False, True]), dtype="float64")))
nan_case = encoder_case(2, 1, 2, 2, 1, layer_norm_eps=0)
nan_case["x"][1] = ["NaN", "Infinity"]
put("encode_case", "non_finite", json.dumps(nan_case))
put("encode_case", "bad_config", json.dumps(dict(encoder_case(2, 1, 2, 2, 1), config={"d_model": 2, "nhead": 3})))

# decode cases (qkv decode, tools/cmd_decode.hpp): every storage and kernel, GQA, a window and
# ALiBi, a prompt, non-finite inputs, and malformed ones
drnd = random.Random(16)


def dmatrix(rows, cols):
    return [[round(drnd.uniform(-1, 1), 3) for _ in range(cols)] for _ in range(rows)]


put("decode_case", "one_head", json.dumps({"q": dmatrix(4, 8), "k": dmatrix(4, 8), "v": dmatrix(4, 8)}))
put("decode_case", "gqa_bfloat16_window_alibi", json.dumps({
    "q": dmatrix(6, 32), "k": dmatrix(6, 8), "v": dmatrix(6, 8), "heads": 4, "kv_heads": 1, "storage": "bfloat16",
    "window": 3, "alibi": True, "prompt": 2}))
put("decode_case", "float16_attend_capacity", json.dumps({
    "q": dmatrix(5, 16), "k": dmatrix(5, 16), "v": dmatrix(5, 4), "heads": 2, "storage": "float16", "kernel": "attend",
    "capacity": 9, "scale": 0.25}))
put("decode_case", "float16_overflow", json.dumps({
    "q": [[1, 0], [0, 1], [1, 1]], "k": [[70000, 0], [0, 1], [1, 1]], "v": [[1e5, 2], [3, -1e5], [5, 6]],
    "storage": "float16"}))
put("decode_case", "non_finite", json.dumps({
    "q": [["NaN", 0], [0, 1], [1, "Infinity"]], "k": [[1, 0], ["-Infinity", 1], [1, 1]], "v": [[1, 2], [3, 4], ["NaN", 6]]}))
put("decode_case", "bad_kv_heads", json.dumps({"q": dmatrix(2, 4), "k": dmatrix(2, 2), "v": dmatrix(2, 2), "heads": 2,
                                               "kv_heads": 3}))
put("decode_case", "bad_capacity", json.dumps({"q": dmatrix(2, 2), "k": dmatrix(2, 2), "v": dmatrix(2, 2),
                                               "capacity": 4294967295}))
put("decode_case", "bad_k_shape", json.dumps({"q": dmatrix(3, 2), "k": dmatrix(2, 2), "v": dmatrix(3, 2)}))
put("decode_case", "not_object", "[1, 2, 3]")

# attend cases with 16-bit inputs (qkv attend "dtype": "bfloat16" / "float16"): ties, overflow
put("attend_case", "bfloat16_inputs", json.dumps({
    "dtype": "bfloat16", "x": [[1.00390625, -3.0e38], [1e-40, 0.1]], "wq": [[1, 0], [0, 1]], "wk": [[0.5, 0], [0, 2]],
    "wv": [[1, 1], [0, 1]], "bias": [[0, "-Infinity"], [0.3, 0]], "causal": True}))
put("attend_case", "float16_overflow", json.dumps({
    "dtype": "float16", "x": [[65519, 65520], [6e-8, -1]], "wq": [[1, 0], [0, 1]], "wk": [[1, 0]], "wv": [[0, 1]],
    "heads": 2, "kv_heads": 1, "alibi": True}))

# attend batch cases (x [B, T, d] with lengths or key_padding [B, S]): float64 with NaN and
# infinities, a length-0 sequence, in_out weights, a bias shared by the batch; a tensor-object x
put("attend_case", "batch_float64_nonfinite", json.dumps({
    "dtype": "float64", "x": [[["NaN", 1], [2, "Infinity"], [0, 0]], [[1, 2], [3, 4], [5, 6]], [[0, 1], [1, 0], [1, 1]]],
    "lengths": [2, 3, 0], "wq": [[1, 0], [0, 1]], "wk": [[1, 2], [0, 1]], "wv": [[1, 0], [0, 1]], "heads": 2,
    "weight_layout": "in_out", "bias": [[0, "-Infinity", 1], [0.5, 0, 0], [0, 0, 0]], "causal": True, "window": 2}))
put("attend_case", "batch_tensor_key_padding", json.dumps({
    "x": {"dtype": "float32", "shape": [2, 2, 2], "data": [[[1, 0], [0, 1]], [[0.5, 0.5], [1, -1]]]},
    "key_padding": {"dtype": "bool", "shape": [2, 2], "data": [[False, True], [True, True]]},
    "wq": [[1, 0], [0, 1]], "wk": [[1, 0], [0, 1]], "wv": [[1, 0], [0, 1]], "wo": [[2, 0]], "bo": [1]}))

# decode cases with rope (kv_cache::set_rope + rope_queries): both layouts, partial rotary,
# positions near 2^24, 16-bit storage; and key_position_offset, which decode refuses
put("decode_case", "rope_interleaved_bfloat16", json.dumps({
    "q": dmatrix(5, 16), "k": dmatrix(5, 8), "v": dmatrix(5, 8), "heads": 2, "kv_heads": 1, "storage": "bfloat16",
    "prompt": 2, "rope": {"layout": "interleaved", "rotary_dim": 4, "base": 500000, "position_offset": 16777200}}))
put("decode_case", "rope_half_split_attend", json.dumps({
    "q": dmatrix(4, 8), "k": dmatrix(4, 8), "v": dmatrix(4, 8), "kernel": "attend", "window": 2, "alibi": True,
    "rope": {}}))
put("decode_case", "rope_key_position_offset", json.dumps({
    "q": dmatrix(2, 8), "k": dmatrix(2, 8), "v": dmatrix(2, 8), "rope": {"key_position_offset": 1}}))
