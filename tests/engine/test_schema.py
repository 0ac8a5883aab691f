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


def main():
    failures = checked = 0
    with tempfile.TemporaryDirectory() as d:
        # its own failures are test_schema's to report; the samples are checked here
        subprocess.run([sys.argv[1], "--dump", d], check=False)
        schemas = sorted(glob.glob(os.path.join(d, "*.schema.json")))
        assert schemas, "no schemas dumped"
        for path in schemas:
            with open(path, encoding="utf-8") as f:
                schema = json.load(f)
            validator = jsonschema.Draft202012Validator(schema)
            with open(path[: -len("schema.json")] + "samples", "rb") as f:
                samples = [s for s in f.read().split(b"\0") if s]
            for s in samples:
                checked += 1
                try:
                    validator.validate(json.loads(s.decode("utf-8")))
                except Exception as e:  # noqa: BLE001 - any failure is a finding
                    failures += 1
                    if failures <= 20:
                        print(f"FAIL {os.path.basename(path)}: {s!r}: {str(e).splitlines()[0]}")
    print(f"test_schema.py: {checked} samples over {len(schemas)} schemas, {failures} invalid")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
