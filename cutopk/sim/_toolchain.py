"""Finding the host compiler and CUDA's headers, and building a module's shared object (cached)."""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

from .. import _environ
from .._host_build import BuildError, build_once, cache_home

RUNTIME_DIR = pathlib.Path(__file__).parent / "runtime"
CACHE_ENV_VAR = "CUTOPK_SIM_CACHE"
# The runtime's code that is the same for every kernel source, compiled once per set of flags
# into objects that every module links (:func:`runtime_objects`).
# The launch: sim_scheduler.cpp with its parts (fibers, shared memory, faults; sim_launch_parts.h),
# the counting build's hooks (sim_traffic.cpp) and the asynchronous copies' model (sim_async.cpp).
RUNTIME_SOURCES = (
    "sim_runtime.cpp",
    "sim_fibers.cpp",
    "sim_shared.cpp",
    "sim_faults.cpp",
    "sim_scheduler.cpp",
    "sim_traffic.cpp",
    "sim_async.cpp",
)
RUNTIME_FILES = (
    "sim_runtime.h",
    "sim_asan.h",
    "sim_intrinsics.h",
    "sim_cluster.h",
    "sim_launch.h",
    "sim_launch_parts.h",
    *RUNTIME_SOURCES,
)
# gnu++17 for the comma elision of the variadic macros (__syncwarp()).
# -fvisibility=hidden and -fno-gnu-unique keep the modules' runtimes apart when several are
# loaded into one process (they would otherwise share the runtime's inline globals).
# -g for the fault reports' kernel lines, inlined callers included (sim/_lines.py; -g1 drops
# those); -fno-var-tracking leaves out the variables' locations, which nothing reads, and a fifth
# of a module's compile time with them.
BASE_FLAGS = (
    "-std=gnu++17",
    "-O1",
    "-g",
    "-fno-var-tracking",
    "-fPIC",
    "-shared",
    "-fvisibility=hidden",
    "-fno-gnu-unique",
    "-w",
)
# timer_create (the watchdog) and dladdr (crash lines) live in libc since glibc 2.34, before in these.
LIBS = ("-lrt", "-ldl")
ASAN_FLAGS = ("-fsanitize=address", "-fno-omit-frame-pointer", "-DCUTOPK_SIM_ASAN")
# The counting build (RawModule(count_traffic=True)): GCC's thread-sanitizer instrumentation calls
# __tsan_{read,write}N for every memory access, which the runtime (sim_traffic.cpp) defines and
# counts. Compiled with these flags, linked without them: no sanitizer runtime is loaded.
TRAFFIC_FLAGS = (
    "-fsanitize=thread",
    "--param=tsan-instrument-func-entry-exit=0",
    "--param=tsan-distinguish-volatile=1",
    "-DCUTOPK_SIM_TRAFFIC",
)


def compiler() -> str | None:
    """The host C++ compiler: $CXX, else g++ or c++ on PATH."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


@functools.cache
def is_gcc() -> bool:
    """Whether the host compiler is GCC (the counting build uses its sanitizer parameters)."""
    cxx = compiler()
    if cxx is None:
        return False
    proc = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return (
        proc.returncode == 0
        and "clang" not in proc.stdout.lower()
        and "Free Software Foundation" in proc.stdout
    )


@functools.cache
def compiler_identity(cxx: str) -> str:
    """``cxx --version``'s first line ("" where it cannot tell): part of the runtime objects' key,
    so that a compiler upgraded in place builds them anew instead of linking the old ones."""
    try:
        proc = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    except OSError:
        return ""
    return proc.stdout.partition("\n")[0] if proc.returncode == 0 else ""


def _candidate_include_dirs():
    for var in ("CUTOPK_CUDA_INCLUDE", "CUDA_PATH", "CUDA_HOME"):
        value = os.environ.get(var)
        if value:
            yield pathlib.Path(value) if var == "CUTOPK_CUDA_INCLUDE" else pathlib.Path(value) / "include"
    nvcc = shutil.which("nvcc")
    if nvcc:
        yield pathlib.Path(nvcc).resolve().parent.parent / "include"
    for path in sorted(glob.glob("/usr/local/cuda*/include"), reverse=True):
        yield pathlib.Path(path)
    # pip wheels that ship the headers (nvidia-cuda-runtime for CUDA 13, and CUDA 12's layout).
    for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path}:
        for sub in ("nvidia/cu13/include", "nvidia/cuda_runtime/include"):
            yield pathlib.Path(site) / sub


# What host-mode cuda_fp16.h/cuda_bf16.h pull in: the runtime headers, crt/ (nvidia-cuda-crt on
# pip) and CCCL's <nv/target> (nvidia-cuda-cccl; a toolkit keeps it under include/cccl).
_NEEDED = ("cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h", "crt/host_defines.h")


@functools.cache
def cuda_include_dirs() -> tuple[pathlib.Path, ...] | None:
    """The include folders for CUDA's headers (the main one first, then CCCL's), or None."""
    for path in _candidate_include_dirs():
        if not all((path / h).is_file() for h in _NEEDED):
            continue
        # CCCL: beside the headers (CUDA 13 wheels), in include/cccl (toolkits), or in the
        # sibling wheel folder nvidia/cuda_cccl/include (CUDA 12 wheels).
        for cccl in (path, path / "cccl", path.parent.parent / "cuda_cccl" / "include"):
            if (cccl / "nv" / "target").is_file():
                return (path,) if cccl == path else (path, cccl)
    return None


def cuda_include_dir() -> pathlib.Path | None:
    """The folder holding cuda_runtime.h, cuda_fp16.h and cuda_bf16.h, or None."""
    dirs = cuda_include_dirs()
    return dirs[0] if dirs else None


@functools.cache
def unavailable_reason() -> str | None:
    """Why the simulator cannot run here, or None when it can."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        return f"the simulator's fiber switch is written for x86-64, this machine is {platform.machine()}"
    if compiler() is None:
        return "no C++ compiler found (set CXX, or install g++)"
    if cuda_include_dir() is None:
        return (
            "CUDA's headers (cuda_runtime.h, cuda_fp16.h, cuda_bf16.h, crt/host_defines.h, nv/target) were "
            "not found: install a CUDA toolkit, set CUDA_PATH (or CUTOPK_CUDA_INCLUDE to the include folder), "
            "or pip install nvidia-cuda-runtime nvidia-cuda-crt nvidia-cuda-cccl (cutopk's test extra)"
        )
    return None


def cache_dir() -> pathlib.Path:
    """Where built modules are kept: $CUTOPK_SIM_CACHE, else $XDG_CACHE_HOME/cutopk/sim."""
    root = _environ.path(CACHE_ENV_VAR)
    if root is None:
        return cache_home() / "cutopk" / "sim"  # a relative $XDG_CACHE_HOME is ignored
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a raw FileNotFoundError would not say which setting made the path
        raise _environ.unusable(CACHE_ENV_VAR, root, exc) from None
    return root


def runtime_text() -> str:
    return "".join((RUNTIME_DIR / name).read_text() for name in RUNTIME_FILES)


# A module's translation unit opens with this line (cutopk/sim/_rewrite.py): the runtime and the
# CUDA headers it includes are then read from a precompiled header (:func:`precompiled_header`).
RUNTIME_INCLUDE = '#include "sim_runtime.h"'


def precompiled_header(flags: tuple[str, ...], includes: list[str]) -> pathlib.Path | None:
    """The folder holding ``sim_runtime.h.gch``, GCC's precompiled ``sim_runtime.h`` for exactly
    these flags (built once into the cache), or None where there is none (not GCC, or its build
    failed: the module then parses the header as text, as before).

    Parsing the runtime and CUDA's fp16/bf16 headers is most of a small module's build
    (benchmarks/results/2026-11-27-cpu-sim-build.md: 1.1 s of 3.3-4.7 s), and a cold cache
    (a fresh CI machine) builds some hundred modules. GCC takes ``NAME.gch`` found in an include
    folder before ``NAME``, checks that it was made with compatible options and otherwise reads
    the header (so a stale or foreign one costs time, never a wrong build); the key holds every
    flag anyway, so each (build kind, -D/-I options) gets its own."""
    cxx = compiler()
    if cxx is None or not is_gcc():
        return None
    parts = ("pch", runtime_text(), *flags, cxx, *includes)
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
    header = RUNTIME_DIR / "sim_runtime.h"

    def commands(src: pathlib.Path, built: pathlib.Path, folder: pathlib.Path) -> list[list[str]]:
        # The runtime's own file (debug lines name it); src is only the text the key covers.
        return [
            [cxx, *flags, "-x", "c++-header", f"-I{RUNTIME_DIR}", *includes, str(header), "-o", str(built)]
        ]

    try:
        out = build_once(
            cache_dir() / f"pch-{key}" / "sim_runtime.h.gch", "runtime.h", runtime_text(), commands
        )
    except (BuildError, OSError):
        return None
    return out.parent


def runtime_objects(flags: tuple[str, ...], includes: list[str]) -> list[pathlib.Path]:
    """The runtime's sources (``RUNTIME_SOURCES``) compiled with exactly these flags and include
    options, built once into the cache; every module's shared object links them.

    Compiling the runtime's scheduler, fault reports and warp operations with each module was
    most of a small module's build left after the precompiled header: a module of one small
    kernel 1.9 s before, 0.3 s with the objects (benchmarks/results/2026-11-27-cpu-sim-build.md).
    What kernels call most (barriers, warp operations, fiber switches) stays
    inline in the headers: out of line it slowed benchmarks/sim_speed.py from 2.8 to 4-4.8 ms.
    The objects hide their symbols like the module
    (-fvisibility=hidden): linked into each shared object, each module keeps its own copy of the
    runtime's state. The key holds the runtime's text (headers and sources), every flag, the
    compiler (its path and version) and the include folders, so each build kind (plain, ASan,
    counting) gets its own."""
    cxx = compiler() or ""
    parts = ("runtime-objects", runtime_text(), *flags, cxx, compiler_identity(cxx), *includes)
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
    pch = precompiled_header(flags, includes)  # the sources open with RUNTIME_INCLUDE too
    found = [*([f"-I{pch}"] if pch else []), f"-I{RUNTIME_DIR}", *includes]
    objects = []
    for name in RUNTIME_SOURCES:
        source = RUNTIME_DIR / name

        def commands(
            src: pathlib.Path, built: pathlib.Path, folder: pathlib.Path, source=source
        ) -> list[list[str]]:
            # The runtime's own file (debug lines name it); src is only the text the key covers.
            return [[cxx, *flags, "-c", *found, str(source), "-o", str(built)]]

        out = cache_dir() / f"runtime-{key}" / f"{source.stem}.o"
        objects.append(build_once(out, name, source.read_text(), commands))
    return objects


def build(source: str, options: tuple[str, ...], asan: bool, traffic: bool = False) -> pathlib.Path:
    """Compile ``source`` (already complete: runtime, kernels, table) to a shared object, reusing
    a cached one built from the same source, options, runtime and compiler. ``traffic``: the
    counting build (incompatible with ``asan``)."""
    cxx = compiler()
    flags = (*BASE_FLAGS, *(ASAN_FLAGS if asan else ()), *(TRAFFIC_FLAGS if traffic else ()), *options)
    # The runtime headers are #included, not pasted: their text must be part of the key.
    includes = [f"-I{d}" for d in cuda_include_dirs() or ()]
    parts = (source, runtime_text(), *flags, *LIBS, cxx or "", *includes)
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
    out = cache_dir() / f"{key}.so"

    def commands(src: pathlib.Path, built: pathlib.Path, folder: pathlib.Path) -> list[list[str]]:
        # Asked for only when the module is to be built: a warm cache builds no header or object.
        # A source of its own (no RUNTIME_INCLUDE: the counting build's test) is complete alone.
        with_runtime = source.startswith(RUNTIME_INCLUDE)
        pch = precompiled_header(flags, includes) if with_runtime else None
        found = [*([f"-I{pch}"] if pch else []), f"-I{RUNTIME_DIR}", *includes]
        runtime = [str(o) for o in runtime_objects(flags, includes)] if with_runtime else []
        if traffic:  # compiled instrumented, linked without the sanitizer's runtime library
            obj = folder / "module.o"
            return [
                [cxx, *flags, "-c", *found, str(src), "-o", str(obj)],
                [cxx, *BASE_FLAGS, str(obj), *runtime, "-o", str(built), *LIBS],
            ]
        return [[cxx, *flags, *found, str(src), *runtime, "-o", str(built), *LIBS]]

    try:
        return build_once(out, "module.cpp", source, commands)
    except BuildError as exc:
        from ._errors import SimError

        raise SimError(f"the simulator could not compile the kernel source:\n{exc.stderr[-6000:]}") from None
