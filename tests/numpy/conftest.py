"""The NumPy routes' tests run with the compiled route off (``CUTOPK_COMPILED=0``): they pin the
routes' own code and choices. tests/numpy/test_numpy_compiled*.py test the compiled route, and the
rest of the suite runs with it on wherever the machine has a C compiler."""

from __future__ import annotations

import pytest

from cutopk.numpy import compiled


@pytest.fixture(autouse=True)
def _numpy_routes_only(request, monkeypatch):
    if not request.module.__name__.rsplit(".", 1)[-1].startswith("test_numpy_compiled"):
        monkeypatch.setenv(compiled.ENV_VAR, "0")


@pytest.fixture
def quick_builds(monkeypatch):
    """The compiled route built at -O0 instead of -O3 (about 1.3 s of CPU for compiled.c, not 8 s;
    measured 2026-11-27 on the 2-core machine): for the tests of the build's machinery (turned
    off, foreign ABI, a compiler without -march=native, the cache's key), whose builds' speed
    proves nothing. The flags are part of the cache key, so an -O0 build never serves an -O3 one;
    every other test, and CI's ASan run of this file, still loads the -O3 build."""
    monkeypatch.setattr(compiled, "FLAGS", tuple("-O0" if f == "-O3" else f for f in compiled.FLAGS))
