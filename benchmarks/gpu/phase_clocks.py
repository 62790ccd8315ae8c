"""M3 and M4 of the lease: cycles per named step of the on-chip families (kernels/phase_clock.cuh).

    python3 benchmarks/gpu/phase_clocks.py --out M3.csv                       # M3: the phase clocks
    python3 benchmarks/gpu/phase_clocks.py --variants --append --out M3.csv   # M4: the A/B variants
    python3 benchmarks/gpu/phase_clocks.py --sim --shape 1x4096:64            # on the CPU simulator
    python3 benchmarks/gpu/phase_clocks.py --dry-run [--variants]

Each family's modules are compiled again with ``-DCUTOPK_PHASE_CLOCKS`` (and a variant's switch),
in this process only: the launcher's module builder is wrapped, its module and call caches
emptied. For each shape and each family of :data:`FAMILIES` that can take it (forced: the
dispatcher's ``why_not``), a warm-up call, then :data:`REPEAT` calls, each with the stamps zeroed
before it and read after it. Each CSV row is one (variant, family, shape, step): the step's cycles
(its stamp minus the one before, on each stamped block), median and max over blocks and calls,
the blocks stamped, and the step's share of the block's total. Step names come from the kernels'
``CUTOPK_PHASE(i, name)`` lines. On the simulator clock64 counts the simulator's polls: the rows
show that the stamps come back, not what the steps cost.

M4's variants are compile-time switches of the kernels; a switch the kernels do not have yet is a
row saying so (``not built``), never an error.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import ctypes
import os
import pathlib
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/: the benchmark package

import numpy as np
from cutopk_bench import watchdog

from cutopk._core import call as _call
from cutopk._demo import inputs
from cutopk.cuda import dispatch, launcher
from cutopk.cuda import kernel_source as _kernel_source

FAMILIES = ("resident", "cluster", "split", "radix")
SHAPES = ("1x8192:512", "1x8192:2048", "1x32000:1", "1x32000:1024", "1x262144:50", "16x65536:2048:bfloat16")
REPEAT = 5
BLOCKS, STEPS = 4096, 8  # kernels/phase_clock.cuh's CUTOPK_PHASE_BLOCKS and CUTOPK_PHASE_STEPS
SYMBOL = "cutopk_phase_stamps"
PHASE = re.compile(r"CUTOPK_PHASE\((\d+), (\w+)\)")
# M4: (name, the switch, what it changes). The first is the count-atomics branch's switch (plain
# shared atomics by default there, the match behind the switch); the others are not in the kernels yet.
VARIANTS = (  # (name, switch, what it changes, the families it changes)
    (
        "count_with_match",
        "CUTOPK_COUNT_WITH_MATCH",
        "the histogram counted with __match_any_sync (the old path)",
        FAMILIES,
    ),
    ("loads_at_entry", "CUTOPK_LOADS_AT_ENTRY", "every tile's loads issued at entry", FAMILIES),
    (
        "threads_1024",
        "CUTOPK_RESIDENT_THREADS_1024",
        "1024 threads per block",
        ("resident", "cluster", "split"),
    ),
)
FIELDS = (
    "variant",
    "family",
    "case",
    "step",
    "index",
    "cycles_median",
    "cycles_max",
    "blocks",
    "share",
    "note",
)


def steps_of(family: str) -> list[str]:
    """The named steps of the family's kernel, in stamp order (from its CUTOPK_PHASE lines)."""
    text = (_kernel_source.kernel_dir() / _kernel_source.file_of(family)).read_text()
    found = sorted((int(i), name) for i, name in PHASE.findall(text))
    return [name for _, name in found]


def switch_built(define: str) -> bool:
    """Whether any kernel file tests the switch (the variant can be compiled)."""
    return any(define in (_kernel_source.kernel_dir() / f).read_text() for f in _kernel_source.all_files())


def parse_shape(text: str) -> tuple[int, int, int, str]:
    m = re.fullmatch(r"(\d+)x(\d+):(\d+)(?::(\w+))?", text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"expected ROWSxN:K[:DTYPE] (e.g. 16x65536:2048:bfloat16), got {text!r}"
        )
    return int(m[1]), int(m[2]), int(m[3]), m[4] or "float32"


@contextlib.contextmanager
def clocked_build(target: str, defines: tuple[str, ...], built: dict):
    """The launcher's families compiled with ``defines`` (``built`` gets each raw module by family)
    while the block runs; its module and call caches emptied on entry and exit."""
    original = launcher._build_family
    options = tuple(f"-D{d}" for d in defines)

    def build(tgt: str, cxx: str, family: str):
        code = _kernel_source.source(family, launcher._dtype_name(cxx))
        if tgt == "cuda":
            import cupy

            mod = cupy.RawModule(code=code, options=("-std=c++17", *options))
        else:
            from cutopk import sim

            mod = sim.RawModule(code=code, options=options)
        built[family] = mod
        return mod

    launcher._MODULES.clear()
    _call.CACHE.clear()
    launcher._build_family = build
    try:
        yield
    finally:
        launcher._build_family = original
        launcher._MODULES.clear()
        _call.CACHE.clear()


def stamps(mod, target: str):
    """The module's stamp array (length BLOCKS x STEPS, uint64), on the device or, on the simulator,
    over the shared object's global."""
    if target == "cuda":
        import cupy

        return cupy.ndarray((BLOCKS * STEPS,), cupy.uint64, mod.get_global(SYMBOL))
    lib = mod._lib  # the simulator's shared object: the __device__ array is a plain global there
    return np.ctypeslib.as_array((ctypes.c_uint64 * (BLOCKS * STEPS)).in_dll(lib, SYMBOL))


def cycles(stamp: np.ndarray, count: int) -> list[list[int]]:
    """Per step 1..count-1: the cycles of each block stamped at both ends (stamp minus the one before)."""
    rows = stamp.reshape(BLOCKS, STEPS)[:, :count].astype(np.int64)
    out = []
    for i in range(1, count):
        both = (rows[:, i] != 0) & (rows[:, i - 1] != 0)
        out.append((rows[both, i] - rows[both, i - 1]).tolist())
    return out


def measure(target: str, shape, family: str, built: dict, repeat: int = REPEAT) -> list[dict]:
    """The family's steps on one shape: one row per step."""
    import cutopk

    rows_, n, k, dtype = shape
    host = inputs.values(_case(shape))
    x = host
    if target == "cuda":
        import cupy

        x = cupy.asarray(host)
    backend = "sim" if target == "sim" else "auto"
    cutopk.top_k(x, k, algorithm=family, backend=backend)  # compiles; the stamps are zeroed next
    names = steps_of(family)
    per_step: list[list[int]] = [[] for _ in names[1:]]
    for _ in range(repeat):
        buf = stamps(built[family], target)
        buf[...] = 0
        cutopk.top_k(x, k, algorithm=family, backend=backend)
        if target == "cuda":
            import cupy

            cupy.cuda.Device().synchronize()
            got = buf.get()
        else:
            got = np.array(buf)
        for i, c in enumerate(cycles(got, len(names))):
            per_step[i] += c
    label = f"{rows_}x{n} k={k}" + ("" if dtype == "float32" else f" {dtype}")
    total = sum(float(np.median(c)) for c in per_step if c)
    out = []
    for i, c in enumerate(per_step, 1):
        med = float(np.median(c)) if c else 0.0
        out.append(
            {
                "family": family,
                "case": label,
                "step": names[i],
                "index": i,
                "cycles_median": f"{med:.0f}",
                "cycles_max": max(c) if c else "",
                "blocks": len(c) // repeat,
                "share": f"{med / total:.3f}" if total else "",
                "note": "" if c else "no block stamped it",
            }
        )
    return out


def _case(shape):
    from cutopk._demo import grid

    rows_, n, k, dtype = shape
    return grid.Case("lease", rows_, n, k, dtype=dtype)


def run(args, writer, out) -> int:
    target = "sim" if args.sim else "cuda"
    defines = ("CUTOPK_PHASE_CLOCKS", *args.define)
    if target == "cuda":
        from cutopk.cuda import device

        facts = device.device_facts("cuda", device.device_id("cuda"))
    else:
        facts = dispatch.Device(clusters=True)
    built: dict = {}
    dog = watchdog.Watchdog(watchdog.limit_from_env() if target == "cuda" else 0)
    bad = 0
    with clocked_build(target, defines, built):
        for shape in args.shape or [parse_shape(s) for s in SHAPES]:
            rows_, n, k, dtype = shape
            for family in args.family or FAMILIES:
                key_bytes = np.dtype(inputs.numpy_dtype(dtype)).itemsize
                if dispatch.why_not(family, n, k, key_bytes, facts, rows_) is not None:
                    continue
                with dog.watch(f"{family} {shape}"):
                    try:
                        rows = measure(target, shape, family, built, args.repeat)
                    except Exception as exc:  # noqa: BLE001 - one failed family is a row, the rest go on
                        rows, bad = (
                            [{"family": family, "case": str(shape), "note": f"failed: {exc}"[:200]}],
                            bad + 1,
                        )
                for row in rows:
                    writer.writerow({"variant": args.variant, **row})
                    out.flush()
                    print(" ".join(f"{k}={v}" for k, v in row.items() if v != ""), flush=True)
    return 1 if bad else 0


def run_variants(args, writer, out) -> int:
    """M4: each variant whose switch the kernels have, in a process of its own; the others listed."""
    status = 0
    for name, define, what, families in VARIANTS:
        if not switch_built(define):
            writer.writerow({"variant": name, "note": f"not built: no kernel file tests {define} ({what})"})
            out.flush()
            print(f"{name}: not built (no kernel file tests {define})", flush=True)
            continue
        if args.dry_run:
            print(f"{name}: would run M3's shapes with -D{define} on {', '.join(families)}")
            continue
        out.flush()
        cmd = [
            sys.executable,
            __file__,
            "--variant",
            name,
            "--define",
            define,
            "--append",
            "--no-header",
            *(a for f in families for a in ("--family", f)),
            "--out",
            args.out or "/dev/stdout",
        ]
        for rows_, n, k, dtype in args.shape or []:
            cmd += ["--shape", f"{rows_}x{n}:{k}:{dtype}"]
        cmd += ["--repeat", str(args.repeat)] + (["--sim"] if args.sim else [])
        status |= subprocess.run(cmd, check=False, env=os.environ).returncode
    return 1 if status else 0


def table(path: str) -> str:
    """M3.csv as a markdown table: one line per (variant, family, case), each step's median cycles
    with its share of the block's total in parentheses; the variants' notes below it."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    lines, notes, groups = [], [], {}
    for r in rows:
        if not r.get("step"):
            where = " ".join(x for x in (r.get("family"), r.get("case")) if x)
            notes.append(f"- {r['variant']}{' ' + where if where else ''}: {r['note']}")
            continue
        groups.setdefault((r["variant"], r["family"], r["case"]), []).append(r)
    lines.append("| variant | family | case | cycles per step (share) | total |")
    lines.append("|---|---|---|---|---|")
    for (variant, family, case), steps in groups.items():
        cells = ", ".join(f"{r['step']} {r['cycles_median']} ({float(r['share'] or 0):.0%})" for r in steps)
        total = sum(float(r["cycles_median"] or 0) for r in steps)
        lines.append(f"| {variant} | {family} | {case} | {cells} | {total:.0f} |")
    return "\n".join(lines + (["", *notes] if notes else []))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/gpu/phase_clocks.py", description=__doc__.split("\n")[0])
    p.add_argument("--out", help="the CSV file (default: stdout)")
    p.add_argument("--append", action="store_true", help="append to --out (M4 after M3)")
    p.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--variants", action="store_true", help="M4: the A/B variants, each with its switch")
    p.add_argument("--variant", default="base", help=argparse.SUPPRESS)
    p.add_argument(
        "--define", action="append", default=[], help="one more preprocessor switch (NAME or NAME=V)"
    )
    p.add_argument("--shape", action="append", type=parse_shape, help="ROWSxN:K[:DTYPE] (default: M3's six)")
    p.add_argument("--family", action="append", choices=FAMILIES, help="only these families")
    p.add_argument(
        "--repeat", type=int, default=REPEAT, help=f"calls per shape and family (default {REPEAT})"
    )
    p.add_argument("--sim", action="store_true", help="on the CPU simulator (stamps count polls, not cycles)")
    p.add_argument("--dry-run", action="store_true", help="print what would run")
    p.add_argument(
        "--table", metavar="CSV", help="print a CSV this script wrote as a markdown table, and stop"
    )
    args = p.parse_args(argv)
    if args.table:
        print(table(args.table))
        return 0
    if args.dry_run and not args.variants:
        for family in FAMILIES:
            print(f"{family}: steps {', '.join(steps_of(family))}")
        from cutopk_bench import lease

        for text in SHAPES:
            rows_, n, k, dtype = parse_shape(text)
            size = np.dtype(inputs.numpy_dtype(dtype)).itemsize
            fams = [f for f in FAMILIES if dispatch.why_not(f, n, k, size, lease.hopper(), rows_) is None]
            print(f"{text}: {', '.join(fams) or 'no on-chip family takes it on sm_90'}")
        print(f"would compile {', '.join(FAMILIES)} with -DCUTOPK_PHASE_CLOCKS and time {', '.join(SHAPES)}")
        return 0
    out = open(args.out, "a" if args.append else "w", newline="") if args.out else sys.stdout
    writer = csv.DictWriter(out, FIELDS)
    if not args.no_header and not (args.append and out.tell() > 0):
        writer.writeheader()
    try:
        return run_variants(args, writer, out) if args.variants else run(args, writer, out)
    finally:
        if out is not sys.stdout:
            out.close()


if __name__ == "__main__":
    sys.exit(main())
