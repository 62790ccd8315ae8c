"""How the compiled route finds and loads the library that ``pip install .`` built
(cutopk/numpy/compiled.py, setup.py): found on ``sys.path`` (also from a source checkout, where
``import cutopk`` imports the checkout and the library is the installed one), its variant the
widest this processor runs; not built, not a library, not one of ours, another ABI: each the
stated reason, with the NumPy routes' answers. Nothing here compiles anything."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from support.reference import check_top_k

import cutopk
from cutopk.numpy import compiled

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
PROBE = "_cutopk_compiled_probe"  # a module name no install makes: the tests plant it

built = pytest.mark.skipif(compiled.locate() is None, reason=f"compiled route: {compiled.NOT_BUILT}")


@pytest.fixture
def fresh(monkeypatch):
    """A process that has not tried to load the compiled route yet."""
    monkeypatch.setattr(
        compiled,
        "_state",
        {"lib": None, "why": None, "tried": False, "env": (None, True), "path": None, "variant": None},
    )
    monkeypatch.delenv(compiled.ENV_VAR, raising=False)
    monkeypatch.delenv("CUTOPK_NATIVE", raising=False)


@pytest.fixture
def planted(fresh, monkeypatch, tmp_path):
    """Where a planted library is looked for: ``PROBE`` in a folder at the head of sys.path."""
    monkeypatch.setattr(compiled, "LIBRARY", PROBE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _plant(folder: pathlib.Path, name: str, data: bytes) -> pathlib.Path:
    path = folder / name
    path.write_bytes(data)
    importlib.invalidate_caches()  # the folder's listing, as importlib's finder keeps it
    return path


def _long_rows():
    return np.random.default_rng(8).standard_normal((2, 9000)).astype(np.float32)


def _assert_numpy_routes(why: str):
    x = _long_rows()
    check_top_k(x, 10)
    params = cutopk.plan(x, 10).params
    assert params["route"] == "filter" and params["compiled_unavailable"].startswith(why), params
    assert "compiled" not in params and "compiled_variant" not in params


@built
def test_the_installed_library_is_found_by_a_plan_and_loaded_by_the_first_call(fresh):
    path = compiled.locate()
    assert path.name.startswith(compiled.LIBRARY + ".")
    assert path.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    x = _long_rows()
    params = cutopk.plan(x, 10).params  # a plan loads nothing
    assert params["route"] == "compiled" and "compiled_unavailable" not in params, params
    assert params["compiled"] == f"not loaded yet: the first call that takes the route loads {path}"
    assert "compiled_variant" not in params and not compiled._state["tried"]
    check_top_k(x, 10)
    params = cutopk.plan(x, 10).params
    assert params["compiled"] == f"loaded from {path}"
    assert params["compiled_variant"] in compiled.VARIANTS


def _cpu_flags() -> set[str] | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


@built
def test_the_variant_is_the_widest_this_processor_runs():
    """compiled_variants.c's choice, against the processor's flags as Linux lists them (of the
    variants the install's compiler built)."""
    flags = _cpu_flags()
    if flags is None:
        pytest.skip("no /proc/cpuinfo flags line (not Linux on x86)")
    avx2 = {"avx2", "fma", "bmi1", "bmi2", "popcnt"} <= flags
    avx512 = avx2 and {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags
    picked = compiled._function()
    runs = [v for v, ok in (("avx512", avx512), ("avx2", avx2), ("baseline", True)) if ok]
    built = [v for v in runs if hasattr(picked.library, f"cutopk_compiled_select_{v}")]
    assert picked.variant == built[0]


@built
def test_each_variant_loads_by_name_and_an_unknown_one_lacks_its_entry_points():
    """The picked variant and every narrower one the install built (a compiler without a
    variant's flags leaves it out) load by name; baseline is always built."""
    path, picked = compiled.locate(), compiled._function()
    assert hasattr(picked.library, "cutopk_compiled_select_baseline")
    for variant in compiled.VARIANTS[compiled.VARIANTS.index(picked.variant) :]:
        if hasattr(picked.library, f"cutopk_compiled_select_{variant}"):
            assert compiled.load(path, variant).variant == variant
    with pytest.raises(compiled.LoadError, match=r"lacks the entry points .*cutopk_compiled_select_sse9"):
        compiled.load(path, "sse9")


def test_not_built_at_install_leaves_the_numpy_routes_and_says_why(planted):
    assert compiled.locate() is None
    params = cutopk.plan(_long_rows(), 10).params  # before any call: loading nothing, it knows
    assert params["route"] == "filter" and params["compiled_unavailable"] == compiled.NOT_BUILT, params
    assert compiled.unavailable_reason() == compiled.NOT_BUILT
    assert compiled.NOT_BUILT.startswith("not built at install: ")
    assert compiled.measure_pool() is None  # no pool to measure
    _assert_numpy_routes("not built at install: ")


def test_a_module_of_that_name_that_is_no_library_is_not_it(planted):
    _plant(planted, f"{PROBE}.py", b"")  # a Python module: never loaded as the library
    assert compiled.locate() is None
    _assert_numpy_routes("not built at install: ")


def test_a_file_that_does_not_load_says_so(planted):
    library = _plant(planted, f"{PROBE}{SUFFIX}", b"not a shared object")
    assert compiled.locate() == library
    _assert_numpy_routes("the compiled route's library cannot be used: ")
    assert "does not load" in compiled.unavailable_reason()


def _some_extension_module() -> pathlib.Path | None:
    """A shared object of this interpreter's that is no library of ours."""
    for name in ("_json", "_struct", "_bisect", "_random", "math", "select"):
        origin = getattr(__import__(name), "__file__", None)
        if origin and origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            return pathlib.Path(origin)
    return None


def test_a_library_that_is_not_ours_lacks_the_entry_points(planted):
    other = _some_extension_module()
    if other is None:
        pytest.skip("this interpreter's standard modules are built in: no shared object to plant")
    _plant(planted, f"{PROBE}{SUFFIX}", other.read_bytes())
    _assert_numpy_routes("the compiled route's library cannot be used: ")
    assert "lacks the entry points" in compiled.unavailable_reason()


@built
def test_a_library_of_another_abi_says_to_install_again(fresh, monkeypatch):
    """The installed library built from another compiled.c than the one imported (a checkout
    changed since its install)."""
    monkeypatch.setattr(compiled, "ABI", compiled.ABI + 1)
    _assert_numpy_routes("the compiled route's library cannot be used: ")
    assert compiled.unavailable_reason().endswith(
        "(built from another version of compiled.c: install the package again)"
    )


@built
def test_a_source_checkout_finds_the_installed_library_and_its_own_in_place_build_first(tmp_path):
    """``python -m pytest`` from the repository's root imports the checkout's cutopk, not the
    installed copy: the library ``pip install`` put in site-packages is found all the same, and
    an in-place build at the checkout's top (``python setup.py build_ext --inplace``) before it."""
    checkout, site = tmp_path / "checkout", tmp_path / "site-packages"
    checkout.mkdir()
    site.mkdir()
    (checkout / "cutopk").symlink_to(ROOT / "cutopk")
    installed = site / compiled.locate().name
    shutil.copyfile(compiled.locate(), installed)
    code = textwrap.dedent(
        """\
        import cutopk
        from cutopk.numpy import compiled
        print(cutopk.__file__)
        print(compiled.locate())
        print(compiled.unavailable_reason())
        """
    )

    def run():
        env = {**os.environ, "PYTHONPATH": str(site)}  # site-packages: after the current folder
        env.pop(compiled.ENV_VAR, None)
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout.splitlines()

    imported, found, why = run()
    assert pathlib.Path(imported).parent == checkout / "cutopk"
    assert (pathlib.Path(found), why) == (installed, "None")
    in_place = checkout / installed.name
    shutil.copyfile(installed, in_place)
    assert pathlib.Path(run()[1]) == in_place


@built
def test_a_fork_while_another_thread_loads_gets_its_answer(fresh):
    """The child of a fork made while another thread holds the load lock (a thread it does not
    have) loads the library itself instead of waiting for ever."""
    with compiled._lock:  # the other thread, loading
        pid = os.fork()
        if pid == 0:  # the child: a fresh lock (os.register_at_fork), and an answer
            os._exit(0 if compiled.available() else 1)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child waited for the load lock")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_caller_that_waited_for_another_threads_load_takes_its_answer(fresh, monkeypatch):
    loads = []
    monkeypatch.setattr(compiled, "_load", lambda: loads.append(1) or "a second load")
    got = []
    with compiled._lock:  # another thread is loading
        waiter = threading.Thread(target=lambda: got.append(compiled._function()))
        waiter.start()
        waiter.join(0.2)  # it waits for the lock
        assert waiter.is_alive() and not got
        compiled._state["lib"], compiled._state["tried"] = "the other thread's load", True
    waiter.join(5)
    assert got == ["the other thread's load"] and loads == []


@built
def test_a_plan_loads_nothing_and_measures_nothing(fresh, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("loaded inside planning()")

    monkeypatch.setattr(compiled, "_load", refuse)
    with compiled.planning():
        assert compiled.available() and compiled._function() is None
        assert compiled.measure_pool() is None  # the pool's costs: measured by a call, not a plan
    assert not compiled._state["tried"]


def test_the_switchs_earlier_name_still_works_with_a_deprecation_warning(fresh, monkeypatch):
    """Issue 40 renamed CUTOPK_NATIVE to CUTOPK_COMPILED; users set the old name, so it is read
    where the new one is unset (warning once per process), and the new name wins."""
    monkeypatch.setattr(compiled, "_warned", set())
    monkeypatch.setenv("CUTOPK_NATIVE", "0")
    with pytest.warns(FutureWarning, match="CUTOPK_NATIVE is deprecated: set CUTOPK_COMPILED instead"):
        assert compiled.unavailable_reason() == "turned off by CUTOPK_NATIVE=0"
    assert not compiled.available()
    monkeypatch.setenv("CUTOPK_COMPILED", "off")
    assert compiled.unavailable_reason() == "turned off by CUTOPK_COMPILED=off"
    monkeypatch.setenv("CUTOPK_COMPILED", "1")
    assert compiled.setting(compiled.ENV_VAR) == ("CUTOPK_COMPILED", "1")
