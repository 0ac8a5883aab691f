#!/usr/bin/env python3
"""Checks test_schema's samples with the jsonschema package: the instances it generated
from each schema and the texts its random walks through each grammar accepted must all
validate against the schema (a grammar that accepts too much fails here).
Usage: test_schema.py TEST_SCHEMA_BINARY. Exit 77 (skipped) without jsonschema."""
import glob
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("test_schema.py: no jsonschema package (scripts/deps installs it); skipped")
    sys.exit(77)


def check_dir(d):
    """Every DIR/NAME.samples (NUL-separated texts) against DIR/NAME.schema.json: the
    schema files found, the samples checked and those that do not validate (printed)."""
    failures = checked = 0
    schemas = sorted(glob.glob(os.path.join(d, "*.schema.json")))
    for path in schemas:
        with open(path, encoding="utf-8") as f:
            validator = jsonschema.Draft202012Validator(json.load(f))
        with open(path[: -len("schema.json")] + "samples", "rb") as f:
            samples = [s for s in f.read().split(b"\0") if s]
        if not samples:
            failures += 1
            print(f"FAIL {os.path.basename(path)}: no samples")
        for s in samples:
            checked += 1
            try:
                validator.validate(json.loads(s.decode("utf-8")))
            except Exception as e:  # noqa: BLE001 - any failure is a finding
                failures += 1
                if failures <= 20:
                    print(f"FAIL {os.path.basename(path)}: {s!r}: {str(e).splitlines()[0]}")
    return len(schemas), checked, failures


def main():
    with tempfile.TemporaryDirectory() as d:
        # its own failures are test_schema's to report; the samples are checked here
        subprocess.run([sys.argv[1], "--dump", d], check=False)
        n, checked, failures = check_dir(d)
        assert n, "no schemas dumped"
    print(f"test_schema.py: {checked} samples over {n} schemas, {failures} invalid")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
