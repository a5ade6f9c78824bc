#!/usr/bin/env bash
# Installs what the tests need, builds every target and runs the whole test suite (unit,
# end-to-end, fuzz replays, JSON Schemas, format; GPU tests skip without a GPU).
# Usage: scripts/test.sh              the normal build in build/
#        scripts/test.sh --sanitize   a second build in build-asan/ with ASan + UBSan (no CUDA)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ "${1:-}" = "--sanitize" ]; then
  scripts/bootstrap.sh --test build-asan -DMLAPLAN_SANITIZE=ON -DMLAPLAN_ENABLE_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir build-asan --output-on-failure --no-tests=error -j "$(nproc)"
else
  scripts/bootstrap.sh --test build
  ctest --test-dir build --output-on-failure --no-tests=error -j "$(nproc)"
fi
