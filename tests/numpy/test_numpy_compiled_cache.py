"""The compiled route's build and cache (cutopk/numpy/compiled.py, cutopk/_host_build.py), as a
new user meets them (issue 36): a fork during the first build, a truncated, foreign or garbage
library under the cache's name, a build killed by SIGTERM, a relative ``$XDG_CACHE_HOME``, a
``$CC`` that names no compiler or carries flags, and ``plan()``, which never builds.

Every test works in a cache folder of its own (``CUTOPK_COMPILED_CACHE`` under ``tmp_path``). The
cases that crashed or hung the interpreter run in a subprocess with a timeout, so that a
regression fails instead of killing or hanging the test run."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from support.reference import check_top_k

import cutopk
from cutopk import _host_build
from cutopk.numpy import compiled
from cutopk.sim import _toolchain as _sim_toolchain

ROOT = pathlib.Path(__file__).resolve().parents[2]
CC = compiled.compiler()

pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler: the compiled route cannot be built here")


def _state() -> dict:
    return {"lib": None, "why": None, "tried": False, "env": (None, True), "path": None, "cc": None}


# These tests check the build's cache, locks and refusals, not the build's code: every build here,
# in this process and in the subprocesses, is at -O0 (about 1.3 CPU s for compiled.c, not 8 s at
# -O3; tests/numpy/conftest.py's quick_builds), the flags being part of the library's name.
QUICK_FLAGS = "compiled.FLAGS = tuple('-O0' if f == '-O3' else f for f in compiled.FLAGS)"


def _quick(flags: tuple[str, ...]) -> tuple[str, ...]:
    return tuple("-O0" if f == "-O3" else f for f in flags)


@pytest.fixture
def cache(monkeypatch, tmp_path, quick_builds):
    """A process that has not tried to load the compiled route yet, and an empty cache."""
    folder = tmp_path / "cache"
    monkeypatch.setattr(compiled, "_state", _state())
    monkeypatch.delenv(compiled.ENV_VAR, raising=False)
    monkeypatch.delenv(compiled.ASAN_ENV_VAR, raising=False)
    monkeypatch.setenv(compiled.CACHE_ENV_VAR, str(folder))
    return folder


@pytest.fixture(scope="session")
def good_build(tmp_path_factory):
    """One build of the library with its record, copied into the tests' caches."""
    folder = tmp_path_factory.mktemp("good-build")
    old = os.environ.get(compiled.CACHE_ENV_VAR)
    os.environ[compiled.CACHE_ENV_VAR] = str(folder)
    try:
        return compiled.build(CC, compiled.SOURCE.read_text(), _quick(compiled.build_flags()))
    finally:
        if old is None:
            del os.environ[compiled.CACHE_ENV_VAR]
        else:
            os.environ[compiled.CACHE_ENV_VAR] = old


def _record_of(library: pathlib.Path) -> pathlib.Path:
    return library.with_suffix(".json")  # _host_build.record_path, spelt out


def _library(good: pathlib.Path) -> pathlib.Path:
    """Where this process's build is kept in the current cache (the good build's name)."""
    return compiled.cache_dir() / good.name


def _install(good: pathlib.Path) -> pathlib.Path:
    """The good build (and its record) copied into the current cache under its name."""
    out = _library(good)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(good, out)
    if _record_of(good).exists():
        shutil.copyfile(_record_of(good), _record_of(out))
    return out


def _fits_its_record(out: pathlib.Path) -> bool:
    record = json.loads(_record_of(out).read_text())
    data = out.read_bytes()
    return record["size"] == len(data) and record["sha256"] == hashlib.sha256(data).hexdigest()


def _long_rows():
    return np.random.default_rng(8).standard_normal((2, 9000)).astype(np.float32)


def _python(code: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter on this source tree, bounded by ``timeout`` seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    env.pop(compiled.ENV_VAR, None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _script(tmp_path: pathlib.Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return str(path)


def _slow_cc(tmp_path, seconds: float) -> str:
    """The real compiler, after a pause: a build that lasts long enough to be interrupted."""
    return _script(tmp_path, "slow-cc", f'sleep {seconds}\nexec {CC} "$@"\n')


def _garbage_cc(tmp_path) -> str:
    """A "compiler" that writes bytes that are no library to its ``-o`` file, at once."""
    return _script(
        tmp_path,
        "garbage-cc",
        """\
        while [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done
        printf 'not a library at all' > "$out"
        """,
    )


# --- item 2: a fork during the first build -----------------------------------------------------


def test_a_fork_during_the_first_build_gets_its_answer(tmp_path):
    """The child of a fork made while another thread builds the library used to wait for ever
    on the build lock held by a thread it does not have."""
    code = f"""
        import multiprocessing, sys, threading, time
        import numpy as np
        import cutopk
        from cutopk.numpy import compiled
        {QUICK_FLAGS}

        x = np.random.default_rng(0).standard_normal((2, 9000)).astype(np.float32)

        def indices():
            return cutopk.top_k(x, 10).indices.tolist()

        first = threading.Thread(target=indices)
        first.start()
        deadline = time.monotonic() + 60
        while not compiled._lock.locked():  # the first build has started
            if time.monotonic() > deadline:
                sys.exit("the first build never started")
            time.sleep(0.001)
        with multiprocessing.get_context("fork").Pool(1) as pool:
            got = pool.apply_async(indices).get(timeout=90)
        first.join()
        expected = np.argsort(-x, axis=1, kind="stable")[:, :10].tolist()
        assert got == expected == indices(), (got, expected)
        assert compiled.available(), compiled.unavailable_reason()
        print("ok")
    """
    env = {compiled.CACHE_ENV_VAR: str(tmp_path / "cache"), "CC": _slow_cc(tmp_path, 1)}
    proc = _python(code, env, timeout=240)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


# --- items 3, 4, 7: a library under the cache's name that is not the build --------------------


def test_a_truncated_library_is_rebuilt_before_it_is_loaded(tmp_path, cache, good_build):
    """Cut to a fifth of its size, the cached library killed the interpreter with SIGBUS at the
    first plan or long-row call: its size no longer fits its build record, so it is built again
    before anything loads it."""
    out = _install(good_build)
    size = out.stat().st_size
    os.truncate(out, size // 5)
    code = f"""
        import numpy as np
        import cutopk
        from cutopk.numpy import compiled
        from support.reference import check_top_k
        {QUICK_FLAGS}

        x = np.random.default_rng(8).standard_normal((2, 9000)).astype(np.float32)
        print(cutopk.plan(x, 10).params["route"])
        check_top_k(x, 10)
        params = cutopk.plan(x, 10).params
        print(params["route"], params["compiled"].split(" ")[0])
    """
    env = {compiled.CACHE_ENV_VAR: str(cache), "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    proc = _python(code, env, timeout=240)
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-3000:]}"
    assert proc.stdout.split() == ["compiled", "compiled", "loaded"], proc.stdout
    assert _fits_its_record(out) and out.stat().st_size > size // 5


def _foreign_library(tmp_path) -> bytes:
    """A valid shared object without the route's entry points."""
    src = tmp_path / "other.c"
    src.write_text("int cutopk_other(void) { return 1; }\n")
    subprocess.run([*CC.split(), "-shared", "-fPIC", str(src), "-o", str(tmp_path / "other.so")], check=True)
    return (tmp_path / "other.so").read_bytes()


def _forge_record(out: pathlib.Path) -> None:
    """A build record that vouches for whatever ``out`` holds now (what a file check alone
    cannot catch: the loader must then refuse it)."""
    record = json.loads(_record_of(out).read_text()) if _record_of(out).exists() else {}
    data = out.read_bytes()
    record.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    _record_of(out).write_text(json.dumps(record))


@pytest.mark.parametrize(
    ("content", "forged"), (("foreign", False), ("foreign", True), ("garbage", True))
)  # fmt: skip
def test_a_foreign_or_garbage_library_is_rebuilt_once(tmp_path, cache, good_build, content, forged):
    """A valid library without the entry points gave AttributeError on every long-row call;
    garbage bytes turned the route off for good, as a failed build ("invalid ELF header"). Both
    are found unfit (by the record, or by the loader where a record vouches for them), closed,
    and built again once."""
    out = _install(good_build)
    bad = _foreign_library(tmp_path) if content == "foreign" else b"\x7fELF garbage" * 100
    out.write_bytes(bad)
    if forged:
        _forge_record(out)
    x = _long_rows()
    check_top_k(x, 10)
    params = cutopk.plan(x, 10).params
    assert params["route"] == "compiled" and "compiled_unavailable" not in params, params
    assert params["compiled"] == f"loaded from {out}" and params["compiler"] == CC
    assert out.read_bytes() != bad and _fits_its_record(out)  # the rebuilt one


def test_a_library_that_never_loads_says_so(tmp_path, cache, monkeypatch):
    """Where the rebuilt library still does not load, the reason says that, not that the
    build failed (nothing failed to compile)."""
    monkeypatch.setenv("CC", _garbage_cc(tmp_path))
    x = _long_rows()
    check_top_k(x, 10)
    why = cutopk.plan(x, 10).params["compiled_unavailable"]
    assert "does not load" in why and "built again by" in why and "could not be built" not in why, why


# --- item 6: a build killed by SIGTERM --------------------------------------------------------


def test_a_killed_build_leaves_nothing_after_the_next_build(tmp_path, cache, monkeypatch):
    """SIGTERM skips Python's clean-up: the build folder (source, and the orphaned compiler's
    output) stayed in the cache for good. The next build removes a folder whose process is
    gone."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "from cutopk.numpy import compiled; print(compiled.available())"],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            compiled.CACHE_ENV_VAR: str(cache),
            "CC": _slow_cc(tmp_path, 30),
        },
        start_new_session=True,  # the compiler's group, ended below
    )
    try:
        deadline = time.monotonic() + 60
        while not (cache.is_dir() and any(p.is_dir() for p in cache.iterdir())):
            assert time.monotonic() < deadline and proc.poll() is None, "the build never started"
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        # The orphaned "compiler"; its group may be gone already (then nothing is left to end).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert any(p.is_dir() for p in cache.iterdir())  # left behind, as a killed build does
    compiled.build(_garbage_cc(tmp_path), compiled.SOURCE.read_text())
    assert not any(p.is_dir() for p in cache.iterdir()), sorted(cache.iterdir())


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
    alive = tmp_path / f".cutopk-build-{_host_build._HOST}-{os.getpid()}-abc"
    alive.mkdir()
    assert _host_build.sweep(tmp_path) == [old]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted((mine.name, young.name, alive.name))


# --- issue 49: every distinct CC built another library, none evicted ---------------------------------


def test_each_cc_builds_its_own_library_and_the_cache_keeps_the_last_used(tmp_path, cache, good_build):
    copy_cc = _script(
        tmp_path,
        "copy-cc",
        f"""\
        while [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done
        cp {good_build} "$out"
        """,
    )
    source, built = compiled.SOURCE.read_text(), []
    for i in range(compiled.CACHE_KEEP + 4):
        built.append(compiled.build(f"{copy_cc} -DVARIANT={i}", source))
        for path in cache.iterdir():  # two hours pass between the builds
            when = path.stat().st_mtime - 7200
            os.utime(path, (when, when))
    libraries = sorted(cache.glob("compiled-*.so"))
    assert len(set(built)) == compiled.CACHE_KEEP + 4 and len(libraries) == compiled.CACHE_KEEP
    assert set(libraries) == set(built[-compiled.CACHE_KEEP :])
    assert sorted(cache.glob("compiled-*.json")) == [p.with_suffix(".json") for p in libraries]
    compiled._close(compiled.load(built[-1]).library)  # the last one still loads


# --- item 8: a relative XDG_CACHE_HOME --------------------------------------------------------


def test_a_relative_xdg_cache_home_is_ignored(monkeypatch, tmp_path):
    monkeypatch.delenv(compiled.CACHE_ENV_VAR, raising=False)
    monkeypatch.delenv("CUTOPK_SIM_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relcache")
    assert compiled.cache_dir() == tmp_path / "home" / ".cache" / "cutopk" / "compiled"
    assert _sim_toolchain.cache_dir() == tmp_path / "home" / ".cache" / "cutopk" / "sim"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compiled.cache_dir() == tmp_path / "xdg" / "cutopk" / "compiled"


# --- item 9: plan() never builds --------------------------------------------------------------


def test_plan_never_builds_and_says_whether_the_route_is_built(cache, monkeypatch, good_build):
    """plan() ran the C compiler (2-4 s) even for a 2x10 array; it reports instead whether the
    route would be taken and whether it is built, and which compiler builds it."""

    def refuse(*args, **kwargs):
        raise AssertionError("plan() built the compiled route")

    monkeypatch.setattr(compiled, "build_once", refuse)
    start = time.perf_counter()
    small = cutopk.plan(np.zeros((2, 10), np.float64), 3).params  # 64 bits: no small call
    long = cutopk.plan(_long_rows(), 10).params
    assert time.perf_counter() - start < 1.5
    assert small["route"] != "compiled" and long["route"] == "compiled"
    for params in (small, long):
        assert params["compiled"].startswith("not built: the first call that takes the route builds it")
        assert params["compiler"] == CC and "compiled_unavailable" not in params
    assert not cache.exists() and not compiled._state["tried"]
    _install(good_build)
    assert cutopk.plan(_long_rows(), 10).params["compiled"].startswith("built, loaded by the first call")
    assert not compiled._state["tried"]
    monkeypatch.undo()  # build_once back (the cache fixture's settings with it, set again)
    monkeypatch.setattr(compiled, "_state", _state())
    monkeypatch.setattr(compiled, "FLAGS", _quick(compiled.FLAGS))
    monkeypatch.setenv(compiled.CACHE_ENV_VAR, str(cache))
    monkeypatch.delenv(compiled.ENV_VAR, raising=False)
    monkeypatch.delenv(compiled.ASAN_ENV_VAR, raising=False)
    check_top_k(_long_rows(), 10)
    assert cutopk.plan(_long_rows(), 10).params["compiled"] == f"loaded from {_library(good_build)}"


# --- item 10: $CC ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ("/nonexistent/cc", "no-such-compiler-36 -O2", "'unbalanced"))
def test_an_unusable_cc_is_the_stated_reason(cache, monkeypatch, value):
    """A ``$CC`` that names no compiler was passed over for ``cc`` in silence; it is the reason
    the route does not run (the user asked for that compiler)."""
    monkeypatch.setenv("CC", value)
    x = _long_rows()
    assert cutopk.plan(x, 10).params["route"] == "filter"  # known before any build
    check_top_k(x, 10)
    params = cutopk.plan(x, 10).params
    assert params["route"] == "filter" and f"CC={value!r}" in params["compiled_unavailable"], params
    assert not cache.exists()


def test_cc_with_flags_builds_and_the_plan_names_it(cache, monkeypatch):
    """``CC="gcc -O0"`` is a command line, as make and setuptools take it; the plan names the
    compiler that built the route."""
    monkeypatch.setenv("CC", f"{CC} -O0")
    x = _long_rows()
    check_top_k(x, 10)
    params = cutopk.plan(x, 10).params
    assert params["route"] == "compiled" and params["compiler"] == f"{CC} -O0", params
    record = json.loads(_record_of(compiled._state["path"]).read_text())
    assert record["compiler"] == f"{CC} -O0"
