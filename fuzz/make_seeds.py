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
