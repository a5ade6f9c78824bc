#!/usr/bin/env python3
"""Every repository file that a comment or a document names exists (ctest: docs.references).

Scans the Markdown documents (README.md, docs/, the READMEs of subfolders) and the comments of the
sources (C++, CUDA, CMake, shell, Python) for paths of this repository's folders ending in a file
extension, such as `src/cache/layout.cpp` or kernels/src/sm90/decode.cu, and fails naming each one
that does not exist (from the root or from the naming file's folder), with the file and line
that names it. A path with a placeholder (NAME, TARGET, *, {...}, ...) names no one file and is
skipped; so are build outputs, NOT_OURS (another project's file, an example) and HISTORY.
"""

import os
import re
import sys

ROOTS = ("src", "include", "app", "kernels", "tests", "docs", "scripts", "fuzz", "configs", "schemas", "bench",
         ".ci", "cmake", "packaging", "tools")
EXTS = ("cpp", "hpp", "h", "cu", "cuh", "md", "py", "sh", "json", "txt", "cmake", "dict", "svg", "html", "yml",
        "yaml", "allowlist")
PATH_RE = re.compile(r"(?<![\w./-])((?:%s)/[A-Za-z0-9_.+/-]*\.(?:%s))(?![\w/])" %
                     ("|".join(re.escape(r) for r in ROOTS), "|".join(EXTS)))
# A bare source-file name in a source comment ("the kernel of decode_ws.cuh"): some file of the
# repository has that name.
BARE_RE = re.compile(r"(?<![\w/.-])([A-Za-z0-9_+-]+\.(?:cpp|hpp|cu|cuh))(?![\w/])")
PLACEHOLDER = re.compile(r"[A-Z]{3,}|\*|\.\.\.|\{|<")
SOURCE_EXTS = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".cmake", ".sh", ".py")
# Paths that name another project's file or an example, by the document that names them.
NOT_OURS = {
    ("src/model/safetensors.cpp", "docs/spec.md"): "git-lfs's pointer specification",
    ("docs/kernels.md", "tests/test_flash_mla_sparse_decoding.py"): "FlashMLA's test",
    ("docs/kernels.md", "tests/lib.py"): "FlashMLA's test helpers",
    ("docs/ci.md", "configs/x.json"): "an example annotation",
}
# A log of past states whose file names are those of their time (it says so).
HISTORY = {"docs/perf-history.md"}
SKIP_DIRS = {".git", "build", "build-asan", "build-fuzz", "build-gpu", "third_party", "node_modules",
             ".sxs-stage"}  # .sxs-stage: FlashMLA and CUTLASS staged for the side-by-side harness (ignored)


def comment_text(path, text):
    """The comment lines of a source file (C++ // and /* */ lines, # lines), others blanked."""
    out = []
    c_like = path.endswith((".cpp", ".hpp", ".h", ".cu", ".cuh"))
    in_block = False
    for line in text.split("\n"):
        s = line.strip()
        if c_like:
            if in_block:
                out.append(line)
                in_block = "*/" not in s
                continue
            if s.startswith("/*"):
                out.append(line)
                in_block = "*/" not in s
                continue
            i = line.find("//")
            out.append(line[i:] if i >= 0 else "")
        else:
            i = line.find("#")
            out.append(line[i:] if i >= 0 else "")
    return out


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    basenames = set()
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith("build")]
        basenames.update(names)
    missing = []
    checked = 0
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith("build")]
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir.startswith(("tests/golden", "fuzz/corpus", "fuzz/regressions")):
            continue
        for n in names:
            path = os.path.join(dirpath, n)
            rel = os.path.relpath(path, root)
            if rel in HISTORY:
                continue
            if n.endswith(".md"):
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.read().split("\n")
            elif n.endswith(SOURCE_EXTS) or n == "CMakeLists.txt":
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = comment_text(n, f.read())
            else:
                continue
            for i, line in enumerate(lines, 1):
                for m in PATH_RE.finditer(line):
                    ref = m.group(1).rstrip(".")
                    if PLACEHOLDER.search(ref):
                        continue
                    if (rel, ref) in NOT_OURS:
                        continue
                    checked += 1
                    # From the repository's root, or from the naming file's folder (kernels/CMakeLists.txt
                    # names its sources relative to its folder).
                    if not os.path.exists(os.path.join(root, ref)) and not os.path.exists(os.path.join(dirpath, ref)):
                        missing.append(f"{rel}:{i}: names {ref}, which does not exist")
                if n.endswith(".md"):
                    continue
                for m in BARE_RE.finditer(line):
                    if (rel, m.group(1)) in NOT_OURS:
                        continue
                    checked += 1
                    if m.group(1) not in basenames:
                        missing.append(f"{rel}:{i}: names {m.group(1)}, and no file of the repository has that name")
    for m in missing:
        print("FAIL: " + m)
    print(f"references: {checked} paths named in comments and documents, {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
