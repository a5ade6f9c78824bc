#!/usr/bin/env bash
# Builds and runs the GPU checks of mla-plan's own kernels (docs/kernels.md).
#
#   scripts/gpu-check.sh build   on a machine with nvcc (no GPU needed): configures build-gpu/
#                                (Release, static libstdc++/libgcc, tests on), builds the GPU test
#                                suite, the probe, the benchmark, mla-plan and mla-plan-cuda (which
#                                runs mla-plan's verify and bench), and copies the five binaries to
#                                build-gpu/carry/ (what travels to the GPU machine).
#   scripts/gpu-check.sh run     on the GPU machine, from the repository root: the GPU test suite,
#                                the [sanitize] cases under compute-sanitizer memcheck, racecheck
#                                and synccheck, then the timing benchmark. Logs go to $OUT (default
#                                build-gpu/gpu-check-out); a summary is printed last.
#   scripts/gpu-check.sh sanitize [FILTER]
#                                on the GPU machine, a kernel change's check in a few minutes: the
#                                test cases FILTER (default "[sanitize]") plain and under the three
#                                sanitizers, and the racecheck probe of kernels/bench/racecheck/
#                                (built by `build`) plain and under racecheck, each with a timeout.
#   scripts/gpu-check.sh gather [B]
#                                on the GPU machine: the gather probe (built by `build`), the
#                                decode's random 584-byte row reads alone at b B (default 256)
#                                against the sequential copy rate.
#   scripts/gpu-check.sh launch [S]
#                                on the GPU machine: the launch probe (built by `build`), what a
#                                call costs before its work: one to three empty kernels chained as
#                                the decode's are, and a split decode's chain (index, row, partial,
#                                merge) with the merge in the kernel or in a second one.
#   scripts/gpu-check.sh compare OLD NEW [H_Q:B[:KERNEL] ...]
#                                on the GPU machine: two builds of mlaplan_kernel_bench alternating
#                                row by row (COMPARE_ROUNDS rounds, default 2; COMPARE_REPLAYS
#                                replays, default 40), each row's us per call and new / old.
#   scripts/gpu-check.sh trace [H_Q B]
#                                on the GPU machine: the per-block timelines of the warp-specialised
#                                kernels (docs/kernels.md "Per-block timelines") at h_q H_Q, batch B
#                                (default 8 256), from the trace build that `TRACE=1 ... build` adds
#                                to the carry, summarised by scripts/ws-trace-summary.py.
#
# Environment: BUILD_DIR (default build-gpu), OUT, JOBS (build parallelism, default 2), TRACE (1: `build`
# also makes the trace build, build-trace/, sm_90a only, and carries its mlaplan_kernel_bench_trace),
# BENCH_REPLAYS (default 60), SANITIZER_TIMEOUT (seconds per sanitizer run, default 240).
set -u -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build-gpu}"
mode="${1:-build}"

# The three sanitizers on the test cases $3 of the suite $2, logs $1/{memcheck,racecheck,synccheck}.log,
# each run at most SANITIZER_TIMEOUT seconds (default 240); sets memcheck_rc, racecheck_rc, synccheck_rc.
sanitizers() {
  local o=$1 tests=$2 filter=$3 st="${SANITIZER_TIMEOUT:-240}"
  timeout "$st" compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" "$filter" 2>&1 | tee "$o/memcheck.log"
  memcheck_rc=${PIPESTATUS[0]}
  timeout "$st" compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 "$tests" "$filter" \
    2>&1 | tee "$o/racecheck.log"
  racecheck_rc=${PIPESTATUS[0]}
  timeout "$st" compute-sanitizer --tool synccheck --error-exitcode 9 "$tests" "$filter" 2>&1 | tee "$o/synccheck.log"
  synccheck_rc=${PIPESTATUS[0]}
}
sanitizer_summary() {
  echo "memcheck: rc $memcheck_rc, $(grep -E 'ERROR SUMMARY' "$1/memcheck.log" | tail -1)"
  echo "racecheck: rc $racecheck_rc, $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$1/racecheck.log" | tail -1)"
  echo "synccheck: rc $synccheck_rc, $(grep -E 'ERROR SUMMARY' "$1/synccheck.log" | tail -1)"
}

case "$mode" in
build)
  set -e
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMLAPLAN_STATIC_RUNTIME=ON \
    -DMLAPLAN_BUILD_TESTS=ON -DMLAPLAN_PTXAS_VERBOSE=ON >/dev/null
  cmake --build "$build" -j "${JOBS:-2}" --target mlaplan_gpu_tests mlaplan_gpu_probe mlaplan_kernel_bench mla-plan \
    mla-plan-cuda
  mkdir -p "$build/carry"
  # mla-plan hands verify and bench over to mla-plan-cuda in its own directory: the two travel together.
  cp "$build/tests/gpu/mlaplan_gpu_tests" "$build/tests/gpu/mlaplan_gpu_probe" \
     "$build/kernels/mlaplan_kernel_bench" "$build/app/mla-plan" "$build/app/mla-plan-cuda" "$build/carry/"
  # The racecheck probe (one file with its own main, sm_90a only; not a CMake target).
  "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
    -lineinfo -o "$build/carry/named_barrier_probe" "$root/kernels/bench/racecheck/named_barrier_probe.cu"
  # The gather probe (kernels/bench/gather/gather_probe.cu: the decode's row reads without the kernel).
  "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
    -o "$build/carry/gather_probe" "$root/kernels/bench/gather/gather_probe.cu"
  # The launch probe (kernels/bench/launch/launch_probe.cu: a call's fixed chain without its work).
  "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
    -o "$build/carry/launch_probe" "$root/kernels/bench/launch/launch_probe.cu"
  if [ "${TRACE:-0}" = 1 ]; then
    cmake -S "$root" -B "$root/build-trace" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMLAPLAN_STATIC_RUNTIME=ON \
      -DMLAPLAN_SM90_ONLY=ON -DCMAKE_CUDA_FLAGS=-DMLAPLAN_WS_TRACE -DCMAKE_CXX_FLAGS=-DMLAPLAN_WS_TRACE >/dev/null
    cmake --build "$root/build-trace" -j "${JOBS:-2}" --target mlaplan_kernel_bench
    cp "$root/build-trace/kernels/mlaplan_kernel_bench" "$build/carry/mlaplan_kernel_bench_trace"
  fi
  du -sh "$build/carry"
  ;;
launch)
  if [ ! -x "$build/carry/launch_probe" ]; then
    echo "gpu-check launch: no $build/carry/launch_probe: run scripts/gpu-check.sh build first" >&2
    exit 2
  fi
  timeout 120 "$build/carry/launch_probe" "${2:-4}"
  ;;
trace)
  out="${OUT:-$build/gpu-check-out}"
  mkdir -p "$out"
  if [ ! -x "$build/carry/mlaplan_kernel_bench_trace" ]; then
    echo "gpu-check trace: no $build/carry/mlaplan_kernel_bench_trace: run TRACE=1 scripts/gpu-check.sh build first" >&2
    exit 2
  fi
  cd "$root"
  timeout 60 "$build/carry/mlaplan_kernel_bench_trace" 5 "${2:-8}" "${3:-256}" >"$out/trace.log" 2>&1
  trace_rc=$?
  grep -vE "trace cta" "$out/trace.log"
  python3 "$root/scripts/ws-trace-summary.py" "$out/trace.log"
  echo "rc: trace $trace_rc"
  [ "$trace_rc" = 0 ]
  ;;
run)
  out="${OUT:-$build/gpu-check-out}"
  mkdir -p "$out"
  bin="$build/carry"
  export MLAPLAN_TESTDATA_DIR="$root/tests/data"
  cd "$root"
  {
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
    "$bin/mlaplan_gpu_probe"
  } 2>&1 | tee "$out/device.log"

  "$bin/mlaplan_gpu_tests" --durations yes 2>&1 | tee "$out/gpu-tests.log"
  tests_rc=${PIPESTATUS[0]}
  # (every decode case also runs the device's other paths through DecodeParams::force: the portable
  # kernel where sm90_ws runs, the 2-CTA pair on and off at h_q 128, an ordinary launch)

  sanitizers "$out" "$bin/mlaplan_gpu_tests" "[sanitize]"

  "$bin/mlaplan_kernel_bench" "${BENCH_REPLAYS:-60}" 2>&1 | tee "$out/bench.log"
  bench_rc=${PIPESTATUS[0]}

  # mla-plan verify on the bundled configs: the planned layouts and schedules on this GPU.
  verify_rc=0
  for c in deepseek-v4.1-flash deepseek-v4-flash deepseek-v3.2; do
    "$bin/mla-plan" verify "configs/$c.json" 2>&1 | tee "$out/verify-$c.txt"
    rc=${PIPESTATUS[0]}
    "$bin/mla-plan" verify "configs/$c.json" --json >"$out/verify-$c.json" 2>/dev/null
    echo "verify $c: exit $rc"
    # 0 = every cell passed (V3.2's 656-byte layout included)
    [ "$rc" = 0 ] || verify_rc=$rc
  done
  "$bin/mla-plan" verify configs/deepseek-v4.1-flash.json --kv-cache-dtype nvfp4_ds_mla --force 2>&1 \
    | tee "$out/verify-v41-nvfp4-forced.txt"
  # The FlashInfer plain-row layouts (an SM10x backend) on this GPU's kernels: bf16 1,024-byte and
  # fp8 512-byte rows, forced past the backend's architecture rule.
  for kv in bfloat16 fp8; do
    "$bin/mla-plan" verify configs/deepseek-v4.1-flash.json --attention-backend FLASHINFER_MLA_SPARSE_DSV41 \
      --kv-cache-dtype "$kv" --force 2>&1 | tee "$out/verify-v41-flashinfer-$kv.txt"
    rc=${PIPESTATUS[0]}
    echo "verify flashinfer $kv (forced): exit $rc"
    [ "$rc" = 0 ] || verify_rc=$rc
  done

  # mla-plan bench on the V4.1-Flash layout: every layer type at the perf table's batch sizes.
  # The threaded path on one GPU: four ranks of TP 2 x DP 2, each its own thread and device object.
  "$bin/mla-plan" verify configs/deepseek-v4.1-flash.json --device 0,0,0,0 --tp 2 --dp 2 2>&1 \
    | tee "$out/verify-v41-ranks.txt"
  rc=${PIPESTATUS[0]}
  echo "verify v4.1 TP 2 x DP 2 on --device 0,0,0,0: exit $rc"
  [ "$rc" = 0 ] || verify_rc=$rc

  "$bin/mla-plan" bench configs/deepseek-v4.1-flash.json --replays "${BENCH_REPLAYS:-60}" --json \
    >"$out/bench-v41.json" 2>"$out/bench-v41.err"
  benchcli_rc=$?
  "$bin/mla-plan" bench configs/deepseek-v4.1-flash.json --replays 20 --layer-type c1a 2>&1 | tee "$out/bench-v41.txt"
  echo "mla-plan bench: exit $benchcli_rc"

  # Diagnosis for later tuning (not a gate): Nsight Compute on the first decode and combine launch
  # of two shapes (h_q 64, b 1 and b 256). Skipped when ncu is missing or NCU=0.
  if [ "${NCU:-1}" != 0 ] && command -v ncu >/dev/null; then
    for b in 1 256; do
      timeout 120 ncu --clock-control none -k "regex:sparse_decode|combine" --launch-count 2 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        "$bin/mlaplan_kernel_bench" 5 64 "$b" 2>&1 || true
    done >"$out/ncu.log"
    grep -E "sparse_decode|combine_kernel|Duration|Throughput|Registers Per|Occupancy|Warp Cycles Per Issued" \
      "$out/ncu.log" | head -40 || true
  fi

  echo "==== summary ===="
  grep -E "^decode |^quantize|^scheduler|^e4m3 conversion" "$out/gpu-tests.log" || true
  grep -E "test cases|assertions" "$out/gpu-tests.log" | tail -2
  sanitizer_summary "$out"
  cat "$out/bench.log"
  echo "rc: tests $tests_rc, memcheck $memcheck_rc, racecheck $racecheck_rc, synccheck $synccheck_rc," \
    "bench $bench_rc, verify $verify_rc, bench cli $benchcli_rc"
  [ "$tests_rc" = 0 ] && [ "$memcheck_rc" = 0 ] && [ "$racecheck_rc" = 0 ] && [ "$synccheck_rc" = 0 ] &&
    [ "$bench_rc" = 0 ] && [ "$verify_rc" = 0 ] && [ "$benchcli_rc" = 0 ]
  ;;
sanitize)
  out="${OUT:-$build/gpu-check-out}"
  mkdir -p "$out"
  bin="$build/carry"
  filter="${2:-[sanitize]}"
  export MLAPLAN_TESTDATA_DIR="$root/tests/data"
  cd "$root"
  probe_rc=absent probe_race_rc=absent
  if [ -x "$bin/named_barrier_probe" ]; then
    timeout 60 "$bin/named_barrier_probe" 2>&1 | tee "$out/probe.log"
    probe_rc=${PIPESTATUS[0]}
    timeout 120 compute-sanitizer --tool racecheck --racecheck-report all "$bin/named_barrier_probe" 2>&1 |
      tee "$out/probe-racecheck.log"
    probe_race_rc=${PIPESTATUS[0]}
  fi
  timeout "${SANITIZER_TIMEOUT:-240}" "$bin/mlaplan_gpu_tests" "$filter" 2>&1 | tee "$out/gpu-tests.log"
  tests_rc=${PIPESTATUS[0]}
  sanitizers "$out" "$bin/mlaplan_gpu_tests" "$filter"
  echo "==== summary ($filter) ===="
  grep -E "test cases|assertions" "$out/gpu-tests.log" | tail -2
  sanitizer_summary "$out"
  # The probe is a diagnosis (which barrier patterns racecheck reports), not a gate.
  echo "probe: rc $probe_rc, under racecheck rc $probe_race_rc"
  [ -f "$out/probe-racecheck.log" ] && grep -E "RACECHECK SUMMARY|Write Thread|in void k<" "$out/probe-racecheck.log" |
    sed -E 's/^=+ +//' | sort | uniq -c | head -20
  echo "rc: tests $tests_rc, memcheck $memcheck_rc, racecheck $racecheck_rc, synccheck $synccheck_rc"
  [ "$tests_rc" = 0 ] && [ "$memcheck_rc" = 0 ] && [ "$racecheck_rc" = 0 ] && [ "$synccheck_rc" = 0 ]
  ;;
gather)
  if [ ! -x "$build/carry/gather_probe" ]; then
    echo "gpu-check gather: no $build/carry/gather_probe: run scripts/gpu-check.sh build first" >&2
    exit 2
  fi
  timeout 120 "$build/carry/gather_probe" "${2:-256}"
  ;;
compare)
  # Two builds of the kernel benchmark on the same GPU in one call, alternating per row so that
  # clock and thermal drift fall on both: scripts/gpu-check.sh compare OLD NEW [ROW ...], a ROW
  # being H_Q:B (B may end in v: variable lengths) or H_Q:B:KERNEL (MLAPLAN_BENCH_KERNEL for both).
  # Prints each run's us per call (the benchmark's planned-mode median) and new / old per row.
  old_bin=${2:?"usage: $0 compare OLD NEW [H_Q:B[:KERNEL] ...]"}
  new_bin=${3:?"usage: $0 compare OLD NEW [H_Q:B[:KERNEL] ...]"}
  shift 3
  rows=("$@")
  [ ${#rows[@]} -gt 0 ] || rows=(8:1 8:8 16:1 16:8)
  for x in "$old_bin" "$new_bin"; do
    [ -x "$x" ] || { echo "gpu-check compare: $x is not an executable" >&2; exit 2; }
  done
  bench_us() {  # BIN H_Q B KERNEL -> the row's us/call (column 7), or "-" when it did not run
    local line
    line=$(MLAPLAN_BENCH_KERNEL="$4" timeout 60 "$1" "${COMPARE_REPLAYS:-40}" "$2" "$3" 2>&1 | tail -1)
    awk '{ if (NF >= 14 && $7 ~ /^[0-9.]+$/) print $7; else print "-" }' <<<"$line"
  }
  median() { printf "%s\n" "$@" | sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  printf "%-24s %-24s %-24s %s\n" "row" "old us (each round)" "new us (each round)" "new / old (medians)"
  for row in "${rows[@]}"; do
    IFS=: read -r h b k <<<"$row"
    o=() n=()
    for ((i = 0; i < ${COMPARE_ROUNDS:-2}; ++i)); do
      o+=("$(bench_us "$old_bin" "$h" "$b" "${k:-}")")
      n+=("$(bench_us "$new_bin" "$h" "$b" "${k:-}")")
    done
    ratio=-
    if [[ " ${o[*]} ${n[*]} " != *" - "* ]]; then
      ratio=$(awk -v n="$(median "${n[@]}")" -v o="$(median "${o[@]}")" 'BEGIN { printf "%.3f", n / o }')
    fi
    printf "%-24s %-24s %-24s %s\n" "$row" "${o[*]}" "${n[*]}" "$ratio"
  done
  ;;
*)
  echo "usage: $0 build|run|sanitize [FILTER]|trace [H_Q B]|gather [B]|launch [S]|compare OLD NEW [ROW ...]" >&2
  exit 2
  ;;
esac
