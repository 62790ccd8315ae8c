"""The package ships py.typed: its users' type checkers trust its annotations, and .ci/run's
lint step checks them with mypy ([tool.mypy] in pyproject.toml). These tests hold what that
check rests on: every public function is annotated in full, and the module defining it is one
mypy checks with ``disallow_untyped_defs`` (so a new public function without annotations is an
error there, not a silent ``Any``)."""

from __future__ import annotations

import inspect
import pathlib

import pytest

import cutopk
import cutopk.dask
import cutopk.directml
import cutopk.onnx
import cutopk.openvino

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def _strict_modules() -> set[str]:
    return {
        module
        for override in CONFIG.get("overrides", [])
        if override.get("disallow_untyped_defs")
        for module in override["module"]
    }


def _public_functions():
    for module in (cutopk, cutopk.onnx, cutopk.openvino, cutopk.directml, cutopk.dask):
        for name in getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]:
            obj = getattr(module, name)
            if inspect.isfunction(obj) and obj.__module__.startswith("cutopk"):
                yield f"{module.__name__}.{name}", obj


PUBLIC = dict(_public_functions())


def test_mypy_checks_the_package_and_every_function_body():
    assert CONFIG["files"][0] == "cutopk" and set(CONFIG["files"]) <= {"cutopk", "benchmarks/cutopk_bench"}
    assert CONFIG["check_untyped_defs"] is True


def test_there_are_public_functions_to_check():
    assert {"cutopk.top_k", "cutopk.plan", "cutopk.merge_top_k", "cutopk.onnx.top_k"} <= set(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_a_public_function_is_annotated_in_full(name):
    fn = PUBLIC[name]
    signature = inspect.signature(fn)
    missing = [p.name for p in signature.parameters.values() if p.annotation is inspect.Parameter.empty]
    assert missing == [], f"{name}: parameters without an annotation: {missing}"
    assert signature.return_annotation is not inspect.Signature.empty, f"{name}: no return annotation"


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_mypy_refuses_unannotated_functions_where_a_public_function_lives(name):
    module = PUBLIC[name].__module__
    assert module in _strict_modules(), (
        f"{name} is defined in {module}, which mypy checks without disallow_untyped_defs"
    )
