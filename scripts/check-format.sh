#!/usr/bin/env bash
# Checks that every C++ and CUDA source is formatted as .clang-format says, with Debian 12's
# clang-format 14 (other versions format some constructs differently, so they are not used: the
# check skips, exit 77, saying so). Exit 1 lists the files that differ; `scripts/check-format.sh
# --fix` rewrites them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
fmt=""
for c in clang-format-14 clang-format; do
  if command -v "$c" >/dev/null 2>&1 && "$c" --version | grep -q 'version 14\.'; then
    fmt="$c"
    break
  fi
done
if [ -z "$fmt" ]; then
  echo "check-format: SKIP: no clang-format 14 (Debian 12's clang-format package) on PATH" >&2
  exit 77
fi
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h' 2>/dev/null || true)
if [ "${#files[@]}" -eq 0 ]; then
  # Not a git checkout (a source archive): every source under the project's folders.
  mapfile -t files < <(find app src include kernels tests fuzz bench -type f \
    \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.h' \) | sort)
fi
if [ "${1:-}" = "--fix" ]; then
  "$fmt" --style=file -i "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! "$fmt" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ "${#bad[@]}" -gt 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format (scripts/check-format.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted as .clang-format says"
