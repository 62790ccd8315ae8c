"""What the benchmark measures: regimes, shapes, K, dtypes, value distributions and layouts.

The full grid is every regime's cartesian product (rows x n x K) in float32 with uniform values,
plus the dtype, distribution and layout axes sampled on one representative shape per regime: the
full product of all axes would be about 20 000 measurements, hours on a GPU, and the other axes
change the kernels' work in ways one shape per regime already shows (ties and NaN move the K-th
value's bucket, sorted input changes the candidate count, half types halve the bytes read).
"""

from __future__ import annotations

import dataclasses
import itertools


@dataclasses.dataclass(frozen=True)
class Case:
    """One measurement: ``rows`` problems of length ``n``, select ``k`` along the case's axis.

    ``layout`` says where the selected axis lies in memory: ``rows`` (last axis, C-contiguous),
    ``axis0`` (axis 0 of a C-contiguous array: the selected axis has the largest stride),
    ``middle`` (the middle axis of a 3-D C-contiguous array) or ``transposed`` (a transposed view,
    the selected axis is the last one but has a stride of ``rows`` elements).
    """

    regime: str
    rows: int
    n: int
    k: int
    mode: str = "largest"
    dtype: str = "float32"
    dist: str = "uniform"
    layout: str = "rows"

    @property
    def elements(self) -> int:
        return self.rows * self.n

    @property
    def is_baseline_axis(self) -> bool:
        """True for the float32 / uniform / row-major point of the grid."""
        return (self.dtype, self.dist, self.layout) == ("float32", "uniform", "rows")

    def variant(self) -> str:
        """The non-default axes, e.g. ``"float16 ties_at_k"``; empty on the baseline axis."""
        return " ".join(
            v for v, d in ((self.dtype, "float32"), (self.dist, "uniform"), (self.layout, "rows")) if v != d
        )

    def label(self) -> str:
        return f"{self.regime} {self.rows}x{self.n} k={self.k} {self.mode} {self.variant()}".strip()


#: The applications' regimes (MoE routing, LLM sampling, sparse-attention indexers, kNN, huge
#: rows, layouts). ``mode`` is the direction the application selects in.
REGIMES: dict[str, dict] = {
    "moe": dict(rows=(1024, 16384, 65536), n=(8, 64, 128, 256), k=(1, 2, 4, 8)),
    "llm": dict(rows=(1, 8, 32, 128, 256), n=(32000, 128256, 151936, 262144), k=(1, 50, 256, 1024)),
    "indexer": dict(rows=(1, 16, 64), n=(8192, 65536, 131072), k=(512, 2048)),
    "knn": dict(
        rows=(100, 1000, 10000), n=(10_000, 100_000, 1_000_000), k=(10, 100, 1024, 4096), mode="smallest"
    ),
    "huge": dict(rows=(1,), n=(2**20, 2**24, 2**28), k=(1, 64, 1024, 65536)),
}
DTYPES = ("float32", "float16", "bfloat16")
DISTRIBUTIONS = ("uniform", "all_equal", "narrow", "inf", "nan", "sorted", "reversed", "ties_at_k")
LAYOUTS = ("rows", "axis0", "middle", "transposed")

#: One shape per regime on which the dtype and distribution axes are sampled in the full grid.
REPRESENTATIVE = (
    Case("moe", 16384, 128, 8),
    Case("llm", 32, 128256, 50),
    Case("indexer", 16, 65536, 2048),
    Case("knn", 1000, 100_000, 100, "smallest"),
    Case("huge", 1, 2**24, 64),
)
#: Layout shapes: a square batch (many rows) and a few long rows (axis 0 then has few columns).
LAYOUT_SHAPES = (Case("layout", 4096, 4096, 64), Case("layout", 64, 131072, 2048))


def regime_cases(name: str) -> list[Case]:
    """The cartesian product of one regime in float32 / uniform (K larger than n left out)."""
    spec = REGIMES[name]
    mode = spec.get("mode", "largest")
    return [
        Case(name, r, n, k, mode)
        for r, n, k in itertools.product(spec["rows"], spec["n"], spec["k"])
        if k <= n
    ]


def full_grid(dtypes: tuple[str, ...] = DTYPES) -> list[Case]:
    """Every regime's product, then the dtype / distribution / layout samples (see module doc)."""
    cases = [c for name in REGIMES for c in regime_cases(name)]
    for base in REPRESENTATIVE:
        cases += [dataclasses.replace(base, dtype=d) for d in dtypes if d != base.dtype]
        cases += [dataclasses.replace(base, dist=d) for d in DISTRIBUTIONS if d != base.dist]
    cases += [dataclasses.replace(s, layout=lay) for s in LAYOUT_SHAPES for lay in LAYOUTS]
    return cases


def quick_grid(gpu: bool) -> list[Case]:
    """A short tour of every regime and of the other axes.

    On a GPU it takes about a minute or two. On the CPU the shapes are scaled down (fewer rows,
    shorter rows) so that the NumPy routes, a full stable argsort included, finish in seconds.
    """
    if gpu:
        return [
            Case("moe", 65536, 128, 8),
            Case("moe", 16384, 256, 2),
            Case("llm", 1, 128256, 50),
            Case("llm", 128, 151936, 256),
            Case("llm", 32, 262144, 1024),
            Case("indexer", 64, 131072, 2048),
            Case("knn", 1000, 100_000, 100, "smallest"),
            Case("huge", 1, 2**24, 64),
            Case("huge", 1, 2**28, 64),  # the bound: within 1.5x of one read of the input
            Case("llm", 32, 128256, 50, dtype="float16"),
            Case("llm", 32, 128256, 50, dtype="bfloat16"),
            Case("indexer", 16, 65536, 512, dist="ties_at_k"),
            Case("llm", 32, 128256, 50, dist="nan"),
            Case("layout", 4096, 4096, 64, layout="axis0"),
            Case("layout", 4096, 4096, 64, layout="transposed"),
        ]
    return [
        Case("moe", 16384, 128, 8),
        Case("llm", 8, 128256, 50),
        Case("indexer", 16, 65536, 512),
        Case("knn", 20, 100_000, 10, "smallest"),
        Case("huge", 1, 2**21, 64),
        Case("llm", 4, 32000, 50, dtype="float16"),
        Case("indexer", 4, 65536, 512, dist="ties_at_k"),
        Case("llm", 4, 32000, 50, dist="nan"),
        Case("layout", 512, 4096, 16, layout="axis0"),
        # The tiny call, many short rows, int8 with many ties, another outer axis.
        Case("moe", 1, 128, 8),
        Case("moe", 65536, 8, 2),
        Case("moe", 131072, 16, 4),
        Case("indexer", 256, 4096, 64, dtype="int8"),
        Case("layout", 1024, 1024, 16, layout="axis0"),
    ]


def in_regimes(cases: list[Case], regimes: list[str] | None) -> list[Case]:
    """The cases of the named regimes (all when ``regimes`` is empty)."""
    if not regimes:
        return cases
    unknown = set(regimes) - {c.regime for c in cases} - set(REGIMES) - {"layout"}
    if unknown:
        raise ValueError(f"regime: unknown {sorted(unknown)}; expected some of {[*REGIMES, 'layout']}")
    return [c for c in cases if c.regime in regimes]
