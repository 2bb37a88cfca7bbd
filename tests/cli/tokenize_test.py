#!/usr/bin/env python3
"""Runs `qkv tokenize` as a user would: python3 tokenize_test.py QKV VOCAB.txt"""
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
check("the table counts the tokens", lines[:1] == ["7 tokens (BERT uncased WordPiece, 30522-token vocabulary)"], out)
rows = [l.split() for l in lines[2:]]
check("the table lists index, id and token",
      rows == [["0", "101", "[CLS]"], ["1", "13675", "cr"], ["2", "21382", "##eme"], ["3", "7987", "br"],
               ["4", "9307", "##ule"], ["5", "2063", "##e"], ["6", "102", "[SEP]"]], out)

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

bad("no --vocab", ["hi"], "missing --vocab")
bad("no text", ["--vocab", vocab], "missing TEXT")
bad("two texts", ["--vocab", vocab, "a", "b"], "expected one TEXT")
bad("an unknown option", ["--vocab", vocab, "--xml", "a"], "unknown option '--xml'")
rc = subprocess.run([qkv, "tokenize", "--vocab", vocab, b"caf\xe9"], capture_output=True)
check("a text in Latin-1: exit 2, the message gives the byte",
      rc.returncode == 2 and rc.stdout == b"" and b"not valid UTF-8" in rc.stderr and b"byte 3" in rc.stderr,
      repr(rc))

print(f"{failures} failed")
sys.exit(1 if failures else 0)
