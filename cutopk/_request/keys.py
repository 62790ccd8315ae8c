"""Order-preserving unsigned keys on the CPU (the NumPy twin of ``kernels/key_traits.cuh``).

The preference key ``P`` of an element is an unsigned integer of the element's width such that a
larger ``P`` means "selected earlier": for ``largest`` it grows with the value, for ``smallest``
it shrinks. Ties in ``P`` are broken by lower index. NaN and -0.0 are canonicalised here, so no
caller ever compares raw floats:

- -0.0 gets the key of +0.0 (they tie);
- every NaN gets key 0 (least preferred, ``nan="last"``; also ``nan="largest"`` with
  ``smallest``), or the all-ones key (most preferred, ``nan="largest"`` with ``largest``).
  No number maps to either extreme: the largest number, +inf, maps below all-ones and the
  smallest, -inf, above 0, so NaN never ties with a number.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as _dtypes


def _nan_from_bits(bits: np.ndarray, dtype) -> np.ndarray:
    """NaN mask from a float array's bits: with the sign cleared, every pattern above +inf's is a
    NaN (np.isnan would raise FE_INVALID on signalling NaNs of ml_dtypes' bfloat16)."""
    key_t = bits.dtype
    sign = key_t.type(1 << (8 * key_t.itemsize - 1))
    return (bits & ~sign) > np.array(np.inf, dtype=dtype).view(key_t)[()]


def preference_keys(values: np.ndarray, largest: bool, nan_first: bool) -> np.ndarray:
    """Return the preference keys of ``values`` (any shape, native byte order) as unsigned ints.

    Parameters
    ----------
    values : numpy.ndarray
        Elements of a supported dtype.
    largest : bool
        True when larger values are preferred.
    nan_first : bool
        True when NaN is the most preferred value (``nan="largest"`` and ``largest``).
    """
    info = _dtypes.info(values.dtype)
    key_t = info.key_dtype
    bits = np.ascontiguousarray(values).view(key_t)
    width = 8 * key_t.itemsize
    sign = key_t.type(1 << (width - 1))
    if not info.is_float:
        key = bits ^ sign if info.is_signed else bits.copy()
        if not largest:
            np.invert(key, out=key)
        return key
    # Floats: positive numbers get the sign bit set, negative ones are bit-inverted, so that the
    # unsigned order is the numeric order (-inf < ... < -0 < +0 < ... < +inf). An arithmetic
    # shift of the sign bit gives the all-ones mask for negatives without a branch or np.where.
    # Each step writes into one array (the caller's blocks fit in cache: few passes, no temporaries).
    key = np.right_shift(bits.view(f"i{key_t.itemsize}"), width - 1).view(key_t)
    np.bitwise_or(key, sign, out=key)
    np.bitwise_xor(key, bits, out=key)
    # -0.0 (key ~sign) -> the key of +0.0 (sign): they tie.
    key += key == key_t.type(~sign)
    if not largest:
        np.invert(key, out=key)
    if values.dtype.kind == "f" and values.itemsize >= 4:
        # NumPy's SIMD isnan (quiet on signalling NaNs); its float16 isnan goes element by
        # element, slower than the bit test on the 16-bit words.
        with np.errstate(invalid="ignore"):
            nan = np.isnan(values)
    else:
        nan = _nan_from_bits(bits, values.dtype)
    if nan.any():
        # A branch-free blend (the NaN mask widened to all-ones words), several times faster than
        # a boolean-index assignment or copyto(where=) on a row with NaNs scattered at random.
        ones = nan.view(np.uint8).astype(key_t)
        np.negative(ones, out=ones)
        if nan_first:
            key |= ones
        else:
            np.invert(ones, out=ones)
            key &= ones
    return key
