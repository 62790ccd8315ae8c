"""Test inputs: the hard value distributions of STYLE.md and the memory layouts of SPEC.md."""

from __future__ import annotations

import numpy as np

from cutopk._request import dtypes as _dtypes

DTYPES = [info.name for info in _dtypes.SUPPORTED.values()]
DISTRIBUTIONS = (
    "uniform", "all_equal", "few_distinct", "leading_bits", "inf", "nan", "zeros",
    "subnormal", "extremes", "sorted", "reversed",
)  # fmt: skip
LAYOUTS = ("C", "F", "transposed", "sliced", "negative", "zero_stride")


def dtype_of(name: str) -> np.dtype:
    """NumPy dtype for a name of the dtype table (bfloat16 through ml_dtypes)."""
    for dt, info in _dtypes.SUPPORTED.items():
        if info.name == name:
            return dt
    raise KeyError(name)


def make_values(rng: np.random.Generator, dtype, shape, dist: str = "uniform") -> np.ndarray:
    """An array of ``shape`` and ``dtype`` drawn from the hard distribution ``dist``."""
    dt = np.dtype(dtype)
    size = int(np.prod(shape))
    info = _dtypes.info(dt)
    if info.is_float:
        x = _float_values(rng, size, dist, dt)
    else:
        x = _int_values(rng, size, dist, dt)
    return x.reshape(shape)


def random_bits(rng: np.random.Generator, dt: np.dtype, shape, levels: int = 0) -> np.ndarray:
    """Elements of ``dt`` made of random bytes (every NaN payload, subnormals), or with
    ``levels`` the bit patterns 0 .. levels - 1 (integers) or those values (floats): few
    distinct keys, many ties."""
    raw = rng.integers(0, 256, (*shape[:-1], shape[-1] * dt.itemsize), dtype=np.uint8).view(dt)
    if levels:
        raw = raw.view(f"u{dt.itemsize}") % levels
        raw = raw.astype(f"u{dt.itemsize}").view(dt) if dt.kind != "f" else raw.astype(dt)
    return raw


def _float_values(rng, size, dist, dt):
    f64 = rng.standard_normal(size) * 100
    if dist == "all_equal":
        f64[:] = 1.5
    elif dist == "few_distinct":
        f64 = rng.integers(-2, 3, size).astype(np.float64)
    elif dist == "leading_bits":
        eps = 2.0**-7 if dt.name == "bfloat16" else float(np.finfo(dt).eps)
        f64 = 1.0 + rng.integers(0, 8, size) * eps
    elif dist == "inf":
        f64[rng.random(size) < 0.2] = np.inf
        f64[rng.random(size) < 0.2] = -np.inf
    elif dist == "nan":
        f64[rng.random(size) < 0.3] = np.nan
        f64[rng.random(size) < 0.05] = np.inf
    elif dist == "zeros":
        f64 = np.where(rng.random(size) < 0.5, 0.0, -0.0)
        f64[rng.random(size) < 0.1] = 1.0
    elif dist == "sorted":
        f64 = np.sort(f64)
    elif dist == "reversed":
        f64 = np.sort(f64)[::-1].copy()
    x = f64.astype(dt)
    if dist == "subnormal":
        key = np.dtype(f"u{dt.itemsize}")
        raw = rng.integers(0, 16, size).astype(key)  # tiny bit patterns are subnormals
        sign = np.array(1, dtype=key) << np.array(8 * dt.itemsize - 1, dtype=key)
        raw[rng.random(size) < 0.5] |= sign
        x = raw.view(dt)
    elif dist == "extremes":
        fi = np.finfo(dt) if dt.name != "bfloat16" else None
        big = float(fi.max) if fi is not None else 3.0e38
        choices = np.array([big, -big, 0.0, -0.0, np.inf, -np.inf, np.nan], dtype=np.float64)
        x = choices[rng.integers(0, len(choices), size)].astype(dt)
    if dist == "nan" and size:
        # NaNs of another sign and payload must tie with the canonical NaN.
        key = np.dtype(f"u{dt.itemsize}")
        raw = x.view(key)
        nan_at = np.flatnonzero(np.isnan(x.astype(np.float64)))
        raw[nan_at[::2]] |= np.array(1, dtype=key) << np.array(8 * dt.itemsize - 1, dtype=key)
    return x


def _int_values(rng, size, dist, dt):
    ii = np.iinfo(dt)
    if dist in ("all_equal",):
        return np.full(size, ii.max // 3, dtype=dt)
    if dist in ("few_distinct", "zeros"):
        return rng.integers(0, 3, size).astype(dt)
    if dist == "extremes":
        return np.array([ii.min, ii.max, 0, ii.min + 1, ii.max - 1], dtype=dt)[rng.integers(0, 5, size)]
    if dist == "leading_bits":
        base = ii.max - 7 if ii.max > 8 else 0
        return dt.type(base) + rng.integers(0, 8, size).astype(dt)
    x = rng.integers(ii.min, ii.max, size, dtype=dt, endpoint=True)
    if dist == "sorted":
        x = np.sort(x)
    elif dist == "reversed":
        x = np.sort(x)[::-1].copy()
    return x


def make_layout(base: np.ndarray, layout: str) -> np.ndarray:
    """A view with the values of ``base`` (2-D or more) laid out as ``layout`` says.

    The result compares equal to ``base`` element by element except for "zero_stride", which
    repeats ``base[..., :1, :]`` along the second-to-last axis (a broadcast view).
    """
    if layout == "C":
        return np.ascontiguousarray(base)
    if layout == "F":
        return np.asfortranarray(base)
    if layout == "transposed":
        return np.ascontiguousarray(np.swapaxes(base, -1, -2)).swapaxes(-1, -2)
    if layout == "sliced":
        padded = np.zeros((*base.shape[:-1], base.shape[-1] * 2 + 1), dtype=base.dtype)
        padded[..., 1::2] = base
        return padded[..., 1::2]
    if layout == "negative":
        return np.ascontiguousarray(base[..., ::-1])[..., ::-1]
    if layout == "zero_stride":
        return np.broadcast_to(base[..., :1, :], base.shape)
    raise ValueError(layout)


def misaligned(values: np.ndarray, backend: str):
    """``values`` copied into an array that starts 2 bytes into its buffer (a CuPy array for
    ``backend="cuda"``, else NumPy): not aligned to its element size."""
    size = values.nbytes
    if backend == "cuda":
        import cupy

        # Written byte by byte: CuPy's copy of whole float32s to this address faults on a GPU.
        buf = cupy.zeros(size + 2, np.uint8)
        buf[2:] = cupy.asarray(np.ascontiguousarray(values).view(np.uint8).ravel())
        x = cupy.ndarray(values.shape, values.dtype, buf.data + 2)
        assert x.data.ptr % values.dtype.itemsize
        return x
    x = np.zeros(size + 2, np.uint8)[2:].view(values.dtype).reshape(values.shape)
    x[...] = values
    assert not x.flags.aligned
    return x
