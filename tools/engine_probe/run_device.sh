#!/usr/bin/env bash
# verify --engine-kernels on a GPU machine against FlashMLA built from source (docs/verify.md,
# "On a GPU machine"): FlashMLA's build into the stage if its module is not there yet (as
# kernels/bench/sxs/run_device.sh builds it), then mla-plan verify with the engine's kernels for each
# config given (default: V4.1-Flash, V4-Flash, V3.2), JSON, text and the kept bundles under $OUT.
#
#   bash tools/engine_probe/run_device.sh STAGE BUILD [CONFIG ...]
#
# STAGE: the folder kernels/bench/sxs/stage.sh filled (.sxs-stage: FlashMLA + CUTLASS headers).
# BUILD: a CUDA build of mla-plan (build-gpu: app/mla-plan, app/mla-plan-cuda and the probe beside them).
# TEXT=first: the text report of the first config only (every config gives its JSON).
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STAGE=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)
shift 2
CONFIGS=("$@")
[ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(configs/deepseek-v4.1-flash.json configs/deepseek-v4-flash.json configs/deepseek-v3.2.json)
FM=$STAGE/flashmla
OUT=${OUT:-$STAGE/engine-out}
# The bundles hold the raw inputs (megabytes per cell): kept beside the stage; their manifests and
# the probe's results are copied under $OUT at the end.
BUNDLES=${BUNDLES:-$STAGE/engine-bundles}
mkdir -p "$OUT" "$BUNDLES"
exec > >(tee -a "$OUT/run.log") 2>&1
cd "$ROOT"
echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
python3 -c "import torch; p=torch.cuda.get_device_properties(0); print(torch.__version__, torch.version.cuda, p.name, p.multi_processor_count)"
if ! ls "$FM"/flash_mla/cuda*.so >/dev/null 2>&1; then
  echo "== build FlashMLA (sm_90a, sparse decode)"
  (cd "$FM" && MAX_JOBS=16 python3 "$ROOT/kernels/bench/sxs/setup_flashmla_sm90.py" build_ext --inplace) >"$OUT/flashmla-build.log" 2>&1
  echo "FlashMLA build exit $?"
fi
rc=0
for cfg in "${CONFIGS[@]}"; do
  name=$(basename "$cfg" .json)
  echo "== $name"
  "$BUILD/app/mla-plan" verify "$cfg" --kv-cache-dtype fp8_ds_mla --engine-kernels=python3 --engine-route flash_mla \
    --engine-path "$FM" --engine-bundles "$BUNDLES/$name" --json >"$OUT/verify-$name.json"
  code=$?
  echo "exit $code (JSON: $OUT/verify-$name.json)"
  if [ "${TEXT:-all}" = all ] || [ "$cfg" = "${CONFIGS[0]}" ]; then
    "$BUILD/app/mla-plan" verify "$cfg" --kv-cache-dtype fp8_ds_mla --engine-kernels=python3 --engine-route flash_mla \
      --engine-path "$FM" >"$OUT/verify-$name.txt"
    cat "$OUT/verify-$name.txt"
  fi
  [ $code -gt $rc ] && rc=$code
done

# A deliberately corrupted engine: a stand-in flash_mla package that runs the real one (its
# __init__ executed with the real folder as its package path) and adds 1.0 to one output element of
# every call. verify must report the cells FAIL (exit 5); a PASS here means the comparison is blind.
echo "== corrupted engine (one element + 1.0): expect FAIL, exit 5"
CORRUPT=$OUT/corrupt-engine
mkdir -p "$CORRUPT/flash_mla"
cat >"$CORRUPT/flash_mla/__init__.py" <<'PY'
import functools
import os

_real = os.path.join(os.environ["MLAPLAN_REAL_FLASHMLA"], "flash_mla")
__path__ = [_real]
with open(os.path.join(_real, "__init__.py")) as _f:
    exec(compile(_f.read(), os.path.join(_real, "__init__.py"), "exec"))
_engine_call = flash_mla_with_kvcache  # noqa: F821 - defined by the real __init__


@functools.wraps(_engine_call)
def flash_mla_with_kvcache(*args, **kwargs):
    rets = _engine_call(*args, **kwargs)
    out = rets[0].clone()
    flat = out.view(-1)
    flat[flat.numel() // 3] += 1.0
    return (out,) + tuple(rets[1:])
PY
cfg=configs/deepseek-v4.1-flash.json
# One run: its progress lines (stderr, in run.log) give each cell's FAIL message beside the JSON.
MLAPLAN_REAL_FLASHMLA="$FM" "$BUILD/app/mla-plan" verify "$cfg" --kv-cache-dtype fp8_ds_mla --engine-kernels=python3 \
  --engine-route flash_mla --engine-path "$CORRUPT" --json >"$OUT/verify-corrupted.json"
ccode=$?
echo "corrupted engine: exit $ccode (expected 5)"
(cd "$BUNDLES" && find . -name '*.json' | tar -cf - -T - | tar -xf - -C "$OUT") 2>/dev/null
[ $ccode -eq 5 ] || rc=$(( rc > 1 ? rc : 1 ))
exit $rc
