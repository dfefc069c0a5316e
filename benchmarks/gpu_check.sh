#!/usr/bin/env bash
# make gpu-check: on a machine with an NVIDIA GPU, run the cuda test cases and the GPU benchmarks with that
# machine's own python3 and packages (no installs, no network). Writes $OUT/gpu_check.txt (OUT defaults to
# results/). Budget: GPU_CHECK_BUDGET seconds for all steps (default 330).
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

# One budget for all steps (GPU_CHECK_BUDGET seconds, default 330): a device is lent for ~15 minutes in all,
# so one run must leave room for a rerun. Each step gets its own limit or what is left, whichever is less;
# a step that finds the budget spent is reported as not run (and fails the check). Most important first.
BUDGET=${GPU_CHECK_BUDGET:-330}
START=$SECONDS
step() {   # step TITLE MAX_SECONDS COMMAND...
  local title=$1 max=$2; shift 2
  local left=$(( BUDGET - (SECONDS - START) ))
  [ "$left" -lt "$max" ] && max=$left
  if [ "$max" -lt 10 ]; then
    echo "== $title: NOT RUN (gpu-check budget of ${BUDGET}s spent)" | tee -a "$LOG"; status=1; return
  fi
  echo "== $title (limit ${max}s)" | tee -a "$LOG"
  timeout "$max" "$@" 2>&1 | tee -a "$LOG"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "   (failed or timed out)" | tee -a "$LOG"; status=1; }
}
tail_of() {   # tail_of N COMMAND...: the command's last N lines, its exit status kept
  local n=$1; shift
  "$@" 2>&1 | tail -"$n"; return "${PIPESTATUS[0]}"
}
export -f tail_of

# the suites that need only what the GPU machine has (no nbformat/nbclient/scikit-learn there)
SUITES="tests/test_tensor.py tests/test_errors.py tests/autograd tests/ops tests/nn tests/optim tests/memory
        tests/backend tests/data tests/test_serialization.py tests/amp"
step "cuda test cases (pytest -m gpu)" 150 bash -c "tail_of 60 $PY -m pytest -q -p no:cacheprovider -m gpu $SUITES"
step "compile: fused CuPy kernels, flash attention, attention memory vs L" 60 $PY benchmarks/gpu_compile_check.py
step "kernels vs NumPy: the catalogue, CuPy's compiled sources, every fusible op x dtype" 45 \
  $PY benchmarks/gpu_kernel_check.py
step "compile: piecewise replay of graph breaks" 30 $PY benchmarks/gpu_piecewise_check.py
step "NCCL (minigrad.distributed)" 60 $PY benchmarks/nccl_check.py
step "GPU benchmarks: MLP, CNN, block, tiny GPT vs PyTorch; device-to-host reads" 75 $PY benchmarks/gpu_bench.py
step "amp: benchmarks/amp_step.py" 40 $PY benchmarks/amp_step.py --device cuda --repeat 9
step "profiler on the GPU (CUDA events)" 30 $PY benchmarks/profiler_gpu_check.py
step "recomputation and planner" 40 $PY benchmarks/recompute_gpu_check.py
step "pool malloc+free" 20 $PY benchmarks/pool_malloc.py
echo "== gpu-check took $(( SECONDS - START ))s of its ${BUDGET}s budget" | tee -a "$LOG"
echo "== gpu-check exit status $status" | tee -a "$LOG"
exit $status
