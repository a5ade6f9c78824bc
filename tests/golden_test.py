#!/usr/bin/env python3
"""Golden outputs: mla-plan's outputs on the bundled configs, compared byte for byte (ctest: golden.outputs).

Each case below runs the binary from the source directory (so file names in the outputs are the
relative ones a user types) and compares what it writes, stdout or the report file of -o, and its
exit code, with the files in tests/golden/:

    tests/golden/NAME.EXT   the output (text, JSON, Markdown, GitHub annotations, SVG, HTML)
    tests/golden/MANIFEST   one line per case: NAME, the exit code, the arguments

A difference fails the test and names the first differing line of each file. When a change of
the outputs is meant, regenerate them and review the diff:

    python3 tests/golden_test.py --binary build/app/mla-plan --update && git diff tests/golden

It also checks that the README's first screen (the console block after "The first screen") is
the golden output of the README's first command, so the README cannot drift from the tool.
"""

import argparse
import os
import subprocess
import sys
import tempfile

V41 = "configs/deepseek-v4.1-flash.json"
V4 = "configs/deepseek-v4-flash.json"
V32 = "configs/deepseek-v3.2.json"
ALL = [V41, V4, V32]

CASE_A = [V4, "--gpu", "rtx-pro-6000", "--tp", "2", "--kv-cache-dtype", "fp8", "--gpu-memory-utilization", "0.95",
          "--max-model-len", "1048576", "--max-num-seqs", "64", "--max-num-batched-tokens", "4096", "--spec-tokens", "2"]
CASE_A_LOG = "tests/data/vllm-logs/case-a-v0.25.0.log"

# (name, extension, arguments); "{out}" stands for the report file the case writes.
CASES = [
    # The README's first command: its first screen (the search of one node, the best layout's plan).
    ("plan-v41-flash", "txt", [V41]),
    ("plan-v41-flash", "json", [V41, "--json"]),
    ("plan-v41-flash-tp8", "txt", [V41, "--tp", "8"]),
    ("plan-v41-flash-tp8", "json", [V41, "--tp", "8", "--json"]),
    ("plan-v41-flash-tp8", "md", [V41, "--tp", "8", "--format", "markdown"]),
    # One H200: it does not fit, and says what would (exit 4).
    ("plan-v41-flash-1gpu", "txt", [V41]),
    ("plan-v41-flash-b200-nvfp4-tp4-dp2-ep", "txt",
     [V41, "--gpu", "b200", "--kv-cache-dtype", "nvfp4_ds_mla", "--indexer-cache-dtype", "fp4", "--tp", "4", "--dp",
      "2", "--enable-expert-parallel", "--details"]),
    ("plan-v4-flash-tp4-details", "txt", [V4, "--tp", "4", "--details"]),
    # SGLang (docs/sglang.md): the S4 deployment (V4.1-Flash, DSpark, H200 TP4, the G3 configurator),
    # the S1 log's inputs under G1, and both engines side by side.
    ("plan-v41-flash-sglang-dspark-tp4", "txt",
     [V41, "--engine", "sglang", "--gpu", "h200", "--tp", "4", "--speculative-algorithm", "DSPARK",
      "--speculative-dspark-block-size", "5", "--max-running-requests", "32", "--chunked-prefill-size", "4096"]),
    ("plan-v4-flash-sglang-g1-h20", "txt",
     [V4, "--engine", "sglang", "--sglang-version", "G1", "--gpu", "h20", "--tp", "8", "--mem-fraction-static", "0.88",
      "--free-before-load-gib", "93.58", "--weights-gib", "36.57", "--load-overhead-gib", "0", "--cuda-graph-max-bs",
      "320", "--disable-radix-cache", "--sglang-kv-cache-dtype", "bf16", "--details"]),
    ("plan-v4-flash-engine-all-tp8", "json", [V4, "--engine", "all", "--tp", "8", "--json"]),
    ("plan-v4-flash-tp4-pp2-spec2", "json", [V4, "--tp", "4", "--pp", "2", "--spec-tokens", "2", "--json"]),
    ("plan-v32-tp8-dcp2-details", "txt", [V32, "--tp", "8", "--dcp", "2", "--details"]),
    ("plan-v32-dp8-ep", "json", [V32, "--tp", "1", "--dp", "8", "--enable-expert-parallel", "--json"]),
    # Engram's tables on the GPU (vLLM keeps them in host memory by default).
    ("plan-v41-flash-tp8-engram-gpu", "json", [V41, "--tp", "8", "--engram", "gpu", "--json"]),
    # Case A: a real v0.25.0 start-up log of V4-Flash on 2 x RTX PRO 6000, set against the plan of its flags;
    # then the same measured terms under 0.27, whose planner generation is not pinned (both are printed).
    ("plan-v4-flash-case-a-log", "txt", CASE_A + ["--vllm-version", "0.25.0", "--from-log", CASE_A_LOG]),
    ("plan-v4-flash-case-a-log-v027", "json",
     CASE_A + ["--vllm-version", "0.27", "--from-log", CASE_A_LOG, "--json"]),
    ("check-bundled-tp8", "txt", ["check"] + ALL + ["--tp", "8", "--min-concurrency", "8"]),
    ("check-bundled-tp8", "github.txt",
     ["check"] + ALL + ["--tp", "8", "--min-concurrency", "8", "--format", "github"]),
    ("check-bundled-tp8", "md", ["check"] + ALL + ["--tp", "8", "--min-concurrency", "8", "--format", "markdown"]),
    ("check-bundled-tp8", "json", ["check"] + ALL + ["--tp", "8", "--min-concurrency", "8", "--json"]),
    ("check-matrix-v4-flash", "txt", ["check", V4, "--matrix", "--tp", "1,2,4,8", "--dp", "1,8"]),
    ("check-matrix-v4-flash", "json", ["check", V4, "--matrix", "--tp", "1,2,4,8", "--dp", "1,8", "--json"]),
    ("schedule-sm90-sparse", "txt",
     ["schedule", "--kernel", "sm90-sparse", "--num-sms", "132", "--h-q", "64", "--lengths", "512,512,128,2048",
      "--extra-lengths", "512,0,512,512"]),
    ("gpus", "txt", ["gpus"]),
    ("formats", "txt", ["formats"]),
    ("report-v41-flash-tp8", "svg", ["report", V41, "--tp", "8", "-o", "{out}"]),
    ("report-v32-tp8", "html", ["report", V32, "--tp", "8", "-o", "{out}"]),
]

README_CASE = "plan-v41-flash.txt"
README_MARK = "The first screen"


def run_case(binary, source_dir, ext, args, tmp):
    """(exit code, the output's bytes, stderr) of one case."""
    out_path = os.path.join(tmp, "out." + ext.split(".")[-1])
    argv = [binary] + [out_path if a == "{out}" else a for a in args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLAPLAN_")}
    env["LC_ALL"] = "C"
    p = subprocess.run(argv, cwd=source_dir, capture_output=True, env=env, timeout=300)
    if "{out}" in args:
        with open(out_path, "rb") as f:
            data = f.read()
        os.remove(out_path)
    else:
        data = p.stdout
    return p.returncode, data, p.stderr.decode("utf-8", "replace")


def manifest_line(name, ext, code, args):
    return f"{name}.{ext} exit {code}: mla-plan {' '.join(args)}\n"


def first_difference(want, got):
    a, b = want.split(b"\n"), got.split(b"\n")
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else b"<end of file>"
        y = b[i] if i < len(b) else b"<end of file>"
        if x != y:
            return f"line {i + 1}: golden {x[:160]!r}, now {y[:160]!r}"
    return "the same lines (line endings differ)"


def readme_screen(source_dir):
    """The console block after README_MARK in README.md, with a final newline."""
    with open(os.path.join(source_dir, "README.md"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(README_MARK)), None)
    if start is None:
        return None
    fence = next((i for i in range(start, len(lines)) if lines[i].startswith("```")), None)
    if fence is None:
        return None
    end = next((i for i in range(fence + 1, len(lines)) if lines[i].startswith("```")), None)
    if end is None:
        return None
    return ("\n".join(lines[fence + 1:end]) + "\n").encode("utf-8")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", required=True, help="the mla-plan binary")
    ap.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--update", action="store_true", help="write the outputs as the new golden files")
    args = ap.parse_args()
    source_dir = os.path.abspath(args.source_dir)
    binary = os.path.abspath(args.binary)
    golden = os.path.join(source_dir, "tests", "golden")
    fails = []
    manifest = []
    with tempfile.TemporaryDirectory(prefix="mla-plan-golden-") as tmp:
        for name, ext, case_args in CASES:
            code, data, err = run_case(binary, source_dir, ext, case_args, tmp)
            if code == 70 or code < 0:
                fails.append(f"{name}.{ext}: exit {code}: {err.strip()}")
                continue
            manifest.append(manifest_line(name, ext, code, case_args))
            path = os.path.join(golden, f"{name}.{ext}")
            if args.update:
                os.makedirs(golden, exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
                continue
            try:
                with open(path, "rb") as f:
                    want = f.read()
            except OSError as e:
                fails.append(f"{name}.{ext}: no golden file ({e.strerror}); run with --update and review it")
                continue
            if want != data:
                fails.append(f"{name}.{ext} differs ({len(want)} bytes golden, {len(data)} now): "
                             f"{first_difference(want, data)}")
    manifest_path = os.path.join(golden, "MANIFEST")
    text = "".join(manifest)
    if args.update:
        with open(manifest_path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"golden: wrote {len(CASES)} outputs and MANIFEST under {golden}")
    else:
        try:
            with open(manifest_path, encoding="utf-8") as f:
                want = f.read()
        except OSError as e:
            want = None
            fails.append(f"MANIFEST: cannot be read ({e.strerror})")
        if want is not None and want != text:
            fails.append("MANIFEST differs (a case's exit code or arguments changed): " +
                         first_difference(want.encode(), text.encode()))
        on_disk = sorted(n for n in os.listdir(golden) if n != "MANIFEST") if os.path.isdir(golden) else []
        expected = sorted(f"{n}.{e}" for n, e, _ in CASES)
        for extra in sorted(set(on_disk) - set(expected)):
            fails.append(f"{extra}: a golden file of no case (remove it or add its case)")

    # The README's first screen is the golden output of its first command.
    screen = readme_screen(source_dir)
    if screen is None:
        fails.append(f"README.md: no console block after a line starting {README_MARK!r}")
    else:
        try:
            with open(os.path.join(golden, README_CASE), "rb") as f:
                want = f.read()
            if screen != want:
                fails.append(f"README.md's first screen is not tests/golden/{README_CASE}: " +
                             first_difference(want, screen))
        except OSError as e:
            fails.append(f"{README_CASE}: cannot be read ({e.strerror})")

    for f in fails:
        print("FAIL: " + f)
    if fails:
        print(f"golden: {len(fails)} failures over {len(CASES)} cases; if the change is meant: "
              f"python3 tests/golden_test.py --binary {args.binary} --update, then review git diff tests/golden")
        return 1
    print(f"golden: {len(CASES)} outputs and the README's first screen as committed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
