#!/usr/bin/env bash
# Side-by-side harness: puts FlashMLA (commit 9241ae3, the last with SM90 sparse decode) and the
# CUTLASS headers of its submodule into an ignored folder for one device call. Nothing of FlashMLA
# or CUTLASS enters the repository: STAGE ignores itself (a .gitignore of "*").
#
#   kernels/bench/sxs/stage.sh FLASHMLA_GIT CUTLASS_GIT STAGE
#
# FLASHMLA_GIT, CUTLASS_GIT: git directories of deepseek-ai/FlashMLA and NVIDIA/cutlass (a mirror
# without a work tree is enough: everything is read with git archive). STAGE: a folder inside the
# checkout (e.g. .sxs-stage), which the device machine receives with the checkout. FlashMLA's
# extension is built there on the device (about 45 s; run_device.sh).
set -euo pipefail
fm_git=$1 cl_git=$2 stage=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fm_commit=9241ae3
mkdir -p "$stage/flashmla/csrc/cutlass" "$stage/flashmla/csrc_sxs"
printf '*\n' > "$stage/.gitignore"
git --git-dir="$fm_git" archive "$fm_commit" | tar -x -C "$stage/flashmla"
cutlass=$(git --git-dir="$fm_git" ls-tree "$fm_commit" csrc/cutlass | awk '{print $3}')
git --git-dir="$cl_git" archive "$cutlass" include tools/util/include | tar -x -C "$stage/flashmla/csrc/cutlass"
cp "$here"/flashmla_api_decode.cpp "$here"/flashmla_sm100_stubs.cpp "$stage/flashmla/csrc_sxs/"
du -sh "$stage"
