"""The compiled route's edges (cutopk/numpy/compiled.py) that need no build: a processor whose
/proc/cpuinfo cannot be read, a cache folder that cannot be made, a platform that cannot unload
a library, plan()'s promise to build nothing, a caller that waited for another thread's build,
and the plan's status without a compiler."""

from __future__ import annotations

import ctypes
import platform
import threading

import pytest

from cutopk.numpy import compiled


def _state() -> dict:
    return {"lib": None, "why": None, "tried": False, "env": (None, True), "path": None, "cc": None}


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A process that has not tried the route yet, with an empty cache of its own."""
    monkeypatch.setattr(compiled, "_state", _state())
    monkeypatch.delenv(compiled.ENV_VAR, raising=False)
    monkeypatch.delenv(compiled.ASAN_ENV_VAR, raising=False)
    monkeypatch.setenv(compiled.CACHE_ENV_VAR, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_processor_is_named_by_platform_where_cpuinfo_cannot_be_read(monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/proc/cpuinfo")

    monkeypatch.setattr(compiled, "open", refuse, raising=False)
    assert compiled._processor.__wrapped__() == platform.machine() + platform.processor()


def test_a_cache_folder_that_cannot_be_made_is_a_build_error_naming_it(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(compiled.CACHE_ENV_VAR, str(blocker / "cache"))
    with pytest.raises(
        RuntimeError,
        match=rf"^cc could not build into {blocker / 'cache'} \(from {compiled.CACHE_ENV_VAR}\): ",
    ):
        compiled.build("cc", "int x;\n", ())


def test_closing_where_the_platform_cannot_unload_leaves_the_library_loaded(monkeypatch):
    import _ctypes

    lib = ctypes.CDLL(None)  # this process itself: always there, never really unloaded
    monkeypatch.delattr(_ctypes, "dlclose")  # as on Windows, which has FreeLibrary instead
    compiled._close(lib)
    assert lib.getpid() > 0  # still callable


def test_inside_planning_nothing_is_built_even_when_the_function_is_asked_for(fresh, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("built inside planning()")

    monkeypatch.setattr(compiled, "_load", refuse)
    with compiled.planning():
        assert compiled._function() is None
    assert not compiled._state["tried"] and not fresh.exists()


def test_a_caller_that_waited_for_another_threads_build_takes_its_answer(fresh, monkeypatch):
    loads = []
    monkeypatch.setattr(compiled, "_load", lambda: loads.append(1) or "a second build")
    got = []
    with compiled._lock:  # another thread is building
        waiter = threading.Thread(target=lambda: got.append(compiled._function()))
        waiter.start()
        waiter.join(0.2)  # it waits for the lock
        assert waiter.is_alive() and not got
        compiled._state["lib"], compiled._state["tried"] = "the other thread's build", True
    waiter.join(5)
    assert got == ["the other thread's build"] and loads == []


def test_the_plan_says_nothing_of_a_build_where_no_compiler_can_run(fresh, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert compiled.status() == {}
    assert (
        compiled.unavailable_reason()
        == "CC='/nonexistent/cc': '/nonexistent/cc' is not a program (a path, or a name on PATH)"
    )
    assert compiled._state["tried"] and not fresh.exists()


def test_the_variables_earlier_names_still_work_with_a_deprecation_warning(fresh, monkeypatch, tmp_path):
    """Issue 40 renamed CUTOPK_NATIVE* to CUTOPK_COMPILED*; users set the old names, so each is
    read where its new name is unset (warning once per process), and the new name wins."""
    monkeypatch.setattr(compiled, "_warned", set())
    for new, old in compiled.DEPRECATED_ENV_VARS.items():
        monkeypatch.delenv(new, raising=False)
        monkeypatch.delenv(old, raising=False)
    monkeypatch.setenv("CUTOPK_NATIVE", "0")
    with pytest.warns(FutureWarning, match="CUTOPK_NATIVE is deprecated: set CUTOPK_COMPILED instead"):
        assert compiled.unavailable_reason() == "turned off by CUTOPK_NATIVE=0"
    assert not compiled.available()
    monkeypatch.setenv("CUTOPK_NATIVE_CACHE", str(tmp_path / "old-cache"))
    with pytest.warns(FutureWarning, match="CUTOPK_NATIVE_CACHE is deprecated"):
        assert compiled.cache_dir() == tmp_path / "old-cache"
    monkeypatch.setenv("CUTOPK_NATIVE_ASAN", "1")
    with pytest.warns(FutureWarning, match="CUTOPK_NATIVE_ASAN is deprecated"):
        assert compiled.ASAN_FLAGS[0] in compiled.build_flags()
    # A reason names the variable the user set.
    monkeypatch.setattr(compiled, "find_compiler", lambda: (["cc"], None))
    monkeypatch.setattr(compiled, "asan_loaded", lambda: False)
    assert compiled._obstacle()[1].startswith("CUTOPK_NATIVE_ASAN=1 needs AddressSanitizer's runtime")
    # The new names win over the old ones, and say so in the reason.
    monkeypatch.setenv("CUTOPK_COMPILED", "off")
    monkeypatch.setenv("CUTOPK_COMPILED_CACHE", str(tmp_path / "new-cache"))
    monkeypatch.setenv("CUTOPK_COMPILED_ASAN", "0")
    assert compiled.unavailable_reason() == "turned off by CUTOPK_COMPILED=off"
    assert compiled.cache_dir() == tmp_path / "new-cache"
    assert compiled.ASAN_FLAGS[0] not in compiled.build_flags()
    monkeypatch.setenv("CUTOPK_COMPILED", "1")
    assert compiled.setting(compiled.ENV_VAR) == ("CUTOPK_COMPILED", "1")
