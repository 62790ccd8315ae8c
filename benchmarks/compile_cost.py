"""The compile cost a user pays, measured on the CPU across fresh processes: no GPU needed.

    python benchmarks/compile_cost.py [--nvrtc DIR ...] [--arch 90] [--repeat 3] [--out FILE]

For each NVRTC (a folder holding the NVRTC wheel(s): ``nvidia/*/lib/libnvrtc.so.*`` and CUDA's
include folder), in a process of its own, through ctypes on libnvrtc:

* per (dtype, family) module (``cutopk.cuda.launcher.programs()``): the cold compile time, source to
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

# The NVRTC wheel folders as `python tools/check_nvrtc.py --install .nvrtc/<v> <v>` makes them (CI does).
DEFAULT_NVRTC = tuple(str(ROOT / ".nvrtc" / v) for v in ("12.9", "13.0", "13.x"))


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

    def compile(self, source: str, options: list[str], ptx: bool = False) -> bytes:
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
            get_size, get = (
                (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX) if ptx else (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN)
            )
            self._check(get_size(prog, ctypes.byref(size)), prog)
            out = ctypes.create_string_buffer(size.value)
            self._check(get(prog, out), prog)
            return out.raw
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


def every_family_source(dtype: str) -> str:
    """One module of every kernel file and every entry point of ``dtype``: the work of the
    module the launcher compiled per dtype before the split (every family, every instantiation)."""
    from cutopk.cuda import kernel_source as _kernel_source

    entries = [e.text for f in _kernel_source.FAMILIES for e in _kernel_source.entries(f, dtype)]
    return _kernel_source.kernel_source() + "\n" + "\n".join(entries)


def measure(folder: str, arch: str, repeat: int) -> dict:
    """In this process (a fresh one, one NVRTC version per process)."""
    from cutopk.cuda import launcher as _launcher

    t0 = time.perf_counter()
    lib, includes = find_nvrtc(folder)
    nvrtc = Nvrtc(lib)
    t_load = time.perf_counter() - t0
    opts = cupy_options(nvrtc.version, arch, includes)
    # A warm start's one NVRTC call: CuPy's cache key holds the preprocessed empty file
    # (compiler.py, _preprocess('', options, arch)), compiled once per process and options.
    pre = [o for o in opts if o != "--device-as-default-execution-space" and not o.startswith("-arch")]
    t0 = time.perf_counter()
    empty = nvrtc.compile("", [*pre, f"-arch=compute_{arch}"], ptx=True)
    t_pre = time.perf_counter() - t0
    out = {
        "nvrtc": f"{nvrtc.version[0]}.{nvrtc.version[1]}",
        "options": opts,
        "load_s": t_load,
        "preprocess_s": t_pre,
        "family": {},
        "whole": {},
        "lookup": {},
    }

    def timed(src: str) -> tuple[float, bytes]:
        times, cubin = [], b""
        for _ in range(repeat):
            t0 = time.perf_counter()
            cubin = nvrtc.compile(src, opts)
            times.append(time.perf_counter() - t0)
        return min(times), cubin

    cubins = {}
    for program in _launcher.programs():
        if program.dtype not in DTYPES:
            continue
        assert not program.name_expressions, 'extern "C" entry points need no name expressions'
        try:
            seconds, cubin = timed(program.source)
        except RuntimeError as exc:  # a module this NVRTC cannot compile: reported, not timed
            out["family"][f"{program.dtype}/{program.family}"] = {"error": _first_error(exc)}
            continue
        out["family"][f"{program.dtype}/{program.family}"] = {"s": seconds, "cubin_bytes": len(cubin)}
        cubins[(program.dtype, program.family)] = (program.source, cubin)
    for dtype in DTYPES:
        try:
            out["whole"][dtype] = {"s": timed(every_family_source(dtype))[0]}
        except RuntimeError as exc:
            out["whole"][dtype] = {"error": _first_error(exc)}
    # The cache look-up of a warm start, as _compile_with_cache_cuda does it for a module without
    # name expressions: the key hashed (sha1 of env, the preprocessed empty file, the source),
    # the file found and read, the cubin's sha1 checked. (CuPy's key also holds its headers'
    # text, extra_source, which this leaves out.)
    env = (arch, tuple(opts), nvrtc.version, "nvrtc")
    with tempfile.TemporaryDirectory() as cache:
        for (dtype, family), (source, cubin) in cubins.items():
            if dtype != "float32":
                continue

            def name(source=source) -> str:
                key = f"{env} {empty!r} {source} None".encode()
                return os.path.join(cache, hashlib.sha1(key).hexdigest() + ".cubin")

            with open(name(), "wb") as f:
                f.write(hashlib.sha1(cubin).hexdigest().encode() + cubin)
            best = float("inf")
            for _ in range(20):
                t0 = time.perf_counter()
                path = name()
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        data = f.read()
                    assert hashlib.sha1(data[40:]).hexdigest().encode() == data[:40]
                best = min(best, time.perf_counter() - t0)
            out["lookup"][family] = best
    return out


DTYPES = ("float32", "float16", "int8", "float64")


def _first_error(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if "error:" in line]
    return lines[0] if lines else str(exc).splitlines()[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvrtc", nargs="+", default=[d for d in DEFAULT_NVRTC if os.path.isdir(d)])
    parser.add_argument("--arch", default="90")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", help="write the table here too (Markdown)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.arch, args.repeat)))
        return 0
    results, load = [], os.getloadavg()[0]
    for folder in args.nvrtc:  # each NVRTC in a fresh process of its own
        cmd = [sys.executable, __file__, "--child", folder, "--arch", args.arch, "--repeat", str(args.repeat)]
        # libnvrtc opens its libnvrtc-builtins by name: the wheel's lib folder must be on the path.
        lib_dir = os.path.dirname(find_nvrtc(folder)[0])
        env = {
            **os.environ,
            "LD_LIBRARY_PATH": os.pathsep.join(filter(None, [lib_dir, os.environ.get("LD_LIBRARY_PATH")])),
        }
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        if proc.returncode != 0:
            print(proc.stderr[-4000:], file=sys.stderr)
            return 1
        results.append(json.loads(proc.stdout))
    args.load = (load, os.getloadavg()[0])
    table = report(results, args)
    print(table)
    if args.out:
        pathlib.Path(args.out).write_text(table)
    return 0


def report(results: list[dict], args) -> str:
    from cutopk.cuda import kernel_source as _kernel_source

    families = list(_kernel_source.FAMILIES)
    shown = [o for o in results[0]["options"] if not o.startswith("-I")] if results else []
    lines = [
        "# Compile cost on the CPU (NVRTC through ctypes, a fresh process per NVRTC)",
        "",
        f"Host: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs (shared); target "
        f"sm_{args.arch}; best of {args.repeat} compiles of each module; load average "
        f"{args.load[0]:.1f} at the start, {args.load[1]:.1f} at the end. "
        "Command: `python benchmarks/compile_cost.py`.",
        "Options (CuPy's for `RawModule(code=..., options=('-std=c++17',))`): "
        + " ".join(f"`{o}`" for o in shown)
        + ' and the include folders. No name expressions: the kernels are `extern "C"` entry points.',
        "",
    ]
    for r in results:
        lines += [
            f"## NVRTC {r['nvrtc']}: cold compile per (dtype, family), s",
            "",
            "| dtype | " + " | ".join(families) + " | every family, one module |",
            "|---" * (len(families) + 2) + "|",
        ]
        errors = sorted({c["error"] for c in [*r["family"].values(), *r["whole"].values()] if "error" in c})

        def cell(c: dict, errors: list = errors) -> str:
            return f"{c['s']:.2f}" if "s" in c else f"fails ({errors.index(c['error']) + 1})"

        for dtype in DTYPES:
            cells = [cell(r["family"][f"{dtype}/{f}"]) for f in families]
            lines.append(f"| {dtype} | " + " | ".join(cells) + f" | {cell(r['whole'][dtype])} |")
        timed = {k: c for k, c in r["family"].items() if "s" in c}
        worst = max(timed.items(), key=lambda kv: kv[1]["s"])
        single = {f: r["family"][f"float32/{f}"] for f in ("warp_row", "warp_radix", "bitonic", "radix")}
        lookup = r["lookup"]
        lines += [""] + [f"({i + 1}) NVRTC {r['nvrtc']} fails: `{e}`" for i, e in enumerate(errors)]
        lines += [
            "",
            f"- Slowest module: {worst[0]}, {worst[1]['s']:.2f} s. A float32 first call of one single-launch "
            "family compiles "
            + ", ".join(f"{f} {cell(c)} s" for f, c in single.items())
            + f", against {cell(r['whole']['float32'])} s for float32's module of every family.",
            f"- Warm start, CPU side: libnvrtc loaded in {r['load_s'] * 1e3:.0f} ms, CuPy's preprocessed "
            f"empty file (one NVRTC call per process) {r['preprocess_s'] * 1e3:.0f} ms, the cache look-up "
            f"(key hashed, cubin read and checked) {min(lookup.values()) * 1e3:.2f} .. "
            f"{max(lookup.values()) * 1e3:.2f} ms per module.",
            "",
        ]
    lines += [
        "Not measured (needs a GPU): the cubin load (`cuModuleLoadData`) and the first launch, so",
        "the warm first call in a new process as a whole (goal <= 20 ms); CuPy's import and the",
        "CUDA context are a new process's cost whatever cutopk does.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
