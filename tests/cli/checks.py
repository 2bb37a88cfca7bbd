"""checks.py: what the tool's test scripts in tests/cli share: check() records and prints one
named check; write_case() writes one JSON case file for the tool to read; flat() reads a tensor
of the tool's JSON (or a nested list) as one flat list. A script imports them
(its own folder is on Python's path), then exits 1 if `failures` is not empty."""
import json
import os

failures = []


def check(cond, what):
    """record `what` as failed unless cond; print ok/FAIL either way"""
    if not cond:
        failures.append(what)
        print('FAIL:', what)
    else:
        print('ok:', what)


def write_case(folder, name, case):
    """folder/name.json holding case; returns its path"""
    path = os.path.join(folder, name + '.json')
    with open(path, 'w') as f:
        json.dump(case, f)
    return path


def flat(t):
    """the numbers of a tensor, row-major: t is {"data": nested lists, ...} or the nested lists"""
    out = []

    def walk(x):
        if isinstance(x, list):
            for e in x:
                walk(e)
        else:
            out.append(x)
    walk(t['data'] if isinstance(t, dict) else t)
    return out
