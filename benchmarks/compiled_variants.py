"""The compiled route's variants, C alone on one thread: each one the installed library holds
and this processor runs, and optionally another build of the same C file to compare with.

    python benchmarks/compiled_variants.py [--repeat 40] [--against LIBRARY]

``--against``: a shared object of the C file built another way, e.g. for this machine alone:
``cc -O3 -march=native -std=gnu11 -fPIC -shared -fvisibility=hidden -fno-strict-aliasing -pthread
cutopk/numpy/compiled.c -o /tmp/native.so`` (the run-time build before the library was built at
install). The builds take turns within each repetition, so that the machine's drift hits them
alike; each cell is the minimum and the median of ``--repeat`` calls, and every build's answer
must be the first one's.
"""

from __future__ import annotations

import argparse
import ctypes
import time

import numpy as np

from cutopk.numpy import compiled, compiled_choice


def _other(path: str):
    """The entry point of a build of the C file that is no install's library (one variant)."""
    lib = ctypes.CDLL(path)
    fn = lib.cutopk_compiled_select
    fn.restype, fn.argtypes = ctypes.c_int, (ctypes.POINTER(compiled.Rows),)
    return fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--against", help="another build of the C file (a shared object)")
    args = parser.parse_args()
    if not compiled.available():
        raise SystemExit(f"the compiled route cannot run: {compiled.unavailable_reason()}")
    picked = compiled._function()
    builds = {} if args.against is None else {"against": _other(args.against)}
    for variant in compiled.VARIANTS[compiled.VARIANTS.index(picked.variant) :]:
        if hasattr(picked.library, f"cutopk_compiled_select_{variant}"):
            builds[variant] = compiled.load(compiled.locate(), variant)
    rng = np.random.default_rng(0)
    cases = [
        ("1 x 2^21 float32, K=64", rng.random((1, 1 << 21), dtype=np.float32), 64),
        ("64 x 65536 float32, K=16", rng.random((64, 65536), dtype=np.float32), 16),
        ("4096 x 128 float32, K=8", rng.random((4096, 128), dtype=np.float32), 8),
        ("256 x 16384 int8, K=300", rng.integers(-128, 127, (256, 16384), dtype=np.int8), 300),
        (
            "256 rows of 65536 side by side (axis 0) float32, K=8",
            rng.random((65536, 256), dtype=np.float32).T,
            8,
        ),
    ]
    print(f"library {compiled.locate()} (picked: {picked.variant}); min / median of {args.repeat} calls, ms")
    print("| case | method | " + " | ".join(builds) + " |")
    print("|---|---|" + "---|" * len(builds))
    for label, x, k in cases:
        method = compiled_choice.choose_method(x, k) or "threshold"
        out = np.empty((x.shape[0], k), np.int64)
        times: dict[str, list[float]] = {name: [] for name in builds}
        first = None
        for _ in range(args.repeat):
            for name, fn in builds.items():
                start = time.perf_counter()
                compiled.select(x, k, True, False, "value", out, function=fn, method=method, threads=1)
                times[name].append(time.perf_counter() - start)
                if first is None:
                    first = out.copy()
                elif not np.array_equal(out, first):
                    raise SystemExit(f"{name} answered otherwise on {label}")
        cells = " | ".join(f"{min(t) * 1e3:.3f} / {np.median(t) * 1e3:.3f}" for t in times.values())
        print(f"| {label} | {method} | {cells} |")


if __name__ == "__main__":
    main()
