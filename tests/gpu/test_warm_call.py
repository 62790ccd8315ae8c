"""A warm call of :func:`cutopk.top_k` on a CuPy array (issue 39): only what depends on the call's
arrays runs again. No argument check, no request, no wrapping of the input, no planning and no
resolving of launch arguments; the answer stays the NumPy backend's. Counted, not timed
(benchmarks/host_overhead.py times it)."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from support.reference import assert_same

import cutopk
from cutopk import _interop
from cutopk._core import call as _call
from cutopk._request import checks as _checks
from cutopk.cuda import launcher as _launcher
from cutopk.cuda import runner as _runner

pytestmark = pytest.mark.gpu

# What a first call does once per signature, and a warm one must not do again.
ONCE = (
    (_checks, "normalize"),
    (_checks, "array_kind"),
    (_checks, "resolve_backend"),
    (_interop, "as_cupy"),
    (_interop, "import_cupy"),
    (_launcher.GpuCall, "__init__"),
    (_runner.Runner, "__init__"),
    (_runner._Sequence, "_add"),
    (_runner._Sequence, "carved"),
    (_runner, "_generated"),
)


def _count(monkeypatch) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for owner, name in ONCE:
        real = getattr(owner, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            counts[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)
    return counts


@pytest.mark.parametrize(
    ("shape", "k", "algorithm"),
    [
        ((1, 8192), 512, "auto"),
        ((8, 3000), 50, "auto"),
        ((3, 5000), 40, "multiblock"),
        ((2, 5, 300), 7, "auto"),
    ],
    ids=["one row", "rows", "several launches and scratch", "3-d"],
)
def test_a_warm_call_checks_plans_and_packs_nothing_again(cupy, monkeypatch, shape, k, algorithm):
    rng = np.random.default_rng(39)
    host = rng.permutation(np.prod(shape)).reshape(shape).astype(np.float32)
    x = cupy.asarray(host)
    kw = {"mode": "largest", "nan": "largest", "algorithm": algorithm}
    want = cutopk.top_k(host, k, **{**kw, "algorithm": "auto"})
    cutopk.top_k(x, k, **kw)  # the first call: checked, planned, launches resolved
    counts = _count(monkeypatch)
    hits = _call.CACHE.hits
    for _ in range(3):
        r = cutopk.top_k(x, k, **kw)
        assert (
            type(r) is cutopk.TopK
            and isinstance(r.values, cupy.ndarray)
            and r.values.shape == (*shape[:-1], k)
        )
        assert_same((r.values.get(), r.indices.get()), want)
    assert not counts, f"a warm call did the first call's work again: {dict(counts)}"
    assert _call.CACHE.hits == hits + 3


def test_a_call_that_differs_in_any_argument_is_checked_again(cupy, monkeypatch):
    """The short path finds only the very signature planned: another k, a bool k or another
    backend name goes through the checks (and their errors)."""
    x = cupy.asarray(np.arange(100, dtype=np.float32).reshape(2, 50))
    cutopk.top_k(x, 3)
    counts = _count(monkeypatch)
    cutopk.top_k(x, 4)
    assert counts["normalize"] == 1
    with pytest.raises(TypeError, match="k: expected an integer, got bool"):
        cutopk.top_k(x, True)
    with pytest.raises(TypeError, match="backend: backend='sim' expects a NumPy array"):
        cutopk.top_k(x, 3, backend="sim")
