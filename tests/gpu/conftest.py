"""Fixtures of the CUDA backend's tests."""

from __future__ import annotations

import pytest
from support.backends import require


@pytest.fixture
def cupy():
    """CuPy (the stand-in without a GPU); the test is skipped, with the reason, where the CUDA
    backend cannot run."""
    require("cuda")
    import cupy

    return cupy
