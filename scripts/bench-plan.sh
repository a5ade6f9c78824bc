#!/usr/bin/env bash
# Wall time of `mla-plan CONFIG` (the whole plan: config, weights, placement, vLLM's budget and KV
# numbers, the decode schedules, rendering) on the bundled configs: the median and the minimum of
# RUNS runs of the process each, output to /dev/null. A benchmark, not a test: it asserts nothing.
#
# Usage: scripts/bench-plan.sh [BINARY] [-- PLAN FLAGS...]   (default flags: --tp 8)
# Environment: RUNS (default 31).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$root/build/app/mla-plan}"
shift || true
[ "${1:-}" = "--" ] && shift
flags=("$@")
[ ${#flags[@]} -eq 0 ] && flags=(--tp 8)
[ -x "$bin" ] || { echo "bench-plan: no binary at $bin (build first)" >&2; exit 1; }
runs="${RUNS:-31}"
for cfg in "$root"/configs/deepseek-*.json; do
  python3 - "$bin" "$cfg" "$runs" "${flags[@]}" <<'PY'
import subprocess, sys, time
binary, cfg, runs, flags = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
times = []
for _ in range(runs):
    t = time.perf_counter()
    rc = subprocess.run([binary, cfg, *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    times.append((time.perf_counter() - t) * 1000)
times.sort()
print(f"{cfg.rsplit('/', 1)[-1]:28s} median {times[len(times) // 2]:6.2f} ms  min {times[0]:6.2f} ms  exit {rc}")
PY
done
