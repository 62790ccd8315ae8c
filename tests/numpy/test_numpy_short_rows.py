"""The NumPy backend's short-row routes (one sort of composite keys per row, and the runner
function of a small cached call) and its thread cost model."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from support.reference import check_top_k

import cutopk
from cutopk.numpy import routes as _numpy_routes
from cutopk.numpy import threads as _numpy_threads

DTYPES = ("float32", "float16", "bfloat16", "int8", "uint8", "int16", "uint16", "int32", "uint32")


def _dtype(name):
    if name == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _values(rng, dtype: np.dtype, shape) -> np.ndarray:
    """Few distinct values (ties everywhere), both signs; for floats -0.0 beside +0.0, +-inf,
    NaNs of both signs in some rows, and a row of NaN only."""
    x = rng.integers(-4, 5, shape).astype(np.float32)
    if dtype.kind == "u":
        x = np.abs(x)
    if dtype.kind == "f" or dtype.name == "bfloat16":
        x[rng.random(shape) < 0.15] = -0.0
        x[rng.random(shape) < 0.05] = np.inf
        x[rng.random(shape) < 0.05] = -np.inf
        x[1, 0] = np.nan
        x[2] = np.nan
        x[3, -1] = -np.nan
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(700, 8), (300, 16), (200, 64), (4, 128), (30, 200)])
def test_short_rows_match_the_reference(dtype, shape):
    """Up to 8192 elements (all but 200x64) through the runner function of a small call, and the
    same elements two apart (no small call) through select_sorted in row blocks, as 200x64:
    every mode, NaN rule and order, ties by lower index."""
    x = _values(np.random.default_rng(shape[1]), _dtype(dtype), shape)
    inputs = [x]
    if x.size <= _numpy_routes.TINY_MAX_ELEMENTS:
        small = "small-composite" if dtype == "bfloat16" else "small-argsort"
        assert cutopk.plan(x, 2).params["route"] == small
        spread = np.zeros((shape[0], 2 * shape[1]), x.dtype)
        spread[:, ::2] = x
        inputs.append(spread[:, ::2])
    assert cutopk.plan(inputs[-1], 2).params["route"] == "sorted"
    n = shape[1]
    for a, k in itertools.product(inputs, sorted({1, 2, n // 2, n - 1})):
        for mode in ("largest", "smallest"):
            for nan in ("last", "largest"):
                for order in (True, "index", False):
                    check_top_k(a, k, mode=mode, nan=nan, sorted=order)


def test_negative_zero_ties_with_zero_and_lower_index_wins():
    x = np.array([[0.0, -0.0, 1.0, -0.0, 0.0, -1.0, 0.0, -0.0]] * 3000, np.float32)
    r = cutopk.top_k(x, 4)
    assert r.indices[0].tolist() == [2, 0, 1, 3]
    assert np.signbit(r.values[0]).tolist() == [False, False, True, True]  # the elements' own bits
    r = cutopk.top_k(x[:1], 4, mode="smallest")
    assert r.indices[0].tolist() == [5, 0, 1, 3]


def test_prepared_call_handles_nan_and_other_layouts():
    x = np.array([[3.0, np.nan, 2.0, 7.0, -np.nan, 1.0]], np.float32)
    assert cutopk.top_k(x, 2).indices.tolist() == [[3, 0]]
    assert cutopk.top_k(x, 2, nan="largest").indices.tolist() == [[1, 4]]
    assert cutopk.top_k(x, 2, mode="smallest").indices.tolist() == [[5, 2]]
    wide = np.tile(np.arange(12, dtype=np.float32), (20, 1))
    for view in (wide[:, ::2], wide.T, wide[::3], wide.astype(">f4")):  # strided, axis 0, swapped
        for axis in (0, 1, -1):
            check_top_k(view, 3, axis=axis)
    check_top_k(np.arange(24, dtype=np.int16).reshape(2, 3, 4), 2)


@pytest.mark.parametrize("threads", (1, 2, 3))
def test_short_rows_identical_on_every_thread_count(threads, monkeypatch):
    monkeypatch.setattr(_numpy_routes, "PARALLEL_MIN_ELEMENTS", 1)
    monkeypatch.setattr(_numpy_routes, "SORTED_BLOCK_ELEMENTS", 512)  # many blocks
    monkeypatch.setitem(_numpy_threads._state, "costs", (0.0, 1.0, 1.0, 0.0))  # splitting always pays
    monkeypatch.setitem(_numpy_threads._state, "cpus", 4)  # counts above the CPUs are not tried
    x = _values(np.random.default_rng(3), np.dtype("float32"), (5000, 16))
    with _numpy_threads.num_threads(threads):
        assert cutopk.plan(x, 4).params["threads"] == threads
        for nan in ("last", "largest"):
            check_top_k(x, 4, nan=nan)


# --- the thread cost model ---------------------------------------------------------------------


def test_threads_decision_follows_the_measured_costs(monkeypatch):
    # 1 us per task handed over, 1 ns per element-pass, on 4 CPUs.
    monkeypatch.setitem(_numpy_threads._state, "costs", (1e-6, 1e-9, 1.0, 0.0))
    monkeypatch.setitem(_numpy_threads._state, "cpus", 4)
    assert _numpy_threads.threads_for(1, 1e9)[0] == 1
    assert _numpy_threads.threads_for(4, 1_000)[0] == 1  # 1 us of work: never split
    t, why = _numpy_threads.threads_for(4, 1e7)  # 10 ms of work
    assert t == 4 and "of work" in why
    # A costly hand-over (a busy machine): the same work stays on fewer threads.
    monkeypatch.setitem(_numpy_threads._state, "costs", (1e-3, 1e-9, 1.0, 0.0))
    assert _numpy_threads.threads_for(4, 1e7)[0] == 3  # 3.3 + 2 ms against 2.5 + 3 on 4
    monkeypatch.setitem(_numpy_threads._state, "costs", (5e-3, 1e-9, 1.0, 0.0))
    assert _numpy_threads.threads_for(4, 1e7)[0] == 1


def test_threads_stay_single_where_a_second_thread_adds_little(monkeypatch):
    # A busy machine of 8 CPUs: two threads only 1.1x as fast as one (under the margin).
    monkeypatch.setitem(_numpy_threads._state, "costs", (0.0, 1e-9, 0.1, 0.0))
    monkeypatch.setitem(_numpy_threads._state, "cpus", 8)
    assert _numpy_threads.threads_for(2, 1e9)[0] == 1
    assert _numpy_threads.threads_for(8, 1e9)[0] == 8  # 1 + 7 * 0.1 = 1.7x: that pays
    monkeypatch.setitem(_numpy_threads._state, "costs", (0.0, 1e-9, 0.0, 0.0))
    assert _numpy_threads.threads_for(8, 1e9)[0] == 1
    monkeypatch.setitem(_numpy_threads._state, "costs", (0.0, 1e-9, 0.5, 0.0))  # 1.5x: pays
    assert _numpy_threads.threads_for(2, 1e9)[0] == 2
    monkeypatch.setitem(_numpy_threads._state, "costs", (0.0, 1e-9, 0.2, 0.0))  # 1.2x: just pays
    assert _numpy_threads.threads_for(2, 1e9)[0] == 2


def test_each_route_family_splits_by_its_own_measured_speedup(monkeypatch):
    # Two threads run the short-row sorts no faster, the other routes' blocks twice as fast.
    monkeypatch.setitem(_numpy_threads._state, "costs", (0.0, 1e-9, {"sort": 0.0, "scan": 1.0}, 0.0))
    with _numpy_threads.num_threads(2):
        short = cutopk.plan(np.zeros((131072, 16), np.float32), 4).params
        long = cutopk.plan(np.zeros((2048, 8192), np.float32), 32).params
    assert (short["route"], short["threads"]) == ("sorted", 1) and "1.00x as fast" in short["threads_why"]
    assert (long["route"], long["threads"]) == ("filter", 2) and "2.00x as fast" in long["threads_why"]


def test_a_split_pays_for_the_numpy_calls_of_its_extra_blocks(monkeypatch):
    # 100 us of work, twice as fast on two threads, no hand-over cost: 50 us on two, unless each
    # extra block makes 60 NumPy calls of 1 us (110 us: no split).
    monkeypatch.setitem(_numpy_threads._state, "costs", (0.0, 1e-9, 1.0, 1e-6))
    assert _numpy_threads.threads_for(2, 1e5, "scan", 0)[0] == 2
    t, why = _numpy_threads.threads_for(2, 1e5, "scan", 60)
    assert t == 1 and "60 NumPy calls" in why
    assert _numpy_threads.threads_for(2, 1e6, "scan", 60)[0] == 2  # 1 ms of work: it pays


def test_each_thread_pays_for_the_calls_of_all_its_blocks(monkeypatch):
    # 10 ms of work, twice as fast on two threads; 10 NumPy calls a block at 100 us each beside
    # the other thread: 2 blocks (one a thread) add 1 ms, 20 blocks (ten a thread) 10 ms.
    monkeypatch.setitem(_numpy_threads._state, "costs", (0.0, 1e-9, 1.0, 1e-4))
    t, why = _numpy_threads.threads_for(2, 1e7, "scan", 10, 2)
    assert t == 2 and "10 NumPy calls a thread" in why
    t, why = _numpy_threads.threads_for(2, 1e7, "scan", 10, 20)
    assert t == 1 and "100 NumPy calls a thread" in why


def test_plan_counts_the_blocks_of_the_route(monkeypatch):
    # Short rows in blocks of SORTED_BLOCK_ELEMENTS: 131072x16 makes 16 of them, 8 a thread.
    monkeypatch.setitem(_numpy_threads._state, "costs", (0.0, 1e-9, 1.0, 1e-6))
    with _numpy_threads.num_threads(2):
        p = cutopk.plan(np.zeros((131072, 16), np.float32), 4).params
    calls = _numpy_routes.ROUTE_SPLIT["sorted"][1] * 8
    assert p["route"] == "sorted" and f"{calls} NumPy calls a thread" in p["threads_why"]


def _measured(monkeypatch, costs):
    """Costs as if measured on this machine (so that splits are tried on the calls)."""
    monkeypatch.setitem(_numpy_threads._state, "costs", costs)
    monkeypatch.setitem(_numpy_threads._state, "measured", costs)
    monkeypatch.setattr(_numpy_threads, "_trials", {})


@pytest.mark.parametrize(("one", "split", "kept"), ((1e-3, 0.5e-3, 2), (1e-3, 0.95e-3, 1), (1e-3, 2e-3, 1)))
def test_a_split_is_kept_only_where_its_trials_paid(monkeypatch, one, split, kept):
    _measured(monkeypatch, (0.0, 1e-9, 1.0, 0.0))
    key, why = ("shape",), "2 of 2: predicted 1 us"
    turns = []
    for _ in range(2 * _numpy_threads.TRIALS):
        t = _numpy_threads.trial(key, 2)
        assert _numpy_threads.verdict(key, 2, 2, why)[1].endswith("being measured on the calls themselves")
        turns.append(t)
        _numpy_threads.record(key, t, one if t == 1 else split)
    assert turns == [1, 2] * _numpy_threads.TRIALS
    assert _numpy_threads.trial(key, 2) == 0  # settled
    t, text = _numpy_threads.verdict(key, 2, 2, why)
    assert t == kept and f"{split * 1e6:.0f} us on 2 threads against {one * 1e6:.0f} us on one" in text
    assert ("did not pay" in text) == (kept == 1)


def test_a_settled_shape_is_tried_again_after_its_calls(monkeypatch):
    _measured(monkeypatch, (0.0, 1e-9, 1.0, 0.0))
    monkeypatch.setattr(_numpy_threads, "RETRIAL_CALLS", 3)
    key = ("shape",)
    for _ in range(2 * _numpy_threads.TRIALS):  # the split does not pay: one thread is kept
        t = _numpy_threads.trial(key, 2)
        _numpy_threads.record(key, t, 1e-3 * t)
    assert [_numpy_threads.trial(key, 2) for _ in range(3)] == [0, 0, 1]  # then tried again
    assert "being measured" in _numpy_threads.verdict(key, 2, 2, "2 of 2: why")[1]


def test_costs_set_by_hand_are_taken_at_their_word(monkeypatch):
    monkeypatch.setitem(_numpy_threads._state, "costs", (0.0, 1e-9, 1.0, 0.0))
    assert _numpy_threads.trial(("shape",), 2) == 0
    assert _numpy_threads.verdict(("shape",), 2, 2, "why") == (2, "why")


def test_trials_run_on_the_calls_and_settle_the_plan(monkeypatch):
    """The first calls of a shape alternate one thread and the split (same answers); a split
    that did not pay is dropped, and plan() says so."""
    _measured(monkeypatch, (0.0, 1e-9, 1.0, 0.0))
    original = _numpy_threads.record
    seen = []

    def record(key, threads, seconds):  # the split took twice as long
        seen.append(threads)
        original(key, threads, 1e-3 * threads)

    monkeypatch.setattr(_numpy_threads, "record", record)
    x = np.random.default_rng(0).random((4096, 64), dtype=np.float32)
    with _numpy_threads.num_threads(2):
        assert "being measured" in cutopk.plan(x, 4).params["threads_why"]
        want = cutopk.top_k(x, 4)
        for _ in range(2 * _numpy_threads.TRIALS):
            got = cutopk.top_k(x, 4)
            assert np.array_equal(got.indices, want.indices) and np.array_equal(got.values, want.values)
        p = cutopk.plan(x, 4).params
    assert seen == [1, 2] * _numpy_threads.TRIALS
    assert p["threads"] == 1 and "splitting did not pay (measured 2000 us on 2 threads" in p["threads_why"]


def test_plan_shows_the_thread_decision(monkeypatch):
    x = np.zeros((4096, 4096), np.float32)
    with _numpy_threads.num_threads(2):
        monkeypatch.setitem(_numpy_threads._state, "costs", (1.0, 1e-9, 1.0, 0.0))  # a second per task
        p = cutopk.plan(x, 16).params
        assert p["threads"] == 1 and "would not pay" in p["threads_why"]
        monkeypatch.setitem(_numpy_threads._state, "costs", (0.0, 1e-9, 1.0, 0.0))
        assert cutopk.plan(x, 16).params["threads"] == 2
        small = cutopk.plan(np.zeros((4, 100), np.float32), 2).params
        assert small["threads"] == 1 and "small problem" in small["threads_why"]


def test_costs_are_measured_once(monkeypatch):
    calls = []
    monkeypatch.setitem(_numpy_threads._state, "costs", None)
    original = _numpy_threads._measure
    monkeypatch.setattr(_numpy_threads, "_measure", lambda: calls.append(1) or original())
    first = _numpy_threads.costs()
    assert _numpy_threads.costs() is first and calls == [1]
    task_s, element_s, efficiency, call_s = first
    assert task_s >= 0 and 0 < element_s < 1e-6 and 0 <= call_s < 1e-3
    assert set(efficiency) == set(_numpy_threads.PROBES) and all(0 <= e <= 1 for e in efficiency.values())


def test_thread_count_follows_the_environment_without_rereading_cpus(monkeypatch):
    monkeypatch.setattr(
        _numpy_threads.os, "sched_getaffinity", lambda pid: pytest.fail("asked again"), raising=False
    )
    monkeypatch.setitem(_numpy_threads._state, "cpus", 6)
    monkeypatch.delenv(_numpy_threads.ENV_VAR, raising=False)
    assert _numpy_threads.get_num_threads() == 6
    monkeypatch.setenv(_numpy_threads.ENV_VAR, "3")
    assert _numpy_threads.get_num_threads() == 3
    monkeypatch.setenv(_numpy_threads.ENV_VAR, " 5 ")
    assert _numpy_threads.get_num_threads() == 5
    monkeypatch.setenv(_numpy_threads.ENV_VAR, "zero")
    for _ in range(2):  # a bad value is refused on every call, never cached
        with pytest.raises(ValueError, match="CUTOPK_NUM_THREADS"):
            _numpy_threads.get_num_threads()


def test_small_call_asks_no_thread_count_and_checks_nothing_again(monkeypatch):
    x = np.random.default_rng(5).random((1, 128), dtype=np.float32)
    expected = cutopk.top_k(x, 8)
    big = np.zeros((512, 1024), np.float32)
    cutopk.top_k(big, 8)
    monkeypatch.setattr(_numpy_threads, "get_num_threads", lambda: pytest.fail("thread count asked"))
    from cutopk._request import checks

    monkeypatch.setattr(checks, "normalize", lambda *a: pytest.fail("checked again"))
    again = cutopk.top_k(x, 8)
    assert np.array_equal(again.indices, expected.indices) and np.array_equal(again.values, expected.values)
    with pytest.raises(pytest.fail.Exception, match="thread count asked"):
        cutopk.top_k(big, 8)  # not small: the general way asks (a cached value)


@pytest.mark.parametrize("rows", (1, 5, 32, 33, 300))
def test_count_rows_counts_each_rows_true_entries(rows):
    from cutopk.numpy import exact

    mask = np.random.default_rng(rows).random((rows, 1000)) < 0.3
    mask[0] = True
    counts = exact.count_rows(mask)
    assert counts.dtype == np.int64 and counts.tolist() == np.count_nonzero(mask, axis=1).tolist()
    assert exact.count_rows(mask[:, ::3]).tolist() == np.count_nonzero(mask[:, ::3], axis=1).tolist()


@pytest.mark.parametrize("shape", [(128,), (1, 128), (3, 40), (2, 3, 20)])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32, np.uint32, np.uint64])
def test_small_call_shapes_and_index_dtypes(shape, index_dtype):
    x = np.random.default_rng(len(shape)).integers(-5, 5, shape).astype(np.float32)
    x.flat[::3] = -0.0
    for dtype in (np.float32, np.float16, np.int16, np.uint8):
        for order in (True, "index", False):
            for mode in ("largest", "smallest"):
                check_top_k(x.astype(dtype), 7, mode=mode, sorted=order, index_dtype=index_dtype)


@pytest.mark.parametrize("shape", [(128,), (1, 128), (1, 1, 128), (1, 30)])
@pytest.mark.parametrize("dtype", (np.float32, np.float16, np.int16, np.uint8))
@pytest.mark.parametrize("mode", ("largest", "smallest"))
def test_small_one_row_call_cached_gives_the_reference_answer(shape, dtype, mode):
    """The one-row runner (an argsort whose first K are the result as they lie):
    the same answer on every call, ties and -0.0 included, in the input's batch shape."""
    x = np.random.default_rng(shape[-1]).integers(-3, 3, shape).astype(np.float32)
    x.flat[::4] = -0.0
    x = x.astype(dtype)
    for _ in range(3):  # the first call plans; the later ones run the runner
        r = check_top_k(x, 7, mode=mode)
        assert r.indices.flags.c_contiguous and r.values.flags.c_contiguous
        assert r.indices.shape == (*shape[:-1], 7)


def test_plan_names_the_small_calls_function_that_serves_it(monkeypatch):
    """plan() said ``compiled-rank`` (and "not built: the first call that takes the route builds
    it") for a 16x100 float32 k=5 call that the small call's argsort served every time."""
    from cutopk.numpy import compiled

    def refuse(*args, **kwargs):
        raise AssertionError("the compiled route ran")

    monkeypatch.setattr(compiled, "select", refuse)
    x = np.random.default_rng(0).random((16, 100)).astype("f4")
    for _ in range(3):
        check_top_k(x, 5)
    params = cutopk.plan(x, 5).params
    assert params["route"] == "small-argsort" and params["threads"] == 1
    assert not any(key.startswith("compiled") for key in params)
    bf16 = cutopk.plan(x.astype(_dtype("bfloat16")), 5).params
    assert bf16["route"] == "small-composite" and "NaN goes the general way" in bf16["threads_why"]
