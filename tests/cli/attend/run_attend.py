#!/usr/bin/env python3
"""run_attend.py CASES BUILD -- QKV attend: `qkv attend` on the small cases of tests/cli/attend/.

Each case NAME.json has its expectations beside it, in NAME.expect (usage.expect: the runs with
no case file), a JSON list of
    {"test": what it checks, "why": the derivation (optional), "status": the exit status,
     "stream": "stdout" or "stderr", "contains": text the stream must contain,
     "args": the arguments after `qkv attend`; @CASES@ is this folder, @BUILD@ the test's folder}
Every run also checks the stream contract: on an error (status 2) nothing on stdout and a
message on stderr; with --json and status 0, stdout is one JSON object with scale, mask and
scaled_scores (docs/cli.md; first "arithmetic": "core" with --arithmetic core or an editable
--html page) and the eight tensors of docs/cli.md (then rope's tables and alibi_slopes when the
case uses them, each of its shape; with d_output, the gradients after them, docs/cli.md "The
backward"), each a {"dtype", "shape",
"data"} tensor whose data matches its shape (a batch case: {"batch", "lengths", "sequences"},
each sequence such an object); with --svg FILE / --html FILE and status 0, FILE exists and is
well-formed XML (SVG / XHTML). Prints one line per expectation; exits 1 if any failed."""
import json
import os
import xml.dom.minidom
import subprocess
import sys


def check_run(cmd, status, stream, text):
    """the problems of one run of cmd (empty: it did what was expected)"""
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
                # --arithmetic core (docs/cli.md) says so first: "arithmetic": "core"; the runtime's
                # output has no such member
                if "arithmetic" in j:
                    if list(j.keys())[0] != "arithmetic" or j["arithmetic"] != "core" or \
                            ("--arithmetic" not in cmd and "--html" not in cmd):
                        problems.append(f"\"arithmetic\": {j['arithmetic']!r} must come first, be \"core\", and "
                                        "only with --arithmetic core (or an editable --html page)")
                    j = {k: v for k, v in j.items() if k != "arithmetic"}
                keys = ["queries", "keys", "values", "scores", "weights", "context", "concat", "output"]
                extras = ["scale", "mask", "scaled_scores"]  # docs/cli.md: the learner's extras first
                # then, when the case uses them, RoPE's tables and ALiBi's slopes (docs/cli.md),
                # and with d_output (docs/cli.md, "The backward") the gradients, in this order, the
                # biases' and d_wo / d_bo only when the case has them
                terms = [k for k in ["rope", "alibi_slopes"] if k in j]
                grads = ["d_output", "d_wo", "d_bo", "d_concat", "d_weights", "D", "d_scaled_scores", "d_queries",
                         "d_keys", "d_values", "d_wq", "d_bq", "d_wk", "d_bk", "d_wv", "d_bv", "d_x"]
                head = extras + keys + terms + ["kernels"]  # then the kernels that ran
                extra = list(j.keys())[len(head):]
                if list(j.keys())[:len(head)] != head or extra != [g for g in grads if g in extra] or \
                        (extra and not {"d_output", "d_concat", "d_weights", "D", "d_scaled_scores", "d_queries", "d_keys",
                                        "d_values", "d_wq", "d_wk", "d_wv", "d_x"} <= set(extra)):
                    problems.append(f"keys {list(j.keys())}, expected {head} (and with d_output the gradients {grads})")
                if "rope" in j:
                    r = j["rope"]
                    t, s = j["queries"]["shape"][0], j["keys"]["shape"][0]
                    half = r["rotary_dim"] // 2
                    for name, rows in (("cos_q", t), ("sin_q", t), ("cos_k", s), ("sin_k", s)):
                        if r[name]["shape"] != [rows, half]:
                            problems.append(f"rope.{name} has shape {r[name]['shape']}, expected {[rows, half]}")
                if "alibi_slopes" in j and j["alibi_slopes"]["shape"] != [j["scores"]["shape"][0]]:
                    problems.append(f"alibi_slopes has shape {j['alibi_slopes']['shape']}, one per head expected")
                keys = keys + extra
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
    return p, problems


def main():
    sep = sys.argv.index("--")
    cases, build = sys.argv[1], sys.argv[2]
    qkv = sys.argv[sep + 1:]
    os.makedirs(build, exist_ok=True)
    failed = total = 0
    for name in sorted(os.listdir(cases)):
        if not name.endswith(".expect"):
            continue
        for e in json.load(open(os.path.join(cases, name), encoding="utf-8")):
            args = [a.replace("@CASES@", cases).replace("@BUILD@", build) for a in e["args"]]
            cmd = qkv + args
            p, problems = check_run(cmd, e["status"], e["stream"], e["contains"])
            total += 1
            if problems:
                failed += 1
                print("FAIL: %s (%s)" % (e["test"], name))
                print("  command:", " ".join(cmd))
                print("  stdout:", p.stdout[:3000])
                print("  stderr:", p.stderr[:3000])
                print("  " + "\n  ".join(problems))
            else:
                print("ok: %s" % e["test"])
    print("%d expectations in %s: %d passed, %d failed" % (total, cases, total - failed, failed))
    if total == 0:
        print("no expectation found")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
