#!/usr/bin/env bash
# The steps of the GitHub composite action (action.yml, docs/ci-action.md), one script so that they
# run the same way in a workflow and on a workstation (tests: install.action).
# Usage: scripts/action.sh install   puts an mla-plan in place and writes bin=PATH to $GITHUB_OUTPUT
#        scripts/action.sh check     runs `mla-plan check` on the configs with --format github (the
#                                    runner turns its lines into annotations), a Markdown summary to
#                                    $GITHUB_STEP_SUMMARY, exit-code=N to $GITHUB_OUTPUT; exits N
# The inputs come as the environment that action.yml sets (never spliced into the script):
#   INPUT_CONFIGS     config.json files, directories holding one, or globs (** included), separated
#                     by white space, relative to INPUT_WORKING_DIRECTORY
#   INPUT_TP, INPUT_GPU   --tensor-parallel-size and --gpu (empty: check's defaults)
#   INPUT_ARGS        more flags of check, separated by white space (no quoting, no globbing)
#   INPUT_SUMMARY     true: the Markdown table to the job summary as well
#   INPUT_WORKING_DIRECTORY   where the paths are relative to (default .)
#   INPUT_BINARY      an mla-plan already on the runner: used as it is
#   INPUT_DEB         a .deb of mla-plan (a path, or an https URL) to install instead of building
#   MLAPLAN_BIN       (check) the mla-plan to run: the install step's output
# Without INPUT_BINARY and INPUT_DEB, install builds mla-plan from this checkout (the action's own
# ref) with scripts/bootstrap.sh into $RUNNER_TEMP (about 2 minutes on 2 cores).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${GITHUB_OUTPUT:-/dev/null}"

install() {
  local bin
  if [ -n "${INPUT_BINARY:-}" ]; then
    bin="$(command -v "$INPUT_BINARY" || true)"
    [ -n "$bin" ] || {
      echo "::error title=mla-plan::binary '$INPUT_BINARY' is not there or not executable"
      exit 1
    }
  elif [ -n "${INPUT_DEB:-}" ]; then
    local deb="$INPUT_DEB" sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    case "$deb" in
      https://*)
        deb="${RUNNER_TEMP:-/tmp}/mla-plan.deb"
        curl -fsSL --retry 3 -o "$deb" "$INPUT_DEB"
        ;;
      *) deb="$(realpath "$deb")" ;;
    esac
    $sudo apt-get install -y -qq "$deb" >/dev/null
    bin=/usr/bin/mla-plan
  else
    local build="${RUNNER_TEMP:-/tmp}/mla-plan-build"
    "$root/scripts/bootstrap.sh" "$build"
    bin="$build/app/mla-plan"
  fi
  "$bin" --version
  echo "bin=$bin" >>"$out"
}

check() {
  local bin="${MLAPLAN_BIN:-mla-plan}"
  cd "${INPUT_WORKING_DIRECTORY:-.}"
  # The configs: split at white space, globs expanded (** over directories); a pattern that
  # matches nothing is passed on as it is, for mla-plan to report.
  local configs=() flags=() extra=()
  shopt -s globstar
  # shellcheck disable=SC2206  # splitting and globbing meant
  configs=(${INPUT_CONFIGS:-})
  shopt -u globstar
  if [ "${#configs[@]}" = 0 ]; then
    echo "::error title=mla-plan::no configs given (the action's input 'configs')"
    exit 1
  fi
  [ -z "${INPUT_TP:-}" ] || flags+=(--tensor-parallel-size "$INPUT_TP")
  [ -z "${INPUT_GPU:-}" ] || flags+=(--gpu "$INPUT_GPU")
  set -f
  # shellcheck disable=SC2206  # splitting meant, globbing off
  extra=(${INPUT_ARGS:-})
  set +f
  local code=0
  "$bin" check "${configs[@]}" "${flags[@]}" "${extra[@]}" --format github || code=$?
  if [ "${INPUT_SUMMARY:-true}" = true ] && [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ "$code" != 1 ]; then
    "$bin" check "${configs[@]}" "${flags[@]}" "${extra[@]}" --format markdown >>"$GITHUB_STEP_SUMMARY" 2>/dev/null ||
      true
  fi
  echo "exit-code=$code" >>"$out"
  exit "$code"
}

case "${1:-}" in
  install) install ;;
  check) check ;;
  *)
    echo "usage: scripts/action.sh install|check" >&2
    exit 2
    ;;
esac
