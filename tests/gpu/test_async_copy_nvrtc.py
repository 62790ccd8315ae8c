"""kernels/async_copy.cuh compiles with NVRTC for sm_75, sm_80 and sm_90 (the cubin: ptxas reads
every inline-asm instruction), each architecture taking its own branch: cp.async.bulk and
mbarrier.try_wait on sm_90, cp.async and cp.async.mbarrier.arrive.noinc on sm_80, neither on
sm_75. Run per NVRTC wheel folder of ``CUTOPK_NVRTC_DIRS`` (as tests/gpu/test_nvrtc.py); without
one the test skips, with the reason."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDERS = [d for d in os.environ.get("CUTOPK_NVRTC_DIRS", "").split(os.pathsep) if d]

KERNEL = r"""
extern "C" __global__ void __launch_bounds__(64) uses_every_copy(const int* in, int* out, int pending) {
  __shared__ __align__(16) int buf[2][256];
  __shared__ cutopk::CopyBarrier full[2];
  const int t = threadIdx.x;
  cutopk::copy16_async(&buf[0][t * 4], in + t * 4);
  cutopk::commit_copies();
  cutopk::wait_copies(pending);
  cutopk::wait_copies(0);
  __syncthreads();
  if (t == 0) {
    cutopk::copy_barrier_init(&full[0]);
    cutopk::copy_barrier_init(&full[1]);
  }
  __syncthreads();
  if (t == 0) {
    cutopk::bulk_copy_async(buf[1], in + 256, 512, &full[1]);
    cutopk::bulk_copy_async(buf[1] + 128, in + 384, 512, &full[1]);
    cutopk::copy_barrier_arrive(&full[1], 1024);
  }
  cutopk::copy_barrier_wait(&full[1], 0);
  cutopk::copy_barrier_wait(&full[1], 0);  // a second wait: its asm labels are scoped
  out[t] = buf[0][255 - t] + buf[1][255 - t];
}
"""

SCRIPT = textwrap.dedent(
    """
    import ctypes, json, pathlib, sys
    sys.path.insert(0, {tools!r})
    import check_nvrtc
    folder = pathlib.Path({folder!r})
    nvrtc = check_nvrtc.Nvrtc(check_nvrtc.find_library(folder))
    source = pathlib.Path({source!r}).read_text()
    out = {{"version": ".".join(map(str, nvrtc.version))}}
    for arch in ("75", "80", "90"):
        ok, log, _, cubin = nvrtc.compile_cubin(source, "async_copy.cu", check_nvrtc.cupy_options(folder, arch), [])
        options = [o.replace("-arch=sm_", "-arch=compute_") for o in check_nvrtc.cupy_options(folder, arch)]
        prog = ctypes.c_void_p()
        nvrtc._call("nvrtcCreateProgram", ctypes.byref(prog), source.encode(), b"async_copy.cu", 0, None, None)
        opts = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
        ptx = ""
        if nvrtc.lib.nvrtcCompileProgram(prog, len(options), opts) == 0:
            size = ctypes.c_size_t()
            nvrtc._call("nvrtcGetPTXSize", prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            nvrtc._call("nvrtcGetPTX", prog, buf)
            ptx = buf.value.decode()
        nvrtc.lib.nvrtcDestroyProgram(ctypes.byref(prog))
        out[arch] = {{"ok": ok and cubin is not None, "log": log[-3000:], "ptx": ptx}}
    print(json.dumps(out))
    """
)

# Instructions each architecture's PTX must hold, and must not.
EXPECTED = {
    "75": ((), ("cp.async", "mbarrier")),
    "80": (
        (
            "cp.async.cg.shared.global",
            "cp.async.wait_group",
            "cp.async.mbarrier.arrive.noinc",
            "mbarrier.test_wait.parity",
        ),
        ("cp.async.bulk", "expect_tx", "try_wait"),
    ),
    "90": (
        (
            "cp.async.cg.shared.global",
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
            "mbarrier.arrive.expect_tx",
            "mbarrier.try_wait.parity",
            "fence.mbarrier_init.release.cluster",
        ),
        ("cp.async.mbarrier.arrive.noinc", "test_wait"),
    ),
}


@pytest.mark.skipif(
    not FOLDERS,
    reason="no NVRTC wheel folder: set CUTOPK_NVRTC_DIRS (python tools/check_nvrtc.py --install DIR VERSION)",
)
@pytest.mark.parametrize("folder", FOLDERS)
def test_async_copies_compile_for_each_architecture_with_its_own_instructions(folder, tmp_path):
    source = tmp_path / "async_copy.cu"
    source.write_text((ROOT / "kernels" / "async_copy.cuh").read_text() + KERNEL)
    script = SCRIPT.format(tools=str(ROOT / "tools"), folder=folder, source=str(source))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    for arch, (present, absent) in EXPECTED.items():
        got = result[arch]
        assert got["ok"], f"NVRTC {result['version']}, sm_{arch}:\n{got['log']}"
        for instruction in present:
            assert instruction in got["ptx"], f"NVRTC {result['version']}, compute_{arch}: no {instruction}"
        for instruction in absent:
            assert instruction not in got["ptx"], f"NVRTC {result['version']}, compute_{arch}: {instruction}"
