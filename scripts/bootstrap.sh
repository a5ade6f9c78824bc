#!/usr/bin/env bash
# Installs what mla-plan needs on Debian 12 (apt-get, when missing), then configures and builds.
# Usage: scripts/bootstrap.sh [--test] [BUILD_DIR] [extra CMake arguments...]   (default BUILD_DIR: build)
#   BUILD_DIR        relative to the current directory; without it, build/ of the checkout
#   without --test  the planner alone: CMake, g++, Ninja, CLI11 and nlohmann/json, then the one
#                   target build/app/mla-plan (no tests, no CUDA kernels: they are not linked into it)
#   --test          (scripts/test.sh) also what the tests need (Catch2, python3-jsonschema,
#                   clang-format, dpkg-dev for the .deb's dependencies), then every target: the tests,
#                   the fuzz replays, and with the CUDA toolkit the kernels, mla-plan-cuda and the GPU tests
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
all=0
if [ "${1:-}" = "--test" ]; then
  all=1
  shift
fi
# BUILD_DIR as given is relative to where the script is run from (`mla-plan/scripts/bootstrap.sh
# mla-plan/build` builds in mla-plan/build); the default is the checkout's build/.
build="${1:-$root/build}"
shift || true
case "$build" in
  /*) ;;
  *) build="$PWD/$build" ;;
esac

packages=(cmake g++ ninja-build libcli11-dev nlohmann-json3-dev)
[ "$all" = 1 ] && packages+=(catch2 python3-jsonschema clang-format dpkg-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cd "$root"
# RelWithDebInfo with line tables only (-g1): backtraces keep file and line, and a clean build takes
# about a third less CPU than with full debug information.
config=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
  -DMLAPLAN_UNITY_BUILD=ON)
if [ "$all" = 1 ]; then
  cmake -S . -B "$build" "${config[@]}" -DMLAPLAN_REQUIRE_TESTS=ON "$@" >/dev/null
  cmake --build "$build" -j "$(nproc)"
else
  cmake -S . -B "$build" "${config[@]}" "$@" >/dev/null
  cmake --build "$build" -j "$(nproc)" --target mla-plan
fi
