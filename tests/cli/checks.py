"""checks.py: what the tool's test scripts in tests/cli share: check() records and prints one
named check; write_case() writes one JSON case file for the tool to read; flat() reads a tensor
of the tool's JSON (or a nested list) as one flat list. A script imports them
(its own folder is on Python's path), then exits 1 if `failures` is not empty."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'support'))
from tensors import flat  # noqa: E402  (tests/support/tensors.py; the scripts here import it from checks)

__all__ = ['check', 'failures', 'write_case', 'flat']

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

