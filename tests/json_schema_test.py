#!/usr/bin/env python3
"""The --json outputs of mla-plan against the JSON Schemas in schemas/ (ctest: json.schemas).

1. Every schema is a valid draft 2020-12 schema; its $id names the "schema" version the documents
   carry; the $defs that several schemas share are the same in each.
2. Every golden CLI output under tests/ (a .json file whose top-level "schema" is "mla-plan/...",
   tests/golden/ above all) is valid against the schema of its command; finding none fails.
3. The binary's outputs on the bundled configs (plan, check, check --matrix, check of a folder,
   schedule, gpus, formats, with a range of flags), the error documents of every command with
   --json (an invalid config, a syntax error, bad flags at parsing and after, no GPU), and the
   verify and bench documents that mlaplan_json_samples renders from host-side reports are valid;
   each carries the tool_version that --version prints, and its exit_code is the process's (for an
   error document, also the exit code of the same run without --json).
4. Together those documents use every key each schema describes (a key the code no longer writes
   is caught), and the schemas reject what they must: an unknown key in any object, a missing
   required key, a wrong type, another schema version.

Exits 0 when all hold, 1 when one does not, 77 (skipped) when the Python package jsonschema is
missing (Debian: apt-get install python3-jsonschema).
"""

import argparse
import copy
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys

KINDS = ("plan", "check", "schedule", "verify", "bench", "gpus", "formats")
SKIP = 77


class Failures:
    def __init__(self):
        self.lines = []

    def add(self, line):
        self.lines.append(line)
        print("FAIL: " + line)


def load_validate_module(source_dir):
    path = os.path.join(source_dir, "scripts", "validate-json.py")
    spec = importlib.util.spec_from_file_location("validate_json", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- schemas -------------------------------------------------------------------------------------

def schema_key_paths(root):
    """Every object key a document of `root` may have, as paths like ".fit.stages[].budget": the
    properties reached through $ref, allOf / anyOf / oneOf and items."""
    out = set()

    def walk(node, path, refs):
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            ref = node["$ref"]
            assert ref.startswith("#/$defs/"), ref
            if (ref, path) not in refs:
                walk(root["$defs"][ref[len("#/$defs/"):]], path, refs | {(ref, path)})
        for kw in ("allOf", "anyOf", "oneOf"):
            for sub in node.get(kw, []):
                walk(sub, path, refs)
        for key, sub in node.get("properties", {}).items():
            out.add(path + "." + key)
            walk(sub, path + "." + key, refs)
        if isinstance(node.get("items"), dict):
            walk(node["items"], path + "[]", refs)

    walk(root, "", frozenset())
    return out


def resolve(root, node):
    """`node`, or the $defs entry it refers to."""
    if isinstance(node, dict) and "$ref" in node:
        return root["$defs"][node["$ref"][len("#/$defs/"):]]
    return node


def error_key_paths(root):
    """The key paths of the error document alone (shared by every schema)."""
    return schema_key_paths({"$defs": root["$defs"], "$ref": "#/$defs/error_document"})


def error_commands(work, source_dir):
    """(kind, arguments, exit code) of commands that end by an error with --json: each must print
    the error document on stdout, with the exit code it has without --json."""
    with open(os.path.join(source_dir, "configs", "deepseek-v4-flash.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["compress_ratios"][3] = 7
    bad = os.path.join(work, "bad-ratio.json")
    write_json(bad, cfg)
    broken = os.path.join(work, "broken.json")
    with open(broken, "w", encoding="utf-8") as f:
        f.write('{"model_type": "deepseek_v4",\n  "num_hidden_layers": 4,,\n}\n')
    v41 = "configs/deepseek-v4.1-flash.json"
    return [
        ("plan", [bad, "--tp", "8", "--json"], 2),  # a field's error: field, value, file, line, column
        ("plan", [broken, "--json"], 2),  # not JSON: file, line, column
        ("plan", [v41, "--json", "--batch", "0"], 1),  # a bad flag value: field and value
        ("plan", [v41, "--json", "--max-model-len", "99999999"], 1),  # a bound from the config, after parsing
        ("plan", ["missing.json", "--json"], 2),
        ("plan", ["vllm", "serve", bad, "-tp", "8", "--json"], 2),
        ("check", ["check", v41, "--json", "--bogus"], 1),
        ("check", ["check", v41, "--tp", "1,2", "--json"], 1),
        ("schedule", ["schedule", "--json"], 1),
        ("schedule", ["schedule", "--kernel", "sm90-sparse", "--num-sms", "0", "--h-q", "64", "--lengths", "1",
                      "--json"], 1),
        ("verify", ["verify", bad, "--json"], 2),
        ("verify", ["verify", v41, "--iterations", "0", "--json"], 1),
        ("bench", ["bench", v41, "--replays", "0", "--json"], 1),
        ("bench", ["bench", "missing.json", "--json"], 2),
        ("gpus", ["gpus", "--json", "--bogus"], 1),
        ("plan", ["plna", "--json"], 1),  # a mistyped command: command null
        ("formats", ["formats", "--json", "--bogus"], 1),
        ("check", ["check", "missing.json", "--format", "json", "--tp", "0"], 1),  # --format json asks too
    ]


def check_schemas(vj, schema_dir, fail):
    """The schemas themselves; returns {kind: schema}."""
    import jsonschema

    schemas = {}
    for kind in KINDS:
        path = os.path.join(schema_dir, kind + ".schema.json")
        if not os.path.exists(path):
            fail.add(f"{path} is missing")
            continue
        s = vj.load_schema(kind, schema_dir)
        try:
            jsonschema.Draft202012Validator.check_schema(s)
        except jsonschema.exceptions.SchemaError as e:
            fail.add(f"{kind}.schema.json is not a valid draft 2020-12 schema: {e.message}")
            continue
        if s.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
            fail.add(f"{kind}.schema.json: $schema is {s.get('$schema')!r}, not draft 2020-12")
        # The document's "schema" (one const for every top-level shape) and the file's $id agree.
        shapes = [resolve(s, shape) for shape in s["oneOf"]] if "oneOf" in s else [s]
        if "oneOf" in s and {"$ref": "#/$defs/error_document"} not in s["oneOf"]:
            fail.add(f"{kind}.schema.json: the error document is not one of its shapes")
        consts = {shape["properties"]["schema"].get("const") for shape in shapes}
        if len(consts) != 1 or None in consts:
            fail.add(f"{kind}.schema.json: its \"schema\" property is not one const: {consts}")
            continue
        version = consts.pop()
        want_id = "urn:" + version.replace("/", ":") + ":" + kind
        if s.get("$id") != want_id:
            fail.add(f"{kind}.schema.json: $id is {s.get('$id')!r}; the documents' schema {version!r} makes it {want_id!r}")
        for shape in shapes:
            for key in ("schema", "tool_version"):
                if key not in shape.get("required", []):
                    fail.add(f"{kind}.schema.json: {key!r} is not required")
            if shape.get("additionalProperties") is not False:
                fail.add(f"{kind}.schema.json: the document is not closed (additionalProperties: false)")
        schemas[kind] = s
    # A $defs entry several schemas have (finding, schedule_entry) is one definition.
    seen = {}
    for kind, s in schemas.items():
        for name, definition in s.get("$defs", {}).items():
            if name in seen and seen[name][1] != definition:
                fail.add(f"$defs/{name} differs between {seen[name][0]}.schema.json and {kind}.schema.json")
            seen.setdefault(name, (kind, definition))
    print(f"schemas: {len(schemas)} of {len(KINDS)} valid; shared $defs: "
          + ", ".join(sorted(n for n in seen if sum(n in s.get('$defs', {}) for s in schemas.values()) > 1)))
    return schemas


# ---- documents -----------------------------------------------------------------------------------

def instance_key_paths(doc, path="", out=None):
    out = set() if out is None else out
    if isinstance(doc, dict):
        for key, value in doc.items():
            out.add(path + "." + key)
            instance_key_paths(value, path + "." + key, out)
    elif isinstance(doc, list):
        for value in doc:
            instance_key_paths(value, path + "[]", out)
    return out


def object_pointers(doc, pointer=(), pattern="", seen=None):
    """The JSON pointer (a tuple) of the first object at each key path of `doc`."""
    seen = {} if seen is None else seen
    if isinstance(doc, dict):
        seen.setdefault(pattern, pointer)
        for key, value in doc.items():
            object_pointers(value, pointer + (key,), pattern + "." + key, seen)
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            object_pointers(value, pointer + (i,), pattern + "[]", seen)
    return seen


def at(doc, pointer):
    for p in pointer:
        doc = doc[p]
    return doc


def run(cmd, cwd):
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    return r.returncode, r.stdout.decode("utf-8"), r.stderr.decode("utf-8", "replace")


def write_json(path, doc):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)


def model_dir_with_safetensors(work, source_dir, name, extra_bytes):
    """A model directory: V4-Flash's config.json and one safetensors file of two small tensors, which
    the config's contract does not have in those shapes (mismatches), and with `extra_bytes` one more
    tensor of that many bytes (a sparse data area). Without it the files hold far less than the
    contract and an index names a shard that is not there: an incomplete checkpoint (exit 2, the
    config's weights); with 160 GB they are used."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(source_dir, "configs", "deepseek-v4-flash.json"), os.path.join(d, "config.json"))
    tensors = {
        "embed.weight": {"dtype": "BF16", "shape": [16, 64], "data_offsets": [0, 2048]},
        "layers.0.ffn.experts.0.w1.weight": {"dtype": "I8", "shape": [32, 32], "data_offsets": [2048, 3072]},
    }
    if extra_bytes:
        tensors["layers.0.attn.extra.weight"] = {"dtype": "U8", "shape": [extra_bytes],
                                                 "data_offsets": [3072, 3072 + extra_bytes]}
    header = json.dumps(tensors).encode()
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        f.truncate(8 + len(header) + 3072 + extra_bytes)
    if not extra_bytes:
        # An index that names a second shard the directory lacks (a download in progress).
        weight_map = {name: "model.safetensors" for name in tensors}
        weight_map["head.weight"] = "model-00002-of-00002.safetensors"
        write_json(os.path.join(d, "model.safetensors.index.json"),
                   {"metadata": {"total_size": 159609485896}, "weight_map": weight_map})
    return d


def config_with_unknown_scheme(work, source_dir):
    """V4-Flash with a quantisation method mla-plan does not know: its weights are not all known."""
    with open(os.path.join(source_dir, "configs", "deepseek-v4-flash.json"), encoding="utf-8") as f:
        cfg = json.load(f)

    def set_method(node):
        if isinstance(node, dict):
            if "quant_method" in node:
                node["quant_method"] = "awq"
                return True
            return any(set_method(v) for v in node.values())
        return False

    if not set_method(cfg):
        raise RuntimeError("configs/deepseek-v4-flash.json has no quant_method")
    path = os.path.join(work, "unknown-scheme.json")
    write_json(path, cfg)
    return path


def cli_commands(work, source_dir):
    """(kind, arguments) of the generated outputs."""
    v41, v4, v32 = ("configs/deepseek-v4.1-flash.json", "configs/deepseek-v4-flash.json",
                    "configs/deepseek-v3.2.json")
    small = sorted(os.path.join("configs", "small", n) for n in os.listdir(os.path.join(source_dir, "configs", "small")))
    model_dir = model_dir_with_safetensors(work, source_dir, "model-dir", 160 * 10**9)
    partial_dir = model_dir_with_safetensors(work, source_dir, "partial-model-dir", 0)
    unknown = config_with_unknown_scheme(work, source_dir)
    # A folder of configs: two configs, a JSON file that is none (skipped) and a subdirectory.
    folder = os.path.join(work, "ci-configs")
    os.makedirs(os.path.join(folder, "more"), exist_ok=True)
    shutil.copy(os.path.join(source_dir, v4), os.path.join(folder, "a.json"))
    shutil.copy(os.path.join(source_dir, v32), os.path.join(folder, "more", "b.json"))
    write_json(os.path.join(folder, "package.json"), {"name": "x", "version": "1.0.0"})
    cmds = [
        ("check", ["check", folder, "--tp", "8", "--json"]),
        ("check", ["check", folder, "--recursive", "--gpu", "h200,b200", "--tp", "8", "--json"]),
        ("plan", [v41, "--tp", "8", "--json"]),
        ("plan", [v41, "--json"]),  # does not fit on one GPU: exit 4, suggestions
        ("plan", ["plan", v41, "--gpu", "b200", "--kv-cache-dtype", "nvfp4_ds_mla", "--indexer-cache-dtype", "fp4",
                  "--tp", "8", "--format", "json"]),
        ("plan", [v41, "--tp", "8", "--spec-tokens", "2", "--context-lens", "1,4096,65536", "--json"]),
        ("plan", [v41, "--gpu", "b200", "--attention-backend", "FLASHINFER_MLA_SPARSE_DSV41", "--tp", "8", "--json"]),
        ("plan", [v41, "--gpu", "a100", "--tp", "8", "--json"]),
        ("plan", [v41, "--tp", "8", "--max-model-len", "auto", "--min-concurrency", "16", "--json"]),
        ("plan", [v41, "--gpus", "16xb200", "--objective", "gpus", "--json"]),
        ("plan", ["vllm", "serve", v41, "-tp", "8", "--max-model-len", "128k", "--port", "8000",
                  "--no-enable-prefix-caching", "--json"]),
        ("plan", [v41, "--tp", "4", "--pp", "2", "--no-draft-layers", "--json"]),
        ("plan", [v41, "--dp", "8", "--enable-expert-parallel", "--engram", "offload", "--json"]),
        ("plan", [v4, "--tp", "8", "--json"]),
        # the host tier with a budget (V4.0 starts the connector; V4.1's ring group is refused: exit 3)
        ("plan", [v4, "--tp", "8", "--kv-offloading-size", "100", "--prefix-cache-retention-interval", "4096", "--json"]),
        ("plan", [v41, "--tp", "8", "--kv-offloading-size", "100", "--json"]),
        ("plan", [v4, "--gpu", "b200", "--tp", "2", "--weights-gib", "80", "--json"]),
        ("plan", [v4, "--arch", "sm100", "--num-sms", "120", "--gpu-memory-gib", "96", "--json"]),
        ("plan", [v32, "--tp", "8", "--json"]),
        ("plan", [v32, "--tp", "8", "--dcp", "2", "--indexer-tiling", "none", "--json"]),  # DCP comparison
        ("plan", [v41, "--tp", "8", "--dcp", "2", "--json"]),  # DCP refused by vLLM, the numbers still drawn
        ("plan", [v32, "--gpu", "b200", "--tp", "8", "--kv-cache-memory-bytes", "40000000000", "--json"]),
        ("plan", [model_dir, "--tp", "8", "--json"]),  # weights from safetensors headers, with mismatches
        ("plan", [partial_dir, "--tp", "8", "--json"]),  # an incomplete checkpoint: exit 2, the config's weights
        ("check", ["check", partial_dir, v4, "--tp", "8", "--json"]),
        ("check", ["check", partial_dir, "--matrix", "--tp", "8", "--json"]),
        ("plan", [unknown, "--tp", "8", "--json"]),  # weights not all known
        ("check", ["check", v41, v4, v32, "--tp", "8", "--json"]),
        ("check", ["check", v41, v4, v32, "--gpu", "b200", "--tp", "8", "--format", "json",
                   "--max-global-bytes-per-token", "1000", "--min-concurrency", "40"]),
        ("check", ["check", v41, "missing.json"] + small + ["--tp", "8", "--json"]),
        ("check", ["check", v4, v32, "missing.json", "--matrix", "--tp", "1,8", "--json"]),
        ("schedule", ["schedule", "--kernel", "sm90-sparse", "--num-sms", "132", "--h-q", "64",
                      "--lengths", "128,2048,0,70000", "--extra-lengths", "512,512,0,1024", "--json"]),
        ("schedule", ["schedule", "--kernel", "sm100-head128", "--num-sms", "148", "--h-q", "128", "--s-q", "2",
                      "--lengths", "4096,1", "--json"]),
        ("schedule", ["schedule", "--kernel", "sm90-dense", "--num-sms", "132", "--h-q", "128", "--h-k", "1",
                      "--lengths", "100,200,300", "--json"]),
        ("gpus", ["gpus", "--json"]),
        ("formats", ["formats", "--json"]),
    ]
    cmds += [("plan", [c, "--json"]) for c in small]
    return cmds


def mutations(kind, doc):
    """(what, changed document) pairs that must not validate."""
    out = []

    def changed(what, fn):
        d = copy.deepcopy(doc)
        fn(d)
        out.append((what, d))

    def remove(pointer):
        def fn(d):
            del at(d, pointer[:-1])[pointer[-1]]
        return fn

    changed("without tool_version", remove(("tool_version",)))
    changed("without schema", remove(("schema",)))
    changed("with another schema version", lambda d: d.__setitem__("schema", "mla-plan/1"))
    changed("with tool_version a number", lambda d: d.__setitem__("tool_version", 1))
    if "exit_code" in doc:
        changed("with exit_code a string", lambda d: d.__setitem__("exit_code", str(d["exit_code"])))
    # A required key of a nested object, one per command.
    nested = {
        "plan": [("model", "family"), ("layers", 0, "type"), ("fit", "vllm", "fits"), ("schedules", 0, "records"),
                 ("schedules", 0, "decode_mode"), ("findings", 0, "severity")],
        "check": [("files", 0, "status"), ("files", 0, "findings"), ("files", 0, "matrix", 0, "supported")],
        "schedule": [("schedules", 0, "accum_bytes")],
        "gpus": [("gpus", 0, "arch")],
        "formats": [("formats", 0, "fields", 0, "offset")],
        "verify": [("device", "name"), ("matrix", 0, "status"), ("devices", 0, "label"),
                   ("devices", 0, "matrix", 0, "kv_cache_dtype")],
        "bench": [("ceilings", "copy_gbps"), ("rows", 0, "b"), ("findings", 0, "severity")],
    }[kind] + [("error", "kind"), ("error", "field"), ("command",)]
    for pointer in nested:
        try:
            at(doc, pointer)
        except (KeyError, IndexError, TypeError):
            continue
        changed("without /" + "/".join(map(str, pointer)), remove(pointer))
    # An unknown key in every kind of object the document has.
    for pattern, pointer in sorted(object_pointers(doc).items()):
        changed(f"with an unknown key in {pattern or '(the document)'}",
                lambda d, p=pointer: at(d, p).__setitem__("not_a_key", 0))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--samples", required=True, help="mlaplan_json_samples")
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        print(f"json.schemas: skipped: the Python package jsonschema is missing for {sys.executable} "
              "(Debian: apt-get install python3-jsonschema)")
        return SKIP

    source_dir = os.path.abspath(args.source_dir)
    schema_dir = os.path.join(source_dir, "schemas")
    vj = load_validate_module(source_dir)
    fail = Failures()
    schemas = check_schemas(vj, schema_dir, fail)
    if len(schemas) != len(KINDS):
        return 1
    validators = {kind: vj.validator(s) for kind, s in schemas.items()}
    work = os.path.abspath(args.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    code, out, _ = run([args.binary, "--version"], source_dir)
    m = re.fullmatch(r"mla-plan (\S+)\n", out)
    if code != 0 or not m:
        fail.add(f"--version printed {out!r} (exit {code})")
        return 1
    version = m.group(1)

    docs = {kind: [] for kind in KINDS}  # (name, document)

    def take(kind, name, doc):
        errs = vj.errors(validators[kind], doc)
        if errs:
            fail.add(f"{name}: not valid against {kind}.schema.json:\n    " + "\n    ".join(errs[:20]))
        if isinstance(doc, dict) and doc.get("tool_version") != version:
            fail.add(f"{name}: tool_version is {doc.get('tool_version')!r}, --version says {version!r}")
        docs[kind].append((name, doc))

    # 2. Golden CLI outputs in the tests.
    goldens = 0
    for dirpath, _, names in os.walk(os.path.join(source_dir, "tests")):
        for n in sorted(names):
            if not n.endswith(".json"):
                continue
            path = os.path.join(dirpath, n)
            try:
                with open(path, encoding="utf-8") as f:
                    doc = json.load(f)
            except ValueError:
                continue
            if not (isinstance(doc, dict) and str(doc.get("schema", "")).startswith("mla-plan/")):
                continue
            kind = vj.detect_kind(doc)
            rel = os.path.relpath(path, source_dir)
            if kind is None:
                fail.add(f"{rel}: an mla-plan document of no known command")
                continue
            goldens += 1
            take(kind, rel, doc)
    print(f"golden CLI outputs under tests/: {goldens}")
    if goldens == 0:
        fail.add("no golden CLI output under tests/ (tests/golden/*.json): step 2 checked nothing")

    # 3. The binary's outputs.
    for kind, cli_args in cli_commands(work, source_dir):
        name = "mla-plan " + " ".join(cli_args)
        code, out, err = run([args.binary] + cli_args, source_dir)
        try:
            doc = json.loads(out)
        except ValueError:
            fail.add(f"{name}: exit {code}, stdout is not JSON; stderr: {err.strip()[:300]}")
            continue
        if vj.detect_kind(doc) != kind:
            fail.add(f"{name}: told as {vj.detect_kind(doc)}, not {kind}")
        if kind in ("plan", "check") and doc.get("exit_code") != code:
            fail.add(f"{name}: exit_code {doc.get('exit_code')} in the document, the process exited {code}")
        take(kind, name, doc)
    # Errors: one JSON document on stdout, the error as data, the exit code without --json.
    error_docs = []
    for kind, cli_args, want in error_commands(work, source_dir):
        name = "mla-plan " + " ".join(cli_args)
        code, out, err = run([args.binary] + cli_args, source_dir)
        plain = [a for a in cli_args if a != "--json"]
        if "--format" in plain:
            i = plain.index("--format")
            del plain[i:i + 2]
        plain_code, _, _ = run([args.binary] + plain, source_dir)
        if code != want or plain_code != want:
            fail.add(f"{name}: exit {code} with --json, {plain_code} without; expected {want}")
        try:
            doc = json.loads(out)
        except ValueError:
            fail.add(f"{name}: exit {code}, stdout is not one JSON document: {out[:200]!r}")
            continue
        if vj.detect_kind(doc) != kind:
            fail.add(f"{name}: told as {vj.detect_kind(doc)}, not {kind}")
        e = doc.get("error", {})
        if doc.get("exit_code") != code or e.get("exit_code") != code:
            fail.add(f"{name}: exit_code {doc.get('exit_code')} / {e.get('exit_code')} in the document, exit {code}")
        line = err.strip().splitlines()[-1] if err.strip() else ""
        if line != "mla-plan: error: " + e.get("message", ""):
            fail.add(f"{name}: the document's message {e.get('message')!r} is not stderr's line {line!r}")
        take(kind, name, doc)
        error_docs.append((name, doc))
    by_name = dict(error_docs)
    expect = {
        0: {"field": "/compress_ratios/3", "value": 7, "kind": "invalid_config"},
        2: {"field": "--batch", "value": "0", "kind": "usage"},
        3: {"field": "--max-model-len", "value": "99999999", "kind": "usage"},
        6: {"field": "--bogus", "kind": "usage"},
    }
    cmds = error_commands(work, source_dir)
    for i, want in expect.items():
        name = "mla-plan " + " ".join(cmds[i][1])
        got = by_name.get(name, {}).get("error", {})
        for key, value in want.items():
            if got.get(key) != value:
                fail.add(f"{name}: error.{key} is {got.get(key)!r}, expected {value!r}")
    first = by_name.get("mla-plan " + " ".join(cmds[0][1]), {}).get("error", {})
    if not (first.get("file", "").endswith("bad-ratio.json") and isinstance(first.get("line"), int)):
        fail.add(f"the invalid config's error names no file and line: {first!r}")
    print(f"error documents: {len(error_docs)} checked")
    samples_dir = os.path.join(work, "samples")
    code, out, err = run([args.samples, samples_dir], source_dir)
    if code != 0:
        fail.add(f"mlaplan_json_samples exited {code}: {err.strip()}")
    for n in out.split():
        kind = n.split("-")[0]
        with open(os.path.join(samples_dir, n), encoding="utf-8") as f:
            take(kind, "mlaplan_json_samples: " + n, json.load(f))
    for kind in KINDS:
        print(f"{kind}: {len(docs[kind])} documents checked")
        if not docs[kind]:
            fail.add(f"no {kind} document was made")

    # 4. Every key a schema describes is written by some document; the schemas reject what they must.
    # The error document is the same in every schema: its keys are checked over every command's
    # error documents together, the others per command.
    error_paths = error_key_paths(schemas["plan"])
    seen_errors = set()
    for _, doc in error_docs:
        instance_key_paths(doc, "", seen_errors)
    unused = sorted(error_paths - seen_errors)
    if unused:
        fail.add("the error document describes keys no error document wrote: " + ", ".join(unused))
    for kind in KINDS:
        seen = set()
        for _, doc in docs[kind]:
            instance_key_paths(doc, "", seen)
        own = set()
        for shape in schemas[kind].get("oneOf", [schemas[kind]]):
            if shape != {"$ref": "#/$defs/error_document"}:
                own |= schema_key_paths(dict(resolve(schemas[kind], shape), **{"$defs": schemas[kind].get("$defs", {})}))
        unused = sorted((schema_key_paths(schemas[kind]) - seen) - (error_paths - own))
        if unused:
            fail.add(f"{kind}.schema.json describes keys no {kind} document wrote: " + ", ".join(unused))
    rejected = 0
    for kind in KINDS:
        # The first document, and for verify and check the other top-level shape too.
        is_error = lambda d: "error" in d[1] and "command" in d[1]  # noqa: E731
        picks = [d for d in docs[kind] if not is_error(d)][:1]
        if kind == "verify":
            picks += [d for d in docs[kind] if "devices" in d[1]][:1]
        if kind == "check":
            picks += [d for d in docs[kind] if any("matrix" in f for f in d[1].get("files", []))][:1]
        picks += [d for d in docs[kind] if is_error(d)][:1]
        for name, doc in picks:
            for what, bad in mutations(kind, doc):
                if validators[kind].is_valid(bad):
                    fail.add(f"{name} {what} is still valid against {kind}.schema.json")
                rejected += 1
    print(f"changed documents rejected as they must be: {rejected}")

    if fail.lines:
        print(f"\n{len(fail.lines)} failure(s)")
        return 1
    print("all valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
