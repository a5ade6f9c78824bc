#!/usr/bin/env python3
"""The man page and the shell completions against the command line (ctest: install.shell_files).

mla-plan writes them itself (`--man`, `--completions bash|zsh`, app/cli/completion.hpp) and the
build keeps them in BUILD/shell-files. This test reads the command line from the other side, the
`--help` of mla-plan and of each subcommand, and checks that every subcommand, every flag and
every value of a flag's fixed set is in each file, in that subcommand's part; that the files are
what the binary writes now; that bash completes a few command lines as a user would type them; that
zsh parses its file (where zsh is installed) and groff reads the page without a warning (where
groff is installed).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

FAILURES = []


def fail(message):
    FAILURES.append(message)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def subcommands(binary):
    """The subcommand names of `mla-plan --help`."""
    out = run([binary, "--help"]).stdout
    names, in_section = [], False
    for line in out.splitlines():
        if line.startswith("Subcommands:"):
            in_section = True
            continue
        if in_section:
            m = re.match(r"^  (\S+)\s", line)
            if m:
                names.append(m.group(1))
            elif line.strip() == "":
                break
    return names


def help_flags(binary, command):
    """The flags of `mla-plan COMMAND --help`: {name: set of values or None}, and the positionals."""
    out = run([binary, command, "--help"]).stdout
    flags, positionals, section = {}, [], ""
    for line in out.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
            continue
        m = re.match(r"^  (-[^ ]+)(?: (\S+))?", line)
        if m and section != "Positionals":
            values = None
            if m.group(2):
                v = re.search(r":\{([^}]*)\}", m.group(2))
                if v:
                    values = set(v.group(1).split(","))
            for name in m.group(1).split(","):
                flags[name] = values
            continue
        m = re.match(r"^  ([A-Z][A-Z_]*) ", line)
        if m and section == "Positionals":
            positionals.append(m.group(1))
    return flags, positionals


def word_in(word, text):
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None


def part(text, start_re, end_re):
    """The text from the line matching start_re to the next line matching end_re."""
    m = re.search(start_re, text, re.M)
    if not m:
        return None
    rest = text[m.end():]
    e = re.search(end_re, rest, re.M)
    return rest[:e.start()] if e else rest


def bash_complete(script, words, cword=None):
    """COMPREPLY of the bash completion for COMP_WORDS `words` (the last one being completed)."""
    if cword is None:
        cword = len(words) - 1
    array = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    program = (f"source '{script}'\nCOMP_WORDS=({array}); COMP_CWORD={cword}\n"
               "_mla_plan\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    r = run(["bash", "--norc", "--noprofile", "-c", program], cwd=os.path.dirname(script))
    if r.returncode != 0 or r.stderr:
        fail(f"bash completion of {words!r}: exit {r.returncode}, stderr {r.stderr.strip()!r}")
    return [w for w in r.stdout.split("\n") if w]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--dir", required=True, help="the build's shell-files directory")
    args = ap.parse_args()

    files = {"bash": "mla-plan.bash", "zsh": "_mla-plan", "man": "mla-plan.1"}
    text = {}
    for kind, name in files.items():
        path = os.path.join(args.dir, name)
        if not os.path.isfile(path):
            print(f"shell files: {path} is missing (the build writes it: target mla-plan-shell-files)")
            return 1
        with open(path, encoding="utf-8") as f:
            text[kind] = f.read()

    # The files the build wrote are what the binary writes now.
    for kind, flags in (("bash", ["--completions", "bash"]), ("zsh", ["--completions", "zsh"]), ("man", ["--man"])):
        r = run([args.binary] + flags)
        if r.returncode != 0 or r.stdout != text[kind]:
            fail(f"{files[kind]} is not what `mla-plan {' '.join(flags)}` writes now (exit {r.returncode})")
    r = run([args.binary, "--completions", "fish"])
    if r.returncode != 1 or "allowed: bash, zsh" not in r.stderr:
        fail(f"--completions fish: exit {r.returncode}, {r.stderr.strip()!r}")

    commands = subcommands(args.binary)
    if len(commands) < 8:
        fail(f"mla-plan --help lists {len(commands)} subcommands: {commands}")
    checked = 0
    for command in commands:
        flags, positionals = help_flags(args.binary, command)
        parts = {
            "bash": part(text["bash"], r"^_mla_plan_" + re.escape(command) + r"\(\) \{$", r"^\}$"),
            "zsh": part(text["zsh"], r"^_mla-plan_" + re.escape(command) + r"\(\) \{$", r"^\}$"),
            "man": part(text["man"], r'^\.SH "mla\\-plan ' + re.escape(command) + r'"$', r"^\.SH "),
        }
        checked += len(flags)
        for kind, body in parts.items():
            if body is None:
                fail(f"{files[kind]}: no part for the subcommand {command}")
                continue
            for name, values in flags.items():
                # man: the flag in bold where its entry starts (.TP, then its names)
                found = (("\\fB" + name.replace("-", "\\-") + "\\fR") in body) if kind == "man" else word_in(name, body)
                if not found:
                    fail(f"{files[kind]}: {command}'s flag {name} is missing")
                for v in sorted(values or ()):
                    if not word_in(v.replace("-", "\\-") if kind == "man" else v, body):
                        fail(f"{files[kind]}: {command} {name}'s value {v} is missing")
            for p in positionals:
                if kind != "bash" and p not in body:
                    fail(f"{files[kind]}: {command}'s argument {p} is missing")
        if not word_in(command, text["bash"].split("_mla_plan() {")[-1]):
            fail(f"mla-plan.bash: the subcommand {command} is not completed")
        if f"'{command}:" not in text["zsh"]:
            fail(f"_mla-plan: the subcommand {command} is not listed")
        if not re.search(r"^\.B " + re.escape(command) + "$", text["man"], re.M):
            fail(f"mla-plan.1: the subcommand {command} is not in COMMANDS")

    # bash, as a user types.
    if shutil.which("bash"):
        script = os.path.join(os.path.abspath(args.dir), files["bash"])
        cases = [
            (["mla-plan", "pl"], {"plan"}, set()),
            (["mla-plan", "--vers"], {"--version"}, set()),
            (["mla-plan", "plan", "--form"], {"--format"}, set()),
            (["mla-plan", "plan", "--format", ""], {"text", "json", "markdown"}, {"github"}),
            (["mla-plan", "check", "--format", "g"], {"github"}, set()),
            (["mla-plan", "check", "--kv-cache-dtype", "fp8_"], {"fp8_e4m3", "fp8_e5m2", "fp8_ds_mla"}, set()),
            (["mla-plan", "plan", "--format", "=", "j"], {"json"}, set()),
            (["mla-plan", "configs/x.json", "--gpus"], {"--gpus"}, set()),
            (["mla-plan", "x.json", "--gpu", "b2"], {"b200"}, set()),
            (["mla-plan", "vllm", "s"], {"serve"}, set()),
            (["mla-plan", "vllm", "serve", "M", "--max-model-l"], {"--max-model-len"}, set()),
            (["mla-plan", "--completions", ""], {"bash", "zsh"}, set()),
            (["mla-plan", "schedule", "--kernel", "sm100"], {"sm100-head64", "sm100-head128"}, set()),
        ]
        for words, want, unwanted in cases:
            got = set(bash_complete(script, words))
            if not want <= got or got & unwanted:
                fail(f"bash completes {' '.join(words)!r} to {sorted(got)}; want {sorted(want)}"
                     + (f" without {sorted(unwanted)}" if unwanted else ""))

    # zsh parses its file; groff reads the page without a warning.
    if shutil.which("zsh"):
        r = run(["zsh", "-n", os.path.join(args.dir, files["zsh"])])
        if r.returncode != 0:
            fail(f"zsh -n _mla-plan: {r.stderr.strip()}")
    else:
        print("shell files: zsh not installed: its file's syntax is not checked")
    if shutil.which("groff"):
        r = run(["groff", "-man", "-Tutf8", "-ww", "-z", os.path.join(args.dir, files["man"])])
        if r.returncode != 0 or r.stderr.strip():
            fail(f"groff -man -ww mla-plan.1: {r.stderr.strip()[:2000]}")
    else:
        print("shell files: groff not installed: the page is not rendered")

    for f in FAILURES:
        print("FAIL:", f)
    print(f"shell files: {len(commands)} subcommands, {checked} flags (with their aliases) checked in each file; "
          f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
