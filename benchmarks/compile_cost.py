"""The compile cost a user pays, measured on the CPU across fresh processes: no GPU needed.

    python benchmarks/compile_cost.py [--nvrtc DIR ...] [--arch 90] [--repeat 3] [--out FILE]

For each NVRTC (a folder holding the NVRTC wheel(s): ``nvidia/*/lib/libnvrtc.so.*`` and CUDA's
include folder), in a process of its own, through ctypes on libnvrtc:

* per (dtype, family) module (``cutopk._gpu.programs()``): the cold compile time, source to
  cubin, with CuPy's own options (``cupy/cuda/compiler.py`` and ``cupy/_core/core.pyx``: the
  launcher's ``-std=c++17``, then ``-ftz=true``, the include folders, ``-arch=sm_XX`` and, for
  NVRTC 12+, ``--device-as-default-execution-space``);
* the cold first call of one family against the module of every family for one dtype (what the
  launcher compiled before it split the modules: every kernel file, every instantiation).

And, with no NVRTC: the warm start's CPU side, the look-up of CuPy's on-disk cache (the cache
key hashed over the options, the NVRTC version, the preprocessed empty file and the source, the
cached cubin read and its hash checked), measured as CuPy's code does it. Loading the cubin
(``cuModuleLoadData``) and the first launch need a GPU: not measured here.

The goals (issue 25): a cold first call <= 1 s of compile; a warm first call in a new process
<= 20 ms.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import hashlib
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_NVRTC = ("/work/nvrtc/12.9", "/work/nvrtc/13.0", "/work/nvrtc/13.5")


def find_nvrtc(folder: str) -> tuple[str, list[str]]:
    """libnvrtc and the include folders (CUDA's headers, CCCL's) inside an NVRTC wheel folder."""
    libs = sorted(p for p in glob.glob(f"{folder}/nvidia/*/lib/libnvrtc.so.*") if ".alt." not in p)
    if not libs:
        raise SystemExit(f"--nvrtc {folder}: no nvidia/*/lib/libnvrtc.so.* inside")
    includes = sorted(
        p
        for p in glob.glob(f"{folder}/nvidia/*/include")
        if os.path.isfile(f"{p}/cuda_fp16.h") or os.path.isdir(f"{p}/cuda")
    )
    return libs[0], includes


class Nvrtc:
    """The few NVRTC calls a compile needs."""

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = (major.value, minor.value)

    def compile(self, source: str, options: list[str]) -> bytes:
        lib, prog = self.lib, ctypes.c_void_p()
        self._check(
            lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kern.cu", 0, None, None), prog
        )
        try:
            opts = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
            rc = lib.nvrtcCompileProgram(prog, len(options), opts)
            if rc != 0:
                size = ctypes.c_size_t()
                lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
                log = ctypes.create_string_buffer(size.value)
                lib.nvrtcGetProgramLog(prog, log)
                raise RuntimeError(
                    f"NVRTC {self.version} failed:\n{log.value.decode(errors='replace')[-4000:]}"
                )
            size = ctypes.c_size_t()
            self._check(lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), prog)
            cubin = ctypes.create_string_buffer(size.value)
            self._check(lib.nvrtcGetCUBIN(prog, cubin), prog)
            return cubin.raw
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))

    def _check(self, rc: int, prog) -> None:
        if rc != 0:
            self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
            raise RuntimeError(f"NVRTC error {rc}: {self.lib.nvrtcGetErrorString(rc).decode()}")


def cupy_options(version: tuple[int, int], arch: str, includes: list[str]) -> list[str]:
    """The options CuPy passes NVRTC for ``RawModule(code=..., options=("-std=c++17",))``:
    core.pyx's assemble_cupy_compiler_options (the user's options, a -std only when none is
    given, the include folders), then compiler.py's -ftz=true, -arch=sm_XX (a cubin, for an
    architecture this NVRTC knows) and --device-as-default-execution-space (NVRTC 12+)."""
    opts = ["-std=c++17", *(f"-I{i}" for i in includes), "-ftz=true", f"-arch=sm_{arch}"]
    if version[0] >= 12:
        opts.append("--device-as-default-execution-space")
    return opts


def measure_nvrtc(folder: str, arch: str, repeat: int) -> dict:
    """In this process (one NVRTC version per process): every (dtype, family) module and every
    dtype's module of all families, each compiled ``repeat`` times (fresh programs; NVRTC keeps
    no cache between them)."""
    from cutopk import _gpu, _kernel_source

    lib, includes = find_nvrtc(folder)
    nvrtc = Nvrtc(lib)
    opts = cupy_options(nvrtc.version, arch, includes)
    out = {
        "nvrtc": f"{nvrtc.version[0]}.{nvrtc.version[1]}",
        "library": lib,
        "options": opts,
        "family": {},
        "whole": {},
    }

    def timed(src: str) -> tuple[float, int]:
        times, size = [], 0
        for _ in range(repeat):
            t0 = time.perf_counter()
            size = len(nvrtc.compile(src, opts))
            times.append(time.perf_counter() - t0)
        return min(times), size

    nvrtc.compile("__global__ void warm_up() {}", opts)  # loading the builtins is not a module's cost
    for program in _gpu.programs():
        assert not program.name_expressions, 'extern "C" entry points need no name expressions'
        seconds, size = timed(program.source)
        out["family"][f"{program.dtype}/{program.family}"] = {"s": seconds, "cubin_bytes": size}
    for dtype in DTYPES:
        whole = _kernel_source.module_source_of_every_family(dtype)
        out["whole"][dtype] = {"s": timed(whole)[0]}
    return out


def cache_lookup(samples: int) -> dict:
    """The CPU side of a warm start, as CuPy 13/14 do it for a module without name expressions
    (``_compile_with_cache_cuda``): the key (options, NVRTC version, the preprocessed empty file,
    the source) hashed, the cache file found, read and its cubin's hash checked. The
    preprocessing of the empty file runs once per process and options (``_preprocess('')``, an
    NVRTC call of a few ms, not measured here: it needs CuPy's NVRTC binding); the cubin load
    (cuModuleLoadData) needs a GPU."""
    from cutopk import _gpu

    programs = [p for p in _gpu.programs() if p.dtype == "float32"]
    times = {}
    with tempfile.TemporaryDirectory() as cache:
        for p in programs:
            cubin = os.urandom(_CUBIN_BYTES.get(p.family, 200_000))
            key = hashlib.sha1(
                f"{('90', ('-std=c++17',), (13, 5), 'nvrtc')} base {p.source} None key".encode()
            ).hexdigest()
            path = os.path.join(cache, key + ".cubin")
            with open(path, "wb") as f:
                f.write(hashlib.sha1(cubin).hexdigest().encode() + cubin)
            best = float("inf")
            for _ in range(samples):
                t0 = time.perf_counter()
                name = hashlib.sha1(
                    f"{('90', ('-std=c++17',), (13, 5), 'nvrtc')} base {p.source} None key".encode()
                ).hexdigest()
                full = os.path.join(cache, name + ".cubin")
                if os.path.exists(full):
                    with open(full, "rb") as f:
                        data = f.read()
                    assert hashlib.sha1(data[40:]).hexdigest().encode() == data[:40]
                best = min(best, time.perf_counter() - t0)
            times[p.family] = best
    return times


# Rough cubin sizes for the cache look-up (the file read is part of the cost); measured sizes
# replace them when an NVRTC ran first.
_CUBIN_BYTES: dict[str, int] = {}
DTYPES = ("float32", "float16", "int8", "float64")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvrtc", nargs="+", default=[d for d in DEFAULT_NVRTC if os.path.isdir(d)])
    parser.add_argument("--arch", default="90")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", help="write the table here too (Markdown)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure_nvrtc(args.child, args.arch, args.repeat)))
        return 0
    results = []
    for folder in args.nvrtc:  # each NVRTC in a fresh process of its own
        cmd = [sys.executable, __file__, "--child", folder, "--arch", args.arch, "--repeat", str(args.repeat)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(proc.stderr[-4000:], file=sys.stderr)
            return 1
        results.append(json.loads(proc.stdout))
    table = report(results, args, cache_lookup(50))
    print(table)
    if args.out:
        pathlib.Path(args.out).write_text(table)
    return 0


def report(results: list[dict], args, lookup: dict) -> str:
    from cutopk import _kernel_source

    families = list(_kernel_source.FAMILIES)
    lines = [
        "# Compile cost on the CPU (NVRTC through ctypes, fresh processes)",
        "",
        f"Host: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; target sm_{args.arch}; "
        f"best of {args.repeat} compiles of each module. Command: `python benchmarks/compile_cost.py`.",
        "Options (CuPy's): "
        + ", ".join(f"`{o}`" for o in results[0]["options"] if not o.startswith("-I"))
        + " and the include folders."
        if results
        else "",
        "",
        "## Cold compile per (dtype, family), seconds",
        "",
    ]
    for r in results:
        lines += [
            f"### NVRTC {r['nvrtc']}",
            "",
            "| dtype | " + " | ".join(families) + " | all families, one module |",
            "|---" * (len(families) + 2) + "|",
        ]
        for dtype in DTYPES:
            cells = [f"{r['family'][f'{dtype}/{f}']['s']:.2f}" for f in families]
            lines.append(f"| {dtype} | " + " | ".join(cells) + f" | {r['whole'][dtype]['s']:.2f} |")
        worst = max(r["family"].items(), key=lambda kv: kv[1]["s"])
        first = [r["family"][f"float32/{f}"]["s"] for f in ("warp_row", "radix", "bitonic", "warp_radix")]
        lines += [
            "",
            f"Slowest module: {worst[0]} {worst[1]['s']:.2f} s. A first call of a single-launch family "
            f"(float32: warp_row, radix, bitonic, warp_radix) compiles {min(first):.2f} .. {max(first):.2f} s, "
            f"against {r['whole']['float32']['s']:.2f} s for float32's module of every family.",
            "",
        ]
    lines += [
        "## Warm start: CuPy's cache look-up on the CPU, float32, ms",
        "",
        "| " + " | ".join(lookup) + " |",
        "|---" * len(lookup) + "|",
        "| " + " | ".join(f"{v * 1e3:.2f}" for v in lookup.values()) + " |",
        "",
        "What needs a GPU to measure: the cubin load (cuModuleLoadData), the kernel's first launch,",
        "and so the whole warm first call in a new process (goal <= 20 ms). Not measured here.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
