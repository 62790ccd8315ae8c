"""cutopk/_host_build.py on its own (no compiler needed): what a build record that does not fit says,
which build folders the sweep takes for abandoned, and the probes that must never raise (a process
that may be another user's, a cache folder that is not there, /proc that cannot be read)."""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time
import types

import pytest

from cutopk import _host_build as hb


@pytest.fixture
def library(tmp_path):
    """A "library" and the record that vouches for it."""
    out = tmp_path / "lib.so"
    out.write_bytes(b"\x7fELF and the rest")
    record = {"abi": 7, "size": out.stat().st_size, "sha256": hb._digest(out)}
    hb.record_path(out).write_text(json.dumps(record))
    return out


def test_a_fitting_record_says_nothing(library):
    assert hb.record_fits(library, {"abi": 7}) is None


@pytest.mark.parametrize(
    ("record", "said"),
    [
        ("{not json", "its build record cannot be read ("),
        ("[1, 2]", "its build record is not a record"),
        ('{"abi": 6}', "its build record's abi is 6, not 7"),
    ],
)
def test_a_record_that_cannot_vouch_says_why(library, record, said):
    hb.record_path(library).write_text(record)
    assert hb.record_fits(library, {"abi": 7}).startswith(said)


def test_a_library_changed_after_its_record_does_not_fit(library):
    library.write_bytes(b"\x7fELF and the REST")  # the same size, other bytes
    assert hb.record_fits(library, {"abi": 7}) == "its SHA-256 is not its build record's"
    library.write_bytes(b"\x7fELF")
    assert hb.record_fits(library, {}).startswith("its size is 4 bytes, its build record's ")


def test_a_record_without_its_library_says_it_cannot_be_read(library):
    library.unlink()
    assert hb.record_fits(library, {"abi": 7}).startswith("it cannot be read (")


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
    hb.record_path(out).write_text(json.dumps({"size": out.stat().st_size, "sha256": hb._digest(out)}))
    assert hb.build_once(out, "compiled.c", "int x;\n", lambda *a: pytest.fail("built"), record={}) == out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib.json", "lib.so"]


# --- the bound on a cache's builds (build_once's keep) -----------------------------------------------


def _planted(folder, name: str, age_s: float) -> pathlib.Path:
    out = folder / name
    out.write_bytes(name.encode())
    hb.record_path(out).write_text(json.dumps({"size": out.stat().st_size, "sha256": hb._digest(out)}))
    when = time.time() - age_s
    os.utime(out, (when, when))
    return out


def test_the_builds_beyond_the_last_used_go_with_their_records_once_unused_for_an_hour(tmp_path):
    old = [_planted(tmp_path, f"lib-{i}.so", 7200 + 60 * i) for i in range(6)]
    young = _planted(tmp_path, "lib-young.so", 1800)  # beyond the count, but used half an hour ago
    recent = _planted(tmp_path, "lib-recent.so", 7200 + 3600 * 24)  # the oldest ...
    os.utime(recent)  # ... until a process used it now
    other = _planted(tmp_path, "other-0.so", 10**6)  # not one of these builds
    stray = tmp_path / "lib-x.txt"
    stray.write_text("")
    out = hb.build_once(
        tmp_path / "lib-new.so", "a.c", "int x;\n", lambda s, b, f: [["cp", str(s), str(b)]], {}, keep=2
    )
    assert out.read_text() == "int x;\n"
    assert {p.name for p in tmp_path.iterdir()} == {
        *(f"{p.stem}{suffix}" for p in (out, young, recent, other) for suffix in (".so", ".json")),
        stray.name,
    }
    assert not any(p.exists() or hb.record_path(p).exists() for p in old)
    # Found built: marked used, nothing evicted.
    os.utime(young, (1, 1))
    os.utime(out, (1, 1))
    assert hb.build_once(out, "a.c", "int x;\n", lambda *a: pytest.fail("built"), {}, keep=1) == out
    assert out.stat().st_mtime > time.time() - 60 and young.exists()


def test_an_eviction_that_cannot_remove_a_file_leaves_it(tmp_path, monkeypatch):
    victim = _planted(tmp_path, "lib-old.so", 7200)
    out = _planted(tmp_path, "lib-new.so", 0)
    real_unlink = pathlib.Path.unlink

    def refuse(self, missing_ok=False):
        if self == victim:
            raise PermissionError(13, "in use")
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(pathlib.Path, "unlink", refuse)
    assert hb.evict(out, 1) == [] and victim.exists()
    assert hb.evict(tmp_path / "missing" / "lib-a.so", 1) == []
