#!/usr/bin/env python3
"""Constrained generation end to end: runs the constrained program (tests/engine/
constrained.c), which generates under JSON mode and ten JSON Schemas from a random-weight
fixture and the real default model and fails itself on replies that do not end or are
not JSON (in unbounded JSON mode up to 5 of 100 sampled replies may still be writing at
its token limit, and are left out); then every reply must validate against its schema
with the jsonschema package.
Usage: test_constrained.py CONSTRAINED_BINARY MODELS_DIR."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_schema import check_dir  # noqa: E402 - the same checks as test_schema's samples


def main():
    with tempfile.TemporaryDirectory() as d:
        rc = subprocess.run([sys.argv[1], d, sys.argv[2]], check=False).returncode
        n, checked, failures = check_dir(d)
    print(f"test_constrained.py: {checked} replies checked against their {n} schemas, {failures} invalid")
    return 1 if failures or rc or n != 21 or checked < 295 else 0


if __name__ == "__main__":
    sys.exit(main())
