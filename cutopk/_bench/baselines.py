"""The peers cutopk is measured against, each built for one input, and the answer checker.

Every route returns ``(values, indices)``; NaN ranks above +inf in all of them (torch's and
JAX's rule), so cutopk runs with ``nan="largest"`` here.
"""

from __future__ import annotations

import importlib.util

import numpy as np

import cutopk


def available(name: str) -> str | None:
    """None when the peer's library is importable, else the reason it is skipped."""
    module = {"torch": "torch", "jax": "jax", "cupy": "cupy"}.get(name)
    if module and importlib.util.find_spec(module) is None:
        return f"{module} is not installed"
    return None


def cutopk_route(x, axis, k, mode):
    return lambda: cutopk.top_k(x, k, axis=axis, mode=mode, nan="largest")


def torch_route(x, axis, k, mode):
    import torch

    t = torch.from_dlpack(x) if not isinstance(x, np.ndarray) else torch.from_numpy(x)
    return lambda: torch.topk(t, k, dim=axis, largest=mode == "largest", sorted=True)


def jax_route(x, axis, k, mode, dist):
    import jax
    import jax.numpy as jnp

    if mode != "largest" and dist in ("nan", "inf"):
        return None, "jax.lax.top_k selects the largest only; negating to get the smallest misorders NaN/inf"
    arr = jnp.asarray(x) if isinstance(x, np.ndarray) else jax.dlpack.from_dlpack(x)

    @jax.jit
    def run(a):
        a = jnp.moveaxis(a, axis, -1)  # top_k works on the last axis only
        return jax.lax.top_k(a if mode == "largest" else -a, k)

    def call():
        out = run(arr)
        out[0].block_until_ready()
        return out

    return call, None


def partition_route(xp, x, axis, k, mode):
    """The sort-based route of NumPy's own top_k (and CuPy's best): argpartition, gather, then
    sort the K. Ties come out in any order."""
    n = x.shape[axis]

    def call():
        kth = n - k if mode == "largest" else k - 1
        part = xp.argpartition(x, kth, axis=axis)
        idx = xp.take(part, xp.arange(n - k, n) if mode == "largest" else xp.arange(k), axis=axis)
        vals = xp.take_along_axis(x, idx, axis=axis)
        order = xp.argsort(-vals if mode == "largest" else vals, axis=axis)
        return xp.take_along_axis(vals, order, axis=axis), xp.take_along_axis(idx, order, axis=axis)

    return call


def cupy_route(x, axis, k, mode):
    import cupy

    return partition_route(cupy, x, axis, k, mode)


def numpy_naive_route(x, axis, k, mode):
    return partition_route(np, x, axis, k, mode)


def numpy_sort_route(x, axis, k, mode):
    def call():
        idx = np.argsort(-x if mode == "largest" else x, axis=axis, kind="stable")
        idx = np.take(idx, np.arange(k), axis=axis)
        return np.take_along_axis(x, idx, axis=axis), idx

    return call


def to_numpy(a) -> np.ndarray:
    if hasattr(a, "get"):
        return a.get()
    if type(a).__module__.split(".")[0] == "torch":
        return a.detach().cpu().numpy()
    return np.asarray(a)


def check(x_host: np.ndarray, axis: int, expected_values: np.ndarray, result) -> str | None:
    """None when ``result`` selects the same values as cutopk (indices equal up to ties: the
    input at the returned indices holds the returned values), else what differs."""
    values, indices = (to_numpy(r) for r in result)
    values = np.moveaxis(values, axis, -1).astype(np.float64)
    indices = np.moveaxis(indices, axis, -1).astype(np.int64)
    expected = np.moveaxis(expected_values, axis, -1).astype(np.float64)
    if values.shape != expected.shape:
        return f"shape {values.shape}, expected {expected.shape}"
    if not np.array_equal(np.sort(values, axis=-1), np.sort(expected, axis=-1), equal_nan=True):
        return "different values selected"
    at = np.take_along_axis(np.moveaxis(x_host, axis, -1).astype(np.float64), indices, axis=-1)
    if not np.array_equal(at, values, equal_nan=True):
        return "indices do not point at the returned values"
    return None
