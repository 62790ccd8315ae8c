"""bfloat16 (``ml_dtypes``) on the NumPy backend, against a reference computed from the bit patterns
alone (no bfloat16 arithmetic, no float conversion, no cutopk code): every one of the 65536
patterns, ties, +-0, +-inf, subnormals, NaNs of every sign and payload (quiet and signalling),
every mode, order and NaN policy, and each route of the NumPy backend (tiny rows, k == n, the exact
selection, the pivot prefilter)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import cutopk

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 on the CPU needs ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)

MODES = ("largest", "smallest")
ORDERS = (True, "value", "index", False)
NANS = ("last", "largest")
# The patterns that matter: +-0, +-1, +-inf, the largest finite, the smallest normal, subnormals,
# quiet NaNs and signalling NaNs (quiet bit 0x0040 clear) of both signs and several payloads.
SPECIAL_BITS = np.array(
    [0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F80, 0xFF80, 0x7F7F, 0xFF7F, 0x0080, 0x8080,
     0x0001, 0x8001, 0x007F, 0x807F, 0x0040, 0x7FC0, 0xFFC0, 0x7FFF, 0x7F81, 0xFF81, 0x7FA5],
    dtype=np.uint16,
)  # fmt: skip
# np.isnan on a signalling bfloat16 NaN warns (ml_dtypes converts through float32); see
# test_signalling_nans_raise_no_warning for the core fix this is waiting for.
SNAN_WARNING = "ignore:invalid value encountered in isnan:RuntimeWarning"


def preference(bits: np.ndarray, mode: str, nan: str) -> np.ndarray:
    """A signed int64 per element, larger = selected earlier, from the bit patterns only."""
    bits = bits.astype(np.int64)
    magnitude = bits & 0x7FFF
    is_nan = magnitude > 0x7F80  # exponent all ones and a non-zero mantissa
    # Sign-magnitude to a signed integer: monotonic in the value, and -0 and +0 both give 0.
    value = np.where(bits & 0x8000, -magnitude, magnitude)
    pref = value if mode == "largest" else -value
    nan_first = nan == "largest" and mode == "largest"
    return np.where(is_nan, (1 << 20) if nan_first else -(1 << 20), pref)


def reference(x: np.ndarray, k: int, axis: int, mode: str, sorted_, nan: str):
    """(values, indices) by a stable sort of the preference: ties keep ascending index."""
    rows = np.moveaxis(x, axis, -1)
    pref = preference(rows.view(np.uint16), mode, nan)
    idx = np.argsort(-pref, axis=-1, kind="stable")[..., :k]
    if sorted_ in ("index", False):
        idx = np.sort(idx, axis=-1)
    values = np.take_along_axis(rows, idx, axis=-1)
    return np.moveaxis(values, -1, axis), np.moveaxis(idx, -1, axis)


def check(x: np.ndarray, k: int, *, axis: int = -1, mode: str = "largest", sorted_=True, nan: str = "last"):
    got = cutopk.top_k(x, k, axis=axis, mode=mode, sorted=sorted_, nan=nan)
    exp_values, exp_indices = reference(x, k, axis, mode, sorted_, nan)
    assert got.values.dtype == BF16 and got.indices.dtype == np.int64
    assert got.values.shape == exp_values.shape and got.values.flags.c_contiguous
    indices, values = got.indices, got.values
    if sorted_ is False and indices.size:  # any order: compare in index order
        perm = np.argsort(indices, axis=axis)
        indices, values = np.take_along_axis(indices, perm, axis), np.take_along_axis(values, perm, axis)
    np.testing.assert_array_equal(indices, exp_indices)
    # Bit for bit: -0.0 stays -0.0 and every NaN keeps its sign and payload.
    np.testing.assert_array_equal(values.view(np.uint16), exp_values.view(np.uint16))


def bf16(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint16).view(BF16)


def test_dtype_is_supported():
    assert cutopk._request.dtypes.check_dtype(BF16).key_dtype == np.uint16


@pytest.mark.filterwarnings(SNAN_WARNING)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("nan", NANS)
def test_all_65536_patterns(mode, nan):
    """Every pattern once, shuffled: the full order of bfloat16 under each policy."""
    x = bf16(np.random.default_rng(0).permutation(1 << 16))
    for k, order in zip((0, 1, 300, 40000, 1 << 16), itertools.cycle(ORDERS), strict=False):
        check(x, k, mode=mode, nan=nan, sorted_=order)


@pytest.mark.filterwarnings(SNAN_WARNING)
@pytest.mark.parametrize("n", [1, 7, 16, 17, 100, 2000])  # tiny rows, exact path, prefilter
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("nan", NANS)
def test_special_values_ties_and_every_order(n, mode, nan):
    rng = np.random.default_rng(n)
    x = bf16(rng.choice(SPECIAL_BITS, (3, n)))  # heavy ties: 21 patterns, fewer distinct values
    for k in sorted({0, 1, min(5, n), n // 2, n - 1, n}):
        for order in ORDERS:
            check(x, k, mode=mode, nan=nan, sorted_=order)


@pytest.mark.filterwarnings(SNAN_WARNING)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("nan", NANS)
def test_long_rows_small_k_take_the_prefilter_and_stay_exact(mode, nan, monkeypatch):
    """Rows long enough for the sampled pivot (NumPy's own sort of bfloat16 is not NaN-safe; the
    pivot may be anything and the answer must still be exact)."""
    from cutopk.numpy import pivot_filter as _pivot_filter

    used = []
    original = _pivot_filter.select_prefiltered

    def spy(*args):
        found = original(*args)
        used.append(found is not None)
        return found

    monkeypatch.setattr(_pivot_filter, "select_prefiltered", spy)
    rng = np.random.default_rng(1)
    normal = rng.standard_normal((4, 6000)).astype(np.float32).astype(BF16)  # many ties: 8-bit mantissa
    raw = normal.view(np.uint16)
    raw[1, rng.random(6000) < 0.2] = 0x7FC1  # many NaNs
    raw[2, ::3] = 0x8000  # -0.0 ties with +0.0
    raw[3, rng.random(6000) < 0.5] = rng.choice(SPECIAL_BITS, 1)[0]
    for k, order in itertools.product((1, 10, 300), ORDERS):
        check(normal, k, mode=mode, nan=nan, sorted_=order)
    assert any(used), "the prefilter route was never taken"


@pytest.mark.parametrize("mode", MODES)
def test_subnormals_and_signed_zeros(mode):
    # 0x0001..0x007F are the positive subnormals (in increasing order), 0x8001.. the negative ones.
    pos = np.arange(1, 0x80, dtype=np.uint16)
    x = bf16(np.concatenate([pos, pos | 0x8000, [0x0000, 0x8000, 0x0000, 0x8000]]))
    x = x[np.random.default_rng(2).permutation(x.size)]
    for k, order in itertools.product((1, 2, 130, x.size), ORDERS):
        check(x, k, mode=mode, sorted_=order)
    zeros = bf16([0x8000, 0x0000, 0x8000, 0x0000])
    assert cutopk.top_k(zeros, 3, mode=mode).indices.tolist() == [0, 1, 2]  # all tie: by index
    assert cutopk.top_k(zeros, 1, mode=mode).values.view(np.uint16).tolist() == [0x8000]


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_axes_and_layouts(axis):
    base = np.random.default_rng(3).standard_normal((5, 40, 6)).astype(np.float32).astype(BF16)
    for x in (base, base.transpose(2, 0, 1), base[:, ::-3, 1::2], np.asfortranarray(base)):
        for mode, order in itertools.product(MODES, ORDERS[1:]):
            check(x, min(4, x.shape[axis]), axis=axis, mode=mode, sorted_=order)


def test_agrees_with_the_float32_route():
    """bfloat16 -> float32 is exact, so both key widths must select the same elements."""
    rng = np.random.default_rng(4)
    x = bf16(rng.choice(SPECIAL_BITS[:14], (6, 3000)))  # no NaNs: float32 conversion keeps them
    for mode, nan, order in itertools.product(MODES, NANS, ORDERS[1:]):
        a = cutopk.top_k(x, 50, mode=mode, nan=nan, sorted=order)
        b = cutopk.top_k(x.astype(np.float32), 50, mode=mode, nan=nan, sorted=order)
        np.testing.assert_array_equal(a.indices, b.indices)


@pytest.mark.filterwarnings(SNAN_WARNING)
def test_index_dtypes():
    x = bf16(np.random.default_rng(5).choice(SPECIAL_BITS, (2, 50)))
    for index_dtype in (np.int32, np.uint32, np.uint64):
        r = cutopk.top_k(x, 9, index_dtype=index_dtype)
        assert r.indices.dtype == index_dtype
        np.testing.assert_array_equal(r.indices, cutopk.top_k(x, 9).indices)


def test_signalling_nans_raise_no_warning():
    x = bf16([0x7F81, 0x3F80, 0xFFA0] * 400)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for nan in NANS:
            cutopk.top_k(x, 2, nan=nan)  # the exact path
            cutopk.top_k(x, 2, nan=nan, mode="smallest")
