"""How many threads a call of the compiled route shares its rows between, and why.

The compiled route splits a call itself (``compiled.c``'s pool: the caller and worker threads
kept between calls, a job handed over by one atomic store), so the backend's thread model
(:mod:`cutopk.numpy.threads`) holds only its work: elements times the route's passes
(``routes.ROUTE_PASSES``) at the probe's seconds per element-pass. What a split costs and
gains is this pool's own, measured by ``compiled.measure_pool``: some microseconds a handover
where the Python pool took 100-230 us, and no GIL turns. The split must still promise at most
``threads.SPLIT_GAIN`` of the one-thread time, and the first calls of a shape still time it
against one thread before it is kept (``threads.trial``, by ``routes.route``).
"""

from __future__ import annotations

import os
import time

from . import compiled as _compiled
from . import threads as _threads

# Where the pool is not measured yet (a plan before the first call that measures it): a
# handover of this many seconds and a second thread this much faster, said so in the plan's
# threads_why.
GUESS = (20e-6, 0.8)
# A measurement that found a second thread at most RETRY_BELOW faster (efficiency) is taken
# again (some 5 ms, in the call that asks) once it is MEASURE_S old: one taken while other work
# held the second core (a second thread measured 1.00-1.02x as fast at a load average of 4-5)
# does not keep every later call of the process on one thread. A measurement that found a
# useful second thread is kept: no call of a busy process pays 5 ms every 30 s, and a split
# that stops paying on a machine loaded later is caught by the trials (``threads.trial``).
MEASURE_S = 30.0
RETRY_BELOW = 0.5
# "costs": (handover seconds, efficiency, time.monotonic() of the measurement), or None.
_state: dict = {"costs": None}


def _forget() -> None:
    """A forked child measures again (its pool starts afresh, perhaps on other CPUs)."""
    _state["costs"] = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def pool_costs() -> tuple[float, float, bool]:
    """``(handover_s, efficiency, measured)``: the pool's costs, measured at the first call that
    asks (a poor second thread measured again after ``MEASURE_S``), else ``GUESS`` and False
    (the route not loaded yet)."""
    known = _state["costs"]
    if known is not None and known[1] <= RETRY_BELOW and time.monotonic() - known[2] > MEASURE_S:
        known = None
    if known is None:
        found = _compiled.measure_pool()
        if found is None:
            return (*GUESS, False)
        known = _state["costs"] = (float(found[0]), min(1.0, max(0.0, float(found[1]))), time.monotonic())
    return known[0], known[1], True


def threads_for(threads: int, element_passes: float, pieces: int) -> tuple[int, str]:
    """How many of ``threads`` a compiled-route call with ``element_passes`` of work in
    ``pieces`` units (rows, or groups of rows side by side) uses, and why: the count ``t`` whose
    predicted time ``work * max(1 / (1 + (t - 1) * efficiency), ceil(pieces / t) / pieces) +
    handover_s * (t - 1)`` is least, provided that it is at most ``threads.SPLIT_GAIN`` of the
    one-thread time; else one. Costs set by hand for the thread model (``threads.set_costs``:
    tests) are taken for the pool's too."""
    if threads <= 1:
        return 1, "one thread asked for"
    measured = _threads.costs()
    pool = pool_costs() if _threads.measured() else None
    # The same question under the same costs: the answer kept (its text alone costs some 6 us,
    # on every call of a shape).
    key = (threads, element_passes, pieces)
    known = _decisions.get(key)
    if known is not None and known[0] is measured and known[1] == pool:
        return known[2]
    if len(_decisions) >= _threads.TRIAL_MAX_SHAPES:
        _decisions.clear()
    answer = _threads_for(measured, pool, threads, element_passes, pieces)
    _decisions[key] = (measured, pool, answer)
    return answer


_decisions: dict = {}  # threads_for's answers, with the costs they were worked out under


def _threads_for(
    measured: tuple, pool: tuple | None, threads: int, element_passes: float, pieces: int
) -> tuple[int, str]:
    """:func:`threads_for` under the thread model's costs ``measured`` and the pool's ``pool``
    (None: costs set by hand)."""
    task_s, element_s, efficiencies, _ = measured
    if pool is not None:
        handover_s, efficiency, known = pool
        note = "" if known else " (not measured yet: the first call measures it)"
    else:  # set by hand: one efficiency for every family
        efficiency = efficiencies if isinstance(efficiencies, float) else next(iter(efficiencies.values()))
        handover_s, note = task_s, ""
    work = element_passes * element_s
    usable, capped = _threads.usable_threads(threads)
    best, best_t = work, 1
    for t in range(2, min(usable, max(pieces, 1)) + 1):
        share = max(1 / (1 + (t - 1) * efficiency), -(-pieces // t) / pieces)
        predicted = work * share + handover_s * (t - 1)
        if predicted < best:
            best, best_t = predicted, t
    figures = (
        f"{work * 1e6:.0f} us of work, {handover_s * 1e6:.1f} us per handover to the compiled route's "
        f"pool{note}, a second thread {1 + efficiency:.2f}x as fast"
    )
    asked = f"{threads}{capped}"
    if best_t == 1 or best > _threads.SPLIT_GAIN * work:
        return 1, f"1 of {asked}: splitting would not pay ({figures})"
    return (
        best_t,
        f"{best_t} of {asked} in the compiled route's pool: predicted {best * 1e6:.0f} us ({figures})",
    )
