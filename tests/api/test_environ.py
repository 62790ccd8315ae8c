"""cutopk._environ.get: os.environ.get's answers, read without re-encoding the name each time."""

import contextlib
import os
import re

import pytest

from cutopk import _environ

NAME = "CUTOPK_TEST_ENVIRON_READ"


@pytest.mark.parametrize("value", ("1", "", " off ", "Ünïcödé", "a=b"))
def test_sees_every_change_made_through_os_environ(monkeypatch, value):
    monkeypatch.delenv(NAME, raising=False)
    assert _environ.get(NAME) is None
    assert _environ.get(NAME, "default") == "default"
    monkeypatch.setenv(NAME, value)
    assert _environ.get(NAME) == os.environ.get(NAME) == value
    os.environ[NAME] = value + "x"  # a plain assignment, not the fixture
    assert _environ.get(NAME) == value + "x"
    del os.environ[NAME]
    assert _environ.get(NAME, "gone") == "gone"


def test_an_os_environ_replaced_is_read_the_plain_way(monkeypatch):
    monkeypatch.setattr(os, "environ", {NAME: "replaced"})
    assert _environ.get(NAME) == "replaced"
    assert _environ.get(NAME + "_UNSET", "d") == "d"


# --- every CUTOPK_ variable's bad value (issue 49): the variable, what it takes, what was given ---


def _sim_module():
    from cutopk import sim

    if sim.unavailable_reason():
        pytest.skip(sim.unavailable_reason())
    return sim.RawModule('extern "C" __global__ void noop() {}')  # the settings are read here


def _compiled_route():
    from cutopk.numpy import compiled

    return compiled.available()


def _threads():
    from cutopk.numpy import threads

    return threads.get_num_threads()


def _step_limit():
    from cutopk_bench import watchdog

    return watchdog.limit_from_env()


_FLAG = r"1 or 0 \(or true/false, yes/no, on/off\)"
BAD_VALUES = [
    ("CUTOPK_SIM_SEED", "abc", _sim_module, r"an integer in \[0, 2\*\*64\)"),
    ("CUTOPK_SIM_SEED", "-1", _sim_module, r"an integer in \[0, 2\*\*64\)"),
    ("CUTOPK_SIM_SEED", "1.5", _sim_module, r"an integer in \[0, 2\*\*64\)"),
    ("CUTOPK_SIM_BLOCK_SEED", "-1", _sim_module, r"an integer in \[0, 2\*\*64\)"),
    ("CUTOPK_SIM_BLOCK_SEED", str(2**64), _sim_module, r"an integer in \[0, 2\*\*64\)"),
    ("CUTOPK_SIM_WATCHDOG", "soon", _sim_module, "seconds, a number >= 0"),
    ("CUTOPK_SIM_WATCHDOG", "-5", _sim_module, "seconds, a number >= 0"),
    ("CUTOPK_SIM_WATCHDOG", "nan", _sim_module, "seconds, a number >= 0"),
    ("CUTOPK_SIM_ASAN", "maybe", _sim_module, _FLAG),
    ("CUTOPK_SIM_ISOLATE", "2", _sim_module, _FLAG),
    ("CUTOPK_SIM_TRAFFIC", "yes please", _sim_module, _FLAG),
    ("CUTOPK_COMPILED", "bogus", _compiled_route, _FLAG),
    ("CUTOPK_COMPILED", "2", _compiled_route, _FLAG),
    ("CUTOPK_NATIVE", "bogus", _compiled_route, _FLAG),  # the deprecated name, named as given
    ("CUTOPK_NUM_THREADS", "zero", _threads, "a positive integer number of threads"),
    ("CUTOPK_NUM_THREADS", "-2", _threads, "a positive integer number of threads"),
    ("CUTOPK_BENCH_STEP_LIMIT", "soon", _step_limit, "seconds, a number >= 0"),
]


@pytest.mark.parametrize(("name", "text", "read", "expected"), BAD_VALUES)
def test_a_bad_value_names_the_variable_what_it_takes_and_what_was_given(
    monkeypatch, name, text, read, expected
):
    if name == "CUTOPK_NATIVE":
        monkeypatch.delenv("CUTOPK_COMPILED", raising=False)
    monkeypatch.setenv(name, text)
    with pytest.warns(FutureWarning) if name == "CUTOPK_NATIVE" else contextlib.nullcontext():
        with pytest.raises(ValueError, match=f"^{name}: expected {expected}.*, got {re.escape(repr(text))}$"):
            read()


@pytest.mark.parametrize(
    ("text", "on"),
    [
        ("0", False),
        ("false", False),
        (" Off ", False),
        ("NO", False),
        ("1", True),
        ("True", True),
        (" on", True),
        ("yes", True),
        ("", True),
    ],
)
def test_a_flag_takes_its_words_either_way(monkeypatch, text, on):
    from cutopk.numpy import compiled

    monkeypatch.setenv("CUTOPK_COMPILED", text)
    assert _environ.flag("CUTOPK_COMPILED", True) is on
    if not on:
        assert compiled.unavailable_reason() == f"turned off by CUTOPK_COMPILED={text}"


def test_a_cache_folder_that_cannot_be_made_names_its_variable(monkeypatch):
    from cutopk.sim import _toolchain

    monkeypatch.setenv("CUTOPK_SIM_CACHE", "/proc/x")
    with pytest.raises(
        OSError, match=r"^CUTOPK_SIM_CACHE: expected a folder that can be made .*got '/proc/x'"
    ):
        _toolchain.cache_dir()
