"""cutopk._environ.get: os.environ.get's answers, read without re-encoding the name each time."""

import os

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
