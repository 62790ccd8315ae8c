"""The histograms' counting under its compile-time switch (kernels/radix_digit.cuh): every
normal build counts with plain shared atomics (tools/check_sass.py fails on a MATCH, and
tests/gpu/test_sass_check.py shows that rule failing); ``CUTOPK_COUNT_WITH_MATCH=1`` brings back
the warp match of equal digits for an A/B on a GPU (issue 50, M4). Here the switched-on build
still selects bit for bit, on the simulator, for each way of counting it changes: the on-chip
load and refine passes (resident), the radix digit passes (radix) and the multi-block passes
(multiblock)."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from support.backends import require
from support.reference import assert_same, reference_top_k

import cutopk
from cutopk._core import call as _call
from cutopk.cuda import kernel_source as _kernel_source
from cutopk.cuda import launcher as _gpu

SWITCH = "#define CUTOPK_COUNT_WITH_MATCH 1\n"


@pytest.fixture
def with_match(monkeypatch):
    """The launcher's modules built afresh from sources that turn the switch on; the families
    built are recorded."""
    built: list[str] = []
    plain = _kernel_source.source

    def switched(family: str, dtype_name: str) -> str:
        built.append(family)
        return SWITCH + plain(family, dtype_name)

    monkeypatch.setattr(_kernel_source, "source", switched)
    with mock.patch.dict(_gpu._MODULES, clear=True):
        _call.CACHE.clear()
        try:
            yield built
        finally:
            _call.CACHE.clear()


def test_the_switch_is_off_unless_defined():
    text = (_kernel_source.kernel_dir() / "radix_digit.cuh").read_text()
    assert "#ifndef CUTOPK_COUNT_WITH_MATCH\n#define CUTOPK_COUNT_WITH_MATCH 0\n#endif" in text
    assert "#define CUTOPK_COUNT_WITH_MATCH 1" not in _kernel_source.kernel_source()


@pytest.mark.parametrize(
    ("algorithm", "shape", "k"),
    [("resident", (3, 5000), 300), ("radix", (2, 20000), 700), ("multiblock", (1, 70000), 2000)],
)
def test_counting_with_the_warp_match_selects_the_same(with_match, algorithm, shape, k):
    require("sim")
    rng = np.random.default_rng(51)
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, ::7] = 1.0  # ties across digits and lanes: many lanes of a warp share a digit
    x[-1] = np.round(x[-1], 1)  # few distinct values
    for kw in ({}, {"sorted": "index", "mode": "smallest"}):
        expected = reference_top_k(x, k, **kw)
        result = cutopk.top_k(x, k, backend="sim", algorithm=algorithm, **kw)
        assert_same(result, expected, order=kw.get("sorted", True))
    assert algorithm in with_match
