"""Which tests a run selects, where a run asks for a stated subset (each with the flag for the
full set).

CI's AddressSanitizer run of the simulator (.ci/run: ``CUTOPK_SIM_ASAN=1``) runs a subset of the
kernel tests it is given; ``CUTOPK_FULL_MATRIX=1`` runs all of them. ASan finds a global access
out of bounds, and where a kernel reads and writes depends on the extents (n, k, row lengths,
strides, the heads and tails of a tile) and on the key's width, not on the element type's other
traits, the mode, the order or the NaN policy: the subset keeps every extent case and one
element type per key width (tests/conftest.py deselects the rest, visibly; test_kernels.py's
matrix takes every extent of the full matrix once).
"""

from __future__ import annotations

import os

ASAN_DTYPES = ("int8", "float16", "float32", "uint64")  # 1, 2, 4, 8 bytes (test_extents' CI set)
ASAN_SUBSET = os.environ.get("CUTOPK_SIM_ASAN") == "1" and os.environ.get("CUTOPK_FULL_MATRIX") != "1"


def asan_keeps(params: dict) -> bool:
    """Whether the ASan subset keeps a test with these parameters: a ``dtype`` parameter must be
    one of ASAN_DTYPES; test_hard_inputs' (distribution, algorithm) pairs are thinned to every
    third along a diagonal, so that each algorithm still meets three or four distributions (ties,
    NaN, sorted runs, ...) and each distribution three or four algorithms."""
    if "dtype" in params and str(params["dtype"]) not in ASAN_DTYPES:
        return False
    if "dist" in params and "algorithm" in params:
        from cutopk.cuda.dispatch import ALGORITHMS
        from support.inputs import DISTRIBUTIONS

        return (DISTRIBUTIONS.index(params["dist"]) + ALGORITHMS.index(params["algorithm"])) % 3 == 0
    return True


# The CuPy stand-in's "cuda" twins of the simulator's cases: one element type per key width, and
# bfloat16 (the one type whose CuPy array needs its own glue: CuPy 13 has none).
TWIN_DTYPES = (*ASAN_DTYPES, "bfloat16")
TWINS_THINNED = os.environ.get("CUTOPK_FULL_MATRIX") != "1"


def standin_twin_keeps(params: dict) -> bool:
    """Whether a test with these parameters runs on the CuPy stand-in (tests/standin) without
    CUTOPK_FULL_MATRIX=1. The stand-in runs a ``"cuda"`` case's kernels on the same simulator as
    its ``"sim"`` twin, which runs every case; what the "cuda" case adds is CuPy's side of the
    launcher (arrays, streams, scratch, the launch sequence), which follows the key's width and
    the algorithm but neither the other traits of the element type nor the values' distribution.
    So a "cuda" case keeps TWIN_DTYPES of a ``dtype`` parameter (of a ``family`` matrix, the
    (family, key width) diagonal of ``family_width_diagonal``), and a third of the
    distributions of a ``dist`` parameter (the (distribution, algorithm) diagonal of the ASan
    subset where an ``algorithm`` parameter goes with it). Other backends, and "cuda" cases
    without these parameters, are all kept; on a real GPU every case runs."""
    if params.get("backend") != "cuda":
        return True
    if "dtype" in params and str(params["dtype"]) not in TWIN_DTYPES:
        return False
    if "dtype" in params and "family" in params:
        if not family_width_diagonal(str(params["family"]), str(params["dtype"])):
            return False
    if "dist" in params:
        from support.inputs import DISTRIBUTIONS

        if params["dist"] not in DISTRIBUTIONS:
            return True
        if "algorithm" in params:
            return asan_keeps({"dist": params["dist"], "algorithm": params["algorithm"]})
        return DISTRIBUTIONS.index(params["dist"]) % 3 == 0
    return True


def family_width_diagonal(family: str, dtype: str) -> bool:
    """Whether a "cuda" twin of a (kernel family, element type) matrix case runs: each family
    with one of ASAN_DTYPES' key widths, the widths in turn along the dispatcher's family order,
    and bfloat16 (its own CuPy glue) with every family. The launcher's CuPy side passes a
    family's arrays and row extents the same way whatever the key's width, and widths the same
    way whatever the family; the "sim" twin runs every pair."""
    from cutopk.cuda.dispatch import ALGORITHMS

    if dtype not in ASAN_DTYPES or family not in ALGORITHMS:
        return True
    return (ALGORITHMS.index(family) - ASAN_DTYPES.index(dtype)) % len(ASAN_DTYPES) == 0


def shard(value: str | None) -> tuple[int, int] | None:
    """``CUTOPK_TEST_SHARD=K/N`` (1 <= K <= N): the run keeps every N-th collected test from the
    K-th on, so that N runs with K = 1..N share a test list between them, each test run once
    (CI splits its AddressSanitizer run and its rerun of the skipped tests so between its two
    cores, .ci/run). None when unset or empty."""
    if not value:
        return None
    k, sep, n = value.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise ValueError(f"CUTOPK_TEST_SHARD must be K/N with 1 <= K <= N (like 1/2), got {value!r}")
    return int(k), int(n)


def shard_keeps(position: int, which: tuple[int, int] | None) -> bool:
    """Whether shard ``which`` ((K, N), or None for no sharding) keeps the test collected at
    ``position`` (from 0): round robin, so that neighbours (often a matrix's like-sized cases)
    go to different shards."""
    return which is None or position % which[1] == which[0] - 1
