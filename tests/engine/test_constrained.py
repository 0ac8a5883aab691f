#!/usr/bin/env python3
"""Constrained generation end to end: runs the constrained program (tests/engine/
constrained.c), which generates under JSON mode and ten JSON Schemas from a random-weight
fixture and the real default model and fails itself on replies that do not end or are
not JSON; then every reply must validate against its schema with the jsonschema package.
Usage: test_constrained.py CONSTRAINED_BINARY MODELS_DIR."""
import glob
import json
import os
import subprocess
import sys
import tempfile

import jsonschema


def main():
    failures = checked = 0
    with tempfile.TemporaryDirectory() as d:
        rc = subprocess.run([sys.argv[1], d, sys.argv[2]], check=False).returncode
        schemas = sorted(glob.glob(os.path.join(d, "*.schema.json")))
        if len(schemas) != 21:
            print(f"FAIL: {len(schemas)} schemas written, want 21")
            return 1
        for path in schemas:
            with open(path, encoding="utf-8") as f:
                validator = jsonschema.Draft202012Validator(json.load(f))
            with open(path[: -len("schema.json")] + "samples", "rb") as f:
                samples = f.read().split(b"\0")[:-1]
            if not samples:
                failures += 1
                print(f"FAIL {os.path.basename(path)}: no replies")
            for s in samples:
                checked += 1
                try:
                    validator.validate(json.loads(s.decode("utf-8")))
                except Exception as e:  # noqa: BLE001 - any failure is a finding
                    failures += 1
                    if failures <= 20:
                        print(f"FAIL {os.path.basename(path)}: {s!r}: {str(e).splitlines()[0]}")
    print(f"test_constrained.py: {checked} replies checked against their schemas, {failures} invalid")
    return 1 if failures or rc or checked < 300 else 0


if __name__ == "__main__":
    sys.exit(main())
