#!/usr/bin/env bash
# Everything a session with a lent GPU should run, in phases that each fit one 10-minute command.
#
#   bash tools/gpu_session.sh PHASE...      (from the repository root, nothing installed)
#
# Phases:
#   env       device, driver and library versions
#   tests     every gpu-marked test (the whole suite on the CUDA backend), then the full kernel matrix
#   memcheck  compute-sanitizer memcheck over the kernel tests (CuPy's memory pool off, so each
#             allocation has its own bounds); racecheck, synccheck likewise
#   racecheck
#   synccheck
#   quick     python -m cutopk --quick with plots
#   full-a    the full grid's moe, indexer, huge and layout regimes; full-llm, full-knn the others
#   full-llm
#   full-knn
#
# The lent machines' image has CuPy, torch, JAX, pytest, hypothesis and matplotlib but not Dask
# (as listed on 2026-11-17): the CuPy-chunk Dask test skips there, saying so, unless Dask's wheels
# travel with the checkout (the device tool's README says how).
#
# Logs go to $OUT/<phase>.log (or ./gpu-session/ without $OUT); benchmark files to
# $OUT/bench-<phase>.tar.gz, to be unpacked under benchmarks/results/. Each phase is bounded by
# PHASE_TIMEOUT seconds (default 540) so that what it wrote still comes back.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-session}
mkdir -p "$out"
export PYTHONPATH=. PYTHONUNBUFFERED=1 CUTOPK_HYPOTHESIS_PROFILE=${CUTOPK_HYPOTHESIS_PROFILE:-ci}
limit=${PHASE_TIMEOUT:-540}
pytest=(python3 -m pytest -q -p no:cacheprovider)

bench() {
  local phase=$1
  shift
  local dir="$out/bench-$phase"
  timeout "$limit" python3 benchmarks/run.py --plots --out "$dir" --time-limit $((limit - 60)) "$@"
  local rc=$?
  tar -czf "$out/bench-$phase.tar.gz" -C "$out" "bench-$phase" && rm -r "$dir"
  return $rc
}

sanitize() {
  local tool=$1
  # Without the pool an out-of-bounds access leaves its allocation instead of landing in a
  # neighbour inside one of the pool's large blocks.
  CUTOPK_CUPY_NO_POOL=1 timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 99 \
    "${pytest[@]}" -m gpu tests/test_kernels.py
}

run_phase() {
  case $1 in
    env)
      nvidia-smi
      python3 -c "import cupy; print('cupy', cupy.__version__, 'runtime', cupy.cuda.runtime.runtimeGetVersion(), 'driver', cupy.cuda.runtime.driverGetVersion())"
      python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
      python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
      python3 -c "import numpy; print('numpy', numpy.__version__)"
      compute-sanitizer --version
      git log -1 --format='commit %H %cd' 2>/dev/null || true
      ;;
    tests)
      timeout "$limit" "${pytest[@]}" -m gpu &&
        CUTOPK_FULL_MATRIX=1 timeout "$limit" "${pytest[@]}" -m gpu tests/test_kernels.py
      ;;
    memcheck | racecheck | synccheck) sanitize "$1" ;;
    quick) timeout "$limit" python3 -m cutopk --quick --plots --out "$out/bench-quick" &&
      tar -czf "$out/bench-quick.tar.gz" -C "$out" bench-quick && rm -r "$out/bench-quick" ;;
    full-a) bench full-a --full --regime moe,indexer,huge,layout ;;
    full-llm) bench full-llm --full --regime llm ;;
    full-knn) bench full-knn --full --regime knn ;;
    *)
      echo "unknown phase: $1" >&2
      return 2
      ;;
  esac
}

status=0
for phase in "$@"; do
  echo "=== $phase ($(date -u +%H:%M:%S))"
  run_phase "$phase" 2>&1 | tee "$out/$phase.log"
  rc=${PIPESTATUS[0]}
  echo "=== $phase: exit $rc" | tee -a "$out/$phase.log"
  [ "$rc" -ne 0 ] && status=1
done
exit $status
