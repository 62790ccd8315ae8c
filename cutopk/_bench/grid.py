"""The benchmark grid: regimes, shapes, K, dtypes, distributions and layouts."""

from __future__ import annotations

import dataclasses
import itertools


@dataclasses.dataclass(frozen=True)
class Case:
    """One measurement: a (rows, n) problem selected along ``axis`` after ``layout``."""

    regime: str
    rows: int
    n: int
    k: int
    mode: str = "largest"
    dtype: str = "float32"
    dist: str = "uniform"
    layout: str = "rows"  # rows (axis -1, contiguous) | axis0 | middle | transposed

    @property
    def elements(self) -> int:
        return self.rows * self.n

    def label(self) -> str:
        extra = (
            ""
            if (self.dtype, self.dist, self.layout) == ("float32", "uniform", "rows")
            else f" {self.dtype} {self.dist} {self.layout}"
        )
        return f"{self.regime:8s} {self.rows:>6}x{self.n:<9} k={self.k:<5} {self.mode[:3]}{extra}"


REGIMES = {
    "moe": dict(rows=(1024, 16384, 65536), n=(8, 64, 128, 256), k=(1, 2, 4, 8)),
    "llm": dict(rows=(1, 8, 32, 128, 256), n=(32000, 128256, 151936, 262144), k=(1, 50, 256, 1024)),
    "indexer": dict(rows=(1, 16, 64), n=(8192, 65536, 131072), k=(512, 2048)),
    "knn": dict(
        rows=(100, 1000, 10000), n=(10_000, 100_000, 1_000_000), k=(10, 100, 1024, 4096), mode="smallest"
    ),
    "huge": dict(rows=(1,), n=(2**20, 2**24, 2**28), k=(1, 64, 1024, 65536)),
}
DISTRIBUTIONS = ("uniform", "all_equal", "narrow", "inf", "nan", "sorted", "reversed", "ties_at_k")
LAYOUTS = ("axis0", "middle", "transposed")


def _regime_cases(name: str, spec: dict, max_elements: int):
    mode = spec.get("mode", "largest")
    for rows, n, k in itertools.product(spec["rows"], spec["n"], spec["k"]):
        if k <= n and rows * n <= max_elements:
            yield Case(name, rows, n, k, mode)


def full_grid(max_elements: int, dtypes=("float32", "float16", "bfloat16")) -> list[Case]:
    """Every regime's cartesian product in float32/uniform; the dtype, distribution and layout
    axes on one representative shape per regime (the full product of all axes would take hours)."""
    cases = [c for name, spec in REGIMES.items() for c in _regime_cases(name, spec, max_elements)]
    representative = [Case("moe", 16384, 128, 8), Case("llm", 32, 128256, 50), Case("indexer", 16, 65536, 2048),
                      Case("knn", 1000, 100_000, 100, "smallest"), Case("huge", 1, 2**24, 64)]  # fmt: skip
    for base in representative:
        if base.elements > max_elements:
            continue
        cases += [dataclasses.replace(base, dtype=d) for d in dtypes[1:]]
        cases += [dataclasses.replace(base, dist=d) for d in DISTRIBUTIONS[1:]]
    cases += [Case("layout", 4096, 4096, 64, layout=lay) for lay in LAYOUTS]
    return [c for c in cases if c.elements <= max_elements]


def quick_grid(gpu: bool) -> list[Case]:
    """A short tour of every regime: about a minute on a GPU; scaled down for the CPU."""
    if gpu:
        return [Case("moe", 65536, 128, 8), Case("moe", 16384, 256, 2), Case("llm", 1, 128256, 50),
                Case("llm", 128, 151936, 256), Case("indexer", 64, 131072, 2048), Case("knn", 1000, 100_000, 100, "smallest"),
                Case("huge", 1, 2**24, 64), Case("huge", 1, 2**28, 1024), Case("llm", 32, 128256, 50, dtype="float16"),
                Case("indexer", 16, 65536, 512, dist="ties_at_k"), Case("layout", 4096, 4096, 64, layout="axis0")]  # fmt: skip
    return [Case("moe", 16384, 128, 8), Case("llm", 8, 128256, 50), Case("indexer", 16, 65536, 512),
            Case("knn", 100, 100_000, 10, "smallest"), Case("huge", 1, 2**22, 64),
            Case("cpu", 4096, 4096, 64), Case("layout", 1024, 4096, 16, layout="axis0")]  # fmt: skip
