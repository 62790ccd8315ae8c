"""Compile every kernel instantiation the dispatcher can launch for sm_75, sm_80 and sm_90 with
nvcc, and fail on a compile error, any register spill or any local-memory stack frame (no
kernel here means to use local memory; a stack frame is a dynamically indexed array or a
spill in disguise), and on what the SASS check finds (tools/check_sass.py: no 128-bit loads in
a streaming kernel, a compare-and-swap histogram, loads issued one at a time).

    python tools/check_kernels.py [--arch 75 80 90] [--nvcc PATH] [--sass auto|require|off]

--sass: "require" (the default under CI) fails when cuobjdump/nvdisasm are missing; "auto"
(the default elsewhere) then skips the SASS check with a message.

One nvcc run per kernel family, on the source the launcher hands NVRTC for that family
(cutopk/cuda/kernel_source.py: the family's file, the headers it includes, its extern "C" entry
points), with the entry points of every element type at once.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from cutopk._request import dtypes as _dtypes
from cutopk.cuda import kernel_source as _kernel_source

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import check_sass

ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>sm_\d+)'")
USAGE = re.compile(r"Used (?P<regs>\d+) registers")
SPILL = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads"
)


def sources() -> list[tuple[str, str, int]]:
    """(family, source, kernels) per kernel family: the module the launcher compiles for one
    element type (cutopk.cuda.kernel_source), with the entry points of every element type at once."""
    dtypes = tuple(info.name for info in _dtypes.SUPPORTED.values())
    out = []
    for family in _kernel_source.FAMILIES:
        count = sum(len(_kernel_source.entries(family, d)) for d in dtypes)
        out.append((family, _kernel_source.module_source(family, dtypes), count))
    return out


def demangle(names: list[str]) -> list[str]:
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not tool:
        return names
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, check=False).stdout
    return out.splitlines() if out else names


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="+", default=["75", "80", "90"])
    parser.add_argument("--nvcc", default=shutil.which("nvcc"))
    parser.add_argument(
        "--sass", choices=("auto", "require", "off"), default="require" if os.environ.get("CI") else "auto"
    )
    args = parser.parse_args(argv)
    if not args.nvcc:
        print("nvcc not found", file=sys.stderr)
        return 2
    programs = sources()
    count = sum(c for _, _, c in programs)
    stderr, functions = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for family, text, _ in programs:
            src, obj = pathlib.Path(tmp) / f"{family}.cu", pathlib.Path(tmp) / f"{family}.o"
            src.write_text(text)
            cmd = [args.nvcc, "-std=c++17", "-c", str(src), "-o", str(obj), "-Xptxas", "-v", "--threads", "0"]
            for arch in args.arch:  # one ptxas per architecture, in parallel
                cmd += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(proc.stderr[-8000:], file=sys.stderr)
                print(
                    f"FAILED: nvcc could not compile the {family} kernels ({' '.join(cmd)})", file=sys.stderr
                )
                return 1
            stderr.append(proc.stderr)
        sass_findings, sass_note = None, ""
        if args.sass != "off":
            if check_sass.find_cuobjdump()[0] is None:
                sass_note = (
                    "cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"
                )
            else:
                for family, _, _ in programs:
                    functions.update(check_sass.disassemble(str(pathlib.Path(tmp) / f"{family}.o")))
                sass_findings = check_sass.check(functions)
                sass_note = f"{len(functions)} kernel builds disassembled, {len(sass_findings)} findings"
    rows, current = [], None
    for line in "\n".join(stderr).splitlines():
        if m := ENTRY.search(line):
            current = {"name": m["name"], "arch": m["arch"]}
            rows.append(current)
        elif current and (m := USAGE.search(line)):
            current["regs"] = int(m["regs"])
        elif current and (m := SPILL.search(line)):
            current.update(stack=int(m["stack"]), stores=int(m["stores"]), loads=int(m["loads"]))
    for row, pretty in zip(rows, demangle([r["name"] for r in rows]), strict=True):
        row["pretty"] = pretty
    bad = [r for r in rows if r.get("stores", 0) or r.get("loads", 0)]
    stacked = [r for r in rows if r.get("stack", 0)]
    print(f"{'arch':6} {'regs':>4} {'stack':>5} {'spill st/ld':>11}  kernel")
    for r in sorted(rows, key=lambda r: (r["pretty"], r["arch"])):
        print(
            f"{r['arch']:6} {r.get('regs', 0):4d} {r.get('stack', 0):5d} {r.get('stores', 0):5d}/{r.get('loads', 0):<5d}  {r['pretty']}"
        )
    expected = count * len(args.arch)
    print(
        f"\n{len(rows)} kernel builds ({count} instantiations x {len(args.arch)} architectures), "
        f"{len(bad)} with spills, {len(stacked)} with a stack frame; "
        f"registers per arch (max): "
        + ", ".join(
            f"{arch} {max((r.get('regs', 0) for r in rows if r['arch'] == arch), default=0)}"
            for arch in sorted({r["arch"] for r in rows})
        )
    )
    if len(rows) != expected:
        print(
            f"FAILED: expected {expected} kernel builds in ptxas's report, found {len(rows)}", file=sys.stderr
        )
        return 1
    if stacked:
        print(
            "FAILED: local-memory stack frames in "
            + ", ".join(f"{r['pretty']} ({r['arch']}: {r['stack']} bytes)" for r in stacked),
            file=sys.stderr,
        )
        return 1
    if bad:
        print(
            "FAILED: register spills in " + ", ".join(f"{r['pretty']} ({r['arch']})" for r in bad),
            file=sys.stderr,
        )
        return 1
    if args.sass == "off":
        return 0
    print(f"SASS check: {sass_note}")
    if sass_findings is None:
        if args.sass == "require":
            print("FAILED: the SASS check could not run", file=sys.stderr)
            return 1
        return 0
    if sass_findings:
        pretty = dict(
            zip((f.name for f in sass_findings), demangle([f.name for f in sass_findings]), strict=True)
        )
        for f in sass_findings:
            print(f"FAILED: {pretty[f.name]} ({f.arch}): {f.problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
