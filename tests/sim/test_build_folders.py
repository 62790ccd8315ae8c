"""cutopk/_host_build.py on its own (the simulator's builds; no compiler needed): which build
folders the sweep takes for abandoned, where the cache lives, and the probes that must never
raise (a process that may be another user's, a cache folder that is not there, /proc that cannot
be read)."""

from __future__ import annotations

import os
import pathlib
import sys
import time
import types

import pytest

from cutopk import _host_build as hb
from cutopk.sim import _toolchain as _sim_toolchain

# --- which processes are alive ----------------------------------------------------------------------


def test_a_running_process_is_alive_and_a_finished_one_is_not():
    assert hb._alive(os.getpid())
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its id names no process now
    assert not hb._alive(child.pid)


def test_another_users_process_counts_as_alive(monkeypatch):
    def kill(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(hb.os, "kill", kill)
    assert hb._alive(12345)


def test_without_posix_signals_every_process_counts_as_alive(monkeypatch):
    # os.kill(pid, 0) is no probe on Windows (signal 0 is CTRL_C_EVENT there): never sent.
    def kill(pid, sig):
        raise AssertionError("os.kill called off POSIX")

    monkeypatch.setattr(hb, "os", types.SimpleNamespace(name="nt", kill=kill, getpid=os.getpid))
    assert hb._alive(12345)


# --- the sweep ------------------------------------------------------------------------------------


def test_a_build_folder_whose_name_does_not_parse_is_left_alone(tmp_path):
    odd = tmp_path / f"{hb._BUILD_PREFIX}nonsense"  # no host-pid-suffix: not one of ours to judge
    odd.mkdir()
    old = time.time() - 2 * hb.STALE_BUILD_S
    os.utime(odd, (old, old))
    assert hb.sweep(tmp_path) == [] and odd.is_dir()


def test_a_dead_process_folder_of_this_host_goes_and_another_hosts_waits_a_day(tmp_path):
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = tmp_path / f"{hb._BUILD_PREFIX}{hb._HOST}-{child.pid}-x1"
    other = tmp_path / f"{hb._BUILD_PREFIX}otherhost-{child.pid}-x2"
    old_other = tmp_path / f"{hb._BUILD_PREFIX}otherhost-{child.pid}-x3"
    for folder in (dead, other, old_other):
        folder.mkdir()
    day_ago = time.time() - hb.STALE_BUILD_S - 60
    os.utime(old_other, (day_ago, day_ago))
    assert sorted(hb.sweep(tmp_path)) == sorted([dead, old_other])
    assert [p.name for p in tmp_path.iterdir()] == [other.name]


def test_sweeping_a_folder_that_is_not_there_removes_nothing(tmp_path):
    assert hb.sweep(tmp_path / "missing") == []


# --- AddressSanitizer's runtime ------------------------------------------------------------------------


def test_asan_is_not_loaded_here_and_unreadable_maps_mean_not_loaded(monkeypatch):
    with open("/proc/self/maps") as maps:
        assert hb.asan_loaded() == ("libasan" in maps.read())

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/proc/self/maps")

    monkeypatch.setattr(hb, "open", refuse, raising=False)
    assert hb.asan_loaded() is False


def test_a_builder_killed_by_sigkill_leaves_a_folder_that_the_next_use_removes(tmp_path):
    """Issue 49: a build killed with SIGKILL left ``.cutopk-build-<host>-<pid>-*/`` for good, as
    only a later build swept; a later process that finds the library built sweeps it too."""
    import signal
    import subprocess

    code = (
        "import pathlib, sys\n"
        "from cutopk import _host_build as hb\n"
        "hb.build_once(pathlib.Path(sys.argv[1]) / 'lib.so', 'compiled.c', 'int x;\\n',\n"
        "              lambda src, built, folder: [['sleep', '60']])\n"
    )
    root = pathlib.Path(__file__).resolve().parents[2]
    builder = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=root,
        start_new_session=True,  # sleep too
    )
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(f"{hb._BUILD_PREFIX}*/compiled.c")):
            assert time.monotonic() < deadline and builder.poll() is None, "the builder never started"
            time.sleep(0.05)
    finally:
        os.killpg(builder.pid, signal.SIGKILL)
        builder.wait()
    left = list(tmp_path.glob(f"{hb._BUILD_PREFIX}{hb._HOST}-{builder.pid}-*"))
    assert len(left) == 1 and (left[0] / "compiled.c").is_file()  # SIGKILL: no clean-up
    out = tmp_path / "lib.so"  # built since by another process
    out.write_bytes(b"\x7fELF and the rest")
    assert hb.build_once(out, "compiled.c", "int x;\n", lambda *a: pytest.fail("built")) == out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib.so"]


# --- where the cache lives, and what earlier versions left there ---------------------------------------


def test_a_relative_xdg_cache_home_is_ignored(monkeypatch, tmp_path):
    monkeypatch.delenv("CUTOPK_SIM_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relcache")
    assert hb.cache_home() == tmp_path / "home" / ".cache"
    assert _sim_toolchain.cache_dir() == tmp_path / "home" / ".cache" / "cutopk" / "sim"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _sim_toolchain.cache_dir() == tmp_path / "xdg" / "cutopk" / "sim"


def test_old_build_folders_are_removed_and_nothing_else(tmp_path):
    """Earlier versions built in ``tmp*`` folders of the cache: one holding only their files
    and an hour old is removed; anything else in the folder stays."""
    hour_ago = time.time() - 2 * 3600
    old = tmp_path / "tmpab12cd"
    old.mkdir()
    (old / "select_rows.c").write_text("int x;\n")
    (old / "built.so").write_bytes(b"")
    mine = tmp_path / "tmpuser"  # not a build's: another file in it
    mine.mkdir()
    (mine / "notes.txt").write_text("keep\n")
    young = tmp_path / "tmpyoung"
    young.mkdir()
    (young / "module.cpp").write_text("\n")
    for folder in (old, mine):
        os.utime(folder, (hour_ago, hour_ago))
    alive = tmp_path / f".cutopk-build-{hb._HOST}-{os.getpid()}-abc"
    alive.mkdir()
    assert hb.sweep(tmp_path) == [old]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted((mine.name, young.name, alive.name))
