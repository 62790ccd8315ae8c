"""One name per concept: no class name is defined twice in cutopk/ (two ``Program`` classes, one
in the launcher and one in the runner, meant two different things under one word). A class
defined inside a function counts too: a reader (and a traceback) sees only its name."""

from __future__ import annotations

import ast
import collections
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "cutopk"


def class_definitions(root: pathlib.Path) -> dict[str, list[str]]:
    """Every class name defined under ``root``, with where each definition is (file:line)."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_no_class_name_is_defined_twice_in_the_package():
    twice = {name: where for name, where in class_definitions(PACKAGE).items() if len(where) > 1}
    assert twice == {}


def test_the_check_sees_a_name_defined_in_two_modules(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("class Program:\n    pass\n")
    (package / "sub" / "b.py").write_text("def f():\n    class Program:\n        pass\n")
    assert class_definitions(package)["Program"] == ["pkg/a.py:1", "pkg/sub/b.py:2"]
