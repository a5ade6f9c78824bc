#!/usr/bin/env python3
"""The GitHub composite action (action.yml) on this machine (ctest: install.action).

- action.yml is valid YAML (where PyYAML is installed), a composite action whose steps run
  scripts/action.sh with a shell, every input reaches a step's environment, and every INPUT_
  variable scripts/action.sh reads is set by a step.
- Its check step, run as the runner runs it (the same environment, GITHUB_OUTPUT and
  GITHUB_STEP_SUMMARY files), on the bundled configs: exit 0, the exit code in GITHUB_OUTPUT, the
  Markdown table in the summary, nothing on stdout but workflow commands; on a broken config next
  to a good one (found by a glob): exit 2 and an ::error annotation with the file and line.
- Its install step with the `binary` input writes bin= to GITHUB_OUTPUT.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

FAILURES = []


def fail(message):
    FAILURES.append(message)


def action_step(source_dir, step, env, cwd):
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GITHUB_ACTION_PATH": source_dir}
    full.update(env)
    return subprocess.run([os.path.join(source_dir, "scripts", "action.sh"), step], env=full, cwd=cwd,
                          capture_output=True, text=True)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--binary", required=True)
    args = ap.parse_args()
    src = os.path.abspath(args.source_dir)
    binary = os.path.abspath(args.binary)

    action_text = read(os.path.join(src, "action.yml"))
    script_text = read(os.path.join(src, "scripts", "action.sh"))
    try:
        import yaml
    except ImportError:
        yaml = None
        print("action: PyYAML not installed: action.yml is not parsed")
    action = None
    if yaml is not None:
        try:
            action = yaml.safe_load(action_text)
        except yaml.YAMLError as e:
            fail(f"action.yml is not valid YAML: {e}")
    if action is not None:
        if action.get("runs", {}).get("using") != "composite":
            fail("action.yml: runs.using is not composite")
        steps = action["runs"]["steps"]
        step_env = {}
        for s in steps:
            if s.get("shell") != "bash":
                fail(f"action.yml: step {s.get('name')!r} has no shell: bash")
            if "scripts/action.sh" not in s.get("run", ""):
                fail(f"action.yml: step {s.get('name')!r} does not run scripts/action.sh")
            step_env.update(s.get("env", {}))
        used = set(re.findall(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", action_text))
        for name in action["inputs"]:
            if name not in used:
                fail(f"action.yml: the input {name!r} reaches no step")
        for var in sorted(set(re.findall(r"\b(INPUT_[A-Z_]+)\b", script_text))):
            if var not in step_env:
                fail(f"scripts/action.sh reads {var}, which no step of action.yml sets")
        for ref in re.findall(r"steps\.(\w+)\.outputs\.([\w-]+)", action_text):
            step_ids = {s.get("id") for s in steps}
            if ref[0] not in step_ids:
                fail(f"action.yml: steps.{ref[0]} is no step")
            elif ref[1] not in ("bin", "exit-code"):
                fail(f"action.yml: steps.{ref[0]}.outputs.{ref[1]} is not written by scripts/action.sh")

    with tempfile.TemporaryDirectory() as tmp:
        # install with the binary input
        out = os.path.join(tmp, "install-output")
        r = action_step(src, "install", {"INPUT_BINARY": binary, "GITHUB_OUTPUT": out}, tmp)
        if r.returncode != 0 or f"bin={binary}\n" not in (read(out) if os.path.exists(out) else ""):
            fail(f"install with binary: exit {r.returncode}, {r.stdout!r} {r.stderr!r}")

        # check on the bundled configs, as a workflow runs it from the repository
        out, summary = os.path.join(tmp, "check-output"), os.path.join(tmp, "summary.md")
        env = {"MLAPLAN_BIN": binary, "INPUT_CONFIGS": "configs/*.json", "INPUT_TP": "8", "INPUT_GPU": "h200",
               "INPUT_ARGS": "--min-concurrency 1", "INPUT_SUMMARY": "true", "INPUT_WORKING_DIRECTORY": src,
               "GITHUB_OUTPUT": out, "GITHUB_STEP_SUMMARY": summary}
        r = action_step(src, "check", env, tmp)
        if r.returncode != 0:
            fail(f"check of configs/*.json: exit {r.returncode}: {r.stdout[-2000:]} {r.stderr[-2000:]}")
        if "exit-code=0\n" not in (read(out) if os.path.exists(out) else ""):
            fail("check of configs/*.json: no exit-code=0 in GITHUB_OUTPUT")
        table = read(summary) if os.path.exists(summary) else ""
        n = len([c for c in os.listdir(os.path.join(src, "configs")) if c.endswith(".json")])
        if f"**{n} of {n} configs passed**" not in table:
            fail(f"check of configs/*.json: the summary lacks '{n} of {n} configs passed': {table[-500:]!r}")
        for line in r.stdout.splitlines():
            if line and not line.startswith("::"):
                fail(f"check: stdout has a line that is no workflow command: {line!r}")

        # a broken config next to a good one, found by a ** glob
        repo = os.path.join(tmp, "repo")
        os.makedirs(os.path.join(repo, "models", "bad"))
        os.makedirs(os.path.join(repo, "models", "good"))
        shutil.copy(os.path.join(src, "configs", "deepseek-v3.2.json"), os.path.join(repo, "models", "good", "config.json"))
        with open(os.path.join(repo, "models", "bad", "config.json"), "w", encoding="utf-8") as f:
            f.write('{\n  "model_type": "deepseek_v32",\n  "num_attention_heads": \n')
        out = os.path.join(tmp, "bad-output")
        env = {"MLAPLAN_BIN": binary, "INPUT_CONFIGS": "models/**/config.json", "INPUT_TP": "8",
               "INPUT_WORKING_DIRECTORY": repo, "GITHUB_OUTPUT": out, "GITHUB_STEP_SUMMARY": summary}
        r = action_step(src, "check", env, tmp)
        if r.returncode != 2:
            fail(f"check of a broken config: exit {r.returncode}, not 2: {r.stdout!r} {r.stderr!r}")
        if not re.search(r"^::error file=models/bad/config\.json,line=\d+", r.stdout, re.M):
            fail(f"check of a broken config: no ::error annotation of models/bad/config.json: {r.stdout!r}")
        if "exit-code=2\n" not in (read(out) if os.path.exists(out) else ""):
            fail("check of a broken config: no exit-code=2 in GITHUB_OUTPUT")

        # no configs
        r = action_step(src, "check", {"MLAPLAN_BIN": binary, "INPUT_CONFIGS": " ", "GITHUB_OUTPUT": out}, tmp)
        if r.returncode != 1 or "::error" not in r.stdout:
            fail(f"check without configs: exit {r.returncode}, {r.stdout!r}")

    for f in FAILURES:
        print("FAIL:", f)
    print(f"action: {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
