#!/usr/bin/env bash
# Side-by-side harness, the device call: GPU facts, FlashMLA's build (sm_90a, sparse decode only;
# skipped when its .so is there), then sxs_bench.py on mla-plan's shim, then mla-plan's own
# benchmark. Logs and tables under $OUT.
#
#   bash kernels/bench/sxs/run_device.sh STAGE BIN [sxs_bench.py arguments]
#
# STAGE: the folder stage.sh filled (FlashMLA + CUTLASS headers). BIN: a folder holding
# libsxs_mlaplan.so and mlaplan_kernel_bench built on the build machine (CMake with
# -DMLAPLAN_BUILD_SXS=ON -DMLAPLAN_SM90_ONLY=ON -DMLAPLAN_STATIC_RUNTIME=ON).
set -u -o pipefail
SXS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STAGE=$(cd "$1" && pwd)
BIN=$(cd "$2" && pwd)
shift 2
FM=$STAGE/flashmla
OUT=${OUT:-$STAGE/out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
t0=$(date +%s)
q='name,driver_version,pstate,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active'
echo "== GPU facts"
nvidia-smi --query-gpu=$q --format=csv
python3 -c "import torch; p=torch.cuda.get_device_properties(0); print(torch.__version__, torch.version.cuda, p.name, p.multi_processor_count, p.total_memory)"

echo "== build FlashMLA 9241ae3 (sm_90a, sparse decode) [$(( $(date +%s) - t0 ))s]"
if ! ls $FM/flash_mla/cuda*.so >/dev/null 2>&1; then
  ( cd $FM && MAX_JOBS=16 python3 $SXS/setup_flashmla_sm90.py build_ext --inplace ) > "$OUT/build.log" 2>&1
  echo "FlashMLA build exit $?"
  grep -iE "error" "$OUT/build.log" | head -20
fi
echo "[$(( $(date +%s) - t0 ))s]"

echo "== side by side"
PYTHONUNBUFFERED=1 python3 $SXS/sxs_bench.py --flashmla $FM --lib $BIN/libsxs_mlaplan.so --out "$OUT" "$@"
echo "sxs_bench exit $? [$(( $(date +%s) - t0 ))s]"
nvidia-smi --query-gpu=$q --format=csv
echo "== done [$(( $(date +%s) - t0 ))s]"
