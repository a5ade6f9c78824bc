#!/usr/bin/env bash
# ctest install.package: the install and the .deb of a built tree, without root and without
# building anything (docs/install.md).
#   1. `cmake --install BUILD --prefix SCRATCH`: the binary, the man page, the completions, the
#      schemas and the configs are in place, and the installed mla-plan runs outside the tree:
#      --version and one plan of the bundled V4.1-Flash config.
#   2. `cpack -G DEB`, then `dpkg-deb -x` into a scratch root: the package's name, version and
#      dependencies, the same files under usr/, and the same two runs of root/usr/bin/mla-plan.
# Usage: packaging/test-install.sh BUILD_DIR   (exit 77, skipped, where cpack or dpkg-deb is missing
# for step 2; step 1 runs everywhere)
set -euo pipefail
build="$(cd "$1" && pwd)"
work="$build/install-test"
rm -rf "$work"
mkdir -p "$work"
cd "$work"  # outside the source tree: the installed binary finds nothing there

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
t0=$(date +%s%N)
elapsed() {
  local ms=$((($(date +%s%N) - t0) / 1000000))
  printf '%d.%d s' $((ms / 1000)) $((ms % 1000 / 100))
}

# The files of an install under ROOT/PREFIX, and the installed binary's two runs.
check_tree() {
  local root="$1" what="$2" zsh_dir="$3" f
  for f in bin/mla-plan bin/mla_plan_engine_probe.py share/man/man1/mla-plan.1 share/bash-completion/completions/mla-plan \
    "share/zsh/$zsh_dir/_mla-plan" share/mla-plan/schemas/plan.schema.json \
    share/mla-plan/schemas/check.schema.json share/mla-plan/configs/deepseek-v4.1-flash.json \
    share/doc/mla-plan/README.md; do
    [ -f "$root/$f" ] || fail "$what: $f is missing"
  done
  [ -x "$root/bin/mla-plan" ] || return 0
  local version
  version="$(env -i PATH=/usr/bin:/bin "$root/bin/mla-plan" --version)" || fail "$what: mla-plan --version failed"
  [ "$version" = "$expected_version" ] || fail "$what: mla-plan --version says '$version', not '$expected_version'"
  local code=0
  env -i PATH=/usr/bin:/bin "$root/bin/mla-plan" "$root/share/mla-plan/configs/deepseek-v4.1-flash.json" --tp 8 \
    >"$work/plan.txt" 2>"$work/plan.err" || code=$?
  [ "$code" = 0 ] || fail "$what: mla-plan CONFIG --tp 8 exited $code: $(head -c 500 "$work/plan.err")"
  grep -q '^fit: FITS on 8 x h200' "$work/plan.txt" || fail "$what: the plan does not say 'fit: FITS on 8 x h200'"
  # The completion names the binary it completes.
  grep -q '^complete -F _mla_plan mla-plan' "$root/share/bash-completion/completions/mla-plan" ||
    fail "$what: the bash completion does not complete mla-plan"
}

expected_version="$("$build/app/mla-plan" --version)"

# 1. cmake --install into a scratch prefix.
if ! cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1; then
  cat "$work/install.log"
  fail "cmake --install failed"
fi
check_tree "$work/prefix" "cmake --install" site-functions
echo "install.package: cmake --install checked ($(elapsed))"

# 2. The .deb, unpacked into a scratch root.
if ! command -v cpack >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "install.package: skipped the .deb: cpack or dpkg-deb is not installed"
  [ "$failures" = 0 ] || exit 1
  exit 77
fi
if ! cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkg" >"$work/cpack.log" 2>&1; then
  cat "$work/cpack.log"
  fail "cpack -G DEB failed"
  exit 1
fi
debs=("$work"/pkg/*.deb)
[ "${#debs[@]}" = 1 ] && [ -f "${debs[0]}" ] || {
  fail "cpack made ${#debs[@]} packages: ${debs[*]}"
  exit 1
}
deb="${debs[0]}"
package="$(dpkg-deb -f "$deb" Package)"
version="$(dpkg-deb -f "$deb" Version)"
depends="$(dpkg-deb -f "$deb" Depends)"
maintainer="$(dpkg-deb -f "$deb" Maintainer)"
[ "$package" = mla-plan ] || fail "the package is '$package', not mla-plan"
[ "mla-plan $version" = "$expected_version" ] || fail "the package's version $version is not mla-plan's ($expected_version)"
case "$depends" in *libc6*libstdc++6* | *libstdc++6*libc6*) ;; *) fail "Depends: '$depends' lacks libc6 or libstdc++6" ;; esac
[ -n "$maintainer" ] || fail "the package has no Maintainer"
dpkg-deb -x "$deb" "$work/root"
check_tree "$work/root/usr" "the .deb" vendor-completions
# Nothing outside /usr, and nothing of the build directory.
stray="$(dpkg-deb -c "$deb" | awk '{print $6}' | grep -Ev '^\./(usr/)?$|^\./usr/(bin|share)/' || true)"
[ -z "$stray" ] || fail "the .deb installs outside /usr/bin and /usr/share: $(echo "$stray" | head -5)"
echo "install.package: $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB), Depends: $depends ($(elapsed))"

[ "$failures" = 0 ] || {
  echo "install.package: $failures failure(s)"
  exit 1
}
echo "install.package: passed ($(elapsed))"
