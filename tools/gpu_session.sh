#!/usr/bin/env bash
# Everything a session with a lent GPU should run, in phases that each fit one 10-minute command.
#
#   bash tools/gpu_session.sh PHASE...      (from the repository root, nothing installed)
#   DRY_RUN=1 bash tools/gpu_session.sh scoreboard   (on the CPU: every command line of the phase, checked)
#
# A lent session runs the scoreboard FIRST, as one command (the device tool's `run`), with the
# prebuilt CUB and FlashInfer libraries carried (build them here first, see below; nothing is
# compiled there but cutopk's NVRTC kernels):
#
#   run(command="bash tools/gpu_session.sh scoreboard", carry=["build/cub", "build/flashinfer"], timeout_s=540)
#
# then copies $OUT/results/<date>-<device>/ (scoreboard.csv/.json, the irregular table) under
# benchmarks/results/, with $OUT/scoreboard.log and $OUT/profile.tar.gz (ncu's files) beside it.
#
# The lease phase is the one command for a lent GPU's 10 minutes (issue 50): M0 facts, M1 the
# never-run kernels' tests and compute-sanitizer, M2 the counting primitives (clock64), M3 phase
# clocks, M4 A/B variants, M5 ncu, M6 the forced-family table, M7 host time per call, then the
# scoreboard with the time left; each step bounded (a hang costs one step), each writing its file
# as it goes, at most 8 files under $OUT, at most LEASE_S seconds (540) in all:
#
#   run(command="bash tools/gpu_session.sh lease", carry=["build/cub", "build/flashinfer"], timeout_s=600)
#   DRY_RUN=1 bash tools/gpu_session.sh lease    # on the CPU: the plan, its estimates and files, checked
#
# (benchmarks/lease.py, benchmarks/cutopk_bench/lease.py). $OUT/lease.log is its log; the step files are
# listed by the dry run.
#
# Phases:
#   lease     the above
#   scoreboard  at most SCOREBOARD_S seconds (default 480): benchmarks/scoreboard.py, cutopk against
#             torch.topk, CUB and FlashInfer's top_k on the chosen cases (every llm and indexer case,
#             the reference run's cases below 0.95x torch, the moe/knn/huge shapes at a dispatcher
#             threshold; no case started that its cost estimate says would end after its share of
#             the time); then benchmarks/irregular.py's table; then one ncu run over the profiled
#             cases (DRAM throughput, stall reasons) into profile/, skipped, saying why, when ncu is
#             missing or not permitted. Files in $OUT/results/<date>-<device>/.
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
# The FlashInfer shim (the `flashinfer` and `flashinfer-unsorted` peers) is built here from the
# FlashInfer wheel (pip download; its headers, bundled CCCL and flags):
#   python benchmarks/flashinfer/build.py --arch sm_90
# which writes build/flashinfer/libcutopk_flashinfer-sm_90-<hash>.so; carry `build/flashinfer`.
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

# The scoreboard phase (see the header). Its three steps share SCOREBOARD_S: the cases get all but
# 150 s (their own budget starts no case that would end later), the irregular table at most 100 s,
# ncu the rest. DRY_RUN=1 runs every command line on the CPU: the cases listed and checked and three
# of them scaled down through the same loop, the irregular script with the same options on tiny
# NumPy-backend inputs (3 repetitions), the profiled cases listed and ncu's command printed.
irregular_args=(--repeat 21)
ncu_sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
  --section LaunchStats --section Occupancy)
scoreboard() {
  local t0=$SECONDS budget=${SCOREBOARD_S:-480} root="$out/results" dir left rc=0
  local dry=() backend=(--backend cuda) small=()
  if [ -n "${DRY_RUN:-}" ]; then
    dry=(--dry-run)
    backend=(--backend numpy)
    small=(--indexer 4x1024:16 --segments 50 --merge 2x2x1024:8 --repeat 3)
  fi
  dir=$(python3 benchmarks/scoreboard.py --root "$root" --where) || return 1
  mkdir -p "$dir/profile"
  echo "results folder: $dir"
  local cases_s=$((budget - 150))
  timeout $((cases_s + 60)) python3 benchmarks/scoreboard.py --out "$dir" --time-limit "$cases_s" "${dry[@]}" || rc=1
  left=$((budget - (SECONDS - t0) - 50))
  echo "=== irregular table ($((SECONDS - t0)) s in, at most $((left < 100 ? left : 100)) s)"
  if [ "$left" -gt 10 ]; then
    timeout $((left < 100 ? left : 100)) python3 benchmarks/irregular.py "${backend[@]}" "${irregular_args[@]}" \
      --save "$dir" "${small[@]}" || rc=1
  else
    echo "irregular table skipped: the cases used the time"
  fi
  left=$((budget - (SECONDS - t0) - 5))
  echo "=== ncu ($((SECONDS - t0)) s in, at most $left s)"
  local ncu_cmd=(ncu --profile-from-start off "${ncu_sections[@]}" --launch-count 60
    --export "$dir/profile/scoreboard" --force-overwrite python3 benchmarks/scoreboard.py --profile)
  if [ -n "${DRY_RUN:-}" ]; then
    echo "would run: timeout $left ${ncu_cmd[*]}"
    python3 benchmarks/scoreboard.py --profile --dry-run || rc=1
    command -v ncu >/dev/null && ncu --version | tail -1 || echo "ncu: not on PATH here"
  elif ! command -v ncu >/dev/null; then
    echo "ncu skipped: not on PATH" | tee "$dir/profile/SKIPPED.txt"
  elif [ "$left" -lt 30 ]; then
    echo "ncu skipped: $left s left" | tee "$dir/profile/SKIPPED.txt"
  else
    timeout "$left" "${ncu_cmd[@]}" 2>&1 | tee "$dir/profile/ncu.log"
    if grep -q "ERR_NVGPUCTRPERM" "$dir/profile/ncu.log"; then
      echo "ncu not permitted on this machine (ERR_NVGPUCTRPERM): no profile" | tee "$dir/profile/SKIPPED.txt"
    elif [ -f "$dir/profile/scoreboard.ncu-rep" ]; then
      ncu --import "$dir/profile/scoreboard.ncu-rep" --page details --csv >"$dir/profile/details.csv" 2>&1
      ncu --import "$dir/profile/scoreboard.ncu-rep" --page raw --csv >"$dir/profile/raw.csv" 2>&1
      echo "ncu: $(grep -c . "$dir/profile/details.csv") lines of details in $dir/profile/"
    else
      echo "ncu wrote no report (see $dir/profile/ncu.log)" | tee "$dir/profile/SKIPPED.txt"
    fi
  fi
  # The device tool returns files at most two folders below $OUT: profile/ (three down) travels
  # back as one archive beside the logs.
  if [ -z "${DRY_RUN:-}" ] && [ -d "$dir/profile" ]; then
    tar -czf "$out/profile.tar.gz" -C "$dir" profile && rm -r "$dir/profile"
  fi
  echo "scoreboard phase: $((SECONDS - t0)) s"
  return $rc
}

run_phase() {
  case $1 in
    lease) python3 benchmarks/lease.py --out "$out" --budget "${LEASE_S:-540}" ${DRY_RUN:+--dry-run} ;;
    scoreboard) scoreboard ;;
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
    cub) build_cub && python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from cutopk_bench import cub; lib, why = cub.available('$(cub_arch)'); print(why or f'CUB {lib.version} loaded from {lib.path}'); sys.exit(lib is None)" ;;
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
