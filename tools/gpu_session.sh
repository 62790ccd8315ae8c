#!/usr/bin/env bash
# Everything a session with a lent GPU should run, in phases that each fit one 10-minute command.
#
#   bash tools/gpu_session.sh PHASE...      (from the repository root, nothing installed)
#
# Phases:
#   env       device, driver and library versions
#   tests     every gpu-marked test (the whole suite on the CUDA backend), then the full kernel matrix
#   memcheck  compute-sanitizer memcheck over the kernel tests and the row-extent tests
#             (tests/gpu/test_kernels.py, tests/irregular/test_extents.py: the kernels' reads of
#             lengths and CSR offsets; CuPy's memory pool off, so each allocation has its own
#             bounds); racecheck, synccheck likewise
#   racecheck
#   synccheck
#   cub       build the CUB shim for this GPU (benchmarks/cub/build.py; about a minute, once):
#             the benchmark's `cub` peer (cub::DeviceTopK / DeviceBatchedTopK) needs it
#   quick     the quick grid (python -m cutopk's) with plots
#   full-a    the full grid's moe and indexer regimes; full-b its huge and layout regimes;
#   full-b    full-llm and full-knn the others (four parts, each bounded by PHASE_TIMEOUT; a part
#   full-llm  that runs out of time lists the cases it left out, "--time-limit reached")
#   full-knn
#   irregular benchmarks/irregular.py --backend cuda: top_k(lengths=) on causal indexer rows,
#             segmented_top_k (CSR kNN) and merge_top_k against the masking/padding routes
#             (torch, cutopk, CUB on the masked rows); writes $OUT/<date>-<device>-irregular.md
# quick, full-* and irregular build the CUB shim first when it is missing (its minute counts
# against the phase's limit, so run `cub` as a phase of its own, or carry a prebuilt one, see below).
#
# The CUB shim needs CCCL >= 3.3 headers (CUDA 13.0's own CCCL 3.0 has no DeviceTopK) and the lent
# machines have no package index. Prepare it on the development machine, where the test extra
# installed nvidia-cuda-cccl:
#   python benchmarks/cub/build.py --arch sm_90 --copy-headers
# which builds build/cub/libcutopk_cub-sm_90-<source hash>.so (about 3 MB) and copies the headers
# to build/cub/cccl/ (about 25 MB); then name `build/cub` in the device run's `carry`. With the
# library carried nothing is compiled there; with only the headers the `cub` phase compiles.
#
# The lent machines' image has CuPy, torch, JAX, pytest, hypothesis and matplotlib but not Dask
# (as listed on 2026-11-17): the CuPy-chunk Dask test skips there, saying so, unless Dask's wheels
# travel with the checkout (the device tool's README says how).
#
# Logs go to $OUT/<phase>.log (or ./gpu-session/ without $OUT); benchmark files to
# $OUT/bench-<phase>.tar.gz, to be unpacked under benchmarks/results/ (irregular's one markdown
# file goes to $OUT as it is, to be copied there). Each phase is bounded by
# PHASE_TIMEOUT seconds (default 540) so that what it wrote still comes back.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-session}
mkdir -p "$out"
export PYTHONPATH=. PYTHONUNBUFFERED=1 CUTOPK_HYPOTHESIS_PROFILE=${CUTOPK_HYPOTHESIS_PROFILE:-ci}
limit=${PHASE_TIMEOUT:-540}
pytest=(python3 -m pytest -q -p no:cacheprovider -rfE --tb=short)
# PYTEST_WORKERS=N spreads the test phases over N processes (pytest-xdist, in the lent machines'
# image): NVRTC compiles, not the GPU, bound them, and the machines have 16 cores.
workers=()
if [ -n "${PYTEST_WORKERS:-}" ] && python3 -c "import xdist" 2>/dev/null; then
  workers=(-n "$PYTEST_WORKERS")
fi

# Builds the CUB shim for this GPU unless it is up to date; a failure only leaves the `cub` peer
# out (the benchmark says why), so it never fails the phase.
cub_arch() {
  local cc
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.[:space:]')
  echo "sm_${cc:-90}"
}
build_cub() {
  timeout "$limit" python3 benchmarks/cub/build.py --arch "$(cub_arch)" ||
    echo "CUB shim not built: the cub peer will be skipped"
}

bench() {
  local phase=$1
  shift
  local dir="$out/bench-$phase"
  local t0=$SECONDS
  build_cub
  local left=$((limit - (SECONDS - t0)))
  # No new case in the last minute, so that the files are written before the timeout.
  timeout "$left" python3 benchmarks/run.py --plots --out "$dir" --time-limit $((left > 120 ? left - 60 : 60)) "$@"
  local rc=$?
  tar -czf "$out/bench-$phase.tar.gz" -C "$out" "bench-$phase" && rm -r "$dir"
  return $rc
}

sanitize() {
  local tool=$1
  # Without the pool an out-of-bounds access leaves its allocation instead of landing in a
  # neighbour inside one of the pool's large blocks.
  CUTOPK_CUPY_NO_POOL=1 timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 99 \
    "${pytest[@]}" -m gpu tests/gpu/test_kernels.py tests/irregular/test_extents.py
}

irregular() {
  local t0=$SECONDS
  build_cub
  local left=$((limit - (SECONDS - t0)))
  timeout "$((left > 1 ? left : 1))" python3 benchmarks/irregular.py --backend cuda --repeat 21 --save "$out"
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
      timeout "$limit" "${pytest[@]}" "${workers[@]}" -m gpu
      local rc=$?
      CUTOPK_FULL_MATRIX=1 timeout "$limit" "${pytest[@]}" "${workers[@]}" -m gpu tests/gpu/test_kernels.py || rc=1
      return $rc
      ;;
    memcheck | racecheck | synccheck) sanitize "$1" ;;
    cub) build_cub && python3 -c "from cutopk._bench import cub; import sys; lib, why = cub.available('$(cub_arch)'); print(why or f'CUB {lib.version} loaded from {lib.path}'); sys.exit(lib is None)" ;;
    quick) bench quick --quick ;;
    full-a) bench full-a --full --regime moe,indexer ;;
    full-b) bench full-b --full --regime huge,layout ;;
    full-llm) bench full-llm --full --regime llm ;;
    full-knn) bench full-knn --full --regime knn ;;
    irregular) irregular ;;
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
