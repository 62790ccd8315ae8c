"""The NumPy backend's thread pool: how many threads, and running independent blocks on them.

NumPy releases the GIL inside its partition, sort, comparison and reduction loops, so blocks of
rows (or column ranges of one long row) handed to a pool of Python threads run on several cores.
Every block writes its own part of the result and the merge order is fixed, so the answer is
identical for every thread count.

The thread count, in order of precedence:

1. :func:`set_num_threads` (or the :func:`num_threads` context manager);
2. the environment variable ``CUTOPK_NUM_THREADS`` (read at every call: a positive integer);
3. the CPUs this process may run on (``os.sched_getaffinity``, else ``os.cpu_count()``).

``threadpoolctl.threadpool_limits`` does not govern this pool: threadpoolctl finds the pools it
controls by the shared libraries loaded in the process, and this pool is plain Python with no
library of its own to be found by (a controller registered for it would have to claim another
package's library file). Use ``CUTOPK_NUM_THREADS`` or :func:`num_threads` beside it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

ENV_VAR = "CUTOPK_NUM_THREADS"

_lock = threading.Lock()
_state: dict = {"set": None, "pool": None, "size": 0}


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _check(n, source: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{source}: expected a positive integer number of threads, got {n!r}")
    return n


def get_num_threads() -> int:
    """The number of threads the NumPy backend uses (see the module doc for the precedence).

    >>> from cutopk import _numpy_threads
    >>> _numpy_threads.get_num_threads() >= 1
    True
    """
    if _state["set"] is not None:
        return _state["set"]
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        try:
            value = int(env)
        except ValueError:
            value = env
        return _check(value, ENV_VAR)
    return _cpus()


def set_num_threads(n: int | None) -> int | None:
    """Set the NumPy backend's thread count (``None``: back to the environment / CPU count).

    Returns the previous setting (``None`` when none was set), so it can be restored.
    """
    previous = _state["set"]
    _state["set"] = None if n is None else _check(n, "n")
    return previous


@contextlib.contextmanager
def num_threads(n: int | None) -> Iterator[None]:
    """Within the block, the NumPy backend uses ``n`` threads.

    >>> import numpy as np, cutopk
    >>> from cutopk import _numpy_threads
    >>> with _numpy_threads.num_threads(1):
    ...     cutopk.top_k(np.arange(5.0), 2).indices.tolist()
    [4, 3]
    """
    previous = set_num_threads(n)
    try:
        yield
    finally:
        _state["set"] = previous


def _forget_pool() -> None:
    """In a forked child the parent's worker threads do not exist: start a new pool there."""
    _state["pool"], _state["size"] = None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _pool(size: int) -> ThreadPoolExecutor:
    with _lock:
        if _state["pool"] is None or _state["size"] < size:
            if _state["pool"] is not None:
                _state["pool"].shutdown(wait=False)
            _state["pool"] = ThreadPoolExecutor(size, thread_name_prefix="cutopk")
            _state["size"] = size
        return _state["pool"]


def run(fn: Callable, items: Sequence, threads: int) -> list:
    """``[fn(item) for item in items]``, on up to ``threads`` threads, this one included.

    The items are handed out one at a time to whichever thread is free (blocks cost unequal
    time: ties, NaNs). The call returns when every item is done, not when every helper has
    started: on a busy machine a helper the scheduler wakes late finds nothing left and the
    caller does not wait for it. The first exception reaches the caller. ``fn`` must not call
    :func:`run` itself (a worker waiting on its own pool could wait forever).
    """
    n = len(items)
    workers = min(threads, n)
    if workers <= 1:
        return [fn(item) for item in items]
    results: list = [None] * n
    claim, completed = itertools.count(), itertools.count(1)  # next() is atomic under the GIL
    finished = threading.Event()
    errors: list = []

    def work() -> None:
        for i in iter(claim.__next__, None):
            if i >= n or errors:
                return
            try:
                results[i] = fn(items[i])
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                errors.append(exc)
                finished.set()
                return
            if next(completed) == n:
                finished.set()

    pool = _pool(workers - 1)
    for _ in range(workers - 1):
        pool.submit(work)
    work()
    finished.wait()
    if errors:
        raise errors[0]
    return results
