"""Benchmark inputs: values drawn from a case's distribution, laid out as the case says.

Values are drawn on the host with NumPy (one generator for every backend, so a GPU run and a CPU
run of the same case see the same numbers) and moved to the device by the loop.

Distributions (the properties ``tests/bench/test_bench.py`` checks):

- ``uniform``: uniform in [0, 1) (half types round, which already gives some ties);
- ``all_equal``: every element 0.5: every element ties with the K-th;
- ``narrow``: ``1 + j * eps`` for ``j`` in [0, 64): same sign, exponent and leading mantissa bits,
  only the lowest six mantissa bits differ (radix passes on the high digits see one bucket);
- ``inf``: uniform, with :data:`INF_FRACTION` of the elements +inf and as many -inf;
- ``nan``: uniform, with :data:`NAN_FRACTION` of the elements NaN;
- ``sorted`` / ``reversed``: uniform, each row ascending / descending;
- ``ties_at_k``: uniform, then :data:`TIE_FRACTION` of every row set to the row's K-th value.
"""

from __future__ import annotations

import numpy as np

from .grid import Case

INF_FRACTION = 0.05
NAN_FRACTION = 0.05
TIE_FRACTION = 1 / 3
NARROW_LEVELS = 64


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of ``name``; bfloat16 comes from ``ml_dtypes`` (ImportError without it)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def values(case: Case, seed: int = 0) -> np.ndarray:
    """``(rows, n)`` C-contiguous values of ``case.dtype`` drawn from ``case.dist``."""
    rng = np.random.default_rng(seed)
    shape = (case.rows, case.n)
    dtype = numpy_dtype(case.dtype)
    x = rng.random(shape, dtype=np.float32)
    if case.dist == "all_equal":
        x.fill(0.5)
    elif case.dist == "narrow":
        # The dtype's own epsilon, so the steps survive the cast to a half type.
        eps = np.float32(np.finfo(dtype).eps) if case.dtype != "bfloat16" else np.float32(2.0**-7)
        x = 1 + rng.integers(0, NARROW_LEVELS, shape).astype(np.float32) * eps
    elif case.dist == "inf":
        draw = rng.random(shape, dtype=np.float32)
        x[draw < INF_FRACTION] = np.inf
        x[draw > 1 - INF_FRACTION] = -np.inf
    elif case.dist == "nan":
        x[rng.random(shape, dtype=np.float32) < NAN_FRACTION] = np.nan
    elif case.dist in ("sorted", "reversed"):
        x.sort(axis=1)
        if case.dist == "reversed":
            x = np.ascontiguousarray(x[:, ::-1])
    elif case.dist == "ties_at_k":
        # The K-th value after rounding to the dtype, so the copies tie exactly in that dtype.
        x = x.astype(dtype).astype(np.float32)
        pos = case.n - case.k if case.mode == "largest" else case.k - 1
        kth = np.partition(x, pos, axis=1)[:, pos : pos + 1]
        x = np.where(rng.random(shape, dtype=np.float32) < TIE_FRACTION, kth, x)
    if dtype.kind in "iu":  # integers: the dtype's whole range (int8: 256 values, many ties)
        info = np.iinfo(dtype)
        x = np.floor(x.astype(np.float64) * (float(info.max) - info.min + 1) + info.min)
    return x.astype(dtype, copy=False)


def arrange(x, case: Case, xp=np):
    """The array to benchmark and the axis to select along, per ``case.layout``.

    ``x`` is the ``(rows, n)`` C-contiguous array of :func:`values`, NumPy or CuPy (``xp``); the
    layouts are built with the same calls in both, so host and device copies have equal strides.
    """
    if case.layout == "axis0":
        return xp.ascontiguousarray(x.T), 0
    if case.layout == "transposed":
        return xp.ascontiguousarray(x.T).T, 1
    if case.layout == "middle":
        outer = next((d for d in (8, 4, 2) if case.rows % d == 0), 1)
        return xp.ascontiguousarray(x.reshape(outer, case.rows // outer, case.n).transpose(0, 2, 1)), 1
    return x, x.ndim - 1
