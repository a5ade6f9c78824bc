#!/usr/bin/env python3
"""Validates mla-plan --json outputs against the JSON Schemas in schemas/ (docs/cli.md, "JSON Schemas").

Usage:
  scripts/validate-json.py [--kind KIND] FILE...     FILE may be - for standard input
  mla-plan configs/deepseek-v4.1-flash.json --tp 8 --json | scripts/validate-json.py -

KIND is the command whose output FILE is: plan, check, schedule, verify, bench, gpus or formats
(the schema schemas/KIND.schema.json). Without --kind it is told from the document's keys.
Prints one line per file ("FILE: valid (KIND)", or each error with the place it is at); exits 0
when every file is valid, 1 when one is not, 2 for a bad argument or when jsonschema is missing
(Debian: apt-get install python3-jsonschema).
"""

import argparse
import json
import os
import sys

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "schemas")
KINDS = ("plan", "check", "schedule", "verify", "bench", "gpus", "formats")


def detect_kind(doc):
    """The command that wrote `doc`, from its keys; None when none matches."""
    if not isinstance(doc, dict):
        return None
    if "error" in doc and "command" in doc:
        # The error document of --json (docs/cli.md, "Errors as JSON"): the same shape in every
        # schema; the command's own when it has one.
        return doc["command"] if doc["command"] in KINDS else "plan"
    if "model" in doc:
        return "plan"
    if "files" in doc:
        return "check"
    if "gpus" in doc:
        return "gpus"
    if "formats" in doc:
        return "formats"
    if "ceilings" in doc or "rows" in doc:
        return "bench"
    if "matrix" in doc or "devices" in doc:
        return "verify"
    if "schedules" in doc:
        return "schedule"
    return None


def load_schema(kind, schema_dir=SCHEMA_DIR):
    with open(os.path.join(schema_dir, kind + ".schema.json"), encoding="utf-8") as f:
        return json.load(f)


def validator(schema):
    """A draft 2020-12 validator of `schema` (jsonschema 4.10, Debian 12's, or later)."""
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def pointer(path):
    """A JSON pointer of a jsonschema error path."""
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path) if path else "(the document)"


def errors(v, doc):
    """Every error of `doc`, as "POINTER: message" lines, in document order."""
    out = []
    for e in sorted(v.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path]):
        # oneOf / anyOf: the branch errors say more than "is not valid under any of the given schemas".
        leaves = [c for c in (e.context or []) if not c.context]
        if leaves:
            best = min(leaves, key=lambda c: -len(c.absolute_path))
            out.append(f"{pointer(best.absolute_path)}: {best.message}")
        else:
            out.append(f"{pointer(e.absolute_path)}: {e.message}")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description="Validate mla-plan --json outputs against schemas/.")
    parser.add_argument("--kind", choices=KINDS, help="the command that wrote the files (default: told from the keys)")
    parser.add_argument("--schemas", default=SCHEMA_DIR, help="the folder of the schema files (default: %(default)s)")
    parser.add_argument("files", nargs="+", metavar="FILE")
    args = parser.parse_args(argv)
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        print("validate-json: the Python package jsonschema is missing (Debian: apt-get install python3-jsonschema)",
              file=sys.stderr)
        return 2
    validators = {}
    bad = 0
    for name in args.files:
        try:
            if name == "-":
                doc = json.load(sys.stdin)
            else:
                with open(name, encoding="utf-8") as f:
                    doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{name}: cannot read it as JSON: {e}")
            bad += 1
            continue
        kind = args.kind or detect_kind(doc)
        if kind is None:
            print(f"{name}: not an mla-plan --json document (give --kind)")
            bad += 1
            continue
        if kind not in validators:
            validators[kind] = validator(load_schema(kind, args.schemas))
        errs = errors(validators[kind], doc)
        if errs:
            bad += 1
            print(f"{name}: INVALID ({kind}, schemas/{kind}.schema.json)")
            for line in errs:
                print("  " + line)
        else:
            print(f"{name}: valid ({kind})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
