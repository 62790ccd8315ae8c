"""Building the FlashInfer shim (``benchmarks/flashinfer/cutopk_flashinfer.cu``) from the FlashInfer
wheel, with nvcc and the wheel's own flags, on a machine without a GPU.

Steps (``benchmarks/flashinfer/build.py`` runs them):

1. the wheel: ``pip download flashinfer-python==<VERSION> --no-deps`` into ``build/flashinfer-wheel/``
   (or a wheel passed with ``--wheel``);
2. the sources the shim needs are extracted into ``build/flashinfer-src/<VERSION>/``: the headers
   (``flashinfer/data/include``), the bundled CCCL (``flashinfer/data/cccl``: CUB 3.6, whose
   ``DeviceBatchedTopK`` FlashInfer's CUB backend calls) and ``csrc/cub_topk.cu``;
3. ``fi_cub_core.inc``: ``csrc/cub_topk.cu`` up to its tvm-ffi entry points (the CUB core, unchanged),
   with ``benchmarks/flashinfer/tvm_ffi_standin.h`` in place of the tvm-ffi headers;
4. nvcc with the flags FlashInfer's JIT uses for its ``topk`` module (``flashinfer/jit/core.py``:
   ``gen_jit_spec`` and ``build_cuda_cflags``; sm_9x gets the ``a`` suffix as FlashInfer's
   ``CompilationContext`` gives it), plus ``-shared -cudart static`` so that the library needs only
   the driver.

Only the library (``build/flashinfer/*.so``) travels to the GPU machine; the extracted sources stay.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

from cutopk._demo import env

from . import flashinfer as fi

WHEEL_DIR = env.REPO / "build" / "flashinfer-wheel"
SRC_ROOT = env.REPO / "build" / "flashinfer-src"
STANDIN = fi.STANDIN
PACKAGE = "flashinfer-python"
# What the shim needs from the wheel (prefixes of members).
MEMBERS = ("flashinfer/data/include/flashinfer/", "flashinfer/data/cccl/cub/cub/",
           "flashinfer/data/cccl/libcudacxx/include/", "flashinfer/data/cccl/thrust/thrust/",
           "flashinfer/data/csrc/cub_topk.cu", "flashinfer/_build_meta.py")  # fmt: skip
# Where csrc/cub_topk.cu's tvm-ffi entry points begin: everything above is the CUB core.
CUB_CORE_END = "// Input-side validation shared by every CUB entry"
# FlashInfer's JIT flags for the topk module (no -gencode: see gencode()).
JIT_FLAGS = ["-std=c++17", "-use_fast_math", "-Xfatbin=-compress-all", "--compress-mode=size",
             "-DFLASHINFER_ENABLE_F16", "-DFLASHINFER_ENABLE_BF16", "-DFLASHINFER_ENABLE_FP8_E4M3",
             "-DFLASHINFER_ENABLE_FP8_E5M2", "-DNDEBUG", "-O3", "--expt-relaxed-constexpr",
             "-static-global-template-stub=false", "-DFLASHINFER_ENABLE_FP8_E8M0",
             "-DFLASHINFER_ENABLE_FP4_E2M1", "-lineinfo"]  # fmt: skip


def gencode(arch: str) -> str:
    """FlashInfer's -gencode for ``sm_XY``: sm_9x targets ``sm_9xa`` (its kernels may use sm_90a
    features), older ones plain."""
    m = re.fullmatch(r"sm_(\d+)(\d)", arch)
    if not m or int(m.group(1) + m.group(2)) < 75:
        raise ValueError(f"arch: expected sm_75 or newer, such as 'sm_90' or 'sm_80', got {arch!r}")
    major, minor = m.groups()
    suffix = "a" if major == "9" else ""
    return f"-gencode=arch=compute_{major}{minor}{suffix},code=sm_{major}{minor}{suffix}"


def wheel_name(version: str = fi.VERSION) -> str:
    return f"flashinfer_python-{version}-py3-none-any.whl"


def download(version: str = fi.VERSION, dest: pathlib.Path = WHEEL_DIR) -> pathlib.Path:
    """The wheel from the package index (pip's own client), unless it is already in ``dest``."""
    wheel = dest / wheel_name(version)
    if wheel.is_file():
        return wheel
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", f"{PACKAGE}=={version}", "--no-deps", "-d", str(dest)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not wheel.is_file():
        raise fi.FlashInferUnavailable(f"pip download failed: {(proc.stderr or proc.stdout)[-1500:]}")
    return wheel


def wheel_version(wheel: pathlib.Path) -> str:
    m = re.fullmatch(r"flashinfer_python-([^-]+)-.*\.whl", wheel.name)
    if not m:
        raise ValueError(f"wheel: expected a flashinfer_python-<version>-...whl file, got {wheel.name!r}")
    return m.group(1)


def extract(wheel: pathlib.Path, dest: pathlib.Path | None = None) -> pathlib.Path:
    """The members the shim needs, under ``dest`` (default ``SRC_ROOT/<version>``); reused when done."""
    dest = dest or SRC_ROOT / wheel_version(wheel)
    done = dest / ".complete"
    if done.is_file():
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    try:
        with zipfile.ZipFile(wheel) as z:
            names = [n for n in z.namelist() if n.startswith(MEMBERS) and not n.endswith("/")]
            if not any(n.endswith("include/flashinfer/topk.cuh") for n in names):
                raise fi.FlashInferUnavailable(f"{wheel} has no flashinfer/data/include/flashinfer/topk.cuh")
            for n in names:
                z.extract(n, dest)
    except zipfile.BadZipFile as exc:
        raise fi.FlashInferUnavailable(f"{wheel} is not a wheel: {exc}") from exc
    done.write_text(wheel.name)
    return dest


def data_dir(src: pathlib.Path) -> pathlib.Path:
    return src / "flashinfer" / "data"


def cub_core(src: pathlib.Path) -> pathlib.Path:
    """``fi_cub_core.inc`` next to the extracted sources: csrc/cub_topk.cu's CUB core (see module doc)."""
    text = (data_dir(src) / "csrc" / "cub_topk.cu").read_text()
    if CUB_CORE_END not in text or "CUBBatchedTopK(" not in text:
        raise fi.FlashInferUnavailable("csrc/cub_topk.cu has changed shape: its CUB core was not found")
    core = text[: text.index(CUB_CORE_END)]
    dropped = (
        '#include "topk_transform_checks.h"',
        '#include "tvm_ffi_utils.h"',
        "using tvm::ffi::Optional;",
    )
    for line in dropped:
        core = core.replace(line + "\n", "")
    out = src / "gen" / "fi_cub_core.inc"
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(STANDIN, out.parent / STANDIN.name)
    out.write_text(
        "// Generated by benchmarks/cutopk_bench/flashinfer_build.py from the FlashInfer wheel's csrc/cub_topk.cu:\n"
        "// its CUB core, unchanged, up to the tvm-ffi entry points.\n"
        f'#include "{STANDIN.name}"\n' + core + "}  // namespace\n"
    )
    return out


def nvcc_command(out: pathlib.Path, arch: str, src: pathlib.Path, with_cub: bool, version: str,
                 nvcc: str = "nvcc") -> list[str]:  # fmt: skip
    """The nvcc command line (FlashInfer's JIT flags, its CCCL first on the include path)."""
    data = data_dir(src)
    cmd = [nvcc, *JIT_FLAGS, gencode(arch), "-shared", "-Xcompiler", "-fPIC", "-cudart", "static"]
    cmd += [f"-I{data / 'cccl' / p}" for p in ("cub", "libcudacxx/include", "thrust")]
    cmd += ["-isystem", str(data / "include"), f'-DCUTOPK_FI_VERSION="{version}"']
    if with_cub:
        cmd += ["-DCUTOPK_FI_WITH_CUB", f"-I{src / 'gen'}"]
    return [*cmd, str(fi.SOURCE), "-o", str(out)]


def build(wheel: pathlib.Path, arch: str, out: pathlib.Path | None = None, with_cub: bool = True,
          nvcc: str = "nvcc") -> pathlib.Path:  # fmt: skip
    """Compile the shim for ``arch`` and return the library's path; raises FlashInferUnavailable
    with nvcc's messages when it fails."""
    gencode(arch)  # the arch is checked before anything is extracted
    compiler = shutil.which(nvcc)
    if compiler is None:
        raise fi.FlashInferUnavailable(f"nvcc not found on PATH ({nvcc!r})")
    version = wheel_version(wheel)
    if version != fi.VERSION:
        raise fi.FlashInferUnavailable(
            f"the wheel is FlashInfer {version}; benchmarks/cutopk_bench/flashinfer.py follows {fi.VERSION}'s dispatch"
        )
    src = extract(wheel)
    if with_cub:
        cub_core(src)
    out = out or fi.library_path(arch)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".so.tmp")
    proc = subprocess.run(nvcc_command(tmp, arch, src, with_cub, version, compiler), capture_output=True,
                          text=True, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise fi.FlashInferUnavailable(
            f"nvcc failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-2000:]}"
        )
    tmp.replace(out)  # never leave a half-written library under the final name
    return out
