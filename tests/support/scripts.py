"""Loading a script of benchmarks/ as a module, for the tests of its functions."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def load_benchmark(monkeypatch, relative: str, name: str):
    """``benchmarks/<relative>`` executed as module ``name``, registered in ``sys.modules`` for the
    test's length (dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / relative)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module
