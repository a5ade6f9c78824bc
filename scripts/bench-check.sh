#!/usr/bin/env bash
# `mla-plan check` at its limits (docs/robustness.md, "At the limits"): generates the largest
# configs of each family (4096 backbone + 64 draft layers) under a temporary directory, runs
# check over the most configs one run takes and --matrix over the most rows, and prints for each
# case the wall time, the peak resident set size (/usr/bin/time -v) and the exit code.
#
# Usage: scripts/bench-check.sh [BINARY] [CASE...]
#   BINARY   default build/app/mla-plan
#   CASE     any of the names printed in the first column (default: all); a prefix selects every
#            case that starts with it (e.g. "matrix" or "check-v4").
# Exit 1 is a case past a limit (its message is shown); 2-4 are the configs' own results.
# Environment: CONFIGS (configs per check run, default 4096), ROWS (matrix rows, default 1024).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$root/build/app/mla-plan}"
shift || true
selected=("$@")
[ -x "$bin" ] || { echo "bench-check: no binary at $bin (build first)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-check: /usr/bin/time is needed (apt-get install time)" >&2; exit 1; }
configs="${CONFIGS:-4096}"
rows="${ROWS:-1024}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/mlaplan-bench-check.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

layers=4096
drafts=64

# compress_ratios of n entries: the first two 0, then a and b alternating; a tail of zeros.
ratios() {  # n drafts a b
  awk -v n="$1" -v d="$2" -v a="$3" -v b="$4" 'BEGIN {
    for (i = 0; i < n; ++i) printf "%s%d", (i ? ", " : ""), (i < 2 ? 0 : (i % 2 == 0 ? a : b));
    for (i = 0; i < d; ++i) printf ", 0";
  }'
}
# The largest config of each family (tests/test_limits.cpp makes them the same way), each as
# costly to plan as its family gets: V4.1 with every compressed layer its own cache source
# (ratios 2 and 1 alternating), V4.0 with 4 and 128 alternating (v4) and with every layer c4a
# (v4c4, the most cache objects per layer), V3.2.
printf '{"model_type": "deepseek_v41_text", "num_hidden_layers": %d, "num_nextn_predict_layers": %d, "compress_ratios": [%s]}\n' \
  "$layers" "$drafts" "$(ratios "$layers" "$drafts" 2 1)" >"$tmp/v41.json"
printf '{"model_type": "deepseek_v4", "num_hidden_layers": %d, "num_nextn_predict_layers": %d, "compress_ratios": [%s]}\n' \
  "$layers" "$drafts" "$(ratios "$layers" "$drafts" 4 128)" >"$tmp/v4.json"
printf '{"model_type": "deepseek_v4", "num_hidden_layers": %d, "num_nextn_predict_layers": %d, "compress_ratios": [%s]}\n' \
  "$layers" "$drafts" "$(ratios "$layers" "$drafts" 4 4)" >"$tmp/v4c4.json"
printf '{"model_type": "deepseek_v32", "num_hidden_layers": %d, "num_nextn_predict_layers": %d}\n' \
  "$layers" "$drafts" >"$tmp/v32.json"
# Released configs: V3.2 has the most layers (61 + 1), V4-Flash 43 + 1.
cp "$root/configs/deepseek-v3.2.json" "$tmp/real-v32.json"
cp "$root/configs/deepseek-v4-flash.json" "$tmp/real-v4.json"

# N paths to the same file, through N symlinks (so each path is its own argument).
paths() {  # family n
  local dir="$tmp/links-$1-$2"
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir"
    for ((i = 0; i < $2; ++i)); do ln -s "../$1.json" "$dir/$i.json"; done
  fi
  for ((i = 0; i < $2; ++i)); do printf '%s\n' "$dir/$i.json"; done
}

tps16="1,2,4,8,16,32,64,128,256,512,1024,2048,4096,1,2,4"
cases=()
for fam in v41 v4 v32; do
  cases+=("check-$fam-text|$fam|$configs|--format text")
done
for fmt in json github markdown; do cases+=("check-v4-$fmt|v4|$configs|--format $fmt"); done
for fam in v41 v4 v4c4 v32; do
  # Inside CheckLimits::max_matrix_layer_rows (131,072): the largest config at 16 TP sizes (66,560
  # layer rows), 31 of them at one TP size (128,960).
  cases+=("matrix-$fam-1x16tp|$fam|1|--matrix --tensor-parallel-size $tps16")
  cases+=("matrix-$fam-31x1tp-json|$fam|31|--matrix --json")
  [ "$fam" = v4c4 ] && continue
  # Past it (the limits before it was added took these): exit 1 at once.
  cases+=("matrix-$fam-$((rows / 16))x16tp|$fam|$((rows / 16))|--matrix --tensor-parallel-size $tps16")
  cases+=("matrix-$fam-${rows}x1tp-json|$fam|$rows|--matrix --json")
done
# The most rows (CheckLimits::max_matrix_rows) of released configs: 1024 x 62 = 63,488 layer rows for V3.2.
for fam in real-v32 real-v4; do
  cases+=("matrix-$fam-$((rows / 16))x16tp|$fam|$((rows / 16))|--matrix --tensor-parallel-size $tps16")
  cases+=("matrix-$fam-${rows}x1tp-json|$fam|$rows|--matrix --json")
done

wanted() {
  [ ${#selected[@]} -eq 0 ] && return 0
  local s
  for s in "${selected[@]}"; do [[ "$1" == "$s"* ]] && return 0; done
  return 1
}

printf '%-28s %8s %10s %5s %12s\n' "case" "seconds" "peak MB" "exit" "stdout bytes"
for c in "${cases[@]}"; do
  IFS='|' read -r name fam n flags <<<"$c"
  wanted "$name" || continue
  mapfile -t files < <(paths "$fam" "$n")
  set +e
  # shellcheck disable=SC2086  # the flags are words
  /usr/bin/time -v -o "$tmp/time" "$bin" check "${files[@]}" $flags >"$tmp/out" 2>"$tmp/err"
  code=$?
  set -e
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {
    n = split($2, p, ":"); s = 0; for (i = 1; i <= n; ++i) s = s * 60 + p[i]; printf "%.2f", s }' "$tmp/time")
  rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$tmp/time")
  printf '%-28s %8s %10s %5s %12s\n' "$name" "$secs" "$rss" "$code" "$(wc -c <"$tmp/out")"
  if [ "$code" -ne 0 ] && [ "$code" -ne 2 ] && [ "$code" -ne 3 ] && [ "$code" -ne 4 ]; then
    sed 's/^/    /' "$tmp/err" | cut -c1-160 | head -3
  fi
done
