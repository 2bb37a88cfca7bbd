#!/usr/bin/env python3
"""Runs `qkv tokenize` as a user would: python3 tokenize_test.py QKV VOCAB.txt HF_ENCODINGS.json"""
import json
import os
import subprocess
import sys
import tempfile

qkv, vocab = sys.argv[1], sys.argv[2]
failures = 0


def run(*args):
    p = subprocess.run([qkv, "tokenize", *args], capture_output=True)
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8")


def check(what, ok, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f"\n     {detail}"))
    failures += 0 if ok else 1


# the tutorial's sentence, as JSON
rc, out, err = run("--vocab", vocab, "--json", "let's tokenize something?")
check("--json exits 0", rc == 0, err)
got = json.loads(out) if rc == 0 else {}
check("--json gives the tutorial's tokens",
      got.get("tokens") == ["[CLS]", "let", "'", "s", "token", "##ize", "something", "?", "[SEP]"], out)
check("--json gives the tutorial's ids",
      got.get("ids") == [101, 2292, 1005, 1055, 19204, 4697, 2242, 1029, 102], out)

# options in any order; the readable table
rc, out, err = run("Crème BRÛLÉE", "--vocab", vocab)
lines = out.splitlines()
check("the table exits 0", rc == 0, err)
check("the table counts the tokens",
      lines[:1] == ["7 tokens (BERT uncased WordPiece, 30522-token vocabulary, fast)"], out)
rows = [l.split() for l in lines[2:]]
check("the table lists index, id, type, offsets and token",
      rows == [["0", "101", "0", "0..0", "[CLS]"], ["1", "13675", "0", "0..2", "cr"],
               ["2", "21382", "0", "2..5", "##eme"], ["3", "7987", "0", "6..8", "br"],
               ["4", "9307", "0", "8..11", "##ule"], ["5", "2063", "0", "11..12", "##e"],
               ["6", "102", "0", "0..0", "[SEP]"]], out)

# quotes and backslashes are escaped in JSON
rc, out, err = run("--json", "--vocab", vocab, 'say "hi" \\o/')
check("JSON escapes quotes and backslashes",
      rc == 0 and json.loads(out)["tokens"] == ["[CLS]", "say", '"', "hi", '"', "\\", "o", "/", "[SEP]"], out + err)

# a text that starts with '-' after --
rc, out, err = run("--vocab", vocab, "--json", "--", "-5")
check("-- ends the options", rc == 0 and json.loads(out)["tokens"] == ["[CLS]", "-", "5", "[SEP]"], out + err)


def bad(what, args, needle):
    rc, out, err = run(*args)
    check(what + ": exit 2, nothing on stdout, the message names it",
          rc == 2 and out == "" and needle in err, f"rc={rc} out={out!r} err={err!r}")


with tempfile.TemporaryDirectory() as d:
    def vocab_file(name, text):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(text)
        return path

    empty = vocab_file("empty.txt", b"")
    bad("an empty vocabulary", ["--vocab", empty, "hi"], f"vocabulary file '{empty}' is empty")
    dup = vocab_file("dup.txt", b"[UNK]\n[CLS]\n[SEP]\nhi\nhi\n")
    bad("a duplicate token", ["--vocab", dup, "hi"], f"vocabulary file '{dup}' line 5: duplicate token \"hi\"")
    nounk = vocab_file("nounk.txt", b"[CLS]\n[SEP]\nhi\n")
    bad("a vocabulary without [UNK]", ["--vocab", nounk, "hi"], f"'{nounk}' lacks the special token [UNK]")
    latin1 = vocab_file("latin1.txt", b"[UNK]\n[CLS]\n[SEP]\ncaf\xe9\n")
    bad("a vocabulary in Latin-1", ["--vocab", latin1, "hi"], f"'{latin1}' line 4 is not valid UTF-8")
    missing = os.path.join(d, "missing.txt")
    bad("a missing vocabulary file", ["--vocab", missing, "hi"], f"cannot open the vocabulary file '{missing}'")

bad("no text", ["--vocab", vocab], "missing TEXT")
bad("two texts", ["--vocab", vocab, "a", "b"], "expected one TEXT")
bad("an unknown option", ["--vocab", vocab, "--xml", "a"], "unknown option '--xml'")
# --- the fast tokenizer's fields, pairs, truncation and padding (values from Hugging Face's
# Rust library through npm `tokenizers`: scripts/fixtures/hf/make_fixtures.js, tests/data/hf_encodings.json)
fixtures = json.load(open(sys.argv[3], encoding="utf-8"))
picked = [c for c in fixtures["cases"] if "expected" in c and c["pair"] is not None and c.get("padding")][:3]
picked += [c for c in fixtures["cases"] if "expected" in c and c.get("truncation") == "only_second" and c["max_length"] >= 3][:2]
for c in picked:
    args = ["--vocab", vocab, "--json", "--pair", c["pair"]]
    if "max_length" in c:
        args += ["--max-length", str(c["max_length"])]
    if "truncation" in c:
        args += ["--truncation", c["truncation"]]
    if "padding" in c:
        args += ["--padding", c["padding"]]
    rc, out, err = run(*args, "--", c["text"])
    got = json.loads(out) if rc == 0 else {}
    want = dict(c["expected"])
    want["key_padding"] = [m == 0 for m in want["attention_mask"]]
    check(f"--pair {c.get('truncation')} max_length {c.get('max_length')} gives the library's fields",
          rc == 0 and all(got.get(k) == v for k, v in want.items()), f"{args}\n{out}{err}")

# the library refuses: only_second without a pair, when it must cut
rc, out, err = run("--vocab", vocab, "--truncation", "only_second", "--max-length", "4", "a b c d e")
check("only_second without a pair: exit 2, the library's message",
      rc == 2 and out == "" and "Second sequence not provided" in err, out + err)

# the vocabulary is found without --vocab (the source tree's data/ from the build directory)
rc, out, err = run("--json", "let's tokenize something?")
check("--vocab is optional", rc == 0 and json.loads(out)["ids"][1] == 2292, out + err)
rc, out, err = run("--help")
check("--help prints the usage on stdout", rc == 0 and "usage: qkv tokenize" in out and "--flavor" in out, out + err)

# the slow flavor: an unassigned code point is dropped; the fast one makes its word [UNK]
rc, out, err = run("--json", "ab\u0378c")
check("fast: a word with an unassigned code point is [UNK]", rc == 0 and json.loads(out)["tokens"] == ["[CLS]", "[UNK]", "[SEP]"], out + err)
rc, out, err = run("--json", "--flavor", "slow", "ab\u0378c")
check("slow: the unassigned code point is dropped", rc == 0 and json.loads(out)["tokens"] == ["[CLS]", "abc", "[SEP]"], out + err)

# many texts: lines in, JSON lines out; padding to the longest of them
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "texts.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("hello world\r\nlet's tokenize something?\n\n")
    rc, out, err = run("--input", path, "--padding", "longest")
    rows = [json.loads(l) for l in out.splitlines()] if rc == 0 else []
    check("--input: one JSON line per line of text (CRLF and an empty line too)", len(rows) == 3, out + err)
    check("--padding longest pads every line to the longest (9 tokens)",
          [len(r["ids"]) for r in rows] == [9, 9, 9] and rows[0]["key_padding"] == [False] * 4 + [True] * 5
          and rows[2]["tokens"] == ["[CLS]", "[SEP]"] + ["[PAD]"] * 7, out)
    # attend's fields: tokens (one label per row) and key_padding (one flag per key, true = padded)
    check("each line has attend's tokens and key_padding, one per position",
          all(len(r["tokens"]) == len(r["key_padding"]) == len(r["ids"]) for r in rows), out)
    p = subprocess.run([qkv, "tokenize", "--input", "-", "--jsonl"], input='{"text": "hi", "pair": "there"}\n"plain"\n'.encode(),
                       capture_output=True)
    rows = [json.loads(l) for l in p.stdout.decode().splitlines()] if p.returncode == 0 else []
    check("--jsonl on standard input: pairs and strings",
          len(rows) == 2 and rows[0]["tokens"] == ["[CLS]", "hi", "[SEP]", "there", "[SEP]"]
          and rows[0]["token_type_ids"] == [0, 0, 0, 1, 1] and rows[1]["tokens"] == ["[CLS]", "plain", "[SEP]"],
          repr(p))
    bad_json = os.path.join(d, "bad.jsonl")
    with open(bad_json, "w", encoding="utf-8") as f:
        f.write('"ok"\n{"text": 3}\n')
    bad("a JSON line without a string text", ["--input", bad_json, "--jsonl"], f"'{bad_json}' line 2: expected a JSON string")
    latin = os.path.join(d, "latin1.txt")
    with open(latin, "wb") as f:
        f.write(b"fine\ncaf\xe9\n")
    bad("a line in Latin-1", ["--input", latin], f"'{latin}' line 2: the text is not valid UTF-8")
    bad("a missing input file", ["--input", os.path.join(d, "nope.txt")], "cannot open the input file")
bad("an unknown flavor", ["--flavor", "medium", "hi"], "--flavor is fast or slow")
bad("a negative max length", ["--max-length", "-3", "hi"], "--max-length is a whole number")
bad("a truncation max length below the special tokens", ["--truncation", "longest_first", "--max-length", "2", "--pair", "b", "a"],
    "max_length 2 is shorter than the 3 special tokens of a pair")
bad("TEXT and --input together", ["--input", "-", "hi"], "give a TEXT or --input, not both")
rc = subprocess.run([qkv, "tokenize", "--vocab", vocab, b"caf\xe9"], capture_output=True)
check("a text in Latin-1: exit 2, the message gives the byte",
      rc.returncode == 2 and rc.stdout == b"" and b"not valid UTF-8" in rc.stderr and b"byte 3" in rc.stderr,
      repr(rc))

print(f"{failures} failed")
sys.exit(1 if failures else 0)
