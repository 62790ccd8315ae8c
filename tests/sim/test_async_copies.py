"""Asynchronous copies (kernels/async_copy.cuh) on the simulator: copies land only at the wait
that completes their group, their destination holds the poison until then, and a kernel that
breaks the protocol faults (sim.AsyncCopyError) with the kernel, block, thread and line."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from cutopk import sim

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEADER = (ROOT / "kernels" / "async_copy.cuh").read_text()
POISON = np.uint32(0xCDCDCDCD)

KERNELS = r"""
// Each thread copies CHUNKS chunks of 16 bytes (4 ints), a group per chunk, all issued first;
// then chunk by chunk: wait until the later chunks alone are pending, barrier, read the chunk
// another thread copied (the block's threads in reverse).
constexpr int CHUNKS = 4;
constexpr int THREADS = 64;
extern "C" __global__ void chunked(const int* in, int* out) {
  __shared__ __align__(16) int buf[CHUNKS][THREADS * 4];
  const int t = threadIdx.x, n = blockDim.x;
  const int* row = in + blockIdx.x * CHUNKS * n * 4;
  for (int c = 0; c < CHUNKS; ++c) {
    cutopk::copy16_async(&buf[c][t * 4], row + (c * n + t) * 4);
    cutopk::commit_copies();
  }
  for (int c = 0; c < CHUNKS; ++c) {
    cutopk::wait_copies(CHUNKS - 1 - c);
    __syncthreads();
    for (int j = 0; j < 4; ++j) out[((blockIdx.x * CHUNKS + c) * n + t) * 4 + j] = buf[c][(n - 1 - t) * 4 + j];
  }
}

// Two groups, a wait that leaves the newer pending: the newer one still reads as the poison.
extern "C" __global__ void early_read(const int* in, int* out) {
  __shared__ __align__(16) int buf[2][32 * 4];
  const int t = threadIdx.x;
  for (int c = 0; c < 2; ++c) {
    cutopk::copy16_async(&buf[c][t * 4], in + (c * 32 + t) * 4);
    cutopk::commit_copies();
  }
  cutopk::wait_copies(1);
  __syncthreads();
  for (int c = 0; c < 2; ++c)
    for (int j = 0; j < 4; ++j) out[(c * 32 + t) * 4 + j] = buf[c][t * 4 + j];
  cutopk::wait_copies(0);
}

// Reads another thread's copy after its own wait; `barrier` says whether a __syncthreads orders
// the other thread's wait before the read. (Every thread has issued its copy by the first
// barrier: issued is not enough.)
extern "C" __global__ void neighbour(const int* in, int* out, int barrier) {
  __shared__ __align__(16) int buf[64 * 4];
  const int t = threadIdx.x, n = blockDim.x;
  cutopk::copy16_async(&buf[t * 4], in + t * 4);
  cutopk::commit_copies();
  __syncthreads();
  cutopk::wait_copies(0);
  if (barrier) __syncthreads();
  for (int j = 0; j < 4; ++j) out[t * 4 + j] = buf[((t + 1) % n) * 4 + j];
}

// A copy issued after the last commit belongs to no group: wait_copies(0) leaves it pending.
extern "C" __global__ void uncommitted(const int* in, int* out) {
  __shared__ __align__(16) int buf[32 * 4];
  const int t = threadIdx.x;
  cutopk::copy16_async(&buf[t * 4], in + t * 4);
  cutopk::wait_copies(0);
  out[t * 2] = buf[t * 4];
  cutopk::commit_copies();
  cutopk::wait_copies(0);
  out[t * 2 + 1] = buf[t * 4];
}

// GROUPS groups of one copy each, then a wait for at most `pending` of them.
constexpr int GROUPS = 9;
extern "C" __global__ void many_groups(const int* in, int* out, int pending) {
  __shared__ __align__(16) int buf[GROUPS][32 * 4];
  const int t = threadIdx.x;
  for (int g = 0; g < GROUPS; ++g) {
    cutopk::copy16_async(&buf[g][t * 4], in + (g * 32 + t) * 4);
    cutopk::commit_copies();
  }
  cutopk::wait_copies(pending);
  for (int g = 0; g < GROUPS; ++g) out[g * 32 + t] = buf[g][t * 4];  // its own copies: no barrier
  cutopk::wait_copies(0);
}

// mode 0: committed, never waited for; mode 1: waited for, never committed.
extern "C" __global__ void exits_pending(const int* in, int mode) {
  __shared__ __align__(16) int buf[32 * 4];
  const int t = threadIdx.x;
  if (t == 5) cutopk::copy16_async(&buf[t * 4], in + t * 4);  // BUG: the copy left pending
  if (mode == 0) cutopk::commit_copies();
  if (mode == 1) cutopk::wait_copies(0);
}

// Addresses cp.async refuses: `dst_off` / `src_off` bytes off 16-byte alignment, or the copy
// (mode 1) into global memory, (mode 2) from shared memory, (mode 3) past dynamic shared memory.
extern "C" __global__ void bad_address(const int* in, int* out, int dst_off, int src_off, int mode) {
  __shared__ __align__(16) int buf[64];
  extern __shared__ __align__(16) unsigned char dyn[];
  char* dst = reinterpret_cast<char*>(buf) + dst_off;
  const char* src = reinterpret_cast<const char*>(in) + src_off;
  if (mode == 1) dst = reinterpret_cast<char*>(out);
  if (mode == 2) src = reinterpret_cast<const char*>(buf + 32);
  if (mode == 3) dst = reinterpret_cast<char*>(dyn) + 16;
  if (threadIdx.x == 3) cutopk::copy16_async(dst, src);  // BUG: the refused copy
  cutopk::commit_copies();
  cutopk::wait_copies(0);
}

// A write (mode 0) or a second copy (mode 1) to a destination whose copy is pending.
extern "C" __global__ void write_pending(const int* in, int mode) {
  __shared__ __align__(16) int buf[32 * 4];
  const int t = threadIdx.x;
  cutopk::copy16_async(&buf[t * 4], in + t * 4);
  if (t == 7 && mode == 0) buf[t * 4 + 2] = 1;  // BUG: written while pending
  if (t == 7 && mode == 1) cutopk::copy16_async(&buf[t * 4], in + 32 * 4);  // BUG: copied again
  cutopk::commit_copies();
  cutopk::wait_copies(0);  // where it is found
}

// Bulk copies: tiles of TILE ints through two stages, thread 0 copying tile i + 1 (in two
// copies) while the block reads tile i in reverse. `all_wait` 0: only thread 0 waits (a bug).
constexpr int TILE = 256;
extern "C" __global__ void bulk_tiles(const int* in, int* out, int tiles, int all_wait) {
  __shared__ __align__(16) int buf[2][TILE];
  __shared__ cutopk::CopyBarrier full[2];
  const int t = threadIdx.x;
  if (t == 0) {
    cutopk::copy_barrier_init(&full[0]);
    cutopk::copy_barrier_init(&full[1]);
  }
  __syncthreads();
  for (int i = -1; i < tiles; ++i) {
    const int next = (i + 1) & 1;
    if (t == 0 && i + 1 < tiles) {
      const int* src = in + (blockIdx.x * tiles + i + 1) * TILE;
      cutopk::bulk_copy_async(buf[next], src, TILE * 2, &full[next]);
      cutopk::bulk_copy_async(buf[next] + TILE / 2, src + TILE / 2, TILE * 2, &full[next]);
      cutopk::copy_barrier_arrive(&full[next], TILE * 4);
    }
    if (i < 0) continue;
    const int stage = i & 1;
    if (all_wait || t == 0) cutopk::copy_barrier_wait(&full[stage], (i >> 1) & 1);
    for (int j = t; j < TILE; j += blockDim.x) out[(blockIdx.x * tiles + i) * TILE + j] = buf[stage][TILE - 1 - j];
    __syncthreads();  // every thread has read buf[stage] before tile i + 2 is copied into it
  }
}

// mode 0: right; 1: the arrival names too few bytes; 2: two threads copy in one phase; 3: no
// arrival; 4: no thread waits; 5: a misaligned destination; 6: a size not a multiple of 16;
// 7: a barrier never initialised.
extern "C" __global__ void bulk_bugs(const int* in, int* out, int mode) {
  __shared__ __align__(16) int buf[64];
  __shared__ cutopk::CopyBarrier bar;
  const int t = threadIdx.x;
  if (t == 0 && mode != 7) cutopk::copy_barrier_init(&bar);
  __syncthreads();
  int* dst = mode == 5 ? buf + 1 : buf;
  if (t == 0) cutopk::bulk_copy_async(dst, in, mode == 6 ? 100 : 128, &bar);  // BUG: the bulk copy
  if (t == 1 && mode == 2) cutopk::bulk_copy_async(buf + 32, in + 32, 128, &bar);  // BUG: a second thread
  __syncthreads();
  if (t == 0 && mode != 3) cutopk::copy_barrier_arrive(&bar, mode == 1 ? 64 : 128);  // BUG: the arrival
  if (mode != 4) cutopk::copy_barrier_wait(&bar, 0);
  out[t] = buf[t];
}
"""

SOURCE = HEADER + KERNELS


def line_of(fragment: str) -> int:
    return next(i + 1 for i, line in enumerate(SOURCE.splitlines()) if fragment in line)


def aligned(n: int, fill=None) -> np.ndarray:
    """``n`` int32 starting at a multiple of 32 bytes (a GPU allocation's alignment)."""
    raw = np.zeros(4 * n + 32, np.uint8)
    start = -raw.ctypes.data % 32
    out = raw[start : start + 4 * n].view(np.int32)
    if fill is not None:
        out[...] = fill
    return out


@pytest.fixture(scope="module")
def mod():
    return sim.RawModule(code=SOURCE)


def where(info) -> str:
    """The line named by a fault's message (empty without addr2line)."""
    msg = str(info.value)
    return msg[msg.index("at kernel.cu") :] if "at kernel.cu" in msg else ""


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_chunked_kernel_that_keeps_the_protocol_is_exact(seed):
    blocks, chunks, threads = 3, 4, 64
    x = aligned(blocks * chunks * threads * 4, fill=np.arange(blocks * chunks * threads * 4))
    out = aligned(x.size)
    sim.RawModule(code=SOURCE, seed=seed).get_function("chunked")(blocks, threads, (x, out))
    expected = x.reshape(blocks, chunks, threads, 4)[:, :, ::-1, :].reshape(-1)
    assert np.array_equal(out, expected)


def test_a_copy_reads_as_the_poison_until_its_group_is_waited_for(mod):
    x = aligned(2 * 32 * 4, fill=np.arange(2 * 32 * 4) + 1)
    out = aligned(x.size)
    mod.get_function("early_read")(1, 32, (x, out))
    assert np.array_equal(out[: 32 * 4], x[: 32 * 4])  # the older group landed at wait_copies(1)
    assert (out[32 * 4 :].view(np.uint32) == POISON).all()  # the newer one is still in flight


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_another_threads_copy_needs_the_barrier_after_its_wait(seed):
    """The model: a thread's copies land when its own wait completes them, and a wait lets the
    other threads run first. A barrier after every thread's wait orders all copies before the
    reads after it; without one, a read of another thread's copy sees it only where that thread
    happened to wait first (in these orders, nearly never)."""
    x = aligned(64 * 4, fill=np.arange(64 * 4) + 1)
    expected = np.roll(x.reshape(64, 4), -1, axis=0).reshape(-1)
    fn = sim.RawModule(code=SOURCE, seed=seed).get_function("neighbour")
    out = aligned(x.size)
    fn(1, 64, (x, out, np.int32(1)))
    assert np.array_equal(out, expected)
    out = aligned(x.size)
    fn(1, 64, (x, out, np.int32(0)))
    assert (out.view(np.uint32) == POISON).any(), "a read before the other thread's wait must see the poison"


def test_wait_copies_leaves_uncommitted_copies_pending(mod):
    x = aligned(32 * 4, fill=np.arange(32 * 4) + 1)
    out = aligned(64)
    mod.get_function("uncommitted")(1, 32, (x, out))
    assert (out[0::2].view(np.uint32) == POISON).all()  # wait_copies(0) before the commit: pending
    assert np.array_equal(out[1::2], x[0::4])  # committed, then waited for: landed


@pytest.mark.parametrize(("pending", "landed"), [(0, 9), (3, 6), (7, 2), (8, 2), (9, 2), (100, 2)])
def test_wait_copies_distinguishes_at_most_seven_pending_groups(mod, pending, landed):
    x = aligned(9 * 32 * 4, fill=np.arange(9 * 32 * 4) + 1)
    out = aligned(9 * 32)
    mod.get_function("many_groups")(1, 32, (x, out, np.int32(pending)))
    got = out.reshape(9, 32)
    assert np.array_equal(got[:landed], x.reshape(9, 32, 4)[:landed, :, 0])
    assert (got[landed:].view(np.uint32) == POISON).all()


@pytest.mark.parametrize(("mode", "never_committed"), [(0, 0), (1, 1)])
def test_exiting_with_copies_pending_faults(mod, mode, never_committed):
    x = aligned(32 * 4)
    with pytest.raises(sim.AsyncCopyError) as info:
        mod.get_function("exits_pending")(1, 32, (x, np.int32(mode)))
    msg = str(info.value)
    assert msg.startswith("kernel 'exits_pending': block (0,0,0) thread (5,0,0) [warp 0 lane 5]: ")
    assert f"exited with 1 copy16_async copies pending ({never_committed} of them never committed" in msg
    assert "into static shared offset 80" in msg and "asynchronous copy misuse" in msg
    if shutil.which("addr2line"):
        assert where(info) == f"at kernel.cu line {line_of('BUG: the copy left pending')} (in exits_pending)"


@pytest.mark.parametrize(
    ("dst_off", "src_off", "mode", "shared_mem", "fragment"),
    [
        (8, 0, 0, 0, r"destination 0x[0-9a-f]+ \(static shared offset 8\) is not 16-byte aligned"),
        (0, 4, 0, 0, r"source 0x[0-9a-f]+ is not 16-byte aligned"),
        (0, 0, 1, 0, r"destination 0x[0-9a-f]+ is not in this block's shared memory"),
        (0, 0, 2, 0, r"source 0x[0-9a-f]+ is in shared memory"),
        (
            0,
            0,
            3,
            24,
            r"destination 0x[0-9a-f]+: its 16 bytes run past the block's shared memory \(256 bytes static, 24 dynamic\)",
        ),
    ],
)
def test_addresses_that_cp_async_refuses_fault(mod, dst_off, src_off, mode, shared_mem, fragment):
    x, out = aligned(64), aligned(64)
    args = (x, out, np.int32(dst_off), np.int32(src_off), np.int32(mode))
    with pytest.raises(
        sim.AsyncCopyError, match=r"thread \(3,0,0\) \[warp 0 lane 3\]: copy16_async " + fragment
    ):
        mod.get_function("bad_address")(1, 32, args, shared_mem=shared_mem)
    if shutil.which("addr2line"):
        with pytest.raises(sim.AsyncCopyError) as info:
            mod.get_function("bad_address")(1, 32, args, shared_mem=shared_mem)
        assert where(info) == f"at kernel.cu line {line_of('BUG: the refused copy')} (in bad_address)"
    # The same kernel with good addresses runs.
    mod.get_function("bad_address")(1, 32, (x, out, np.int32(0), np.int32(0), np.int32(0)), shared_mem=32)


@pytest.mark.parametrize("mode", [0, 1])
def test_a_pending_destination_written_is_found_at_the_wait(mod, mode):
    x = aligned(33 * 4, fill=1)
    with pytest.raises(sim.AsyncCopyError) as info:
        mod.get_function("write_pending")(1, 32, (x, np.int32(mode)))
    msg = str(info.value)
    assert (
        "thread (7,0,0)" in msg and "(static shared offset 112) of a pending copy16_async was written" in msg
    )
    if shutil.which("addr2line"):
        assert where(info) == f"at kernel.cu line {line_of('where it is found')} (in write_pending)"


def test_traffic_counts_the_copied_bytes():
    if sim._module._environ.flag("CUTOPK_SIM_ASAN"):
        pytest.skip("traffic counting and AddressSanitizer builds exclude each other")
    blocks, chunks, threads = 2, 4, 64
    x = aligned(blocks * chunks * threads * 4, fill=np.arange(blocks * chunks * threads * 4))
    out = aligned(x.size)
    counting = sim.RawModule(code=SOURCE, count_traffic=True)
    counting.get_function("chunked")(blocks, threads, (x, out))
    record = counting.traffic[-1]
    assert (record.bytes_read, record.bytes_written) == (x.nbytes, out.nbytes)
    assert record.sectors == (x.nbytes + out.nbytes) // 32


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_bulk_copies_through_two_stages_are_exact(seed):
    blocks, tiles = 2, 5
    x = aligned(blocks * tiles * 256, fill=np.arange(blocks * tiles * 256) + 1)
    out = aligned(x.size)
    fn = sim.RawModule(code=SOURCE, seed=seed).get_function("bulk_tiles")
    fn(blocks, 64, (x, out, np.int32(tiles), np.int32(1)))
    assert np.array_equal(out, x.reshape(-1, 256)[:, ::-1].reshape(-1))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_bulk_copy_read_without_the_wait_sees_the_poison(seed):
    """The bytes land at the first wait that sees their phase complete; a thread that reads
    without waiting itself sees them only where that wait happened to run first."""
    x = aligned(3 * 256, fill=np.arange(3 * 256) + 1)
    out = aligned(x.size)
    fn = sim.RawModule(code=SOURCE, seed=seed).get_function("bulk_tiles")
    fn(1, 64, (x, out, np.int32(3), np.int32(0)))
    assert (out.view(np.uint32) == POISON).any()


@pytest.mark.parametrize(
    ("mode", "fragment", "bug"),
    [
        (
            1,
            r"copy_barrier_arrive expects 64 bytes, but the open phase's bulk copies on 0x[0-9a-f]+ total 128",
            "the arrival",
        ),
        (
            2,
            r"thread \(1,0,0\).*bulk_copy_async on the copy barrier 0x[0-9a-f]+, whose open phase thread 0 copies to",
            "a second thread",
        ),
        (
            4,
            r"the block ended with 1 bulk copies on the copy barrier 0x[0-9a-f]+ not landed \(their phase completed, but no thread waited",
            "the bulk copy",
        ),
        (
            5,
            r"bulk_copy_async destination 0x[0-9a-f]+ \(static shared offset 4\) is not 16-byte aligned",
            "the bulk copy",
        ),
        (6, r"bulk_copy_async of 100 bytes: the size must be a positive multiple of 16", "the bulk copy"),
        (
            7,
            r"bulk_copy_async on the copy barrier 0x[0-9a-f]+, which no copy_barrier_init of this block initialised",
            "the bulk copy",
        ),
    ],
)
def test_bulk_copies_that_break_the_protocol_fault(mod, mode, fragment, bug):
    x, out = aligned(64, fill=1), aligned(32)
    with pytest.raises(sim.AsyncCopyError, match=fragment) as info:
        mod.get_function("bulk_bugs")(1, 32, (x, out, np.int32(mode)))
    if shutil.which("addr2line"):
        assert where(info) == f"at kernel.cu line {line_of('BUG: ' + bug)} (in bulk_bugs)"
    mod.get_function("bulk_bugs")(1, 32, (x, out, np.int32(0)))
    assert (out == 1).all()


def test_a_wait_for_a_phase_without_its_arrival_is_a_deadlock():
    x, out = aligned(64, fill=1), aligned(32)
    with pytest.raises(
        sim.DeadlockError, match=r"copy_barrier_wait for the phase of parity 0 .* never completes"
    ):
        sim.RawModule(code=SOURCE, spin_budget=10_000).get_function("bulk_bugs")(1, 32, (x, out, np.int32(3)))


def test_traffic_counts_the_bulk_copied_bytes():
    if sim._module._environ.flag("CUTOPK_SIM_ASAN"):
        pytest.skip("traffic counting and AddressSanitizer builds exclude each other")
    x = aligned(2 * 4 * 256, fill=1)
    out = aligned(x.size)
    counting = sim.RawModule(code=SOURCE, count_traffic=True)
    counting.get_function("bulk_tiles")(2, 64, (x, out, np.int32(4), np.int32(1)))
    record = counting.traffic[-1]
    assert (record.bytes_read, record.bytes_written) == (x.nbytes, out.nbytes)
    assert record.sectors == (x.nbytes + out.nbytes) // 32


ASAN_SCRIPT = textwrap.dedent(
    """
    import numpy as np, sys
    sys.path.insert(0, {root!r})
    from cutopk import sim
    sys.path.insert(0, {here!r})
    from test_async_copies import SOURCE
    mod = sim.RawModule(code=SOURCE, asan=True, isolate=True)
    x = np.zeros({n}, np.int32)
    try:
        mod.get_function({kernel!r})(1, 64, (x, np.zeros({full}, np.int32), *{extra}))
    except sim.KernelCrashError as exc:
        print("caught:", exc)
    else:
        print("no error")
    """
)


@pytest.mark.asan
@pytest.mark.parametrize(
    ("kernel", "full", "extra"),
    [("chunked", 4 * 64 * 4, "()"), ("bulk_tiles", 2 * 256, "(np.int32(2), np.int32(1))")],
)
@pytest.mark.parametrize("short", [0, 4])
def test_a_copy_source_out_of_bounds_is_caught_under_asan(kernel, full, extra, short):
    """A copy's source read is an instrumented read: an input one 16-byte chunk short (4 ints)
    is a heap-buffer-overflow."""
    from test_faults import _libasan

    libasan = _libasan()
    if libasan is None:
        pytest.skip("g++'s AddressSanitizer runtime (libasan.so) is not installed")
    here = os.path.dirname(os.path.abspath(__file__))
    env = {**os.environ, "LD_PRELOAD": libasan, "ASAN_OPTIONS": "detect_leaks=0"}
    script = ASAN_SCRIPT.format(
        root=str(ROOT), here=here, n=full - short, full=full, kernel=kernel, extra=extra
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    if short == 0:
        assert "no error" in proc.stdout
    else:
        assert f"caught: kernel '{kernel}'" in proc.stdout and "heap-buffer-overflow" in proc.stdout
