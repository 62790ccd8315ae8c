"""The NumPy routes' tests run with the compiled route off (``CUTOPK_COMPILED=0``): they pin the
routes' own code and choices. tests/numpy/test_numpy_compiled*.py test the compiled route, and the
rest of the suite runs with it on wherever the package's install built it."""

from __future__ import annotations

import pytest

from cutopk.numpy import compiled


@pytest.fixture(autouse=True)
def _numpy_routes_only(request, monkeypatch):
    if not request.module.__name__.rsplit(".", 1)[-1].startswith("test_numpy_compiled"):
        monkeypatch.setenv(compiled.ENV_VAR, "0")
