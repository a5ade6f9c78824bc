#!/usr/bin/env bash
# Installs what the tests need, builds every target and runs the whole test suite (unit,
# end-to-end, fuzz replays, JSON Schemas, format; GPU tests skip without a GPU).
# Usage: scripts/test.sh              the normal build in build/
#        scripts/test.sh --sanitize   a second build in build-asan/ with ASan + UBSan (no CUDA), without
#                                     the checks the sanitizers add nothing to (run in the normal build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ "${1:-}" = "--sanitize" ]; then
  scripts/bootstrap.sh --test build-asan -DMLAPLAN_SANITIZE=ON -DMLAPLAN_ENABLE_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # What the sanitizers add nothing to is run once, in the normal build: the format and document
  # checks, the JSON Schemas and golden outputs (byte-identical in both builds), the browser, the
  # install and the .deb (a packaging check, not a code path), and the output-reproducibility tests
  # (the same code paths run under ASan in every other test). Also left to the normal build, to keep
  # CI under 30 minutes on 2 cores: verify's every-cell sweep (80 s under ASan; the other verify
  # tests run its code paths), the engine probe's absent and crashing cases (subprocess outcomes;
  # the bundle writer and reader run under ASan in "a corrupted output or plan is a FAIL"), and the
  # two slowest limit sweeps (87 s and 47 s under ASan; the other limits tests run under it).
  ctest --test-dir build-asan --output-on-failure --no-tests=error -j "$(nproc)" \
    -E '^(format\.|docs\.|json\.schemas|golden\.|report\.chromium|install\.|reproducible: |e2e: the same inputs give byte-identical output|verify runs the planner.s decode mode per cell|engine kernels: each absent case|engine kernels: no Python|limits: check$|limits: backbone and draft layers)'
else
  scripts/bootstrap.sh --test build
  ctest --test-dir build --output-on-failure --no-tests=error -j "$(nproc)"
fi
