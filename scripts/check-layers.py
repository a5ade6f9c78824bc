#!/usr/bin/env python3
"""The core library's folders form floors: each includes only its own and lower ones (ctest: docs.layers).

src/ and include/mlaplan/ are cut into folders that follow make_plan from the bottom up (the order
of FLOORS; docs/design.md draws it). A header or source of one floor may include the headers of
its own floor and of the floors below it, never one above: this script fails naming each include
that points up, and each header or source that lies outside every floor. Folders of one floor may
include each other's headers only when they are the same folder; a second engine is a sibling of
engine/vllm and may not include it.
"""

import os
import re
import sys

# Lowest first. Folders on one line share a floor and do not see each other.
FLOORS = [
    ["base"],
    ["model", "hardware"],
    ["rules"],
    ["cache"],
    ["engine/vllm", "engine/sglang"],
    ["plan"],
    ["gpu_check"],
]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"mlaplan/([^"]+)"', re.M)
TOP_LEVEL = {"version.hpp"}  # generated at configure time; includes nothing


def folder_of(rel):
    """The floor folder of a path relative to src/ or include/mlaplan/, or None."""
    for i, floor in enumerate(FLOORS):
        for f in floor:
            if rel.startswith(f + "/"):
                return i, f
    return None


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = []
    checked = 0
    for base in ("src", os.path.join("include", "mlaplan")):
        top = os.path.join(root, base)
        for dirpath, _, names in os.walk(top):
            for n in names:
                if not n.endswith((".cpp", ".hpp")):
                    continue
                path = os.path.join(dirpath, n)
                rel = os.path.relpath(path, top).replace(os.sep, "/")
                where = folder_of(rel)
                if where is None:
                    problems.append("%s/%s: not in any floor folder (%s)" %
                                    (base, rel, ", ".join(f for fl in FLOORS for f in fl)))
                    continue
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                for m in INCLUDE_RE.finditer(text):
                    inc = m.group(1)
                    checked += 1
                    if inc in TOP_LEVEL:
                        continue
                    target = folder_of(inc)
                    line = text.count("\n", 0, m.start()) + 1
                    if target is None:
                        problems.append("%s/%s:%d: includes mlaplan/%s, which is in no floor folder" %
                                        (base, rel, line, inc))
                    elif target[0] > where[0]:
                        problems.append("%s/%s:%d: includes mlaplan/%s: %s is above %s" %
                                        (base, rel, line, inc, target[1], where[1]))
                    elif target[0] == where[0] and target[1] != where[1]:
                        problems.append("%s/%s:%d: includes mlaplan/%s: %s and %s are siblings" %
                                        (base, rel, line, inc, target[1], where[1]))
    for p in problems:
        print(p)
    if checked == 0:
        print("check-layers: no includes found; is the tree where this script expects it?")
        return 1
    if problems:
        print("check-layers: %d include(s) break the floors" % len(problems))
        return 1
    print("check-layers: %d includes, every one within its floor or below" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
