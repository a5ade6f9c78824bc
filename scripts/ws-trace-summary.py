#!/usr/bin/env python3
"""Per-span medians of the warp-specialised kernels' per-block timelines.

Reads the lines `trace cta C role R: t:e t:e ...` (the 64-head kernel) and `small trace cta C role
R: ...` (the small-head kernel) that a
-DMLAPLAN_WS_TRACE build of mlaplan_kernel_bench prints (docs/kernels.md, "Per-block timelines"),
and prints for each traced warp every span between consecutive events (event a -> event b): how
often it occurs and its median, mean and total in SM cycles, the largest total first.

Usage: scripts/ws-trace-summary.py LOG [LABEL]   (LABEL: "trace" or "small trace"; default both)
"""
import re
import statistics
import sys


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    labels = (sys.argv[2],) if len(sys.argv) == 3 else ("trace", "small trace")
    try:
        with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError as e:
        print(f"ws-trace-summary: cannot read {sys.argv[1]!r}: {e.strerror}", file=sys.stderr)
        return 1
    found = 0
    for line in lines:
        m = re.match(r"^(small trace|trace) cta (\d+) role (\d+):(.*)$", line.rstrip("\n"))
        if not m or m.group(1) not in labels:
            continue
        found += 1
        events = []
        for item in m.group(4).split():
            t, _, e = item.partition(":")
            if t.isdigit() and e.isdigit():
                events.append((int(t), int(e)))
        head = f"{m.group(1)} cta {m.group(2)} role {m.group(3)}"
        if len(events) < 2:
            print(f"{head}: {len(events)} events")
            continue
        print(f"{head}: {len(events)} events over {events[-1][0] - events[0][0]} cycles")
        spans = {}
        for (ta, ea), (tb, eb) in zip(events, events[1:]):
            spans.setdefault((ea, eb), []).append(tb - ta)
        for (ea, eb), v in sorted(spans.items(), key=lambda kv: -sum(kv[1])):
            print(f"  {ea:>2} -> {eb:<2} n {len(v):4d}  median {statistics.median(v):9.0f}"
                  f"  mean {statistics.mean(v):9.0f}  total {sum(v):10d}")
    if found == 0:
        print(f"ws-trace-summary: no trace lines ({' / '.join(labels)}) in {sys.argv[1]!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the reader (e.g. head) stopped early
        sys.exit(0)
