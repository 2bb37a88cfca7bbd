#!/usr/bin/env python3
"""run_attend.py STATUS STREAM TEXT -- QKV ARGS...: run `qkv ARGS`, check its exit status, that
TEXT appears in STREAM (stdout or stderr), and the stream contract: on an error (status 2)
nothing on stdout; with --json and status 0, stdout is one JSON object with scale, mask and
scaled_scores (docs/cli.md) and the eight tensors of docs/cli.md, each a {"dtype", "shape", "data"} tensor whose data matches its shape
(a batch case: {"batch", "lengths", "sequences"}, each sequence such an object); with
--svg FILE / --html FILE and status 0, FILE exists and is well-formed XML (SVG / XHTML)."""
import json
import os
import xml.dom.minidom
import subprocess
import sys

sep = sys.argv.index("--")
status, stream, text = int(sys.argv[1]), sys.argv[2], sys.argv[3]
cmd = sys.argv[sep + 1:]
p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
out = {"stdout": p.stdout, "stderr": p.stderr}
problems = []
if p.returncode != status:
    problems.append(f"exit status {p.returncode}, expected {status}")
if text not in out[stream]:
    problems.append(f"{stream} does not contain {text!r}")
if p.returncode == 2 and p.stdout:
    problems.append("an error, but something on stdout")
if p.returncode == 2 and not p.stderr.strip():
    problems.append("an error, but no message on stderr")
if p.returncode < 0:
    problems.append(f"killed by signal {-p.returncode}")
if p.returncode == 0 and "--json" in cmd:
    try:
        top = json.loads(p.stdout)
        # a batch case (docs/cli.md, "A batch of sequences"): {"batch", "lengths", "sequences"},
        # each sequence the object of a one-sequence case
        if isinstance(top, dict) and "batch" in top:
            if list(top.keys()) != ["batch", "lengths", "sequences"] or len(top["sequences"]) != top["batch"] or \
                    len(top["lengths"]) != top["batch"]:
                problems.append(f"a batch: keys {list(top.keys())}, expected batch, lengths and one result per sequence")
            objects = top["sequences"]
        else:
            objects = [top]
        for j in objects:
            keys = ["queries", "keys", "values", "scores", "weights", "context", "concat", "output"]
            extras = ["scale", "mask", "scaled_scores"]  # docs/cli.md: the learner's extras first
            if list(j.keys()) != extras + keys:
                problems.append(f"keys {list(j.keys())}, expected {extras + keys}")
            if not isinstance(j.get("scale"), (int, float)):
                problems.append("scale is not a number")
            for k in ["mask", "scaled_scores"] + keys:
                t = j[k]
                def check(d, shape):
                    if not shape:  # a number, or NaN and the infinities as strings; never null
                        return isinstance(d, (int, float)) or d in ("NaN", "Infinity", "-Infinity")
                    return isinstance(d, list) and len(d) == shape[0] and all(check(e, shape[1:]) for e in d)
                if set(t) != {"dtype", "shape", "data"} or not check(t["data"], t["shape"]):
                    problems.append(f"{k} is not a well-formed tensor")
            if len(j["scores"]["shape"]) != 3 or len(j["context"]["shape"]) != 3:
                problems.append("scores and context must be heads x T x ...")
    except (ValueError, KeyError, TypeError) as e:
        problems.append(f"stdout is not the expected JSON: {e}")
if p.returncode == 0:
    for flag, root in (("--svg", "svg"), ("--html", "html")):
        if flag in cmd:
            path = cmd[cmd.index(flag) + 1]
            try:
                doc = xml.dom.minidom.parse(path)
                if doc.documentElement.tagName != root:
                    problems.append(f"{path}: root element {doc.documentElement.tagName}, expected {root}")
            except Exception as e:  # noqa: BLE001 - any failure to read is a problem to report
                problems.append(f"{path} is not well-formed XML: {e}")
if problems:
    print("command:", " ".join(cmd))
    print("stdout:", p.stdout[:3000])
    print("stderr:", p.stderr[:3000])
    print("\n".join(problems))
    sys.exit(1)
print("ok:", " ".join(cmd[1:]))
