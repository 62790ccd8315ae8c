"""Benchmark inputs: a NumPy array of the case's distribution, laid out as the case says."""

from __future__ import annotations

import numpy as np

from .grid import Case


def _dtype(name: str):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def values(case: Case, seed: int = 0) -> np.ndarray:
    """``(rows, n)`` values drawn from ``case.dist``."""
    rng = np.random.default_rng(seed)
    shape = (case.rows, case.n)
    x = rng.random(shape, dtype=np.float32)
    if case.dist == "all_equal":
        x[:] = 0.5
    elif case.dist == "narrow":  # same leading bits: only the last mantissa bits differ
        x = 1.0 + rng.integers(0, 64, shape).astype(np.float32) * np.float32(2.0**-16)
    elif case.dist == "inf":
        x[rng.random(shape) < 0.05] = np.inf
        x[rng.random(shape) < 0.05] = -np.inf
    elif case.dist == "nan":
        x[rng.random(shape) < 0.05] = np.nan
    elif case.dist == "sorted":
        x.sort(axis=1)
    elif case.dist == "reversed":
        x.sort(axis=1)
        x = x[:, ::-1].copy()
    elif case.dist == "ties_at_k":  # a third of every row equals the K-th value
        kth = (
            np.sort(x, axis=1)[:, -case.k][:, None]
            if case.mode == "largest"
            else np.sort(x, axis=1)[:, case.k - 1][:, None]
        )
        x = np.where(rng.random(shape) < 0.33, kth, x)
    return x.astype(_dtype(case.dtype))


def arrange(x: np.ndarray, case: Case) -> tuple[np.ndarray, int]:
    """The array to benchmark and the axis to select along, per ``case.layout``."""
    if case.layout == "axis0":
        return np.ascontiguousarray(x.T), 0
    if case.layout == "transposed":
        return np.ascontiguousarray(x.T).T, 1
    if case.layout == "middle":
        rows = case.rows
        a = next((d for d in (8, 4, 2) if rows % d == 0), 1)
        return np.ascontiguousarray(x.reshape(a, rows // a, case.n).transpose(0, 2, 1)), 1
    return x, -1
