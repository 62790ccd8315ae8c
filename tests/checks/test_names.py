"""One name per concept: no class name is defined twice in cutopk/ (two ``Program`` classes, one
in the launcher and one in the runner, meant two different things under one word). A class
defined inside a function counts too: a reader (and a traceback) sees only its name. And the
names issue 40 retired (a second name for one concept) do not come back."""

from __future__ import annotations

import ast
import collections
import pathlib
import re

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


# Names issue 40 retired, each for the one name its concept keeps (docs/architecture.md, "One
# name per concept"), and the files where the old word may still stand: the deprecated aliases
# users set, and the file names of earlier versions' build folders that the cache cleaner knows.
RETIRED = {
    r"\bCUTOPK_NATIVE": ("numpy/compiled.py",),  # CUTOPK_COMPILED*; the aliases live there
    # The compiled route (FlashInfer's "native" backend is the benchmark's, outside the package).
    r"[\"']native(-\w+)?[\"']|\bcutopk_native|numpy/native|numpy\.native": ("numpy/compiled.py",),
    r"\bselect_rows\.c\b": ("_host_build.py",),  # compiled.c; an earlier version's build file
    r"\bclass Prepared\b|\bdef prepared\(": (),  # a runner (the core's prepared call keeps the word)
    r"\bcuda\.rows\b|\bcuda/rows\.py|from \. import rows\b|import rows as": (),  # cuda/shared_memory.py
    r"\bdef listing\(|\.listing\(\)": (),  # a runner's launches, as plan() names them
    r"\bdef device_facts\(\) -> dict": (),  # the benchmark's device_record (a Device is device facts)
}


def retired_names(root: pathlib.Path) -> dict[str, list[str]]:
    """Where a retired name is used under ``root`` outside the files allowed to keep it."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.c")]):
        name = path.relative_to(root).as_posix()
        text = path.read_text()
        for pattern, allowed in RETIRED.items():
            if name not in allowed:
                found[pattern] += [
                    f"{name}:{text.count(chr(10), 0, m.start()) + 1}" for m in re.finditer(pattern, text)
                ]
    return {pattern: where for pattern, where in found.items() if where}


def test_retired_names_stay_retired():
    assert retired_names(PACKAGE) == {}


def test_the_retired_names_check_sees_an_old_name(tmp_path):
    (tmp_path / "numpy").mkdir()
    (tmp_path / "numpy" / "routes.py").write_text('ROUTE = "native-rank"\nENV = "CUTOPK_NATIVE"\n')
    found = retired_names(tmp_path)
    assert found[r"\bCUTOPK_NATIVE"] == ["numpy/routes.py:2"]
    assert list(found.values())[1] == ["numpy/routes.py:1"]
