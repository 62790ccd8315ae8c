"""Checks shared by the tests of the one-launch families (resident, cluster, split): the same
hard inputs and the same ``lengths=`` comparison, each family forcing itself by name."""

from __future__ import annotations

import numpy as np

import cutopk

from .backends import to_backend, to_host
from .reference import assert_same_padded, reference_with_lengths

# (sorted, mode, nan) pairs for the lengths checks: value order with the defaults, index order with
# the other mode and NaN rule.
LENGTHS_ORDERS = ((True, "largest", "last"), ("index", "smallest", "largest"))


def signed_zeros_and_nans(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    """float32 rows of normal values with NaNs and zeros of both signs mixed in, and row 1 made
    only of zeros of both signs (ties by index)."""
    x = rng.standard_normal((rows, n)).astype(np.float32)
    x[:, ::7] = np.nan
    x[:, 1::11] = -0.0
    x[:, 2::11] = 0.0
    x[1] = np.where(x[1] > 0, 0.0, -0.0)
    return x


def check_lengths(
    backend: str, x: np.ndarray, k: int, lengths: np.ndarray, orders=LENGTHS_ORDERS, **kw
) -> None:
    """``top_k(x, k, lengths=...)`` on ``backend`` (``kw``: e.g. the forced algorithm) equals the
    padded reference for each (sorted, mode, nan) of ``orders``."""
    for order, mode, nan in orders:
        got = cutopk.top_k(
            to_backend(x, backend), k, lengths=to_backend(lengths, backend), backend=backend,
            sorted=order, mode=mode, nan=nan, **kw,
        )  # fmt: skip
        want = reference_with_lengths(x, k, lengths, mode=mode, sorted=order, nan=nan)
        assert_same_padded(tuple(to_host(r) for r in got), want, index_dtype=np.int64, order=order)
