"""Test stand-ins for what no CPU machine has: CuPy with GPUs (:mod:`standin.cupy`) and torch
CUDA tensors (:mod:`standin.torch_cuda`)."""

from __future__ import annotations

import sys


def install_cupy() -> None:
    """Make ``import cupy`` (and its submodules) the stand-in."""
    from . import cupy  # noqa: F401 - imports every submodule

    for name in [n for n in sys.modules if n == "standin.cupy" or n.startswith("standin.cupy.")]:
        sys.modules[name.removeprefix("standin.")] = sys.modules[name]
