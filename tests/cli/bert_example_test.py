#!/usr/bin/env python3
"""Runs examples/04_bert_self_attention with a small checkpoint made here, the way a user with a
real bert-base-uncased would: python3 bert_example_test.py EXAMPLE

The checkpoint has BERT's tensor names and shapes (768 wide; a vocabulary of 11 tokens that
covers the sentence) with values whose result is known by hand:
  word embeddings: row r, column c = (r + 1) / 100 + c / 10000
  query and key weights and biases 0 (F16)  -> every score 0 -> every weight 1/9 = 0.1111
  value weight 0, value bias b_j = j / 1000  -> every value row is b -> every context row is b
  output dense weight the identity (BF16), bias 0 -> output row = concat row = b
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

example = sys.argv[1]
failures = 0
D = 768


def check(what, ok, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f"\n     {detail[-3000:]}"))
    failures += 0 if ok else 1


def write_checkpoint(path, prefix="bert.", drop=None):
    tensors = []  # (name, dtype, shape, bytes)
    emb = [(r + 1) / 100 + c / 10000 for r in range(11) for c in range(D)]
    tensors.append((prefix + "embeddings.word_embeddings.weight", "F32", [11, D], struct.pack(f"<{len(emb)}f", *emb)))
    for name in ("query", "key"):
        base = prefix + "encoder.layer.0.attention.self." + name
        tensors.append((base + ".weight", "F16", [D, D], bytes(2 * D * D)))
        tensors.append((base + ".bias", "F16", [D], bytes(2 * D)))
    base = prefix + "encoder.layer.0.attention.self.value"
    tensors.append((base + ".weight", "F32", [D, D], bytes(4 * D * D)))
    tensors.append((base + ".bias", "F32", [D], struct.pack(f"<{D}f", *[j / 1000 for j in range(D)])))
    eye = bytearray(2 * D * D)
    for i in range(D):
        eye[2 * (i * D + i):2 * (i * D + i) + 2] = struct.pack("<H", 0x3F80)  # BF16 1.0
    base = prefix + "encoder.layer.0.attention.output.dense"
    tensors.append((base + ".weight", "BF16", [D, D], bytes(eye)))
    tensors.append((base + ".bias", "F32", [D], bytes(4 * D)))
    header, offset, data = {"__metadata__": {"format": "pt"}}, 0, []
    for name, dtype, shape, raw in tensors:
        if name == drop:
            continue
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data.append(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(data))


with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        f.write("[PAD]\n[UNK]\n[CLS]\n[SEP]\nlet\n'\ns\ntoken\n##ize\nsomething\n?\n")
    write_checkpoint(os.path.join(d, "model.safetensors"))
    svg, html = os.path.join(d, "w.svg"), os.path.join(d, "w.html")
    p = subprocess.run([example, "--model", d, "--svg", svg, "--html", html], capture_output=True, text=True)
    out = p.stdout
    check("--model DIR runs", p.returncode == 0, p.stderr)
    check("the ids come from DIR/vocab.txt", "[2, 4, 5, 6, 7, 8, 9, 10, 3]" in out, out)
    check("it says the weights are the checkpoint's", "seq_embedding: BERT's own" in out, out)
    # [CLS] is id 2: row 2 = 0.03 + c / 10000
    check("the embedding rows are the checkpoint's", "[  0.0300   0.0301   0.0302   0.0303   0.0304   0.0305 ...]" in out, out)
    rows_of_ninths = "  [" + " ".join(["  0.1111"] * 9) + "]"
    check("every head's weights are 1/9 (query and key are 0)", out.count(rows_of_ninths) == 12 * 9, out)
    check("the output is the value bias through the identity",
          "[  0.0000   0.0010   0.0020   0.0030   0.0040   0.0050 ...]" in out.split("nn.Linear(768, 768)(att_concat)")[-1], out)
    check("the SVG and the HTML page are written", os.path.getsize(svg) > 0 and os.path.getsize(html) > 0)

    env = dict(os.environ, QKV_BERT_MODEL=d)
    p = subprocess.run([example], capture_output=True, text=True, env=env)
    check("QKV_BERT_MODEL=DIR does the same", p.returncode == 0 and "seq_embedding: BERT's own" in p.stdout, p.stderr)

    write_checkpoint(os.path.join(d, "model.safetensors"), drop="bert.encoder.layer.0.attention.self.key.weight")
    p = subprocess.run([example, "--model", d], capture_output=True, text=True)
    check("a checkpoint without a key weight: exit 2, the message names the file and the tensor",
          p.returncode == 2 and "model.safetensors" in p.stderr and "encoder.layer.0.attention.self.key.weight" in p.stderr,
          f"rc={p.returncode} {p.stderr}")
    os.remove(os.path.join(d, "model.safetensors"))
    p = subprocess.run([example, "--model", d], capture_output=True, text=True)
    check("a directory without model.safetensors: exit 2, the message names it",
          p.returncode == 2 and "model.safetensors" in p.stderr, p.stderr)

p = subprocess.run([example], capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "QKV_BERT_MODEL"})
check("without a checkpoint it says it uses a stand-in", p.returncode == 0 and "seq_embedding: a stand-in" in p.stdout, p.stderr)
print(f"{failures} failed")
sys.exit(1 if failures else 0)
