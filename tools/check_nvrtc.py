"""Compile every program the launcher builds with the NVRTC of pip's CUDA wheels, exactly as CuPy
does, and fail on a compile error, a name expression that does not lower, any register spill or
any local-memory stack frame; and compile each kernel file alone (``-I kernels``), so that every
file includes what it uses. No GPU needed.

    python tools/check_nvrtc.py DIR [DIR ...] [--arch 75 80 90] [--ptx-only] [--ptx-arch 75] [--sass] [--jobs N]
    python tools/check_nvrtc.py DIR --arch 90 --dtype int8 float32 --front-end-dtype uint8 uint32
    python tools/check_nvrtc.py --install DIR VERSION     # VERSION: 12.9, 13.0 or 13.x (the newest)
    python tools/check_nvrtc.py DIR --family block_row --arch 90 --no-alone --keep CUBINS  # then check_sass.py

Each DIR is a ``pip install --target`` folder of NVRTC wheels (``--install`` makes one; see
``WHEELS``); it is checked in its own process, since two NVRTC libraries of one major version
cannot share a process. The options are those of CuPy 13 and 14's ``RawModule`` with
``options=("-std=c++17",)`` (cupy/_core/core.pyx ``assemble_cupy_compiler_options`` and
cupy/cuda/compiler.py): CuPy's CCCL include folders (here the CCCL wheel's), the options given,
CuPy's own include folder (not needed: the kernels include none of its headers), the CUDA
runtime's include folder, ``-ftz=true``, ``-arch=sm_XX`` (CuPy asks for a cubin whenever the
NVRTC knows the architecture), ``--device-as-default-execution-space``; every name expression
added before the compile and lowered after it. ``--ptxas-options=-v`` is added to read the
register report from the program log. Programs with the same source text are compiled once with
the union of their name expressions (the kernels each instantiation compiles are the same).

``--ptx-only``: the ``--arch`` targets to PTX (compute_XX) instead of cubins: the front end
only, no ptxas, so no register report and no spill check; for an NVRTC whose ptxas is checked
elsewhere (NVRTC 13.0.88's ptxas is nvcc 13.0.88's, which tools/check_kernels.py runs on every
kernel for sm_75/80/90). ``--ptx-arch A``: also compile, to PTX for compute_A, the
programs whose source branches on ``__CUDA_ARCH__`` (cluster.cu): there the front end sees other
code on A than on the ``--arch`` targets, while every other program's front-end work is the same
on every architecture. PTX costs about 0.4 of a cubin (measured, NVRTC 13.x, 6 programs: 8.0 CPU
s to compute_90 PTX, 19.5 s to sm_90 cubins, 25.9 s to sm_75 cubins). CI (.ci/run) uses both to
keep the older NVRTCs' check to fewer cubin architectures without leaving a branch unparsed.

``--front-end-dtype T ...``: these element types' programs through NVRTC's front end alone
(``-fdevice-syntax-only``: parsing and template instantiation, no NVVM, no ptxas), on every
``--arch`` and, for the programs that branch on ``__CUDA_ARCH__``, on every ``--ptx-arch``: a
compile error in their code fails the check, as it would in a cubin compile, at about a seventh
of the cost (NVRTC 13.5, the 15 programs of one element type: some 6 CPU s, against some 42 s to
sm_90 cubins). What it cannot see is what the back end decides (registers, spills, the SASS
check): CI gives the cubin compile to other element types of the same key width and kind.

``--sass``: the SASS check of tools/check_sass.py (the rules tools/check_kernels.py applies to
nvcc's objects) on every cubin NVRTC returns, that is on the machine code CuPy would load; it
fails where cuobjdump/nvdisasm are missing, and where a kernel build in ptxas's report is not in
the disassembly. CI runs it on the newest 13.x for sm_75/80/90 instead of a second compile of
every kernel with nvcc. It cost about 100 CPU s of cuobjdump per architecture (156 programs,
0.9-1.2 s for the largest, of 220-250 KB): the 13.x check for sm_75/80/90 took 918 CPU s with it
on 2026-11-27, about 614 s without it (the CI run of 2026-11-26), both on the loaded 2-core
machine, 864 kernel builds disassembled and 0 findings. Most of that was nvdisasm starting once
per cubin (about 0.7 s): an architecture's cubins are now read by one nvdisasm call
(check_sass.disassemble_cubins), which gives the same instructions.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import json
import pathlib
import re
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
import check_sass  # noqa: E402

ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>sm_\d+)'")
SPILL = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads"
)
USAGE = re.compile(r"Used (?P<regs>\d+) registers")

# What --install puts in a folder: the NVRTC and the headers cuda_fp16.h/cuda_bf16.h need
# (runtime, crt, CCCL). "13.x" is the newest 13.x release pip finds; there is no CCCL wheel for
# every 13.x release, so its CCCL is the newest 13.x too.
WHEELS = {
    "12.9": [
        "nvidia-cuda-nvrtc-cu12==12.9.86",
        "nvidia-cuda-runtime-cu12==12.9.*",
        "nvidia-cuda-cccl-cu12==12.9.*",
    ],
    "13.0": [
        "nvidia-cuda-nvrtc==13.0.88",
        "nvidia-cuda-runtime==13.0.*",
        "nvidia-cuda-crt==13.0.*",
        "nvidia-cuda-cccl==13.0.*",
    ],
    "13.x": [
        "nvidia-cuda-nvrtc>=13,<14",
        "nvidia-cuda-runtime>=13,<14",
        "nvidia-cuda-crt>=13,<14",
        "nvidia-cuda-cccl>=13,<14",
    ],
}


class NvrtcError(Exception):
    pass


class Nvrtc:
    """The few NVRTC calls CuPy makes, through ctypes."""

    def __init__(self, lib: pathlib.Path):
        # NVRTC dlopens its builtins library by name at the first compile; a wheel's folder is not
        # on the search path (13.0's libnvrtc has no RPATH), so load it first, under that name.
        for builtins in sorted(lib.parent.glob("libnvrtc-builtins.so.*")):
            ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
        self.lib = ctypes.CDLL(str(lib))
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._call("nvrtcVersion", ctypes.byref(major), ctypes.byref(minor))
        self.version = (major.value, minor.value)

    def _call(self, name, *args):
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            raise NvrtcError(f"{name}: {self.lib.nvrtcGetErrorString(rc).decode()}")

    def compile(self, source: str, name: str, options: list[str], names: list[str]):
        """Compile; returns (ok, log, {name expression: lowered name or None})."""
        return self.compile_cubin(source, name, options, names, cubin=False)[:3]

    def compile_cubin(self, source: str, name: str, options: list[str], names: list[str], cubin=True):
        """Compile; returns (ok, log, lowered, the cubin's bytes or None): the machine code CuPy
        loads, for the SASS check (None for a PTX target or a failed compile)."""
        prog = ctypes.c_void_p()
        self._call("nvrtcCreateProgram", ctypes.byref(prog), source.encode(), name.encode(), 0, None, None)
        try:
            for n in names:
                self._call("nvrtcAddNameExpression", prog, n.encode())
            opts = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
            rc = self.lib.nvrtcCompileProgram(prog, len(options), opts)
            size = ctypes.c_size_t()
            self._call("nvrtcGetProgramLogSize", prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            self._call("nvrtcGetProgramLog", prog, buf)
            log = buf.value.decode(errors="replace")
            lowered = {}
            if rc == 0:
                for n in names:
                    out = ctypes.c_char_p()
                    got = self.lib.nvrtcGetLoweredName(prog, n.encode(), ctypes.byref(out))
                    lowered[n] = out.value.decode() if got == 0 and out.value else None
            code = None
            if rc == 0 and cubin:
                self._call("nvrtcGetCUBINSize", prog, ctypes.byref(size))
                data = ctypes.create_string_buffer(size.value)
                self._call("nvrtcGetCUBIN", prog, data)
                code = data.raw or None
            return rc == 0, log, lowered, code
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))


def find_library(folder: pathlib.Path) -> pathlib.Path:
    libs = sorted(folder.glob("nvidia/*/lib/libnvrtc.so.[0-9]*"))
    if not libs:
        raise SystemExit(f"FAILED: no nvidia/*/lib/libnvrtc.so.<major> under {folder} (see --install)")
    return libs[0]


def include_dirs(folder: pathlib.Path) -> tuple[list[str], str]:
    """(CCCL include folders, the CUDA runtime's include folder) of a wheel folder."""
    runtime = [
        p for p in (folder / "nvidia/cuda_runtime/include", folder / "nvidia/cu13/include") if p.is_dir()
    ]
    if not runtime or not (runtime[0] / "cuda_fp16.h").is_file():
        raise SystemExit(f"FAILED: no CUDA runtime headers (cuda_fp16.h) under {folder}/nvidia")
    cccl = [
        p for p in (folder / "nvidia/cuda_cccl/include", folder / "nvidia/cu13/include/cccl") if p.is_dir()
    ]
    return [str(p) for p in cccl], str(runtime[0])


def cupy_options(folder: pathlib.Path, arch: str, extra=()) -> list[str]:
    cccl, cuda = include_dirs(folder)
    return [
        *(f"-I{p}" for p in cccl),
        "-std=c++17",
        *extra,
        f"-I{cuda}",
        "-ftz=true",
        f"-arch=sm_{arch}",
        "--device-as-default-execution-space",
    ]


def merged_programs(
    families: tuple[str, ...] = (), dtypes: tuple[str, ...] = ()
) -> list[tuple[str, list[str], list[str]]]:
    """The launcher's programs (one per element type and kernel family; only ``families``' and
    ``dtypes``' where given), those with the same source text merged: (source, name expressions,
    the kernels each must build)."""
    from cutopk.cuda import launcher as _launcher

    merged: dict[str, tuple[list[str], list[str]]] = {}
    for program in _launcher.programs():
        if (families and program.family not in families) or (dtypes and program.dtype not in dtypes):
            continue
        names, kernels = merged.setdefault(program.source, ([], []))
        names += [n for n in program.name_expressions if n not in names]
        kernels += [k for k in program.kernels if k not in kernels]
    return [(source, names, kernels) for source, (names, kernels) in merged.items()]


def parse_ptxas(log: str) -> list[dict]:
    """One row per kernel build: its registers, and its stack frame and spills together with those
    of the out-of-line functions ptxas reports after it (``__noinline__`` callees: their
    "Function properties" lines follow the entry's; each is added, not the last one kept, so a
    callee's spills are never hidden by a later callee's clean report)."""
    rows, current = [], None
    for line in log.splitlines():
        if m := ENTRY.search(line):
            current = {"name": m["name"], "arch": m["arch"], "regs": 0, "stack": 0, "stores": 0, "loads": 0}
            rows.append(current)
        elif current and (m := USAGE.search(line)):
            current["regs"] = int(m["regs"])
        elif current and (m := SPILL.search(line)):
            current["stack"] = max(current["stack"], int(m["stack"]))
            current["stores"] += int(m["stores"])
            current["loads"] += int(m["loads"])
    return rows


def alone_programs() -> list[tuple[str, str]]:
    """(name, source) of each kernel file compiled on its own: a header through an #include, a
    .cu file as it is."""
    from cutopk.cuda import launcher as _launcher

    d = _launcher.kernel_dir()
    out = []
    for f in sorted(d.glob("*.cu*")):
        out.append((f.name, f'#include "{f.name}"\n' if f.suffix == ".cuh" else f.read_text()))
    return out


def findings(where: str, log: str, lowered: dict, kernels=()) -> tuple[list[dict], list[str]]:
    """The kernel builds in a program's log (``--ptxas-options=-v``) and what fails: a name
    expression that did not lower or has no build, an ``extern "C"`` kernel of ``kernels`` with no
    build, any spill, any stack frame."""
    failures = [
        f"{where}: the name expression {n} did not lower (nvrtcGetLoweredName)"
        for n, low in lowered.items()
        if low is None
    ]
    pretty = {low: n for n, low in lowered.items() if low}
    rows = parse_ptxas(log)
    for r in rows:
        r["pretty"] = pretty.get(r["name"], r["name"])
        what = []
        if r["stores"] or r["loads"]:
            what.append(f"spills {r['stores']} bytes stored / {r['loads']} bytes loaded")
        if r["stack"]:
            what.append(f"a stack frame of {r['stack']} bytes")
        if what:
            failures.append(f"{where}, {r['pretty']}: " + " and ".join(what))
    built = {r["name"] for r in rows}
    failures += [
        f"{where}: no ptxas report for {n} ({low}): was it compiled?"
        for n, low in lowered.items()
        if low and low not in built
    ]
    failures += [
        f"{where}: no ptxas report for the kernel {k}: was it compiled?" for k in kernels if k not in built
    ]
    return rows, failures


def compile_errors(log: str, limit: int) -> str:
    errors = [ln for ln in log.splitlines() if "error" in ln] or log.splitlines()[-limit:]
    return "\n    " + "\n    ".join(errors[:limit])


def does_not_compile(where: str, i: int, count: int, source: str, log: str) -> str:
    """The failure of program ``i`` (from 0) of ``count``: its kernel file and its errors."""
    return (
        f"{where}: program {i + 1} of {count} does not compile ({kernel_file(source, log)}):"
        + compile_errors(log, 20)
    )


def arch_dependent(source: str) -> bool:
    """Whether the front end sees other code on other architectures (``#if __CUDA_ARCH__``)."""
    return "__CUDA_ARCH__" in source


def ptx_failures(nvrtc, version: str, folder: pathlib.Path, arch: str, programs) -> list[str]:
    """Compile ``programs`` ((index, count, source, name expressions)) to PTX for compute_``arch``:
    the front end only (no ptxas, so no register report): what fails to compile or to lower."""
    where = f"NVRTC {version}, compute_{arch} (PTX)"
    options = [o.replace(f"-arch=sm_{arch}", f"-arch=compute_{arch}") for o in cupy_options(folder, arch)]
    failures = []
    for i, count, source, names in programs:
        ok, log, lowered = nvrtc.compile(source, "cutopk.cu", options, names)
        if not ok:
            failures.append(does_not_compile(where, i, count, source, log))
            continue
        failures += [
            f"{where}: the name expression {n} did not lower" for n, low in lowered.items() if low is None
        ]
    return failures


def front_end_failures(nvrtc, version: str, folder: pathlib.Path, archs, ptx_archs, programs) -> list[str]:
    """``programs`` (merged_programs' triples) through the front end alone
    (``-fdevice-syntax-only``) for sm_``archs``, and those that branch on ``__CUDA_ARCH__`` for
    sm_``ptx_archs`` too: the compile errors, as a cubin compile would report them."""
    failures = []
    targets = [(arch, programs) for arch in archs]
    targets += [
        (arch, [p for p in programs if arch_dependent(p[0])]) for arch in ptx_archs if arch not in archs
    ]
    for arch, chosen in targets:
        where = f"NVRTC {version}, sm_{arch} (front end only)"
        options = cupy_options(folder, arch, ["-fdevice-syntax-only"])
        for i, (source, names, _) in enumerate(chosen):
            ok, log, _ = nvrtc.compile(source, "cutopk.cu", options, names)
            if not ok:
                failures.append(does_not_compile(where, i, len(chosen), source, log))
    return failures


def check_folder(
    folder: pathlib.Path,
    archs: list[str],
    programs: bool,
    alone: bool,
    ptx_archs: tuple[str, ...] = (),
    ptx_only: bool = False,
    sass: bool = False,
    families: tuple[str, ...] = (),
    keep: str = "",
    dtypes: tuple[str, ...] = (),
    front_end_dtypes: tuple[str, ...] = (),
) -> dict:
    """One NVRTC folder, in this process: the report as a dict. ``ptx_only``: the ``archs`` to
    PTX (no cubins, no register report); ``ptx_archs``: the programs that branch on
    ``__CUDA_ARCH__`` to PTX for these as well; ``sass``: the SASS check on every cubin; ``keep``:
    a folder to write every cubin into (``keep_cubin``); ``front_end_dtypes``: these element
    types' programs through the front end alone (``front_end_failures``)."""
    from cutopk.cuda import launcher as _launcher

    nvrtc = Nvrtc(find_library(folder))
    version = "{}.{}".format(*nvrtc.version)
    report = {"folder": str(folder), "version": version, "failures": [], "builds": [], "seconds": {}}
    merged = merged_programs(families, dtypes) if programs else []
    indexed = [(i, len(merged), source, names) for i, (source, names, _) in enumerate(merged)]
    sass_code: dict = {}
    cubin_archs = archs if programs and not ptx_only else []
    if sass and cubin_archs and check_sass.find_cuobjdump()[0] is None:
        report["failures"].append(f"NVRTC {version}: the SASS check cannot run: {NO_CUOBJDUMP}")
        sass = False
    for arch in cubin_archs:
        t0 = time.perf_counter()
        cubins = []  # disassembled together: nvdisasm's start-up is most of one cubin's cost
        for i, (source, names, kernels) in enumerate(merged):
            where = f"NVRTC {version}, sm_{arch}"
            options = cupy_options(folder, arch, ["--ptxas-options=-v"])
            ok, log, lowered, cubin = nvrtc.compile_cubin(
                source, "cutopk.cu", options, names, cubin=sass or bool(keep)
            )
            if not ok:
                report["failures"].append(does_not_compile(where, i, len(merged), source, log))
                continue
            rows, failures = findings(where, log, lowered, kernels)
            report["builds"] += rows
            report["failures"] += failures
            if sass and cubin:
                cubins.append(cubin)
            if keep and cubin:
                keep_cubin(pathlib.Path(keep), version, arch, kernels, cubin)
        if sass:
            sass_code.update(disassemble(f"sm_{arch}", cubins))
        report["seconds"][f"sm_{arch}"] = round(time.perf_counter() - t0, 1)
    if sass and cubin_archs:
        report["sass"] = len(sass_code)
        report["failures"] += sass_failures(version, report["builds"], sass_code)
    ptx = [(arch, indexed) for arch in archs if ptx_only] + [
        (arch, [p for p in indexed if arch_dependent(p[2])]) for arch in ptx_archs
    ]
    for arch, chosen in ptx if programs else []:
        t0 = time.perf_counter()
        report["failures"] += ptx_failures(nvrtc, version, folder, arch, chosen)
        report["ptx_programs"] = report.get("ptx_programs", 0) + len(chosen)
        report["seconds"][f"compute_{arch}"] = round(time.perf_counter() - t0, 1)
    if programs and front_end_dtypes:
        t0 = time.perf_counter()
        chosen = merged_programs(families, front_end_dtypes)
        report["failures"] += front_end_failures(nvrtc, version, folder, archs, ptx_archs, chosen)
        report["front_end_programs"] = len(chosen)
        report["seconds"]["front end"] = round(time.perf_counter() - t0, 1)
    if alone:
        t0 = time.perf_counter()
        kernels = str(_launcher.kernel_dir())
        for name, source in alone_programs():
            options = cupy_options(folder, archs[0], [f"-I{kernels}"])
            ok, log, _ = nvrtc.compile(source, f"alone_{name}", options, [])
            if not ok:
                report["failures"].append(
                    f"NVRTC {version}, sm_{archs[0]}: kernels/{name} does not compile alone (-I kernels):"
                    + compile_errors(log, 10)
                )
        report["seconds"]["alone"] = round(time.perf_counter() - t0, 1)
    return report


def keep_cubin(folder: pathlib.Path, version: str, arch: str, kernels: list[str], cubin: bytes) -> None:
    """Writes a program's cubin as ``<folder>/<NVRTC version>-sm_<arch>-<its first kernel>.cubin``
    (e.g. ``13.5-sm_90-block_row_topk_float32.cubin``), for ``tools/check_sass.py``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{version}-sm_{arch}-{kernels[0] if kernels else 'program'}.cubin").write_bytes(cubin)


NO_CUOBJDUMP = "cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"


def disassemble(arch: str, cubins: list[bytes]) -> dict:
    """check_sass's {(arch, name): instructions} of the cubins of one architecture (``"sm_90"``),
    from one nvdisasm call (check_sass.disassemble_cubins). Checked 2026-11-27 against one
    cuobjdump call per cubin: NVRTC 13.x, all 156 programs' sm_90 cubins, the same instructions
    for all 312 kernels (133.7 s through cuobjdump, 19.1 s in one call); a 25-program sample for
    sm_75 and, with NVRTC 13.0, a 20-program one for sm_80: the same."""
    return check_sass.disassemble_cubins(arch, cubins)


def sass_failures(version: str, builds: list[dict], code: dict) -> list[str]:
    """tools/check_sass.py's rules on the disassembled cubins of one NVRTC, and a failure for
    every kernel build in ptxas's report that the disassembly lacks (the check saw all or fails)."""
    missing = sorted({(r["arch"], r["name"]) for r in builds} - set(code))
    failures = [
        f"NVRTC {version}, {arch}: the SASS of {name} is not in the cubin's disassembly"
        for arch, name in missing
    ]
    return failures + [f"NVRTC {version}, SASS check: {f}" for f in check_sass.check(code)]


def kernel_file(source: str, log: str) -> str:
    """The kernel files the first errors of a program's log point into (the loader marks each
    file's start with a '// ---- NAME' line)."""
    lines = source.splitlines()
    files = []
    for m in re.finditer(r"cutopk\.cu\((\d+)\): error", log):
        marks = [ln[8:] for ln in lines[: int(m[1])] if ln.startswith("// ---- ")]
        if marks and f"kernels/{marks[-1]}" not in files:
            files.append(f"kernels/{marks[-1]}")
    return ", ".join(files) or "see the log"


def run_worker(
    folder: str,
    archs: list[str],
    programs: bool,
    alone: bool,
    ptx_archs=(),
    ptx_only=False,
    sass=False,
    families=(),
    keep="",
    dtypes=(),
    front_end_dtypes=(),
) -> dict:
    """check_folder in a child process (its own NVRTC library)."""
    cmd = [sys.executable, __file__, "--worker", folder, "--arch", *archs]
    if dtypes:
        cmd += ["--dtype", *dtypes]
    if front_end_dtypes:
        cmd += ["--front-end-dtype", *front_end_dtypes]
    if keep:
        cmd += ["--keep", keep]
    if families:
        cmd += ["--family", *families]
    if ptx_archs:
        cmd += ["--ptx-arch", *ptx_archs]
    if ptx_only:
        cmd.append("--ptx-only")
    if sass:
        cmd.append("--sass")
    if not alone:
        cmd.append("--no-alone")
    if not programs:
        cmd.append("--only-alone")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    try:
        return json.loads(proc.stdout.splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {
            "folder": folder,
            "version": "?",
            "builds": [],
            "seconds": {},
            "failures": [
                f"{folder}: the check process failed (exit code {proc.returncode}):\n{proc.stderr[-4000:]}"
            ],
        }


def install(folder: str, version: str) -> int:
    if version not in WHEELS:
        print(f"--install: VERSION must be one of {sorted(WHEELS)}, got {version!r}", file=sys.stderr)
        return 2
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--target", folder, *WHEELS[version]]
    print(" ".join(cmd))
    return subprocess.run(cmd, check=False).returncode


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", help="pip --target folders of NVRTC wheels")
    parser.add_argument("--arch", nargs="+", default=["75", "80", "90"])
    parser.add_argument(
        "--ptx-arch",
        nargs="+",
        default=[],
        help="also compile the programs that branch on __CUDA_ARCH__ to PTX for these (front end only)",
    )
    parser.add_argument(
        "--ptx-only",
        action="store_true",
        help="the --arch targets to PTX only: the front end, no ptxas (no register or spill check)",
    )
    parser.add_argument(
        "--sass",
        action="store_true",
        help="the SASS check (tools/check_sass.py) on every cubin; fails where cuobjdump is missing",
    )
    parser.add_argument("--jobs", type=int, default=1, help="folders checked at once")
    parser.add_argument("--no-alone", dest="alone", action="store_false", help="skip the file-alone check")
    parser.add_argument(
        "--only-alone", dest="programs", action="store_false", help="only the file-alone check (seconds)"
    )
    parser.add_argument(
        "--family", nargs="+", default=[], help="only these kernel families' programs (e.g. streaming)"
    )
    parser.add_argument(
        "--dtype",
        nargs="+",
        default=[],
        help="only these element types' programs (e.g. int8 float16); default: every one",
    )
    parser.add_argument(
        "--front-end-dtype",
        nargs="+",
        default=[],
        help="also these element types' programs, through the front end alone (-fdevice-syntax-only)",
    )
    parser.add_argument(
        "--keep",
        default="",
        metavar="DIR",
        help="write every cubin into DIR (for tools/check_sass.py --counting)",
    )
    parser.add_argument("--install", nargs=2, metavar=("DIR", "VERSION"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.install:
        return install(*args.install)
    if args.worker:
        report = check_folder(
            pathlib.Path(args.worker),
            args.arch,
            args.programs,
            args.alone,
            tuple(args.ptx_arch),
            args.ptx_only,
            args.sass,
            tuple(args.family),
            args.keep,
            tuple(args.dtype),
            tuple(args.front_end_dtype),
        )
        print(json.dumps(report))
        return 0
    from cutopk._request import dtypes as _dtypes

    known = [info.name for info in _dtypes.SUPPORTED.values()]
    for option, given in (("--dtype", args.dtype), ("--front-end-dtype", args.front_end_dtype)):
        unknown = sorted(set(given) - set(known))
        if unknown:
            parser.error(
                f"{option}: expected element types among {', '.join(known)}, got {', '.join(unknown)}"
            )
    if args.front_end_dtype and not args.dtype:
        parser.error("--front-end-dtype needs --dtype: without it every element type is compiled to cubins")
    both = sorted(set(args.dtype) & set(args.front_end_dtype))
    if both:
        parser.error(f"--dtype and --front-end-dtype name the same element types: {', '.join(both)}")
    if not args.folders:
        parser.error("give at least one NVRTC folder (make one with --install DIR VERSION)")
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        reports = list(
            pool.map(
                lambda f: run_worker(
                    f,
                    args.arch,
                    args.programs,
                    args.alone,
                    args.ptx_arch,
                    args.ptx_only,
                    args.sass,
                    args.family,
                    args.keep,
                    args.dtype,
                    args.front_end_dtype,
                ),
                args.folders,
            )
        )
    failures = []
    for rep in reports:
        builds = rep["builds"]
        regs = {}
        for r in builds:
            regs[r["arch"]] = max(regs.get(r["arch"], 0), r["regs"])
        print(
            f"NVRTC {rep['version']} ({rep['folder']}): {len(builds)} kernel builds, "
            + (f"{rep['ptx_programs']} programs to PTX only, " if rep.get("ptx_programs") else "")
            + (
                f"{rep['front_end_programs']} programs through the front end only, "
                if rep.get("front_end_programs")
                else ""
            )
            + (f"{rep['sass']} kernel builds disassembled for the SASS check, " if "sass" in rep else "")
            + f"max registers {', '.join(f'{a} {v}' for a, v in sorted(regs.items()))}; "
            f"seconds {', '.join(f'{k} {v}' for k, v in rep['seconds'].items())}; "
            f"{len(rep['failures'])} failures"
        )
        failures += rep["failures"]
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
