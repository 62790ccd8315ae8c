"""The NumPy backend's compiled route (cutopk/numpy/compiled.c through ``compiled.select``):
bit for bit against the reference and the NumPy routes over every dtype, strides, mode, NaN
rule and order; the sampled threshold and its fallback; the route's choice, ``plan()``, and the
NumPy routes wherever it cannot run (turned off, a foreign ABI; the library's loader:
test_numpy_compiled_library.py)."""

from __future__ import annotations

import itertools
import os
import pathlib
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.inputs import dtype_of, make_values, random_bits
from support.reference import check_top_k, reference_top_k

import cutopk
from cutopk.numpy import backend as _numpy
from cutopk.numpy import compiled
from cutopk.numpy import compiled_choice as _compiled_choice

ROOT = pathlib.Path(__file__).resolve().parents[2]

DTYPES = (
    "float16", "bfloat16", "float32", "float64",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
)  # fmt: skip
DISTS = ("uniform", "all_equal", "few_distinct", "nan", "inf", "zeros", "sorted", "reversed", "extremes")

pytestmark = pytest.mark.skipif(
    not compiled.available(), reason=f"compiled route: {compiled.unavailable_reason()}"
)


def _dtype(name):
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    return dtype_of(name)


VARIANTS = compiled.VARIANTS


@pytest.fixture(params=VARIANTS)
def build(request):
    """Which variant of the library ``_compiled`` calls: each one built that this processor runs
    (the one the library picked and every narrower one), so that the AVX2 and baseline steps (no
    AVX-512 mask compares) are tested on a processor that has AVX-512 too."""
    picked = compiled._function()
    if not hasattr(picked.library, f"cutopk_compiled_select_{request.param}"):
        pytest.skip(f"the install's compiler could not build the {request.param} variant")
    if VARIANTS.index(request.param) < VARIANTS.index(picked.variant):
        pytest.skip(
            f"this processor does not run the {request.param} variant (the library picked {picked.variant})"
        )
    _BUILD["function"] = compiled.load(compiled.locate(), request.param)
    yield request.param
    _BUILD["function"] = None


_BUILD: dict = {"function": None}


def _compiled(x, k, largest=True, nan_first=False, order="value"):
    out = np.full((x.shape[0], k), -1, np.int64)
    compiled.select(x, k, largest, nan_first, order, out, _BUILD["function"])
    return out


def _routes(x, k, largest=True, nan_first=False, order="value"):
    """The NumPy routes' answer (``select_rows`` on a C-contiguous copy)."""
    return _numpy.select_rows(np.ascontiguousarray(x), k, largest, nan_first, order)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dist", DISTS)
def test_rows_match_the_numpy_routes_in_every_mode(dtype, dist, build):
    rng = np.random.default_rng(zlib.crc32(f"{dtype} {dist}".encode()))
    x = make_values(rng, _dtype(dtype), (4, 300), dist)
    for view in (x, x[:, ::-1], np.asfortranarray(x), x[::2, 1::3]):
        n = view.shape[1]
        for k, largest, nan_first, order in itertools.product(
            sorted({1, 2, n // 3, n}), (True, False), (False, True), ("value", "index", "none")
        ):
            nan_first = nan_first and largest  # nan="largest" prefers NaN only for largest
            got = _compiled(view, k, largest, nan_first, order)
            np.testing.assert_array_equal(got, _routes(view, k, largest, nan_first, order))


@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16", "int8", "uint64", "float64"))
@pytest.mark.parametrize("n", (8192, 10000, 70001))
def test_sampled_rows_and_their_fallback(dtype, n, build):
    """Rows of at least 8192 start from a sample's key. On the rows whose sampled columns alone
    hold large values, fewer than K elements reach it for large K: the row is read again."""
    dt = _dtype(dtype)
    rng = np.random.default_rng(n)
    uniform = make_values(rng, dt, (3, n), "uniform")
    step = n // 256  # the C file's sample: 256 columns, evenly spaced
    decoy = np.zeros((3, n), dt)
    decoy[:, ::step] = 1
    decoy[:, 7] = 2
    rising = np.sort(uniform, axis=1)
    for x in (uniform, decoy, rising, rising[:, ::-1], make_values(rng, dt, (3, n), "few_distinct")):
        for k in (1, 5, 50, 300, n // 64):
            for largest in (True, False):
                np.testing.assert_array_equal(_compiled(x, k, largest), _routes(x, k, largest))


def test_the_fallback_runs_when_the_sample_promises_too_much(build):
    """K above the 257 elements at or above the decoy's sampled key: only a second, plain
    reading finds the rest (zeros, by lowest index)."""
    n = 65536
    x = np.zeros((1, n), np.float32)
    x[0, :: n // 256] = 1
    got = _compiled(x, 600)[0]
    ones = np.arange(0, n, n // 256)
    zeros = np.setdiff1d(np.arange(n), ones)[: 600 - ones.size]
    np.testing.assert_array_equal(got, np.concatenate([ones, zeros]))


@settings(max_examples=60, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    rows=st.integers(1, 3),
    n=st.integers(1, 700),
    k_share=st.floats(0, 1),
    largest=st.booleans(),
    nan_first=st.booleans(),
    order=st.sampled_from(("value", "index")),
    seed=st.integers(0, 2**32 - 1),
    step=st.sampled_from((1, 2, -1, -3)),
    levels=st.sampled_from((0, 3, 50)),
)
def test_random_rows(dtype, rows, n, k_share, largest, nan_first, order, seed, step, levels):
    """Random bits (every NaN payload, both zeros, subnormals), or few levels (ties)."""
    dt = _dtype(dtype)
    rng = np.random.default_rng(seed)
    width = abs(step) * n
    raw = rng.integers(0, 256, (rows, width * dt.itemsize), dtype=np.uint8).view(dt)
    if levels:
        raw = raw.view(f"u{dt.itemsize}") % levels
        raw = raw.astype(f"u{dt.itemsize}").view(dt) if dt.kind != "f" else raw.astype(dt)
    x = raw[:, ::step][:, :n]
    k = max(1, round(k_share * n))
    nan_first = nan_first and largest
    np.testing.assert_array_equal(
        _compiled(x, k, largest, nan_first, order), _routes(x, k, largest, nan_first, order)
    )


@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16", "int64", "uint8"))
def test_top_k_takes_the_compiled_route_and_matches_the_reference(dtype, monkeypatch):
    monkeypatch.delenv(compiled.ENV_VAR, raising=False)
    rng = np.random.default_rng(3)
    x = make_values(rng, _dtype(dtype), (3, 20000), "nan" if "float" in dtype else "uniform")
    assert cutopk.plan(x, 50).params["route"] == "compiled"
    assert "compiled_unavailable" not in cutopk.plan(x, 50).params
    for mode, nan, order in itertools.product(
        ("largest", "smallest"), ("last", "largest"), (True, "index", False)
    ):
        check_top_k(x, 50, mode=mode, nan=nan, sorted=order)
    # Strided rows are read as they lie; an outer axis stays on the NumPy routes.
    check_top_k(x[:, ::-2], 40)
    check_top_k(x.T.copy().T, 40)
    assert cutopk.plan(np.ascontiguousarray(x.T), 50, axis=0).params["route"] != "compiled"


def test_routes_by_row_length_and_k():
    def route(shape, k, dtype=np.float32):
        return cutopk.plan(np.zeros(shape, dtype), k).params["route"]

    assert route((4, 8192), 128) == "compiled"
    assert route((4, 8192), 129) != "compiled"  # K above a 64th of the row
    assert route((4, 65536), 512) == "compiled"
    assert route((4, 1 << 17), 513) != "compiled"  # K above COMPILED_MAX_K
    assert route((4, 8191), 8) != "compiled"
    assert route((1, 1 << 21), 64) == "compiled"  # instead of the long-row ranges
    assert route((4, 8192), 8, np.dtype(">f4")) != "compiled"  # non-native byte order


def test_identical_answers_on_every_thread_count():
    x = make_values(np.random.default_rng(5), np.dtype(np.float32), (9, 40000), "few_distinct")
    answers = []
    for threads in (1, 2, 3):
        with cutopk.num_threads(threads):
            answers.append(cutopk.top_k(x, 64))
    for values, indices in answers[1:]:
        np.testing.assert_array_equal(indices, answers[0].indices)
        np.testing.assert_array_equal(values.view(np.uint32), answers[0].values.view(np.uint32))


@pytest.fixture
def fresh_compiled(monkeypatch):
    """A process that has not tried to load the compiled route yet."""
    monkeypatch.setattr(
        compiled,
        "_state",
        {"lib": None, "why": None, "tried": False, "env": (None, True), "path": None, "variant": None},
    )
    monkeypatch.delenv(compiled.ENV_VAR, raising=False)


def _long_rows():
    return make_values(np.random.default_rng(8), np.dtype(np.float32), (2, 9000), "uniform")


def _assert_numpy_routes(x, why: str):
    check_top_k(x, 10)  # the first call tries the route
    params = cutopk.plan(x, 10).params
    assert params["route"] == "filter" and why in params["compiled_unavailable"], params


@pytest.mark.parametrize("text", ("0", "off", "false", "No"))
def test_turned_off_by_the_environment(fresh_compiled, monkeypatch, text):
    monkeypatch.setenv(compiled.ENV_VAR, text)
    assert not compiled.available()
    _assert_numpy_routes(_long_rows(), f"turned off by CUTOPK_COMPILED={text}")
    monkeypatch.setenv(compiled.ENV_VAR, "1")
    assert compiled.available()


def test_a_foreign_abi_leaves_the_numpy_routes(fresh_compiled, monkeypatch):
    monkeypatch.setattr(compiled, "ABI", compiled.ABI + 1)
    _assert_numpy_routes(_long_rows(), "is not the expected")


def test_no_memory_is_a_memory_error(monkeypatch):
    class Refusing:
        def __call__(self, rows):
            return 1  # the C file's STATUS_NO_MEMORY

    monkeypatch.setitem(compiled._state, "lib", Refusing())
    monkeypatch.setitem(compiled._state, "tried", True)
    with pytest.raises(MemoryError, match="k=3"):
        compiled.select(np.zeros((1, 10), np.float32), 3, True, False, "value", np.empty((1, 3), np.int64))
    monkeypatch.setitem(compiled._state, "lib", lambda rows: 2)
    with pytest.raises(RuntimeError, match="status 2"):
        compiled.select(np.zeros((1, 10), np.float32), 3, True, False, "value", np.empty((1, 3), np.int64))


def test_reference_agrees_on_a_long_nan_row():
    """One row of 2**20 with NaNs of both signs and both zeros: the long-row case end to end."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(1 << 20).astype(np.float32)
    x[rng.random(x.size) < 0.01] = np.nan
    x[::1001] = -np.nan
    x[5::997] = -0.0
    for nan in ("last", "largest"):
        values, indices = cutopk.top_k(x, 100, nan=nan)
        expected = reference_top_k(x, 100, nan=nan)
        np.testing.assert_array_equal(indices, expected[1])
        np.testing.assert_array_equal(values.view(np.uint32), expected[0].view(np.uint32))


# Issue 42: the C file's other methods (short rows, 8-bit counting, rows side by side) and the
# routes that take them. Every method is exact on every input it accepts, whatever the speed.
METHODS = tuple(compiled.METHODS)


def _methods_for(x):
    return [m for m in METHODS if (m != "count" or x.itemsize <= 2) and (m != "rank" or x.itemsize <= 4)]


def _select(view, k, largest, nan_first, order, method, function=None):
    """``compiled.select``'s indices of ``view``, its values checked on the way: each the bits of
    the input's element at its index (NaN payloads, both zeros), as the backend returns them."""
    rows = view.shape[0]
    got = np.full((rows, k), -1, np.int64)
    values = np.zeros((rows, k), view.dtype)
    compiled.select(view, k, largest, nan_first, order, got, function, method=method, values=values)
    bits = np.dtype(f"u{view.dtype.itemsize}")
    expected = np.take_along_axis(view, got.clip(0, view.shape[1] - 1), axis=1)
    np.testing.assert_array_equal(values.view(bits), expected.view(bits), err_msg=f"{method} values")
    return got


def _views(x):
    """Rows as they lie in several layouts: C order, reversed columns, Fortran order (the rows
    side by side: an outer axis), every other row and every third column, and the rows of a
    transposed C array."""
    views = (x, x[:, ::-1], np.asfortranarray(x), x[::2, 1::3], np.ascontiguousarray(x.T).T)
    return [v for v in views if v.shape[1]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", (1, 8, 13, 64, 65, 200))
def test_every_method_matches_the_numpy_routes(dtype, n):
    """70 rows: column blocks of 64 and a part one; rows of at most 64 keyed several at a time
    (packed or not); chunk boundaries; ties, NaN, infinities and both zeros, rising rows (an
    entry for every element)."""
    dt = _dtype(dtype)
    rng = np.random.default_rng(zlib.crc32(f"{dtype} {n}".encode()))
    for dist in ("few_distinct", "extremes", "sorted"):
        x = make_values(rng, dt, (70, n), dist)
        for view in _views(x):
            m = view.shape[1]
            for k, largest, nan_first, order in itertools.product(
                sorted({1, min(2, m), max(1, m // 3), m}), (True, False), (False, True), ("value", "index")
            ):
                nan_first = nan_first and largest
                expected = _routes(view, k, largest, nan_first, order)
                for method in _methods_for(view):
                    got = _select(view, k, largest, nan_first, order, method)
                    np.testing.assert_array_equal(
                        got, expected, err_msg=f"{method} {dist} {view.strides} k={k}"
                    )


@pytest.mark.parametrize("dtype", ("float32", "bfloat16", "int8", "uint16", "float64"))
def test_every_method_on_every_variant(dtype, build):
    """The steps with vector masks (the avx512 variant), with 256-bit vectors (avx2) and with
    neither (baseline): each variant this processor runs."""
    dt = _dtype(dtype)
    rng = np.random.default_rng(zlib.crc32(dtype.encode()))
    for n, dist in ((13, "extremes"), (200, "few_distinct"), (300, "uniform"), (256, "sorted")):
        x = make_values(rng, dt, (70, n), dist)
        for view, k, order in itertools.product(
            (x, np.asfortranarray(x[:, ::-1])), (1, 5, min(16, n)), ("value", "index")
        ):
            expected = _routes(view, k, True, True, order)
            for method in _methods_for(view):
                got = _select(view, k, True, True, order, method, _BUILD["function"])
                np.testing.assert_array_equal(got, expected, err_msg=f"{method} {dist} k={k}")


@settings(max_examples=80, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    rows=st.integers(1, 140),
    n=st.integers(1, 300),
    k_share=st.floats(0, 1),
    largest=st.booleans(),
    nan_first=st.booleans(),
    order=st.sampled_from(("value", "index")),
    seed=st.integers(0, 2**32 - 1),
    outer=st.booleans(),
    levels=st.sampled_from((0, 2, 40)),
    method=st.sampled_from(METHODS),
)
def test_random_rows_by_every_method(
    dtype, rows, n, k_share, largest, nan_first, order, seed, outer, levels, method
):
    """Random bits (every NaN payload, subnormals) or few levels, as rows or side by side."""
    dt = _dtype(dtype)
    rng = np.random.default_rng(seed)
    shape = (n, rows) if outer else (rows, n)
    raw = random_bits(rng, dt, shape, levels)
    x = raw.T if outer else raw
    k = max(1, round(k_share * n))
    nan_first = nan_first and largest
    if (method == "count" and dt.itemsize > 2) or (method == "rank" and dt.itemsize > 4):
        method = "insert"
    got = _select(x, k, largest, nan_first, order, method)
    np.testing.assert_array_equal(got, _routes(x, k, largest, nan_first, order))


@pytest.mark.parametrize("dtype", ("int16", "uint16", "float16", "bfloat16"))
def test_sixteen_bit_counts_settle_both_levels(dtype, build):
    """16-bit counting in two levels of 256 bins: the K-th key's high byte shared with many
    (the low bytes settle it), one high byte for the whole row (the second pass reads every
    key), ties at the K-th key, NaN payloads of both signs; K at the edges and about
    COUNT_SORT_MAX_K (value order by a sort of composites, or by byte passes), both orders,
    negative strides; with vector masks and without (every variant)."""
    dt = _dtype(dtype)
    rng = np.random.default_rng(zlib.crc32(dtype.encode()))
    shape, n = (3, 1000), 1000
    patterns = (
        rng.integers(0, 1 << 16, shape),  # random bits: NaN payloads, both zeros, subnormals
        rng.integers(0, 3, shape) << 8 | rng.integers(0, 256, shape),  # three high bytes
        0x3C00 | rng.integers(0, 3, shape),  # one high byte, three keys: ties at the K-th
        0x7E00 | rng.integers(0, 2, shape) << 15 | rng.integers(0, 3, shape),  # +-NaN (floats)
    )
    modes = ((True, False), (False, False), *(((True, True),) if "float" in dtype else ()))  # NaN rules
    for bits in patterns:
        x = bits.astype(np.uint16).view(dt)
        for view, k, (largest, nan_first), order in itertools.product(
            (x, x[:, ::-1]), (1, 16, 17, n), modes, ("value", "index")
        ):
            got = np.full((3, k), -1, np.int64)
            compiled.select(view, k, largest, nan_first, order, got, _BUILD["function"], method="count")
            np.testing.assert_array_equal(
                got, _routes(view, k, largest, nan_first, order), err_msg=f"{bits[0, :3]} k={k}"
            )


@pytest.mark.parametrize("dtype, method", (("int32", "count"), ("float64", "rank"), ("uint64", "rank")))
def test_methods_refuse_elements_they_cannot_take(dtype, method):
    """The C file checks its request: counting is for 8- and 16-bit elements, ranks for up to 32 bits
    (the backend never asks otherwise); a refusal is an error, never a wrong answer."""
    x = np.zeros((2, 300), dtype)
    with pytest.raises(RuntimeError, match="status 2"):
        compiled.select(x, 3, True, False, "value", np.empty((2, 3), np.int64), method=method)


def test_short_rows_outer_axes_and_eight_bits_take_the_compiled_route():
    def route(shape, k, dtype=np.float32, axis=-1, order="C"):
        return cutopk.plan(np.zeros(shape, dtype, order=order), k, axis=axis).params["route"]

    assert route((16384, 128), 8) == "compiled-rank"  # MoE routing
    assert route((65536, 8), 2) == "compiled-columns"  # rows of at most 64 side by side
    assert route((65536, 8), 2, np.float16) == "compiled-columns"
    assert route((4096, 64), 16, np.int8) == "compiled-columns"
    assert route((4096, 64), 17, np.int8) != "compiled-columns"  # 8 bits, K above 16: counting's
    assert route((4096, 64), 1, np.float64) == "compiled-insert"  # 64 bits, K below 4: the list
    assert route((4096, 64), 4, np.float64) == "compiled-columns"
    assert route((4096, 8), 1, np.float64) == "compiled-columns"
    assert route((15, 8), 2) == "small-argsort"  # a small call's own function, which ...
    assert (
        _compiled_choice.choose_method(np.zeros((15, 8), np.float32), 2) == "rank"
    )  # too few rows side by side
    assert route((4096, 65), 1, np.int8) == "compiled-insert"  # K of 1-4: a compare per element
    assert route((4096, 128), 2) == "compiled-rank"
    assert route((4096, 256), 2) == "compiled-insert"
    assert route((4096, 1024), 4, np.int16) == "compiled-insert"
    assert route((16, 65536), 4) == "compiled-insert"
    assert route((16, 65536), 5) == "compiled"
    assert route((1, 128), 8) == "small-argsort"  # ... the same rows of another call do not take
    assert route((1, 300), 8) == "compiled-rank"
    assert route((2048, 1024), 8) == "compiled-rank"
    assert route((2048, 1024), 4, np.float64) == "compiled-insert"  # no 96-bit composites
    assert route((2048, 1024), 16) == "compiled-rank"
    assert route((2048, 1024), 17) == "compiled"  # K above RANK_MAX_K: the threshold scan
    assert route((1024, 4096), 64) == "compiled"
    assert route((64, 64), 20) != "compiled"  # and above an eighth of the row: the NumPy routes
    assert route((1024, 4096), 64, np.int8) == "compiled-count"
    assert route((1024, 4096), 64, np.uint8) == "compiled-count"
    assert route((1024, 100), 8, np.int8) == "compiled-rank"  # short 8-bit rows: no counts
    assert route((64, 16384), 1024, np.int8) == "compiled-count"  # long rows, K above the scan's
    assert route((64, 16384), 1024, np.float16) == "compiled-count"
    assert route((64, 16384), 256, np.float16) == "compiled"  # K at most a 64th: the scan
    assert route((64, 16384), 1024, np.float32) != "compiled-count"  # 32 bits: never counted
    assert route((1024, 1024), 64, np.int16) == "compiled-count"  # 16 bits, K >= N/16
    assert route((1024, 1024), 512, np.uint16) == "compiled-count"
    assert route((1024, 1024), 32, np.int16) == "compiled"  # below N/16: the threshold scan
    assert route((1024, 512), 64, np.int16) == "compiled"  # rows below COUNT16_MIN_N
    assert route((1024, 256), 1, np.int16) == "compiled-insert"  # K = 1: no count
    assert route((1024, 128), 1, np.int16) == "compiled-insert"
    assert route((2048, 1024), 16, axis=0) == "compiled-columns"  # read in place
    assert route((1024, 2048), 16, order="F") == "compiled-columns"
    assert route((2048, 1024), 65, axis=0) == "filter-outer"  # K above COLUMNS_MAX_K
    assert route((1 << 20, 4), 8, axis=0) == "long-rows"  # too few rows side by side
    assert route((64, 16), 16) != "compiled"  # K = N: no selection
    params = cutopk.plan(np.zeros((2048, 1024), np.float32), 16, axis=0).params
    assert not params.get("block_copies") and not params.get("copy")  # no transposed copy


@pytest.mark.parametrize(
    "shape, k, dtype, axis",
    [
        ((300, 128), 8, "float32", -1),
        ((1000, 8), 2, "float32", -1),
        ((1, 128), 8, "float32", -1),
        ((130, 64), 5, "bfloat16", -1),
        ((40, 4096), 64, "int8", -1),
        ((40, 700), 3, "uint8", -1),
        ((40, 1024), 100, "float16", -1),
        ((30, 1100), 1, "int16", -1),
        ((3, 8192), 1000, "int8", -1),
        ((3, 8200), 600, "bfloat16", -1),
        ((1000, 100), 16, "float32", 0),
        ((300, 90), 7, "float64", 0),
        ((6, 50, 7), 4, "float16", 1),
        # Issue 42's third look: short rows side by side in lanes, K of 1-4 on the sorted list.
        ((200, 16), 4, "float32", -1),
        ((200, 64), 16, "int8", -1),
        ((100, 8), 1, "float64", -1),
        ((100, 40), 6, "uint64", -1),
        ((20, 3000), 3, "float32", -1),
        ((5, 9000), 2, "bfloat16", -1),
        ((2, 70), 1, "int32", -1),
    ],
)
def test_top_k_on_short_rows_matches_the_reference(shape, k, dtype, axis, monkeypatch):
    monkeypatch.delenv(compiled.ENV_VAR, raising=False)
    dt = _dtype(dtype)
    x = make_values(
        np.random.default_rng(len(shape) * k), dt, shape, "nan" if dt.kind == "f" else "few_distinct"
    )
    if cutopk.plan(x, k, axis=axis).params["route"].startswith("small-"):
        # A small C-contiguous call runs its own function (short_rows.runner), never the compiled
        # route: the same elements two apart take it.
        check_top_k(x, k, axis=axis)
        spread = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), x.dtype)
        spread[..., ::2] = x
        x = spread[..., ::2]
    assert cutopk.plan(x, k, axis=axis).params["route"].startswith("compiled")
    for mode, nan, order in itertools.product(("largest", "smallest"), ("last", "largest"), (True, "index")):
        check_top_k(x, k, axis=axis, mode=mode, nan=nan, sorted=order)
    check_top_k(x[..., ::-2] if axis == -1 else x[::-2], k, axis=axis)


def test_without_the_compiled_route_short_rows_keep_the_numpy_routes(monkeypatch):
    """CUTOPK_COMPILED=0: the NumPy routes of before, named in plan(), with the same answers."""
    x = make_values(np.random.default_rng(4), np.dtype(np.float32), (2048, 128), "few_distinct")
    y = make_values(np.random.default_rng(5), np.dtype(np.int8), (64, 4096), "uniform")
    on = [cutopk.top_k(x, 8), cutopk.top_k(x, 16, axis=0), cutopk.top_k(y, 64)]
    monkeypatch.setenv(compiled.ENV_VAR, "0")
    assert cutopk.plan(x, 8).params["route"] == "composite"
    assert cutopk.plan(x, 16, axis=0).params["route"] == "filter-outer"
    assert cutopk.plan(y, 64).params["route"] == "filter"
    off = [cutopk.top_k(x, 8), cutopk.top_k(x, 16, axis=0), cutopk.top_k(y, 64)]
    for a, b in zip(on, off, strict=True):
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.values, b.values)


def test_short_rows_identical_on_every_thread_count():
    x = make_values(np.random.default_rng(6), np.dtype(np.float32), (4099, 128), "few_distinct")
    answers = []
    for threads in (1, 2, 3):
        with cutopk.num_threads(threads):
            answers.append((cutopk.top_k(x, 8), cutopk.top_k(x, 8, axis=0)))
    for rows, cols in answers[1:]:
        np.testing.assert_array_equal(rows.indices, answers[0][0].indices)
        np.testing.assert_array_equal(cols.indices, answers[0][1].indices)


def test_an_arrays_address_is_its_first_elements():
    """compiled._address: the quick way (a writable C-contiguous buffer) and the plain way agree."""
    base = np.arange(64, dtype=np.float32).reshape(8, 8)
    read_only = base.copy()
    read_only.flags.writeable = False
    arrays = [
        base,
        base[2:],
        base[:, 3:],
        base.T,
        base[:, ::-1],
        read_only,
        np.zeros((3, 2), _dtype("bfloat16")),
    ]
    for a in arrays:
        assert compiled._address(a) == a.ctypes.data


# --- issue 49: a long compiled call cannot be interrupted (Ctrl-C) ----------------------------------


@pytest.mark.parametrize(
    ("shape", "k", "axis", "route"),
    [
        ((37, 9000), 5, -1, "compiled"),
        ((300, 100), 4, -1, "compiled-rank"),
        ((300, 100), 12, 0, "compiled-columns"),
        ((5, 30000), 2, -1, "compiled-insert"),
    ],
)
def test_a_long_call_made_in_blocks_of_rows_gives_the_same_answer(monkeypatch, shape, k, axis, route):
    monkeypatch.delenv(compiled.ENV_VAR, raising=False)
    monkeypatch.setattr(compiled, "INTERRUPT_BLOCK_ELEMENTS", 2000)
    calls = []
    function = compiled._function()
    monkeypatch.setitem(compiled._state, "lib", lambda ref: calls.append(ref._obj.rows) or function(ref))
    x = make_values(np.random.default_rng(4), np.dtype(np.float32), shape, "nan")
    assert cutopk.plan(x, k, axis=axis).params["route"] == route
    for mode, order in (("largest", True), ("smallest", "index")):
        calls.clear()
        check_top_k(x, k, axis=axis, mode=mode, sorted=order, nan="largest")
        rows = x.size // shape[axis]
        assert len(calls) > 1 and sum(calls) == rows
        if route == "compiled-columns":  # the C file's groups of 64 rows side by side stay whole
            assert all(c % 64 == 0 for c in calls[:-1])


def test_ctrl_c_interrupts_a_long_compiled_call_between_blocks(tmp_path):
    """SIGINT in the middle of a call of some 8 s on the compiled route: KeyboardInterrupt within
    a second or two, not when the call is done (the C call holds no GIL and runs to its end)."""
    import signal
    import subprocess
    import sys
    import time

    code = (
        "import signal, time, numpy as np, cutopk\n"
        "from cutopk.numpy import compiled\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job ignores it\n"
        "assert compiled.available(), compiled.unavailable_reason()\n"
        "row = np.random.default_rng(0).random(65536, dtype=np.float32)\n"
        "x = np.broadcast_to(row, (2048, 65536))  # rows of one row's memory\n"
        "cutopk.top_k(x, 8)\n"
        "start = time.perf_counter()\n"
        "cutopk.top_k(x, 8)\n"
        "rows = int(8.0 / ((time.perf_counter() - start) / 2048))\n"
        "x = np.broadcast_to(row, (rows, 65536))\n"
        "assert cutopk.plan(x, 8).params['route'] == 'compiled'\n"
        "print(rows, flush=True)\n"
        "try:\n"
        "    cutopk.top_k(x, 8)\n"
        "    print('finished', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    # This checkout's cutopk, and the compiled library wherever this process found it (CI's ASan
    # step puts its instrumented build first on PYTHONPATH).
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "CUTOPK_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(paths)}
    env.pop(compiled.ENV_VAR, None)
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        rows = child.stdout.readline()
        assert rows.strip().isdigit(), child.communicate(timeout=120)
        time.sleep(0.5)  # into the call
        child.send_signal(signal.SIGINT)
        sent = time.perf_counter()
        out, err = child.communicate(timeout=120)
        waited = time.perf_counter() - sent
    finally:
        child.kill()
    assert out.strip() == "interrupted", (out, err)
    assert waited < 2.5, f"KeyboardInterrupt {waited:.1f} s after SIGINT, in a call of some 8 s"
