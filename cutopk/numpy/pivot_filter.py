"""The NumPy backend's pivot filter: discard most of each long row before selecting.

A sample of columns of each row gives a pivot that, with overwhelming probability, has at least
K elements at or beyond it (:func:`pivot_of`); one vectorised comparison keeps only those
candidates (typically a few K per row), and one sort of (row, inverted key, column) composites
orders every row's candidates at once (:func:`select_candidates`). Rows whose pivot is the K-th
value are settled on their ties; rows the pivot does not settle go to the exact path whole, so
the answer never depends on the sample. Half floats are filtered on their bits where that is
exact (:func:`select_half`). :mod:`cutopk.numpy.outer_axis` runs the same filter down the
columns of an outer axis, which is why the pivot, the comparison and the candidates' selection
are public here. Which rows come here: :mod:`cutopk.numpy.routes`.
"""

from __future__ import annotations

import math

import numpy as np

from .._request.keys import preference_keys
from . import exact as _exact
from .exact import count_rows, first_true, order_winners, true_positions, true_words

# When the candidates exceed this share of the input (heavy ties at the pivot), the filtered
# path would do more work than the plain exact path, so it is abandoned for those rows.
PREFILTER_MAX_KEEP_SHARE = 1 / 4
# Above this many candidates in a block, or a quarter of it (equal rows, a pivot among ties),
# rows tied at the pivot are settled on their masks before the rest are listed: listing every
# element as an int64 position (and its row, column, value) takes some 40 bytes per element.
FLAT_MAX_CANDIDATES = 1 << 19
# The filter's first look at its candidates: this many columns of each row (see _filter).
FILTER_HEAD_COLUMNS = 1024
# Rows at least this long get a sample of 1024 columns for the pivot instead of 256.
SAMPLE_LARGE_MIN_N = 16384


def sample_positions(n: int) -> np.ndarray | None:
    """Positions of a sample of a row of ``n``: short runs of adjacent positions spread evenly
    over the row (None: the whole row, when it is not longer than the sample). Runs read whole
    cache lines (a plain stride would touch one line per element) and, spread out, still see
    every part of a sorted or clustered row. Long rows get a larger sample: a tighter pivot,
    fewer candidates (8x128256, k=50: about 2000 candidates per row from 256 samples, 600
    from 1024)."""
    size, runs = (256, 16) if n < SAMPLE_LARGE_MIN_N else (1024, 32)
    if n <= size:
        return None
    run = size // runs
    starts = np.arange(runs) * (n // runs)
    return (starts[:, None] + np.arange(run)).ravel()


def _pivot(x: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """A ``(rows, 1)`` pivot per row, from a sample of columns, chosen so that at least K
    elements of each row lie at or beyond it with overwhelming probability."""
    where = sample_positions(x.shape[1])
    return pivot_of(x if where is None else np.take(x, where, axis=1), k, x.shape[1], largest)


def pivot_of(sample: np.ndarray, k: int, n: int, largest: bool) -> np.ndarray:
    """The ``(rows, 1)`` pivots from a ``(rows, s)`` sample of rows of length ``n``."""
    s = sample.shape[1]
    # The pivot falls short only when `rank` sample points land among the row's top K-1
    # elements, a binomial with mean k*s/n: a margin of 3 standard deviations makes that rare
    # (about 1 row in 2000 for k=64, n=4096), and a shortfall only sends that row to the plain
    # exact path, never gives a wrong answer.
    mean = k * s / n
    rank = min(s, math.ceil(mean + 3 * math.sqrt(mean) + 2))
    # The pivot comes from a partition of the raw sample, not of its keys (a third of the cost).
    # NumPy orders NaN above every number and -0.0 with +0.0; where that differs from the NaN
    # policy (largest with nan="last"), NaNs only raise the pivot: fewer candidates, at worst a
    # short row sent to the exact path.
    at = s - rank if largest else rank - 1
    if sample.itemsize == 1:
        # NumPy's partition of 8-bit integers is some 15 times slower than of 16-bit ones
        # (256x256 int8: 410 us against 23 us widened).
        return np.partition(sample.astype(np.int16), at, axis=1)[:, at : at + 1].astype(sample.dtype)
    return np.partition(sample, at, axis=1)[:, at : at + 1]


def beyond(x: np.ndarray, pivot: np.ndarray, largest: bool, strict: bool, nan_first: bool):
    """Mask of the elements at (``strict`` False) or strictly beyond the pivot in the preferred
    direction. NaN compares False, so where NaN is preferred (largest only) the mask is the
    negated opposite comparison, True for NaN: one pass, no NaN mask."""
    with np.errstate(invalid="ignore"):
        if nan_first:
            keep = np.less_equal(x, pivot) if strict else np.less(x, pivot)
            return np.logical_not(keep, out=keep)
        if largest:
            return x > pivot if strict else x >= pivot
        return x < pivot if strict else x <= pivot


def select_half(x: np.ndarray, k: int, largest: bool, nan_first: bool, order: str) -> np.ndarray:
    """The pivot filter for half floats (float16, bfloat16), whose comparisons NumPy makes one
    element at a time through float32 (its 16-bit integers: in SIMD).

    Where the top of every row lies on one side of zero, the filter runs on the elements' bits
    as 16-bit integers, with no pass to make keys: the positive numbers' bits, as int16, are
    in their numeric order, the negative numbers' bits, as uint16, in the reverse order. A row
    is answered so only when its K winners in that integer order are all numbers of that side
    (not zero, not NaN): every element left out then has bits at or beyond the K-th's, so it is
    a number of the same side, no better, or a NaN or zero that ranks below them too; and equal
    bits are equal numbers. The other rows (a NaN or a zero among the winners, a top across
    zero), and calls where NaN is preferred and the input holds a NaN with its sign bit set,
    go the general way: bfloat16 through float32 (one
    fast pass in ml_dtypes: a shift, exact), float16 through its keys (NumPy's float16 cast is
    slow: 1.2 ms for 1M elements)."""
    inf = int(np.array(np.inf, dtype=x.dtype).view(np.int16)[()])
    # Where NaN is preferred, every NaN must be among the winners, and a NaN whose sign bit is
    # set would be missed (its bits, as int16, lie below every number's; as uint16 above
    # -inf's): one pass (a maximum) makes sure there is none. A NaN of the other sign sorts
    # first in the integer order: a winner, found below.
    if not nan_first or x.view(np.uint16).max() <= (0x8000 | inf):
        rows, n = x.shape
        where = sample_positions(n)
        positive = x.view(np.int16)
        sample = positive if where is None else positive.take(where, axis=1)
        # The positive side: int16 bits, the preference direction as asked.
        pivot = pivot_of(sample, k, n, largest)
        view: np.ndarray | None
        view, view_largest, low, high = positive, largest, 1, inf
        if not (pivot > 0).all():
            # The negative side: uint16 bits, larger magnitudes larger, so the direction flips.
            view = x.view(np.uint16)
            sample = sample.view(np.uint16)
            pivot = pivot_of(sample, k, n, not largest)
            view_largest, low, high = not largest, 0x8001, 0x8000 | inf
            if not ((pivot >= low) & (pivot <= high)).all():
                view = None
        if view is not None:
            cols = select_prefiltered(view, k, view_largest, False, order, pivot)
            won = view.ravel().take(cols + np.arange(0, rows * n, n)[:, None] if rows > 1 else cols)
            bad = (won < low) | (won > high)
            if not bad.any():
                return cols
            bad_rows = bad.any(axis=1)
            cols[bad_rows] = select_half_general(x[bad_rows], k, largest, nan_first, order)
            return cols
    return select_half_general(x, k, largest, nan_first, order)


def select_half_general(x, k: int, largest: bool, nan_first: bool, order: str) -> np.ndarray:
    """:func:`select_half`'s general way (see there)."""
    if x.dtype.kind != "f":
        with np.errstate(invalid="ignore"):  # a signalling NaN stays a NaN, quietly
            return select_prefiltered(x.astype(np.float32), k, largest, nan_first, order)
    return select_prefiltered(preference_keys(x, largest, nan_first), k, True, False, order)


def select_prefiltered(
    x: np.ndarray, k: int, largest: bool, nan_first: bool, order: str, pivot: np.ndarray | None = None
) -> np.ndarray:
    """Exact top-K through a pivot pass: the ``(rows, k)`` columns, ordered as ``order`` asks.
    Rows that the pivot does not settle (too many candidates that do not tie at K, too few
    candidates) go to the plain exact path. ``pivot``: :func:`_pivot`'s, where already known."""
    rows, n = x.shape
    if pivot is None:
        pivot = _pivot(x, k, largest)
    cols = np.empty((rows, k), dtype=np.int64)
    done = np.zeros(rows, dtype=bool)
    if nan_first and x.dtype.kind == "f":
        nan_pivot = np.isnan(pivot[:, 0])
        if nan_pivot.any():
            # A NaN pivot (many NaNs in the sample, NaN preferred): nothing ranks above NaN and
            # NaNs tie, so a row with K NaNs takes its first K, found in its first columns.
            sel = np.flatnonzero(nan_pivot)
            part = x if sel.size == rows else x[sel]
            # The first K NaNs of such a row usually lie in its first columns: look there first
            # (4x32000 k=50, a tenth NaN: 77 us to 62 us), then in the whole rows.
            head = min(n, max(FILTER_HEAD_COLUMNS, 16 * k))
            nans = np.isnan(part[:, :head])
            enough = count_rows(nans) >= k
            if head < n and not enough.all():
                nans = np.isnan(part)
                enough = count_rows(nans) >= k
            if enough.any():
                if not enough.all():
                    sel, nans = sel[enough], nans[enough]
                first = first_true(nans, np.full(sel.size, k))
                cols[sel] = (true_positions(first) % nans.shape[1]).reshape(-1, k)
                done[sel] = True
            # For the others +inf keeps the NaNs and the infinities, the K best wherever there
            # are K of them (a NaN pivot would keep every element).
            pivot[nan_pivot] = np.inf
    all_nan = done.copy()  # rows answered by K NaNs: in order already (NaNs tie)
    in_order, light = True, np.zeros(rows, dtype=bool)
    if not done.all():
        light, in_order = _filter(x, pivot, k, largest, nan_first, order, cols, done)
    if in_order and light.all():
        return cols
    if not done.all():
        rest = ~done
        cols[rest] = _exact.select_exact(preference_keys(x[rest], largest, nan_first), k)
    # Rows in index order still (settled at the pivot, the exact path, or candidates that
    # could not be packed with their keys) get ordered by their keys.
    unordered = ~light if in_order else np.ones(rows, dtype=bool)
    unordered &= ~all_nan  # their K NaNs tie: index order is their order
    if order == "value" and unordered.any():
        if unordered.all():
            keys = preference_keys(np.take_along_axis(x, cols, axis=1), largest, nan_first)
            return order_winners(cols, keys, order)
        part = cols[unordered]
        keys = preference_keys(np.take_along_axis(x[unordered], part, axis=1), largest, nan_first)
        cols[unordered] = order_winners(part, keys, order)
    return cols


def _filter(x, pivot, k: int, largest: bool, nan_first: bool, order: str, cols, done):
    """The pivot filter proper for the rows not ``done``: writes their columns into ``cols``
    (settled rows marked ``done``); returns the rows settled through their sorted candidates
    and whether those are in the order asked for."""
    rows, n = x.shape
    keep = beyond(x, pivot, largest, False, nan_first)
    if done.any():
        keep[done] = False
    limit = min(FLAT_MAX_CANDIDATES, keep.size * PREFILTER_MAX_KEEP_SHARE)
    # The words holding a candidate bound their count (at most 8 each): the usual few
    # candidates need no count of their own (8x128256: 25 us). Where the rows' first columns
    # hold many already (ties at the pivot), the words would only be counted in vain.
    head = keep[:, :FILTER_HEAD_COLUMNS]
    dense = np.count_nonzero(head) > head.size * PREFILTER_MAX_KEEP_SHARE / 2
    words = None if dense else true_words(keep)
    if (words is None or words.size * 8 > limit) and np.count_nonzero(keep) > limit:
        # Candidates everywhere (equal rows, a pivot among ties): settle the rows tied at the
        # pivot on their masks, then list the candidates of the rows left (4x65536, a third
        # tied at K: 1.2 ms against 3.2 ms listing them all; 64x8192 equal: 4.2 against 20 ms).
        counts = count_rows(keep)
        heavy = counts > n * PREFILTER_MAX_KEEP_SHARE
        _settle_at_pivot_masks(x, keep, counts, heavy, pivot, k, largest, nan_first, cols, done)
        if done.all():  # every row tied at its pivot: nothing left to list
            return np.zeros(rows, dtype=bool), True
        keep[done | heavy] = False
        words = None
    flat = true_positions(keep, words)  # row-major: rows in order, columns ascending within a row
    del keep
    r, c = np.divmod(flat, n)
    counts = np.bincount(r, minlength=rows)
    heavy = counts > n * PREFILTER_MAX_KEEP_SHARE
    if heavy.any():
        # Many elements at the pivot: when the pivot is the K-th value itself (ties at K, equal
        # values), the elements strictly beyond it and the first that equal it are the answer.
        hf, hr = (flat, r) if heavy.all() else (flat[heavy[r]], r[heavy[r]])
        strict = beyond(x.ravel()[hf], pivot[hr, 0], largest, True, nan_first)
        above = np.bincount(hr[strict], minlength=rows)
        at_pivot = heavy & (above < k) & (counts >= k)
        if at_pivot.any():
            if not at_pivot[hr].all():
                sel = at_pivot[hr]
                hf, hr, strict = hf[sel], hr[sel], strict[sel]
            # Running count of the ties within each row: a global count less the row's start.
            ties = np.cumsum(~strict, dtype=np.int64)
            per_row = counts[at_pivot]
            first = np.zeros(per_row.size, dtype=np.int64)
            np.cumsum(per_row[:-1], out=first[1:])
            ties -= np.repeat(ties[first] - ~strict[first], per_row)
            need = (k - above)[hr]
            win = strict | (ties <= need)
            cols[at_pivot] = (hf[win] - hr[win] * n).reshape(-1, k)
            done |= at_pivot
    light = ~done & (counts >= k) & ~heavy
    in_order = True
    if light.any():
        if not light.all():
            sel = light[r]
            flat, r, c = flat[sel], r[sel], c[sel]
        counts[~light] = 0
        cand, in_order = select_candidates(
            x.ravel()[flat], r, c, counts, rows, n, k, largest, nan_first, order
        )
        cols[light] = cand[light]
        done |= light
    return light, in_order


def _settle_at_pivot_masks(x, keep, counts, heavy, pivot, k, largest, nan_first, cols, done) -> None:
    """For the ``heavy`` rows whose pivot is the K-th value (fewer than K beyond it, K or more
    at or beyond it), write their columns into ``cols`` and mark them ``done``: the elements
    strictly beyond the pivot, then the first ones equal to it. Works on the rows' masks."""
    if not heavy.any():
        return
    every = heavy.all()  # then no row copies
    sel = np.flatnonzero(heavy)
    strict = beyond(x if every else x[sel], pivot if every else pivot[sel], largest, True, nan_first)
    above = count_rows(strict)
    at_pivot = (above < k) & (counts[sel] >= k)
    if not at_pivot.any():
        return
    if not at_pivot.all():
        sel, strict, above, every = sel[at_pivot], strict[at_pivot], above[at_pivot], False
    # Every row settled here: the caller drops all of keep after, so it may serve as the ties.
    tied = keep if every else keep[sel]
    tied &= ~strict
    strict |= first_true(tied, k - above)
    cols[sel] = (true_positions(strict) % x.shape[1]).reshape(-1, k)
    done[sel] = True


def select_candidates(
    values, r, c, counts, rows: int, n: int, k: int, largest: bool, nan_first: bool, order: str
):
    """The ``(rows, k)`` columns of the top K of each row among its candidates: ``values`` at row
    ``r`` and column ``c``, grouped by row and in ascending column within a row, ``counts`` per
    row (rows with fewer than K get garbage). Returns the columns and whether they are in the
    order asked for (else in index order)."""
    keys = preference_keys(values, largest, nan_first)
    key_bits = 8 * keys.itemsize
    col_bits = max(1, (n - 1).bit_length())
    row_bits = max(1, (rows - 1).bit_length())
    if key_bits + col_bits + row_bits <= 64:
        # One sort of composites (row, inverted key, column): each row's candidates come out
        # preferred first, ties by lower column; its first K are the answer, in order.
        comp = r.astype(np.uint64)
        comp <<= np.uint64(key_bits)
        comp |= ~keys  # the inverted key: ascending order is preferred first
        comp <<= np.uint64(col_bits)
        comp |= c.astype(np.uint64)
        comp.sort()
        starts = np.zeros(rows, dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        take = np.minimum(starts[:, None] + np.arange(k), max(0, comp.size - 1))
        cols = (comp[take] & np.uint64((1 << col_bits) - 1)).astype(np.int64)
        if order != "value":
            cols.sort(axis=1)
        return cols, True
    # 64-bit keys: pack the candidates, still in index order, into a (rows, width) matrix.
    # Padding has key 0 and column n, so it ranks below every candidate with key 0 too: it is
    # never selected while a row has at least K real candidates.
    width = max(k, int(counts.max()))
    starts = np.zeros(rows, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    slot = np.arange(r.size) - starts[r]
    # Flat indexing: NumPy's 2-D fancy indexing is several times slower.
    dest = r * width + slot
    cand_cols = np.full((rows, width), n, dtype=np.int64)
    cand_cols.ravel()[dest] = c
    cand_keys = np.zeros((rows, width), dtype=keys.dtype)
    cand_keys.ravel()[dest] = keys
    pos = _exact.select_exact(cand_keys, k)
    return np.take_along_axis(cand_cols, pos, axis=1), False
