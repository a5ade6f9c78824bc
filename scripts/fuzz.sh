#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and runs one (docs/fuzzing.md).
# Usage: scripts/fuzz.sh TARGET [RUNS] [extra libFuzzer flags...]
#   TARGET  config | checkpoint | cli | cli_args (the argument parser alone: parse_cli, app/cli/cli.hpp)
#   RUNS    executions (default 1000000); -1 runs until stopped
# Examples: scripts/fuzz.sh config 10000000
#           scripts/fuzz.sh cli 100000 -jobs=1 -print_final_stats=1
#           FUZZ_BUILD_ONLY=1 scripts/fuzz.sh config
# New inputs go to build-fuzz/corpus/TARGET (the committed seeds in fuzz/corpus/TARGET, and for
# cli_args those of cli, are read, not written); crashes go to build-fuzz/artifacts/TARGET/. The
# last lines printed are libFuzzer's stats.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${1:-}"
runs="${2:-1000000}"
shift $(( $# < 2 ? $# : 2 ))
# Per target: the longest input, the dictionary, and the committed corpus it reads besides its own.
shared_corpus=()
case "$target" in
  config) max_len=65536 dict=config ;;
  checkpoint) max_len=65536 dict=checkpoint ;;
  cli) max_len=4096 dict=cli ;;
  cli_args) max_len=4096 dict=cli shared_corpus=(cli) ;;  # the input of fuzz_cli
  *) echo "usage: scripts/fuzz.sh config|checkpoint|cli|cli_args [RUNS] [libFuzzer flags...]" >&2; exit 1 ;;
esac

packages=(clang libclang-rt-14-dev cmake ninja-build libcli11-dev nlohmann-json3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "fuzz: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

build="$root/build-fuzz"
jobs="${FUZZ_BUILD_JOBS:-2}"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLAPLAN_FUZZ=ON \
  -DMLAPLAN_ENABLE_CUDA=OFF -DMLAPLAN_BUILD_TESTS=OFF -DMLAPLAN_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target "fuzz_$target"
[ -n "${FUZZ_BUILD_ONLY:-}" ] && exit 0

corpus="$build/corpus/$target"
artifacts="$build/artifacts/$target"
work="$build/work/$target"  # the working directory: empty, so relative names in arguments find nothing
log="$build/fuzz_$target.log"
mkdir -p "$corpus" "$artifacts" "$work"
inputs=("$corpus")
for c in "$target" "${shared_corpus[@]}"; do
  if [ -d "$root/fuzz/corpus/$c" ]; then inputs+=("$root/fuzz/corpus/$c"); fi
done
[ -d "$root/fuzz/regressions/$target" ] && inputs+=("$root/fuzz/regressions/$target")
# malloc_context_size=0 and a 16 MiB quarantine (default: 30 frames, 256 MiB) make a run about twice
# as fast; detection is the same, but reports carry no allocation stacks: for those, re-run the
# artifact with ASAN_OPTIONS=detect_leaks=1 (docs/fuzzing.md).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:malloc_context_size=0:quarantine_size_mb=16}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# fuzz_checkpoint unpacks every input into a directory under TMPDIR: in memory (tmpfs) its files
# cost less to write and remove (a fifth of a run on a disk-backed /tmp).
if [ "$target" = checkpoint ] && [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  export TMPDIR=/dev/shm
fi
cd "$work"
start=$(date +%s)
set +e
"$build/fuzz/fuzz_$target" "${inputs[@]}" -dict="$root/fuzz/$dict.dict" -max_len="$max_len" -runs="$runs" \
  -rss_limit_mb=2048 -timeout=30 -artifact_prefix="$artifacts/" -print_final_stats=1 "$@" 2>&1 | tee "$log"
code=${PIPESTATUS[0]}
set -e
echo "fuzz: fuzz_$target exited $code after $(( $(date +%s) - start )) s (log: $log)"
grep -E '^#[0-9]+ +DONE|^Done [0-9]+ runs|^stat::' "$log" || true
exit "$code"
