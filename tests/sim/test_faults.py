"""One planted bug per fault class: each must be caught, with the right exception and a message
naming the kernel, the block, the thread and the source line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from cutopk import sim

BUGS = r"""
extern "C" __global__ void missing_barrier(const int* in, int* out) {
  __shared__ int buf[128];
  buf[threadIdx.x] = in[threadIdx.x];
  // BUG: no __syncthreads() before reading another thread's element
  out[threadIdx.x] = buf[127 - threadIdx.x];
}

extern "C" __global__ void uninitialised_shared(int* out) {
  __shared__ int buf[64];
  if (threadIdx.x < 32) buf[threadIdx.x] = 1;  // BUG: half the buffer is never written
  __syncthreads();
  out[threadIdx.x] = buf[threadIdx.x];
}

extern "C" __global__ void divergent_barrier(int* out) {
  if (threadIdx.x >= 40) return;  // BUG: these threads never reach the barrier
  __syncthreads();  // the barrier the early returns skip
  out[threadIdx.x] = 1;
}

extern "C" __global__ void bad_shuffle_mask(int* out) {
  int v = threadIdx.x;
  if (threadIdx.x < 16) v = __shfl_sync(0xffffffffu, v, 0);  // BUG: the mask names 32 lanes, 16 arrive
  out[threadIdx.x] = v;
}

extern "C" __global__ void mismatched_masks(int* out) {
  unsigned mask = threadIdx.x == 3 ? 0x0000000fu : 0x000000ffu;  // BUG: lane 3 disagrees
  if (threadIdx.x < 8) out[threadIdx.x] = __ballot_sync(mask, 1);
}

extern "C" __global__ void deadlock(int* flag) {
  if (threadIdx.x == 0) {
    while (atomicAdd(flag, 0) == 0) { __threadfence(); }  // BUG: nobody ever sets the flag
  }
}

extern "C" __global__ void typed(float* out, int n) { out[0] = n; }

extern "C" __global__ void dynamic_overrun(int* out, int n) {
  extern __shared__ int dyn[];
  for (int i = threadIdx.x; i <= n; i += blockDim.x) dyn[i] = i;  // BUG: <= writes one past the end
  __syncthreads();
  out[threadIdx.x] = dyn[threadIdx.x];
}

extern "C" __global__ void null_deref(int* out) {
  int* p = nullptr;
  if (blockIdx.x == 1 && threadIdx.x == 5) p[0] = 1;  // BUG: crash
  out[threadIdx.x] = 2;
}

extern "C" __global__ void global_overrun(int* out, int n) {
  out[threadIdx.x] = 1;  // BUG: launched with more threads than out has elements
}

extern "C" __global__ void two_barriers(int* out) {
  if (threadIdx.x < 32) {
    __syncthreads();  // BUG: the first warp waits here...
  } else {
    __syncthreads();  // ...the others here
  }
  out[threadIdx.x] = 1;
}

extern "C" __global__ void failing_assert(const int* in) {
  assert(in[threadIdx.x] >= 0);  // BUG: a negative input
}

extern "C" __global__ void trapping(int* out) {
  if (threadIdx.x == 3) __trap();  // the kernel gives up
  out[threadIdx.x] = 1;
}

extern "C" __global__ void volatile_spin(volatile int* flag) {
  while (flag[0] == 0) { }  // BUG: nothing ever sets the flag, and the loop never yields
}

extern "C" __global__ void small_dynamic_overrun(int n) {
  extern __shared__ unsigned char bytes[];
  if (threadIdx.x == 0) bytes[n] = 1;  // BUG: one past the end of n bytes
}

__device__ int deep(int depth, int* sink) {
  int frame[256];  // 1 KB per call: 100 calls overflow a 64 KB fiber stack
  frame[depth % 256] = depth;
  sink[0] += frame[(depth * 7) % 256];
  return depth == 0 ? 0 : frame[depth % 256] + deep(depth - 1, sink);
}

extern "C" __global__ void stack_overflow(int* out, int depth) {
  out[threadIdx.x] = deep(depth, out);  // BUG: recursion far deeper than a GPU stack allows
}

extern "C" __global__ void too_much_static_shared(int* out) {
  __shared__ int big[13000];  // BUG: 52 KB, over the 48 KB a block may declare statically
  big[threadIdx.x] = 1;
  out[0] = big[0];
}

extern "C" __global__ void wait_for_block_one(int* flag) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    while (atomicAdd(flag, 0) == 0) { }  // waits for a block that only runs after this one
  }
  if (blockIdx.x == 1 && threadIdx.x == 0) atomicExch(flag, 1);
}
"""


def line_of(fragment: str) -> int:
    return next(i + 1 for i, line in enumerate(BUGS.splitlines()) if fragment in line)


@pytest.fixture(scope="module")
def mod():
    return sim.RawModule(code=BUGS)


def test_missing_barrier_found_by_random_thread_order():
    x = np.arange(128, dtype=np.int32)
    wrong = 0
    for seed in range(1, 6):
        out = np.zeros_like(x)
        sim.RawModule(code=BUGS, seed=seed).get_function("missing_barrier")(1, 128, (x, out))
        wrong += not np.array_equal(out, x[::-1])
    assert wrong > 0, "a shuffled thread order must expose the missing barrier"


def test_uninitialised_shared_memory_is_poisoned(mod):
    out = np.zeros(64, np.int32)
    mod.get_function("uninitialised_shared")(1, 64, (out,))
    assert (out[:32] == 1).all()
    assert (out[32:].view(np.uint32) == 0xCDCDCDCD).all()


def test_barrier_divergence(mod):
    with pytest.raises(sim.BarrierDivergenceError) as info:
        mod.get_function("divergent_barrier")(1, 64, (np.zeros(64, np.int32),))
    msg = str(info.value)
    assert "divergent_barrier" in msg and "block (0,0,0)" in msg
    assert f"line {line_of('the barrier the early returns skip')}" in msg and "reached by 40 of 64" in msg
    assert "thread (40,0,0)" in msg


def test_shuffle_mask_naming_lanes_that_never_arrive(mod):
    with pytest.raises(sim.WarpMaskError) as info:
        mod.get_function("bad_shuffle_mask")(1, 32, (np.zeros(32, np.int32),))
    msg = str(info.value)
    assert "bad_shuffle_mask" in msg and "__shfl_sync" in msg and "0xffffffff" in msg
    assert f"line {line_of('v = __shfl_sync')}" in msg and "lane" in msg


def test_mismatched_masks(mod):
    with pytest.raises(sim.WarpMaskError) as info:
        mod.get_function("mismatched_masks")(1, 32, (np.zeros(32, np.int32),))
    msg = str(info.value)
    assert "mismatched_masks" in msg and "__ballot_sync" in msg and "mismatch" in msg


def test_deadlock_is_reported_not_hung():
    mod = sim.RawModule(code=BUGS, spin_budget=100_000)
    with pytest.raises(sim.DeadlockError) as info:
        mod.get_function("deadlock")(1, 32, (np.zeros(1, np.int32),))
    assert "deadlock" in str(info.value) and "thread (0,0,0)" in str(info.value)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((np.zeros(1, np.float32), np.int64(3)), "argument 1: the parameter is a 4-byte signed integer"),
        (
            (np.zeros(1, np.float32), 3),
            "argument 1: the parameter is a 4-byte signed integer, got builtins.int (8-byte signed integer) "
            "(Python ints are passed as int64, as CuPy does)",
        ),
        ((np.zeros(1, np.float32), np.float32(3)), "argument 1"),
        (
            (np.int32(1), np.int32(3)),
            "argument 0: the parameter is an 8-byte pointer, got numpy.int32 (4-byte signed integer)",
        ),
        ((np.zeros(1, np.float32), np.zeros(1, np.int32)), "got an array"),
        ((np.zeros(1, np.float32),), "takes 2 arguments, got 1"),
    ],
)
def test_wrong_launch_arguments(mod, args, fragment):
    with pytest.raises(sim.LaunchArgumentError, match="typed") as info:
        mod.get_function("typed")(1, 1, args)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("arg", "fragment"),
    [
        (3j, ", got builtins.complex (16-byte value)"),
        ("3", "; expected a NumPy array, a NumPy scalar or None, got builtins.str"),
    ],
)
def test_python_values_without_a_kernel_type_are_refused(mod, arg, fragment):
    with pytest.raises(sim.LaunchArgumentError) as info:
        mod.get_function("typed")(1, 1, (np.zeros(1, np.float32), arg))
    assert (
        str(info.value) == f"kernel 'typed', argument 1: the parameter is a 4-byte signed integer{fragment}"
    )


@pytest.mark.parametrize(
    ("grid", "block", "shared_mem", "message"),
    [
        ((1, 1, 1, 1), 1, 0, r"grid: expected an int or up to 3 non-negative ints, got \(1, 1, 1, 1\)"),
        (1, -1, 0, "block: expected an int or up to 3 non-negative ints, got -1"),
        (1, (32, 33), 0, r"kernel 'typed': block \(32, 33, 1\) has 1056 threads, more than CUDA's 1024"),
        (1, 1, -1, r"kernel 'typed': shared_mem=-1 is outside \[0, 227 KB\]"),
        (1, 1, 228 * 1024, r"kernel 'typed': shared_mem=233472 is outside \[0, 227 KB\]"),
    ],
)
def test_launch_geometry_outside_cuda_limits_is_refused(mod, grid, block, shared_mem, message):
    out = np.zeros(1, np.float32)
    with pytest.raises(ValueError, match=f"^{message}$"):
        mod.get_function("typed")(grid, block, (out, np.int32(1)), shared_mem=shared_mem)
    assert out[0] == 0  # nothing ran


def test_unknown_kernel_name_lists_the_known_ones(mod):
    with pytest.raises(KeyError, match=r"kernel 'nope' is not in this module \(known: .*typed"):
        mod.get_function("nope")


def test_more_parameters_than_the_runtime_describes_is_an_error():
    params = ", ".join(f"int p{i}" for i in range(65))
    m = sim.RawModule(code=f'extern "C" __global__ void wide({params}) {{}}')
    with pytest.raises(sim.LaunchArgumentError, match="kernel 'wide' has 65 parameters, more than 64"):
        m.get_function("wide")


def test_module_options_are_checked(monkeypatch):
    with pytest.raises(ValueError, match=r"resident_blocks: expected 0 \(all\) or a positive int, got -1"):
        sim.RawModule(code=BUGS, resident_blocks=-1)
    with pytest.raises(sim.SimError, match=r"could not compile the kernel source:\n.*kernel\.cu:1:1: error"):
        sim.RawModule(code="this is not C++").get_function("x")


def test_unreadable_process_map_counts_as_no_asan_runtime(monkeypatch):
    from cutopk import _host_build

    def no_proc(*args, **kwargs):
        raise OSError("no /proc")

    def maps_with_asan(*args, **kwargs):
        import io

        return io.StringIO("7f00-7f01 r-xp 0 0:0 0 /usr/lib/libasan.so.8\n")

    # The process map is what tells (so a map naming libasan counts as the runtime loaded)...
    monkeypatch.setattr(_host_build, "open", maps_with_asan, raising=False)
    assert _host_build.asan_loaded()
    # ...and one that cannot be read counts as no runtime: asan=True is refused, not loaded.
    monkeypatch.setattr(_host_build, "open", no_proc, raising=False)
    assert not _host_build.asan_loaded()
    with pytest.raises(
        sim.SimUnavailableError, match="asan=True needs the AddressSanitizer runtime loaded first"
    ):
        sim.RawModule(code=BUGS, asan=True)


def test_dynamic_shared_memory_overrun(mod):
    with pytest.raises(sim.SharedMemoryOverrunError) as info:
        mod.get_function("dynamic_overrun")(1, 32, (np.zeros(32, np.int32), np.int32(64)), shared_mem=64 * 4)
    assert "dynamic_overrun" in str(info.value) and "256 bytes" in str(info.value)
    # The same kernel within its bounds runs.
    out = np.zeros(32, np.int32)
    mod.get_function("dynamic_overrun")(1, 32, (out, np.int32(63)), shared_mem=64 * 4)
    assert out.tolist() == list(range(32))


def test_crash_does_not_take_down_the_process(mod):
    with pytest.raises(sim.KernelCrashError) as info:
        mod.get_function("null_deref")((2,), (32,), (np.zeros(32, np.int32),))
    msg = str(info.value)
    assert "null_deref" in msg and "block (1,0,0)" in msg and "thread (5,0,0)" in msg
    assert "Segmentation fault" in msg
    if shutil.which("addr2line"):
        assert f"kernel.cu line {line_of('BUG: crash')}" in msg
    out = np.zeros(32, np.int32)
    mod.get_function("null_deref")((1,), (32,), (out,))  # the module still works afterwards
    assert (out == 2).all()


INLINED_STEPS = r"""
__device__ __forceinline__ void store_step(int* p, int i) {
  int* q = nullptr;
  if (i == 5) q[0] = 1;  // BUG: crash inside an inlined step
  p[i] = 2;
}
template <int N>
__device__ void outer_step(int* p) { store_step(p, threadIdx.x + N); }
extern "C" __global__ void steps(int* out) { outer_step<0>(out); }
"""


def test_a_crash_inside_an_inlined_device_function_names_its_own_line():
    """Kernels are built of inlined steps: the line named is the step's, not its caller's. That
    needs the modules' inline debug entries (-g): -g1 (measured 2026-11-27: 0.2 s less per build)
    names the caller's line instead."""
    if not shutil.which("addr2line"):
        pytest.skip("addr2line is not installed")
    mod = sim.RawModule(code=INLINED_STEPS)
    with pytest.raises(sim.KernelCrashError) as info:
        mod.get_function("steps")((1,), (32,), (np.zeros(32, np.int32),))
    line = next(i + 1 for i, text in enumerate(INLINED_STEPS.splitlines()) if "BUG: crash" in text)
    assert f"kernel.cu line {line} (in store_step(int*, int))" in str(info.value)


def test_barriers_at_different_call_sites(mod):
    with pytest.raises(sim.BarrierDivergenceError) as info:
        mod.get_function("two_barriers")(1, 64, (np.zeros(64, np.int32),))
    msg = str(info.value)
    assert "two_barriers" in msg and "block (0,0,0)" in msg and "barrier divergence" in msg
    assert f"line {line_of('the first warp waits here')}" in msg
    assert f"line {line_of('the others here')}" in msg


def test_failed_assert(mod):
    x = np.zeros(64, np.int32)
    x[17] = -1
    with pytest.raises(sim.KernelAssertionError) as info:
        mod.get_function("failing_assert")(1, 64, (x,))
    msg = str(info.value)
    assert "failing_assert" in msg and "thread (17,0,0)" in msg and "in[threadIdx.x] >= 0" in msg
    assert f"line {line_of('BUG: a negative input')}" in msg


def test_trap(mod):
    with pytest.raises(sim.KernelCrashError, match=r"thread \(3,0,0\).*__trap\(\) called"):
        mod.get_function("trapping")(1, 32, (np.zeros(32, np.int32),))


def test_non_yielding_spin_is_stopped_by_the_watchdog():
    mod = sim.RawModule(code=BUGS, watchdog_s=0.3)
    with pytest.raises(sim.KernelHangError) as info:
        mod.get_function("volatile_spin")(1, 4, (np.zeros(1, np.int32),))
    msg = str(info.value)
    assert "volatile_spin" in msg and "thread (0,0,0)" in msg and "hang" in msg
    if shutil.which("addr2line"):
        assert f"kernel.cu line {line_of('never yields')}" in msg
    assert isinstance(info.value, sim.DeadlockError)


def test_dynamic_overrun_within_the_alignment_slack_is_found_by_canaries(mod):
    with pytest.raises(sim.SharedMemoryOverrunError, match="byte offset 10, outside the 10 bytes"):
        mod.get_function("small_dynamic_overrun")(1, 32, (np.int32(10),), shared_mem=10)
    mod.get_function("small_dynamic_overrun")(1, 32, (np.int32(9),), shared_mem=10)


def test_spin_on_a_later_block_is_a_deadlock_unless_both_are_resident():
    flag = np.zeros(1, np.int32)
    with pytest.raises(sim.DeadlockError, match="resident_blocks"):
        sim.RawModule(code=BUGS, spin_budget=10_000).get_function("wait_for_block_one")(2, 32, (flag,))
    for resident in (2, 0):  # 0: the whole grid
        flag[0] = 0
        sim.RawModule(code=BUGS, resident_blocks=resident).get_function("wait_for_block_one")(2, 32, (flag,))
        assert flag[0] == 1


def test_stack_overflow_is_named(mod):
    out = np.zeros(4, np.int32)
    with pytest.raises(sim.KernelCrashError, match=r"thread \(0,0,0\).*stack overflow: .* 64 KB stack"):
        mod.get_function("stack_overflow")(1, 4, (out, np.int32(1000)))
    mod.get_function("stack_overflow")(1, 4, (out, np.int32(5)))  # shallow recursion is fine


def test_static_shared_over_48_kb(mod):
    with pytest.raises(sim.SharedMemoryOverrunError, match="48 KB"):
        mod.get_function("too_much_static_shared")(1, 32, (np.zeros(1, np.int32),))


def test_isolated_launches_survive_crashes_and_hangs():
    mod = sim.RawModule(code=BUGS, isolate=True, timeout_s=20)
    out = np.zeros(32, np.int32)
    with pytest.raises(sim.KernelCrashError, match=r"block \(1,0,0\) thread \(5,0,0\)"):
        mod.get_function("null_deref")((2,), (32,), (out,))
    assert (out == 0).all()  # a failed launch writes nothing back
    mod.get_function("null_deref")((1,), (32,), (out,))
    assert (out == 2).all()  # results come back from the child
    hung = sim.RawModule(code=BUGS, isolate=True, timeout_s=0.5, watchdog_s=0)
    with pytest.raises(sim.KernelHangError, match=r"timeout_s=0\.5"):
        hung.get_function("volatile_spin")(1, 1, (np.zeros(1, np.int32),))


ASAN_SCRIPT = textwrap.dedent(
    """
    import numpy as np, sys
    sys.path.insert(0, {root!r})
    from cutopk import sim
    sys.path.insert(0, {here!r})
    from test_faults import BUGS
    mod = sim.RawModule(code=BUGS, asan=True, isolate={isolate})
    out = np.zeros(32, np.int32)
    try:
        mod.get_function("global_overrun")(1, {threads}, (out, np.int32(32)))
    except sim.KernelCrashError as exc:
        print("caught:", exc)
    else:
        print("no error", int(out.sum()))
    """
)


def _libasan() -> str | None:
    try:
        path = subprocess.run(
            ["g++", "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    path = path.stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


@pytest.mark.asan
@pytest.mark.parametrize("isolate", [False, True])
@pytest.mark.parametrize("threads", [32, 33])
def test_global_out_of_bounds_caught_under_asan(threads, isolate):
    """Under ASan a global overrun ends the process with ASan's report; with isolate=True the
    report comes back as a KernelCrashError and the process carries on."""
    libasan = _libasan()
    if libasan is None:
        pytest.skip("g++'s AddressSanitizer runtime (libasan.so) is not installed")
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    env = {**os.environ, "LD_PRELOAD": libasan, "ASAN_OPTIONS": "detect_leaks=0"}
    script = ASAN_SCRIPT.format(root=root, here=here, threads=threads, isolate=isolate)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    if threads == 32:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "no error 32" in proc.stdout
    elif isolate:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "caught: kernel 'global_overrun'" in proc.stdout
        assert "heap-buffer-overflow" in proc.stdout and "global_overrun" in proc.stdout
    else:
        assert proc.returncode != 0
        assert "heap-buffer-overflow" in proc.stderr, proc.stderr[-3000:]
        assert "global_overrun" in proc.stderr


def test_shared_memory_beyond_48k_needs_the_opt_in():
    # CUDA refuses a launch asking for more dynamic shared memory than the kernel's
    # max_dynamic_shared_size_bytes (48 KB until it opts in): so does the simulator.
    import numpy as np

    from cutopk import sim

    src = r"""
    extern "C" __global__ void big(int* out) {
      extern __shared__ int buf[];
      buf[threadIdx.x] = threadIdx.x;
      __syncthreads();
      out[threadIdx.x] = buf[31 - threadIdx.x];
    }
    """
    fn = sim.RawModule(code=src).get_function("big")
    out = np.zeros(32, np.int32)
    with pytest.raises(sim.LaunchArgumentError, match="set max_dynamic_shared_size_bytes first"):
        fn((1,), (32,), (out,), shared_mem=64 * 1024)
    fn.max_dynamic_shared_size_bytes = 100 * 1024
    fn((1,), (32,), (out,), shared_mem=64 * 1024)
    assert out.tolist() == list(range(31, -1, -1))
