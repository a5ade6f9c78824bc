#!/bin/sh
# mlaplan_kernel_bench's argument and environment errors, checked before any device is touched, so
# this runs without a GPU: each bad input exits 1 (usage) with a one-line message naming it.
#   tests/gpu/kernel_bench_usage.sh PATH_TO_mlaplan_kernel_bench
bench=$1
fails=0
expect() {  # expect MESSAGE_FRAGMENT ENV_VALUE ARGS...
  want=$1 kernel=$2
  shift 2
  out=$(MLAPLAN_BENCH_KERNEL="$kernel" "$bench" "$@" 2>&1)
  rc=$?
  if [ "$rc" != 1 ] || ! printf '%s\n' "$out" | grep -qF -- "$want" || [ "$(printf '%s\n' "$out" | wc -l)" != 1 ]; then
    echo "FAIL: MLAPLAN_BENCH_KERNEL='$kernel' $*: exit $rc, output: $out (wanted exit 1 and: $want)"
    fails=$((fails + 1))
  fi
}
expect "MLAPLAN_BENCH_KERNEL 'bogus' is not a decode kernel; allowed generic, sm90_ws, small_heads, small_heads_sm90 or small_heads_lean" bogus 5
expect "MLAPLAN_BENCH_KERNEL 'small_heads ' is not a decode kernel" "small_heads " 5
expect "MLAPLAN_BENCH_KERNEL 'a\\x01b' is not a decode kernel" "$(printf 'a\001b')" 5
expect "replays '3' is out of range" "" 3
expect "h_q must be 0 (all), 8, 16, 64 or 128" "" 5 7
expect "b '2000' is out of range; allowed 0..1024" "" 5 8 2000
[ "$fails" = 0 ] && echo "kernel_bench.usage: 6 cases passed"
[ "$fails" = 0 ]
