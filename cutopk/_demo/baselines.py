"""The routes measured side by side: cutopk and its peers, each built for one input.

A route is a callable returning ``(values, indices)`` in the peer's own array type, plus the
facts the checker and the timer need: whether its output is sorted by value, which NaN rule it
follows (``"largest"``: NaN ranks above +inf, torch's rule; ``"last"``: a NaN is never preferred),
and whether it runs on a stream of its own (JAX).

Peers on a GPU: ``torch.topk`` on a zero-copy DLPack view; ``jax.lax.top_k`` on a DLPack import
(last axis and largest only: the axis is moved inside the jitted function, and the smallest are
the largest of ``-x``, negated back; integers would take ``~x`` instead, which has no overflow,
and floats with NaN are skipped because ``-NaN`` sorts first); CuPy's best sort-based route
(``cupy.argsort`` + take: CuPy's ``argpartition`` sorts fully anyway, so a partition would only
add a second sort of the K). CUB's and FlashInfer's top-K, through shims built from their sources,
are the benchmark's peers (``benchmarks/cutopk_bench/shims.py``), not the demo's. On the CPU: NumPy's naive route
(``argpartition`` + gather + ``argsort`` of the K), a full ``argsort(kind="stable")``,
``torch.topk`` with one thread and with its default thread count, and cutopk on one thread
(``cutopk`` itself uses every core).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Callable

import numpy as np

from .._core import entry
from .route import Route


def missing(module: str) -> str | None:
    """None when ``module`` can be imported, else the reason a peer needing it is skipped."""
    return None if importlib.util.find_spec(module) is not None else f"{module} is not installed"


def _slice(a, axis: int, start: int | None, stop: int | None, step: int = 1):
    """``a[..., start:stop:step, ...]`` along ``axis`` (a view, for NumPy and CuPy alike)."""
    index = [slice(None)] * a.ndim
    index[axis] = slice(start, stop, step)
    return a[tuple(index)]


def _take_ends(xp, x, order, axis: int, k: int, mode: str):
    """Values and indices of the first K (smallest) or the last K reversed (largest) of an
    ascending ``order``. NaN sorts last in NumPy and CuPy, so both follow the ``largest`` rule."""
    n = x.shape[axis]
    # Reversed slice n-1 down to n-k; a stop of -1 would mean "the last element", hence None.
    rev = _slice(order, axis, n - 1, n - k - 1 if n > k else None, -1)
    idx = _slice(order, axis, 0, k) if mode == "smallest" else rev
    idx = xp.ascontiguousarray(idx)
    return xp.take_along_axis(x, idx, axis=axis), idx


JAX_UNCAPTURED = (
    "jax.jit dispatches on XLA's own stream: neither CuPy's nor torch's capture sees its launches"
)


def cutopk_route(x, axis: int, k: int, mode: str, nan: str = "largest", sort: bool = True) -> Route:
    """cutopk itself, with torch's NaN rule so that every GPU peer is compared like for like;
    ``sort=False``: its ``sorted=False`` call, the one the unsorted peers are set against."""
    call = lambda: entry.top_k(x, k, axis=axis, mode=mode, nan=nan, sorted=sort)  # noqa: E731
    return Route("cutopk" if sort else "cutopk-unsorted", call, nan=nan, sorts=sort)


def torch_route(x, axis: int, k: int, mode: str, dtype: str) -> Route:
    """``torch.topk`` on a zero-copy view of ``x`` (``from_numpy`` on the CPU, DLPack on a GPU)."""
    if reason := missing("torch"):
        return Route("torch", None, reason)
    import torch

    if isinstance(x, np.ndarray):
        # ml_dtypes' bfloat16 does not cross torch.from_numpy: share the bits and reinterpret.
        t = (
            torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16)
            if dtype == "bfloat16"
            else torch.from_numpy(x)
        )
    elif not torch.cuda.is_available():
        return Route("torch", None, f"this torch ({torch.__version__}) has no CUDA")
    elif dtype == "bfloat16":
        t = torch.from_dlpack(x.view(np.uint16)).view(torch.bfloat16)
    else:
        t = torch.from_dlpack(x)  # zero-copy: torch reads CuPy's memory in place
    largest = mode == "largest"
    return Route("torch", lambda: torch.topk(t, k, dim=axis, largest=largest, sorted=True), capture="torch")


def jax_route(x, axis: int, k: int, mode: str, dist: str, dtype: str = "float32") -> Route:
    """``jax.lax.top_k`` jitted around a DLPack import of ``x`` (see the module doc for the axis,
    the smallest and NaN)."""
    if reason := missing("jax"):
        return Route("jax", None, reason)
    if mode != "largest" and dist == "nan":
        return Route("jax", None, "jax.lax.top_k selects the largest only and -NaN would rank first")
    import jax
    import jax.numpy as jnp

    if not isinstance(x, np.ndarray) and jax.default_backend() != "gpu":
        return Route("jax", None, f"JAX has no GPU backend here (its default is {jax.default_backend()})")
    bf16 = dtype == "bfloat16"
    src = x.view(np.uint16) if bf16 else x  # DLPack exporters may not know bfloat16: pass the bits
    try:
        arr = jnp.asarray(src) if isinstance(x, np.ndarray) else jax.dlpack.from_dlpack(src)
    except Exception as exc:  # noqa: BLE001 - JAX refuses some strides and dtypes; say which
        return Route("jax", None, f"JAX cannot import this array: {type(exc).__name__}: {exc}"[:160])

    @jax.jit
    def run(a):
        if bf16:
            a = jax.lax.bitcast_convert_type(a, jnp.bfloat16)  # a reinterpretation, not a conversion
        a = jnp.moveaxis(a, axis, -1)  # lax.top_k works on the last axis only
        if mode == "largest":
            v, i = jax.lax.top_k(a, k)
        else:
            v, i = jax.lax.top_k(-a, k)
            v = -v  # -(-x) is x bit for bit for every non-NaN float
        return jnp.moveaxis(v, -1, axis), jnp.moveaxis(i, -1, axis)

    def call():
        out = run(arr)
        out[1].block_until_ready()
        return out

    return Route("jax", call, own_stream=True, capture=JAX_UNCAPTURED)


def cupy_route(x, axis: int, k: int, mode: str) -> Route:
    """``cupy.argsort`` (stable) and a take of the first or last K."""
    import cupy

    return Route("cupy", lambda: _take_ends(cupy, x, cupy.argsort(x, axis=axis), axis, k, mode))


def numpy_naive_route(x, axis: int, k: int, mode: str) -> Route:
    """``argpartition`` + gather + ``argsort`` of the K: what NumPy users write (ties arbitrary)."""
    n = x.shape[axis]

    def call():
        kth = n - k if mode == "largest" else k - 1
        part = np.argpartition(x, kth, axis=axis)
        idx = _slice(part, axis, n - k, n) if mode == "largest" else _slice(part, axis, 0, k)
        vals = np.take_along_axis(x, idx, axis=axis)
        top, pos = _take_ends(np, vals, np.argsort(vals, axis=axis), axis, k, mode)
        return top, np.take_along_axis(idx, pos, axis=axis)

    return Route("numpy-naive", call)


def numpy_sort_route(x, axis: int, k: int, mode: str) -> Route:
    """A full stable ``argsort`` and a slice: exact, ties by index, O(n log n).

    For the largest it sorts ``-x`` (so equal values keep ascending indices), which puts NaN last:
    this route follows the ``last`` NaN rule.
    """

    def call():
        # ~x reverses an integer's order exactly (-x overflows at the dtype's minimum).
        flip = (~x if x.dtype.kind in "iu" else -x) if mode == "largest" else x
        idx = _slice(np.argsort(flip, axis=axis, kind="stable"), axis, 0, k)
        return np.take_along_axis(x, idx, axis=axis), idx

    return Route("numpy-sort", call, nan="last")


def _cpus() -> int:
    """The CPUs this process may use: torch's default intra-op thread count on machines
    without SMT (it counts physical cores), cutopk's default everywhere."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_thread_routes(x, axis: int, k: int, mode: str, dtype: str) -> dict[str, Callable[[], Route]]:
    """Builders of the CPU peers that differ from another route by their thread count only:
    cutopk on one thread (``cutopk`` itself uses every core) and ``torch.topk`` with torch's
    default thread count (``torch`` runs on one thread). Each call sets its count and restores
    the previous one, so the routes can take turns in one process."""

    def cutopk_one():
        from ..numpy import threads as _threads

        def call():
            with _threads.num_threads(1):
                return entry.top_k(x, k, axis=axis, mode=mode, nan="largest")

        return Route("cutopk-1thread", call)

    def torch_default():
        route = torch_route(x, axis, k, mode, dtype)
        if route.call is None:
            return dataclasses.replace(route, name="torch-threads")
        import torch

        # torch's default count, computed (the loop has set torch to one thread by now).
        threads, one_thread = _cpus(), route.call

        def call():
            before = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                return one_thread()
            finally:
                torch.set_num_threads(before)

        return Route("torch-threads", call)

    return {"cutopk-1thread": cutopk_one, "torch-threads": torch_default}


GPU_PEERS = ("torch", "jax", "cupy")
CPU_PEERS = ("numpy-naive", "numpy-sort", "torch", "cutopk-1thread", "torch-threads")


# The modules a peer's route imports besides cutopk's own.
PEER_MODULES = {"torch": "torch", "torch-threads": "torch", "jax": "jax"}


def peer_missing(name: str) -> str | None:
    """Why the peer ``name`` cannot run anywhere in this environment (a module it needs is not
    installed), or None."""
    module = PEER_MODULES.get(name)
    return missing(module) if module else None


def peer_unavailable(name: str, gpu: bool) -> str | None:
    """None when the peer ``name`` can run in a GPU (or CPU) benchmark here, else why not; asked
    for the peers named with ``--peers``, so that one that cannot run is an error, not a silent drop."""
    mine, here = (GPU_PEERS, "GPU") if gpu else (CPU_PEERS, "CPU")
    if name not in mine:
        there = "CPU" if gpu else "GPU"
        also = f"; besides, {why}" if name in ("torch", "jax") and (why := missing(name)) else ""
        return f"{name} runs only in a {there} benchmark, and this one runs on the {here} (its peers: {', '.join(mine)}){also}"
    if name in ("torch", "jax"):
        return missing(name)
    return None


def builders(x, axis: int, case, gpu: bool) -> dict[str, Callable[[], Route]]:
    """The demo's peers for one input, by name, each built only when called: on a GPU torch, JAX
    and CuPy; on the CPU NumPy's two routes, torch, and the thread-count variants."""
    k, mode = case.k, case.mode
    if gpu:
        found = {
            "torch": lambda: torch_route(x, axis, k, mode, case.dtype),
            "jax": lambda: jax_route(x, axis, k, mode, case.dist, case.dtype),
            "cupy": lambda: cupy_route(x, axis, k, mode),
        }
    else:
        found = {
            "numpy-naive": lambda: numpy_naive_route(x, axis, k, mode),
            "numpy-sort": lambda: numpy_sort_route(x, axis, k, mode),
            "torch": lambda: torch_route(x, axis, k, mode, case.dtype),
            **cpu_thread_routes(x, axis, k, mode, case.dtype),
        }
    assert tuple(found) == (GPU_PEERS if gpu else CPU_PEERS)
    return found


def build(found: dict[str, Callable[[], Route]], only: tuple[str, ...] = ()) -> list[Route]:
    """The routes of ``found`` (``only`` these when given: the others are not even set up, JAX's
    import and jit cost seconds). A peer whose library fails to import or to take the input is
    skipped, with the reason."""
    routes = []
    for name, make in found.items():
        if only and name not in only:
            continue
        try:
            routes.append(make())
        except Exception as exc:  # noqa: BLE001 - e.g. a JAX whose CUDA plugin does not load
            routes.append(Route(name, None, f"cannot set up: {type(exc).__name__}: {exc}"[:200]))
    return routes


def peers(x, axis: int, case, gpu: bool, only: tuple[str, ...] = ()) -> list[Route]:
    """The demo's peers for one input (:func:`builders`), ``only`` these when given."""
    return build(builders(x, axis, case, gpu), only)
