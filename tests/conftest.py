"""Shared pytest configuration: the hypothesis profiles (a bounded one for CI), CuPy without its
memory pool when a sanitizer asks for it, and the CuPy stand-in (tests/standin/cupy) where no real
CuPy with a usable GPU is there, so that the ``"cuda"`` parameters run everywhere.

``CUTOPK_CUPY_STANDIN=0`` leaves the stand-in out (``import cupy`` then fails without CuPy)."""

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# CI draws as many examples as a developer's run (it was 150: 2.5x the property tests' time, about
# 100 s of CI's 20-minute budget); every run draws new ones, and "long" is there for a deep search.
settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "long", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("CUTOPK_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def _real_cupy_has_a_gpu() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, or a CuPy that cannot reach a GPU
        for name in [n for n in sys.modules if n.split(".")[0] in ("cupy", "cupyx", "cupy_backends")]:
            del sys.modules[name]
        return False


STANDIN = os.environ.get("CUTOPK_CUPY_STANDIN", "1") != "0" and not _real_cupy_has_a_gpu()
if STANDIN:
    from standin import install_cupy

    install_cupy()

if os.environ.get("CUTOPK_CUPY_NO_POOL") == "1":
    # For compute-sanitizer (tools/gpu_session.sh): every array gets its own cudaMalloc, so an
    # access past an array's end leaves the allocation instead of landing inside a pool block.
    import cupy

    cupy.cuda.set_allocator(None)
    cupy.cuda.set_pinned_memory_allocator(None)


# CI's first run (the README's test command in a venv holding only the test extra) names here the
# tests it skipped; CI's second run, with the optional peers (torch, ...) installed, runs just those.
SKIPPED_TESTS_FILE = os.environ.get("CUTOPK_SKIPPED_TESTS_FILE")


def _record_skip(report) -> None:
    if SKIPPED_TESTS_FILE and report.skipped:
        with open(SKIPPED_TESTS_FILE, "a") as out:
            out.write(report.nodeid + "\n")


def pytest_collectreport(report):
    """A whole module skipped at collection (``pytest.importorskip`` at its top)."""
    _record_skip(report)


def pytest_runtest_logreport(report):
    if report.when in ("setup", "call"):
        _record_skip(report)


# The AddressSanitizer run's subset and, on the CuPy stand-in, the thinned "cuda" twins of the
# simulator's cases (tests/support/selection.py; CUTOPK_FULL_MATRIX=1 runs all), then the shard
# of the tests left that CUTOPK_TEST_SHARD=K/N asks for. Last of the hooks, so that the shards
# split what -k and -m leave.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    from support.selection import (
        ASAN_SUBSET,
        TWINS_THINNED,
        asan_keeps,
        shard,
        shard_keeps,
        standin_twin_keeps,
    )

    try:
        which = shard(os.environ.get("CUTOPK_TEST_SHARD"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if ASAN_SUBSET:
        _deselect(
            config,
            items,
            [asan_keeps(getattr(getattr(i, "callspec", None), "params", {})) for i in items],
            "the ASan subset (tests/conftest.py): {} deselected; CUTOPK_FULL_MATRIX=1 runs all",
        )
    if STANDIN and TWINS_THINNED:
        _deselect(
            config,
            items,
            [standin_twin_keeps(getattr(getattr(i, "callspec", None), "params", {})) for i in items],
            'the CuPy stand-in\'s "cuda" twins of simulator cases (tests/support/selection.py): '
            "{} deselected; CUTOPK_FULL_MATRIX=1 runs all",
        )
    if which:
        _deselect(
            config,
            items,
            [shard_keeps(j, which) for j in range(len(items))],
            f"shard {which[0]} of {which[1]} (CUTOPK_TEST_SHARD): {{}} deselected, run by the other shards",
        )


def _deselect(config, items, keep, message):
    kept = [i for i, k in zip(items, keep, strict=True) if k]
    dropped = [i for i, k in zip(items, keep, strict=True) if not k]
    if dropped:  # reported by pytest as deselected, and named here
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
        print("\n" + message.format(len(dropped)))


@pytest.fixture(scope="session", autouse=True)
def caches_of_other_packages(tmp_path_factory):
    """The suite leaves nothing in the user's temp and cache folders (issue 49): what other
    packages cache on their own, torch.compile's inductor (``/tmp/torchinductor_<user>``),
    matplotlib's font list and onnxruntime's device id (``$XDG_CACHE_HOME``), goes into this
    session's temp folder (pytest's, which it prunes). cutopk's own cache, the simulator's
    modules, stays where it was (built once, reused by the next run, as a user's is); the tests
    that build into a cache of their own set one."""
    from cutopk.sim import _toolchain

    root = tmp_path_factory.mktemp("caches")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(_toolchain.CACHE_ENV_VAR, str(_toolchain.cache_dir()))
        patch.setenv("XDG_CACHE_HOME", str(root / "xdg"))
        patch.setenv("TORCHINDUCTOR_CACHE_DIR", str(root / "torchinductor"))
        patch.setenv("MPLCONFIGDIR", str(root / "matplotlib"))
        yield root


@pytest.fixture(autouse=True)
def standin_state():
    """With the CuPy stand-in, each test starts on device 0 with no stream captured, and leaves
    no capture, device or stream behind (a test that fails mid-capture would fail every later one)."""
    yield
    if STANDIN:
        from standin.cupy import _state

        _state.reset()


@pytest.fixture(autouse=True)
def fresh_call_cache():
    """Each test starts with an empty call cache (prepared calls, each with its plan): tests patch dispatcher constants, and a plan
    made before a patch must not serve a call after it (tests that patch mid-test clear it too)."""
    from cutopk._core import call as _call

    _call.CACHE.clear()
    yield
    _call.CACHE.clear()


@pytest.fixture
def no_generic_route(monkeypatch):
    """A segmented_top_k call that should run in the kernels fails the test if its plan (the
    route the call itself takes, cutopk.plan with offsets) is the generic (padded batches) one."""
    import cutopk

    call = cutopk.segmented_top_k

    def in_the_kernels(data, offsets, k, /, **kwargs):
        route = cutopk.plan(data, k, offsets=offsets, **kwargs).batch
        assert route.startswith("CSR segments read by the kernels"), f"segmented_top_k took {route!r}"
        return call(data, offsets, k, **kwargs)

    monkeypatch.setattr(cutopk, "segmented_top_k", in_the_kernels)
