"""The block_row family (kernels/block_row.cu: a 1024-thread block per row, the row's copies in
flight at entry, a float16-style first digit, the K-th key's bin refined as shared candidates) on
the simulator (and a GPU when present), bit for bit against the reference, values and indices:
every dtype, the lengths around K and the copy chunks, each way the select ends (candidates that
hold just the winners, ties across the K-th place ranked over the row, a bin that overflows the
candidates), NaN rules, signed zeros, subnormals, infinities, ``lengths=``, CSR segments, strided
and misaligned rows, both index widths, all three orders. The first digit's NumPy twin is checked
for monotonicity, and the kernel's digit against the twin. Rows stay few: the simulator runs a
fiber per thread, 1024 per block."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, require, to_backend, to_host
from support.family_checks import LENGTHS_ORDERS, check_lengths, signed_zeros_and_nans
from support.inputs import DTYPES, dtype_of, make_values
from support.reference import assert_same_padded, reference_segments
from test_kernels import run_case
from test_kernels_rows import H100_SHARED, use_device

import cutopk
from cutopk import sim
from cutopk._request import keys as _keys
from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda import kernel_source as _kernel_source
from cutopk.cuda.families import block_row as _block_row

GPU_BACKENDS = [p for p in BACKEND_PARAMS if p.values[0] != "numpy"]
ALGO = {"algorithm": "block_row"}


def block_row_plan(backend, x, k, **kw):
    plan = cutopk.plan(to_backend(x, backend), k, backend=backend, algorithm="block_row", **kw)
    assert plan.algorithm == "block_row" and len(plan.launches) == 1, plan
    return plan


def float_edge_values(dtype) -> np.ndarray:
    """Every exponent with a few mantissas, both signs, and the special values: NaN (several
    payloads), +-inf, +-0, subnormals, the extremes."""
    dt = dtype_of(dtype) if isinstance(dtype, str) else np.dtype(dtype)
    width = dt.itemsize * 8
    exp_bits = 8 if dt.name == "bfloat16" else {16: 5, 32: 8, 64: 11}[width]
    mant_bits = width - 1 - exp_bits
    u = np.dtype(f"u{dt.itemsize}")
    exps = np.arange(1 << exp_bits, dtype=np.uint64)
    mants = np.array(
        [0, 1, 1 << (mant_bits - 6), (1 << (mant_bits - 1)) | 5, (1 << mant_bits) - 1], np.uint64
    )
    magnitudes = ((exps[:, None] << np.uint64(mant_bits)) | mants[None, :]).ravel()
    sign = np.uint64(1) << np.uint64(width - 1)
    both = np.concatenate([magnitudes, magnitudes | sign]).astype(u)
    return both.view(dt)


FLOATS = ["float16", "bfloat16", "float32", "float64"]


def float_values(dtype, rng) -> np.ndarray:
    """float_edge_values, random bit patterns and the special values."""
    dt = dtype_of(dtype)
    u = np.dtype(f"u{dt.itemsize}")
    random_bits = rng.integers(0, np.iinfo(u).max, 20_000, dtype=u, endpoint=True).view(dt)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float64).astype(dt)
    return np.concatenate([float_edge_values(dt), random_bits, special])


@pytest.mark.parametrize("dtype", FLOATS)
def test_first_digit_of_floats_is_monotone_and_splits_each_binade_64_ways(dtype):
    rng = np.random.default_rng(50)
    dt = dtype_of(dtype)
    values = float_values(dtype, rng)
    for largest in (True, False):
        for nan_first in (True, False):
            keys = np.sort(_keys.preference_keys(values, largest, nan_first))
            digits = _block_row.first_digit(keys, dt)
            assert digits.min() >= 1 and digits.max() <= 4095
            assert (np.diff(digits) >= 0).all(), "a larger key must never get a smaller digit"
            nan_key = _keys.preference_keys(np.array([np.nan], np.float64).astype(dt), largest, nan_first)
            _, _, cap = _block_row.FLOAT_VIEWS[dt.name]
            assert _block_row.first_digit(nan_key, dt)[0] == 2048 + (cap if nan_first else -cap)
            zeros = _keys.preference_keys(np.array([0.0, -0.0], np.float64).astype(dt), largest, nan_first)
            assert (_block_row.first_digit(zeros, dt) == 2048).all()
    # Uniform [0.5, 1): one exponent, 64 bins for 32/64-bit floats (resident's digit: 8), 64 for
    # float16 (its top 6 mantissa bits) and 8 for bfloat16 (its top 3 of 7); the same on the
    # negative side.
    half = (0.5 + rng.random(50_000) / 2).astype(dt)
    half = half[half < 1]  # rounded to 1.0 in 16 bits: the next binade
    for v in (half, -half):
        bins = np.unique(_block_row.first_digit(_keys.preference_keys(v, True, False), dt)).size
        assert bins == (8 if dtype == "bfloat16" else 64)


@pytest.mark.parametrize("dtype", ["int16", "uint8", "int32", "uint64"])
def test_first_digit_of_other_keys_is_their_top_bits(dtype):
    dt = dtype_of(dtype)
    keys = _keys.preference_keys(make_values(np.random.default_rng(51), dt, (5000,), "uniform"), True, False)
    width = np.dtype(dt).itemsize * 8
    bits = min(12, width)
    want = keys.astype(np.uint64) >> np.uint64(width - bits)
    assert (_block_row.first_digit(keys, dt) == want.astype(np.int64)).all()


def test_first_digit_common_bits_are_those_of_every_key_of_the_bin():
    # FloatView::common's twin: a bin strictly inside (2048 - CAP, 2048 + CAP), not 2048, holds
    # the keys whose bits at and above VIEW_SHIFT are one prefix.
    rng = np.random.default_rng(56)
    for dtype in FLOATS:
        dt = dtype_of(dtype)
        keys = _keys.preference_keys(float_values(dtype, rng), True, False).astype(np.uint64)
        digits = _block_row.first_digit(keys.astype(f"u{dt.itemsize}"), dt)
        shift, _, cap = _block_row.FLOAT_VIEWS[dt.name]
        for t in np.unique(digits):
            prefixes = np.unique(keys[digits == t] >> np.uint64(shift))
            assert (len(prefixes) == 1) or t == 2048 or abs(int(t) - 2048) >= cap, (dtype, t)


DIGIT_SOURCE = r"""
template <class T>
__device__ void digits(const typename cutopk::KeyTraits<T>::Key* bits, unsigned* out, int n, int largest, int nan_first) {
  typedef cutopk::KeyTraits<T> K;
  const auto raw = cutopk::RawDigit<T>::of_row(largest, nan_first);
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    out[2 * i] = cutopk::FirstDigit<T>::of(K::from_bits(bits[i], largest, nan_first));
    out[2 * i + 1] = raw.of(bits[i]);
  }
}
extern "C" __global__ void digits_f16(const unsigned short* b, unsigned* o, int n, int l, int f) { digits<__half>(b, o, n, l, f); }
extern "C" __global__ void digits_bf16(const unsigned short* b, unsigned* o, int n, int l, int f) {
  digits<__nv_bfloat16>(b, o, n, l, f);
}
extern "C" __global__ void digits_f32(const unsigned* b, unsigned* o, int n, int l, int f) { digits<float>(b, o, n, l, f); }
extern "C" __global__ void digits_f64(const unsigned long long* b, unsigned* o, int n, int l, int f) { digits<double>(b, o, n, l, f); }
"""


def test_the_kernels_first_digit_and_the_digit_of_the_bits_are_the_twins():
    # FirstDigit<T>::of(key) and RawDigit<T>::of(bits) (the count's: the element's bits as loaded)
    # against the NumPy twin of the keys, every mode and NaN rule (nan_first with "smallest" too,
    # which no request makes).
    require("sim")
    headers = _kernel_source._inline(_kernel_source.files_of("first_digit.cuh"))
    mod = sim.RawModule(code=headers + DIGIT_SOURCE)
    rng = np.random.default_rng(52)
    for name, dtype in (
        ("digits_f16", "float16"),
        ("digits_bf16", "bfloat16"),
        ("digits_f32", "float32"),
        ("digits_f64", "float64"),
    ):
        dt = dtype_of(dtype)
        values = float_values(dtype, rng)[::7]
        bits = values.view(f"u{dt.itemsize}").copy()
        for largest in (True, False):
            for nan_first in (True, False):
                keys = _keys.preference_keys(values, largest, nan_first)
                out = np.zeros(2 * bits.size, np.uint32)
                mod.get_function(name)(
                    1, 256, (bits, out, np.int32(bits.size), np.int32(largest), np.int32(nan_first))
                )
                want = _block_row.first_digit(keys, dt)
                assert (out[0::2].astype(np.int64) == want).all(), (name, largest, nan_first)
                assert (out[1::2].astype(np.int64) == want).all(), (name, largest, nan_first, "bits")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_on_rows_of_8192(backend, dtype, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(53)
    dist = "nan" if "float" in dtype else "few_distinct"
    x = make_values(rng, dtype_of(dtype), (2, 8192), dist)
    key_bytes = np.dtype(dtype_of(dtype)).itemsize
    plan = block_row_plan(backend, x, 512)
    assert plan.launches[0].shared_bytes == _block_row.shared_bytes(8192, 512, key_bytes)
    run_case(backend, x, 512, nan="largest", **ALGO)
    run_case(backend, x, 2048, mode="smallest", sorted="index", index_dtype=np.int32, **ALGO)
    run_case(backend, make_values(rng, dtype_of(dtype), (1, 8192), "uniform"), 50, sorted=False, **ALGO)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_lengths_around_k_and_the_copy_chunks(backend, monkeypatch):
    # 1 element, K elements (rows shorter than K: lengths=, below), 4095 (rows of 16380 bytes: every other row off a 16-byte
    # boundary, read by plain loads), 8192 (2 chunks of a vector per thread), 32000 (8 chunks, the
    # last one short), 40000 (8 chunks of two vectors per thread: 10000 vectors).
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(54)
    for n, k, rows in ((1, 1, 2), (300, 300, 2), (4095, 1000, 3), (8192, 1, 1), (32000, 64, 1)):
        x = rng.standard_normal((rows, n)).astype(np.float32)
        run_case(backend, x, k, **ALGO)
        run_case(backend, x, k, mode="smallest", sorted="index", **ALGO)
    x = rng.random((1, 40000)).astype(np.float32)  # uniform [0, 1): the float16 view's 64 bins a binade
    run_case(backend, x, 2048, sorted=False, **ALGO)
    h = rng.standard_normal((1, 40003)).astype(np.float16)  # a tail of 3 elements past the vectors
    run_case(backend, h, 333, **ALGO)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_ties_across_the_kth_place_and_overflowing_candidates(backend, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(55)
    # A run of equal keys across the K-th place, in a bin that fits the candidates: ties ranked by
    # index over the whole row, winners above it spread over the row.
    x = np.where(rng.random((2, 8192)) < 0.05, rng.random((2, 8192)) + 2, 1.5).astype(np.float32)
    x[:, ::3] = rng.random((2, 2731)).astype(np.float32)  # the run of 1.5 is under a quarter of the row
    for k in (1, 300, 1000, 2048):
        for order in (True, "index", False):
            run_case(backend, x, k, sorted=order, **ALGO)
    # All equal: bin t holds the whole row (more than the candidates): the exact path over the row.
    equal = np.full((2, 8192), 3.0, np.float32)
    for order in (True, "index", False):
        run_case(backend, equal, 512, sorted=order, **ALGO)
    run_case(backend, equal.astype(np.float16), 2048, mode="smallest", **ALGO)
    # Distinct keys in one bin of the first digit (values 1 + tiny): overflow without ties.
    y = (1.25 + rng.random((1, 8192)) * 1e-4).astype(np.float32)
    run_case(backend, y, 700, **ALGO)
    run_case(backend, y, 700, mode="smallest", sorted="index", **ALGO)
    # 16-bit keys of few values: ties at the K-th place through the candidates.
    h = make_values(rng, dtype_of("bfloat16"), (2, 8192), "few_distinct")
    run_case(backend, h, 777, **ALGO)
    run_case(backend, h, 2000, mode="smallest", nan="largest", sorted="index", **ALGO)
    # 64-bit keys that differ in their lowest bits only: every digit refined, one first-digit bin.
    z = (np.int64(2**62) + np.arange(8192, dtype=np.int64) % 37).reshape(1, -1)
    run_case(backend, z, 700, **ALGO)
    run_case(backend, z[:, ::-1].copy(), 700, mode="smallest", **ALGO)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64"])
def test_integer_rows_of_a_narrow_range(backend, dtype, monkeypatch):
    # 32/64-bit integers count their first digit over the range of the row's first chunk: token
    # ids (one top-12-bit bin for the whole row), and rows whose later chunks reach past chunk 0's
    # range on both sides (clamped into bins 0 and 4095), and a row of 2 values.
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(59)
    dt = np.dtype(dtype)
    ids = rng.integers(0, 32000, (2, 16384)).astype(dt)
    run_case(backend, ids, 1000, **ALGO)
    run_case(backend, ids, 2048, mode="smallest", sorted="index", **ALGO)
    wide = rng.integers(100, 400, (1, 16384)).astype(dt)
    wide[0, 8192:] = rng.integers(0, 100_000, 8192).astype(dt)  # past chunk 0's range, both ways
    run_case(backend, wide, 1500, **ALGO)
    run_case(backend, wide, 1500, mode="smallest", **ALGO)
    two = np.where(rng.random((1, 8192)) < 0.5, 7, 9).astype(dt)
    run_case(backend, two, 2000, sorted=False, **ALGO)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_nan_rules_signed_zeros_subnormals_and_infinities(backend, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(56)
    x = signed_zeros_and_nans(rng, 4, 3000)  # row 1: zeros only, ties by index
    x[2, :100] = np.inf
    x[2, 100:200] = -np.inf
    x[3] = rng.standard_normal(3000).astype(np.float32) * np.float32(1e-40)  # subnormals (and -0.0)
    x[3, ::5] = np.nan
    for mode in ("largest", "smallest"):
        for nan in ("last", "largest"):
            for k in (5, 700):
                run_case(backend, x, k, mode=mode, nan=nan, **ALGO)
    d = x.astype(np.float64)
    d[3] = rng.standard_normal(3000) * 1e-310
    run_case(backend, d, 1000, mode="smallest", nan="largest", **ALGO)
    run_case(backend, d, 64, nan="largest", sorted="index", **ALGO)
    h = x.astype(np.float16)
    run_case(backend, h, 900, mode="smallest", nan="largest", sorted="index", **ALGO)
    edges = float_edge_values(np.float32).reshape(1, -1)  # every exponent, both signs, NaN payloads
    run_case(backend, edges, 1500, nan="largest", **ALGO)
    run_case(backend, edges, 1500, mode="smallest", **ALGO)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "uint64"])
def test_lengths_read_by_the_kernel(backend, dtype, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(57)
    x = make_values(rng, dtype_of(dtype), (6, 8192), "nan" if "float" in dtype else "few_distinct")
    lengths = np.array([8192, 0, 1, 511, 513, 5001])
    k = 512
    plan = cutopk.plan(
        to_backend(x, backend), k, lengths=to_backend(lengths, backend), backend=backend, **ALGO
    )
    assert plan.algorithm == "block_row" and plan.batch.startswith("lengths read by the kernels"), plan
    check_lengths(backend, x, k, lengths, (*LENGTHS_ORDERS, (False, "largest", "largest")), **ALGO)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_csr_segments_strided_rows_and_index_widths(backend, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(58)
    data = rng.standard_normal(12_000).astype(np.float32)
    data[::9] = np.nan
    offsets = np.array([0, 3, 2003, 2003, 4501, 12_000])  # unaligned starts, one empty segment
    for order, nan in ((True, "last"), ("index", "largest")):
        got = cutopk.segmented_top_k(
            to_backend(data, backend), offsets, 150, backend=backend, sorted=order, nan=nan, **ALGO
        )
        want = reference_segments(data, offsets, 150, sorted=order, nan=nan)
        assert_same_padded(tuple(to_host(a) for a in got), want, order=order)
    x = make_values(rng, np.int16, (3, 3000), "few_distinct")
    run_case(backend, x[:, ::-3], 200, **ALGO)  # a negative column stride: plain loads
    run_case(backend, x[:, 1:], 200, index_dtype=np.int32, **ALGO)  # rows 2 bytes off a 16-byte boundary
    run_case(backend, x.T, 2, axis=0, index_dtype=np.int64, **ALGO)  # rows along an outer axis: copied first
    f = rng.random((2, 3001)).astype(np.float64)
    run_case(backend, f[:, ::2], 333, mode="smallest", sorted="index", index_dtype=np.int32, **ALGO)


def test_capacity_refusals_and_traffic(monkeypatch):
    h100 = _dispatch.Device(shared_bytes=H100_SHARED)
    # Next to the histogram, the winners (K = 1024) and 4096 candidates: about 42.6K float32 keys
    # and 90K 16-bit ones on an H100 (resident: 52K and 104K, without candidates).
    assert 42_000 < _block_row.max_n(1024, 4, h100) < 43_000
    assert 89_000 < _block_row.max_n(1024, 2, h100) < 91_000
    assert _block_row.why_not(_block_row.max_n(1024, 4, h100), 1024, 4, h100) is None
    reason = _dispatch.why_not("block_row", _block_row.max_n(1024, 4, h100) + 1, 1024, 4, h100)
    assert reason is not None and "holds a row in shared memory" in reason
    assert (
        _dispatch.why_not("block_row", 8192, 2049, 4, h100)
        == "'block_row' selects at most k=2048, got k=2049"
    )
    # The candidates: a quarter of the row, rounded up to 16, at most 4096.
    assert [_block_row.candidate_cap(n) for n in (1, 100, 8192, 16384, 65536)] == [16, 32, 2048, 4096, 4096]
    assert _block_row.shared_bytes(32000, 1024, 4) == 16384 + 4096 + 4096 + 16384 + 16384 + 128000
    plan = _dispatch.plan(8, 32000, 1024, 4, h100, copy=False, algorithm="block_row")
    assert (plan.kernel, plan.block, plan.grid) == ("block_row_topk", 1024, 8)
    assert _dispatch.plan(8, 32000, 1024, 1, h100, copy=False, algorithm="block_row").block == 512
    use_device(monkeypatch, "numpy", H100_SHARED)  # plan() sees an H100's shared memory
    x = np.zeros((8, 32000), np.float32)
    p = cutopk.plan(x, 1024, backend="sim", algorithm="block_row")
    assert len(p.launches) == 1 and p.launches[0].global_bytes == 8 * 32000 * 4 + 8 * 1024 * (4 + 8)
