#!/usr/bin/env bash
# make gpu-check: on a machine with an NVIDIA GPU, run the cuda test cases and the GPU benchmarks with that
# machine's own python3 and packages (no installs, no network). Writes $OUT/gpu_check.txt (OUT defaults to
# results/). Budget: well under 8 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-results}
mkdir -p "$OUT"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
unset MINIGRAD_EMULATE_CUDA
LOG="$OUT/gpu_check.txt"
status=0
{
  echo "== gpu-check $(date -u +%FT%TZ) on $(hostname)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
  $PY - <<'PYEOF'
import minigrad as mg, numpy, sys
print("python", sys.version.split()[0], "numpy", numpy.__version__)
try:
    import cupy; print("cupy", cupy.__version__)
except Exception as e:
    print("cupy import failed:", e)
print("cuda available:", mg.cuda.is_available(), "devices:", mg.cuda.device_count(), "emulated:", mg.cuda.is_emulated())
if not mg.cuda.is_available() or mg.cuda.is_emulated():
    sys.exit("gpu-check needs a real CUDA device")
PYEOF
} 2>&1 | tee "$LOG"
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1

echo "== cuda test cases (pytest -m gpu)" | tee -a "$LOG"
# the suites that need only what the GPU machine has (no nbformat/nbclient/scikit-learn there)
SUITES="tests/test_tensor.py tests/test_errors.py tests/autograd tests/ops tests/nn tests/optim tests/memory
        tests/backend tests/data tests/test_serialization.py"
timeout 300 $PY -m pytest -q -p no:cacheprovider -m gpu $SUITES 2>&1 | tail -60 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== GPU benchmarks" | tee -a "$LOG"
timeout 200 $PY benchmarks/gpu_bench.py 2>&1 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== pool malloc+free" | tee -a "$LOG"
timeout 60 $PY benchmarks/pool_malloc.py 2>&1 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
{ echo "== amp: cuda tests and benchmarks/amp_step.py"; timeout 150 $PY -m pytest -q -p no:cacheprovider -m gpu tests/amp 2>&1 | tail -15; timeout 150 $PY benchmarks/amp_step.py --device cuda --repeat 9; } 2>&1 | tee -a "$LOG"
echo "== NCCL (minigrad.distributed)" | tee -a "$LOG"; timeout 240 $PY benchmarks/nccl_check.py 2>&1 | tee -a "$LOG"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "== profiler on the GPU (CUDA events)" | tee -a "$LOG"; timeout 120 $PY benchmarks/profiler_gpu_check.py 2>&1 | tee -a "$LOG"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
{ echo "== recomputation and planner"; timeout 240 $PY benchmarks/recompute_gpu_check.py; } 2>&1 | tee -a "$LOG"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "== compile: fused CuPy kernels, flash attention, attention memory vs L" | tee -a "$LOG"; timeout 240 $PY benchmarks/gpu_compile_check.py 2>&1 | tee -a "$LOG"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "== compile: piecewise replay of graph breaks" | tee -a "$LOG"; timeout 120 $PY benchmarks/gpu_piecewise_check.py 2>&1 | tee -a "$LOG"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "== gpu-check exit status $status" | tee -a "$LOG"
exit $status
