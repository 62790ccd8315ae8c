"""One long row of the NumPy backend: column ranges on a thread pool, bounded memory, exact.

A row is cut into ranges of at most ``RANGE_ELEMENTS`` columns. Each range computes its own
order-preserving keys (:func:`cutopk._request.keys.preference_keys`) when it needs them and drops them after, so
the memory beyond the outputs is a few range-sized temporaries per thread, whatever the data (all
equal, mostly zeros, half NaN, a K of millions) and whatever the strides (a zero-stride view of
2**31 elements is read range by range, never copied whole). The steps:

1. **The K-th key ``t``.** A sample of the row gives a pivot key ``p`` that has at least K keys
   at or above it with overwhelming probability. One pass counts, per range, the keys above and
   at ``p`` and keeps those at or above it while they are few.
   - Fewer than K above ``p`` but K or more at or above: ``t = p`` (ties at K, equal rows).
   - K or more at or above, and few: the kept candidates (index order) go through the exact
     partition selection of ``_numpy`` at once: that is the answer. When many keys equal the
     pivot (a mostly-zero row) but K or more lie strictly above it and those are few, the
     ranges keep only those.
   - Otherwise (an unlucky sample, a K near N, heavy ties elsewhere): ``t`` comes from a radix
     select: histograms of 16-bit digits of the keys, summed over the ranges, one pass per digit
     (one pass for 8/16-bit types, two for 32-bit, four for 64-bit), each narrowing the prefix.
2. **The winners for ``t``.** Each range counts its keys above ``t`` and equal to it; the keys
   equal to ``t`` are given out to the ranges in index order (the lower-index rule across range
   boundaries), so each range knows how many of its own ties it takes and where its winners go
   in the output. The ranges then write their winners, in index order, side by side.
3. **Order.** A stable argsort of the K winners' inverted keys for ``sorted=True``.

K = N skips the selection: the positions, or the stable argsort of the keys (made range by range
into one key array: the one input-sized temporary).

The ranges' boundaries depend on the thread count (one range per thread at least), the answer
does not: every step is exact whatever the boundaries, and ties are handed out across ranges in
index order.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from .._request import dtypes as _dtypes
from .._request.keys import preference_keys
from . import threads as _threads
from .exact import select_exact

# Rows at least this long always go through here (one row is then larger than a row block).
LONG_ROW_MIN_N = 1 << 20
# With fewer rows than threads, rows at least this long are split so that every core works.
SPLIT_ROW_MIN_N = 1 << 16
# Columns per range: a range's keys, masks and digits stay within a few MB (per thread).
RANGE_ELEMENTS = 1 << 18
# Bits per radix digit: a 65536-bin histogram per range.
DIGIT_BITS = 16
# Candidates kept in the pivot pass at most, as a share of the row (their keys and int64 columns
# then take at most half the memory of the input itself for 4-byte types).
CANDIDATE_SHARE = 1 / 16


def takes(rows: int, n: int, threads: int) -> bool:
    """Whether rows of length ``n`` go through here, one at a time, rather than in row blocks."""
    return n >= LONG_ROW_MIN_N or (threads > 1 and rows < threads and n >= SPLIT_ROW_MIN_N)


def _ranges(n: int, threads: int) -> list[tuple[int, int]]:
    size = min(RANGE_ELEMENTS, -(-n // max(1, threads)))
    return [(s, min(s + size, n)) for s in range(0, n, size)]


class _Row:
    """One row read range by range: its keys, and masks of the elements beyond or at a key.

    The masks come from comparisons of the elements themselves with the value whose key it is
    (one vectorised pass, no key transform) where NumPy compares the dtype fast and the key is
    a number's; otherwise (half floats, a NaN's key) from the keys.
    """

    def __init__(self, row: np.ndarray, largest: bool, nan_first: bool):
        self.row, self.largest, self.nan_first = row, largest, nan_first
        self.native = row.dtype.newbyteorder("=")
        self.info = _dtypes.info(self.native)
        self.key_t = self.info.key_dtype

    def keys(self, span: tuple[int, int]) -> np.ndarray:
        part = np.ascontiguousarray(self.row[span[0] : span[1]], dtype=self.native)
        return preference_keys(part, self.largest, self.nan_first)

    def value_of(self, key):
        """The element value whose preference key is ``key``; None where the masks must come
        from the keys (see the class doc)."""
        info, key_t = self.info, self.key_t
        top = np.iinfo(key_t).max
        if info.is_float and (info.itemsize < 4 or key in (0, top)):
            return None  # half floats compare slowly; 0 and all-ones are NaN's keys
        raw = int(key) if self.largest else top - int(key)
        sign = 1 << (8 * info.itemsize - 1)
        if info.is_float:
            bits = raw ^ sign if raw & sign else top - raw
        else:
            bits = raw ^ sign if info.is_signed else raw
        return np.array(bits, dtype=key_t).view(self.native)[()]

    def masks(self, span: tuple[int, int], key, value):
        """``(beyond, equal)``: masks of the range's elements whose key is above ``key``, and
        equal to it; ``value`` is :meth:`value_of` the key."""
        if value is None:
            keys = self.keys(span)
            return keys > key, keys == key
        part = self.row[span[0] : span[1]]
        with np.errstate(invalid="ignore"):
            if self.nan_first:  # NaN is preferred: "not at or below" is True for NaN
                beyond = np.less_equal(part, value)
                np.logical_not(beyond, out=beyond)
            else:
                beyond = part > value if self.largest else part < value
            equal = part == value  # -0.0 == +0.0: they tie, as their keys do
        return beyond, equal


def select_row(
    row: np.ndarray, k: int, largest: bool, nan_first: bool, order: str, threads: int
) -> np.ndarray:
    """The int64 positions of the top K of the 1-D ``row`` (any stride and byte order), ordered as
    ``order`` asks; ``1 <= k <= row.size``."""
    n = row.size
    ranges = _ranges(n, threads)
    r = _Row(row, largest, nan_first)
    if k == n:  # every element: no selection, only the order (keys made range by range)
        if order != "value":
            return np.arange(n, dtype=np.int64)
        keys = np.empty(n, dtype=r.key_t)

        def fill(span):
            keys[span[0] : span[1]] = r.keys(span)

        _threads.run(fill, ranges, threads)
        np.invert(keys, out=keys)
        return np.argsort(keys, kind="stable")
    p = _pivot_key(r, k)
    value = r.value_of(p)
    cap = max(64, int((ranges[0][1] - ranges[0][0]) * CANDIDATE_SHARE))  # candidates kept per range

    def count_at_pivot(span):
        """Counts above and at the pivot, and the candidates while few: those at or above it,
        else those strictly above it (a pivot among many equal keys, e.g. a mostly-zero row)."""
        beyond, equal = r.masks(span, p, value)
        gt = int(np.count_nonzero(beyond))
        ge = gt + int(np.count_nonzero(equal))
        if ge <= cap:
            beyond |= equal
        elif gt > cap:
            return gt, ge, None
        pos = np.flatnonzero(beyond)
        cand = np.ascontiguousarray(row[span[0] : span[1]][pos], dtype=r.native)
        return gt, ge, (pos + span[0], preference_keys(cand, largest, nan_first))

    found = _threads.run(count_at_pivot, ranges, threads)
    gt = sum(f[0] for f in found)
    ge = sum(f[1] for f in found)
    kept = [f[2] for f in found]
    counts = None
    if gt < k <= ge:
        t = p
        counts = np.array([(f[0], f[1] - f[0]) for f in found], dtype=np.int64)
    elif k <= ge and all(c is not None for c in kept):
        cand_cols = np.concatenate([c[0] for c in kept])
        cand_keys = np.concatenate([c[1] for c in kept])
        # Here k <= gt: the keys above the pivot suffice (some ranges kept only those).
        above = cand_keys > p
        cand_cols, cand_keys = cand_cols[above], cand_keys[above]
        pos = select_exact(cand_keys[None, :], k)[0]
        return _order(cand_cols[pos], cand_keys[pos], order)
    else:
        del found, kept
        t = _radix_kth_key(r.keys, ranges, k, r.key_t, threads)
    cols, keys = _winners(r, ranges, k, t, threads, counts)
    return _order(cols, keys, order)


def _order(cols: np.ndarray, keys: np.ndarray, order: str) -> np.ndarray:
    """The winners (ascending positions, their keys) in the order asked for; ``keys`` is
    overwritten (inverted in place: a K-sized temporary fewer)."""
    if order != "value":
        return cols
    np.invert(keys, out=keys)  # ascending inverted keys: preferred first; stable: ties by position
    return cols[np.argsort(keys, kind="stable")]


def _pivot_key(r: _Row, k: int, size: int = 4096):
    """A key with at least K keys of the row at or above it with overwhelming probability (see
    :func:`cutopk.numpy.pivot_filter.pivot_of` for the margin), from runs of adjacent columns spread over the row."""
    n = r.row.size
    runs = 256
    run = size // runs
    starts = np.arange(runs) * (n // runs)
    cols = np.unique(np.minimum((starts[:, None] + np.arange(run)).ravel(), n - 1))
    keys = preference_keys(np.ascontiguousarray(r.row[cols], dtype=r.native), r.largest, r.nan_first)
    s = keys.size
    mean = k * s / n
    rank = min(s, math.ceil(mean + 3 * math.sqrt(mean) + 2))
    return np.partition(keys, s - rank)[s - rank]


def _radix_kth_key(keys_of, ranges, k: int, key_t: np.dtype, threads: int):
    """The K-th largest key of the row, exactly: a most-significant-digit radix select whose
    histograms are summed over the ranges."""
    width = 8 * key_t.itemsize
    digit = min(DIGIT_BITS, width)
    prefix, done, remaining = 0, 0, k
    while done < width:
        shift = width - done - digit

        totals: dict = {}  # one histogram per thread, summed at the end (not one per range)

        def histogram(span, done=done, shift=shift, prefix=prefix, totals=totals):
            keys = keys_of(span)
            if done:
                keys = keys[(keys >> key_t.type(width - done)) == key_t.type(prefix)]
            digits = (keys >> key_t.type(shift)) & key_t.type((1 << digit) - 1)
            counts = np.bincount(digits.astype(np.intp), minlength=1 << digit)
            totals.setdefault(threading.get_ident(), np.zeros(1 << digit, dtype=np.int64)).__iadd__(counts)

        _threads.run(histogram, ranges, threads)
        hist = np.sum(list(totals.values()), axis=0)
        # Buckets from the top: the K-th key lies in the first bucket where the running count
        # from above reaches the remaining rank.
        from_top = np.cumsum(hist[::-1])
        b = int(np.searchsorted(from_top, remaining))  # first index with from_top >= remaining
        remaining -= int(from_top[b - 1]) if b else 0
        prefix = (prefix << digit) | ((1 << digit) - 1 - b)
        done += digit
    return key_t.type(prefix)


def _winners(r: _Row, ranges, k: int, t, threads: int, counts: np.ndarray | None = None):
    """Positions (ascending) and keys of the K winners for the K-th key ``t``: every key above
    ``t`` and, of the keys equal to ``t``, the first in index order. ``counts``: per range, the
    keys above and equal to ``t`` when already known (else one pass counts them)."""
    value = r.value_of(t)

    def count(span):
        beyond, equal = r.masks(span, t, value)
        return int(np.count_nonzero(beyond)), int(np.count_nonzero(equal))

    if counts is None:
        counts = np.array(_threads.run(count, ranges, threads), dtype=np.int64).reshape(-1, 2)
    above, equal = counts[:, 0], counts[:, 1]
    need = k - int(above.sum())
    ties_before = np.concatenate([[0], np.cumsum(equal)[:-1]])
    take = np.clip(need - ties_before, 0, equal)  # ties each range takes, lowest index first
    ends = np.cumsum(above + take)
    cols = np.empty(k, dtype=np.int64)
    keys_out = np.empty(k, dtype=r.key_t)

    def write(i):
        span = ranges[i]
        mask, ties = r.masks(span, t, value)
        if take[i] == equal[i]:
            mask |= ties
        elif take[i]:
            mask[np.flatnonzero(ties)[: take[i]]] = True
        pos = np.flatnonzero(mask)
        start = ends[i] - pos.size
        cols[start : ends[i]] = pos + span[0]
        part = np.ascontiguousarray(r.row[span[0] : span[1]][pos], dtype=r.native)
        keys_out[start : ends[i]] = preference_keys(part, r.largest, r.nan_first)

    _threads.run(write, np.flatnonzero(above + take), threads)  # ranges with winners only
    return cols, keys_out
