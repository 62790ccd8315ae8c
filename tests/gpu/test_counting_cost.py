"""The cost of block_row's count (kernels/block_row.cu, ``count_chunks``: the first digit of each held
key and a shared atomicAdd) in instructions per key of its sm_90 SASS, against FlashInfer's
FilteredTopK coarse histogram counted the same way (tools/check_sass.py ``counting_loops``).
FlashInfer's count is recorded (benchmarks/results/2026-12-02-sass/flashinfer_counting.txt: CI
cannot download or build FlashInfer); where benchmarks/flashinfer/build.py has built the shim here,
its count is taken again and must still be the recorded one. block_row is compiled with the newest
NVRTC of ``CUTOPK_NVRTC_DIRS`` (tools/check_nvrtc.py --keep). Each test skips, saying why, where
its NVRTC, cuobjdump/nvdisasm or shim is missing."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import check_sass  # noqa: E402

REFERENCE = ROOT / "benchmarks" / "results" / "2026-12-02-sass" / "flashinfer_counting.txt"
FOLDERS = [d for d in os.environ.get("CUTOPK_NVRTC_DIRS", "").split(os.pathsep) if d]
# The LLM dtypes, by block_row's kernel names and FlashInfer's mangled element types.
DTYPES = {"float32": "f", "float16": "6__half", "bfloat16": "13__nv_bfloat16"}
NO_TOOLS = "cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"


def recorded() -> dict[str, str]:
    """{dtype: the line check_sass.py --counting printed for FlashInfer's kernel}."""
    out = {}
    for line in REFERENCE.read_text().splitlines():
        if line and not line.startswith("#"):
            dtype, printed = line.split("\t")
            out[dtype] = printed
    return out


def per_key(printed: str) -> float:
    return float(printed.split(" per key ")[0].rsplit(": ", 1)[1])


def flashinfer_kernel(dtype: str) -> str:
    vec = 4 if dtype == "float32" else 8
    return f"FilteredTopKUnifiedKernelI{DTYPES[dtype]}iLi{vec}ELb0ELNS0_16FilteredTopKModeE0ELNS0_12TopKTieBreakE0E"


def test_the_recorded_reference_names_each_dtype_and_its_kernel():
    lines = recorded()
    assert sorted(lines) == sorted(DTYPES)
    for dtype, printed in lines.items():
        assert flashinfer_kernel(dtype) in printed and "(sm_90): loop at " in printed, printed
        assert 5 < per_key(printed) < 30, printed


def newest(folders: list[str]) -> str:
    """The folder whose NVRTC is the newest (by the version of its nvidia_cuda_nvrtc wheel)."""

    def version(folder: str) -> tuple[int, ...]:
        found = sorted(pathlib.Path(folder).glob("nvidia_cuda_nvrtc*.dist-info"))
        digits = found[0].name.split("-")[1].split(".") if found else ["0"]
        return tuple(int(d) for d in digits if d.isdigit())

    return max(folders, key=version)


@pytest.fixture(scope="module")
def block_row_sm90(tmp_path_factory):
    if not FOLDERS:
        pytest.skip(
            "no NVRTC wheel folder: set CUTOPK_NVRTC_DIRS (python tools/check_nvrtc.py --install DIR VERSION)"
        )
    if check_sass.find_cuobjdump()[0] is None:
        pytest.skip(NO_TOOLS)
    keep = tmp_path_factory.mktemp("block_row_cubins")
    cmd = [sys.executable, str(ROOT / "tools" / "check_nvrtc.py"), newest(FOLDERS), "--family", "block_row"]
    proc = subprocess.run(
        [*cmd, "--arch", "90", "--no-alone", "--keep", str(keep)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    cubins = [p.read_bytes() for p in sorted(keep.glob("*-sm_90-block_row_topk_*.cubin"))]
    return check_sass.disassemble_cubins("sm_90", cubins)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_block_rows_count_costs_at_most_flashinfers_per_key(block_row_sm90, dtype):
    code = block_row_sm90[("sm_90", f"block_row_topk_{dtype}")]
    loop = check_sass.held_counting_loop(code)
    assert loop is not None, f"block_row_topk_{dtype}: no count of the held row (LDS.128 and ATOMS) found"
    reference = recorded()[dtype]
    print(f"block_row_topk_{dtype} (sm_90): {loop}\nFlashInfer: {reference}")
    assert round(loop.per_key, 1) <= per_key(reference), (
        f"block_row_topk_{dtype}: {loop}; FlashInfer: {reference}"
    )


def test_the_built_shim_still_counts_the_recorded_number():
    shims = sorted((ROOT / "build" / "flashinfer").glob("libcutopk_flashinfer-sm_90-*.so"))
    if not shims:
        pytest.skip(
            "no FlashInfer shim for sm_90 in build/flashinfer (python benchmarks/flashinfer/build.py --arch sm_90)"
        )
    if check_sass.find_cuobjdump()[0] is None:
        pytest.skip(NO_TOOLS)
    functions = check_sass.disassemble(str(shims[-1]))
    for dtype, printed in recorded().items():
        (name,) = [n for (arch, n) in functions if arch == "sm_90" and flashinfer_kernel(dtype) in n]
        first = check_sass.counting_loops(functions[("sm_90", name)])[0]
        assert f"{name} (sm_90): {first}" == printed
