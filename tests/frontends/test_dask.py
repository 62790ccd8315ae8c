"""cutopk.dask against cutopk.top_k on the computed array, bit for bit: shapes (1-D to 3-D, every
axis, negative axes), chunkings (the axis in uneven chunks, shorter than k, unchunked), k from 0
to n, ties and NaNs that fall in different chunks, every mode, order, NaN policy and index dtype,
tree depths (split_every), eager errors, CuPy-backed chunks (GPU) and the simulator backend."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.backends import cuda_unavailable_reason, sim_unavailable_reason
from support.inputs import dtype_of, make_values
from support.reference import assert_same, bits

import cutopk

dask = pytest.importorskip("dask", reason="cutopk.dask needs dask[array]")
da = pytest.importorskip("dask.array", reason="cutopk.dask needs dask[array]")
import cutopk.dask as cdask  # noqa: E402

ORDERS = (True, "value", "index", False)


@pytest.fixture(autouse=True)
def _sync_scheduler():
    """The synchronous scheduler: deterministic, and fast for these small graphs."""
    with dask.config.set(scheduler="sync"):
        yield


def check(x: np.ndarray, chunks, k: int, *, split_every=None, index_only=False, **kw):
    """cutopk.dask.top_k on ``x`` in ``chunks`` against cutopk.top_k on ``x``, bit for bit, plus
    the lazy result's metadata and (``index_only``) the index-only variant."""
    d = da.from_array(x, chunks=chunks)
    lazy = cdask.top_k(d, k, split_every=split_every, **kw)
    expected = cutopk.top_k(x, k, **kw)
    axis = kw.get("axis", -1) % x.ndim
    index_dtype = np.dtype(kw.get("index_dtype", np.int64))
    assert lazy.values.dtype == x.dtype and lazy.indices.dtype == index_dtype
    assert lazy.values.shape == lazy.indices.shape == expected.values.shape
    out_chunks = tuple((k,) if i == axis else c for i, c in enumerate(d.chunks))
    assert lazy.values.chunks == lazy.indices.chunks == out_chunks
    assert isinstance(lazy.values._meta, np.ndarray) and lazy.indices._meta.dtype == index_dtype
    got = dask.compute(*lazy)
    assert_same(got, expected, index_dtype=index_dtype, order=kw.get("sorted", True), axis=axis)
    if kw.get("sorted", True) is not False:  # a fixed order: the very same arrays as top_k
        np.testing.assert_array_equal(got[1], expected.indices)
    if index_only:
        only = cdask.top_k_indices(d, k, split_every=split_every, **kw).compute()
        assert only.dtype == index_dtype
        np.testing.assert_array_equal(only, got[1])
    return got


@pytest.mark.parametrize("chunks", [37, 5, (3, 1, 20, 13), (1,) * 37, (36, 1)], ids=str)
def test_1d_every_mode_order_and_nan_policy(chunks):
    x = make_values(np.random.default_rng(0), np.float32, (37,), "nan")
    ks = itertools.cycle((0, 1, 2, 4, 21, 36, 37))  # 4 and 21 exceed some chunks' lengths
    for mode, order, nan in itertools.product(("largest", "smallest"), ORDERS[1:], ("last", "largest")):
        check(x, chunks, next(ks), mode=mode, sorted=order, nan=nan, split_every=3, index_only=True)


@pytest.mark.parametrize("chunks", [(5, 37), (2, 7), (1, (3, 1, 20, 13)), (3, (30, 7)), (5, 1)], ids=str)
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_2d_chunkings_and_axes(chunks, axis):
    x = make_values(np.random.default_rng(1), np.float64, (5, 37), "few_distinct")
    n = x.shape[axis]
    orders = itertools.cycle(ORDERS)
    for k in sorted({0, 1, 3, 9, n - 1, n} & set(range(n + 1))):
        check(x, chunks, k, axis=axis, sorted=next(orders), mode="smallest" if k % 2 else "largest")


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("mode", ["largest", "smallest"])
@pytest.mark.parametrize("nan", ["last", "largest"])
def test_3d_uneven_chunks_nan_policies(axis, mode, nan):
    x = make_values(np.random.default_rng(2), np.float16, (4, 9, 23), "nan")
    chunks = ((1, 3), (2, 2, 5), (4, 1, 11, 7))
    n = x.shape[axis]
    for k, order in zip(sorted({0, 1, 3, 6, n} & set(range(n + 1))), itertools.cycle(ORDERS)):
        check(x, chunks, k, axis=axis, mode=mode, nan=nan, sorted=order, split_every=2)


@pytest.mark.parametrize("split_every", [None, 2, 3, 100, {0: 2}, {0: 5}], ids=str)
def test_tree_depths(split_every):
    """40 blocks of 1 to 3 elements: 2 to 6 levels of merges, all ties across blocks."""
    sizes = tuple(np.random.default_rng(3).integers(1, 4, 40).tolist())
    x = make_values(np.random.default_rng(4), np.int16, (sum(sizes),), "few_distinct")
    for k, order in zip((1, 5, 17, 60), ORDERS, strict=True):
        check(x, (sizes,), k, sorted=order, split_every=split_every)


def test_ties_across_chunks_go_to_the_lower_global_index():
    x = np.array([1, 5, 3, 5, 5, 0, 5, 2, 5], dtype=np.int32)
    assert cdask.top_k_indices(da.from_array(x, chunks=2), 3).compute().tolist() == [1, 3, 4]
    assert cdask.top_k_indices(da.from_array(x[::-1].copy(), chunks=4), 3).compute().tolist() == [0, 2, 4]
    # All equal: the first k in every order, whatever the chunking and tree shape.
    ones = np.ones(50, dtype=np.uint8)
    for chunks, split_every, order in itertools.product((7, (1, 30, 19), 50), (2, 4), ORDERS):
        got = cdask.top_k_indices(
            da.from_array(ones, chunks=chunks), 9, sorted=order, split_every=split_every
        )
        assert sorted(got.compute().tolist()) == list(range(9))


def test_signed_zeros_and_nan_payloads_tie_across_chunks_and_keep_their_bits():
    raw = np.array([0x8000, 0x0000, 0x7E00, 0xFE01, 0x8000, 0x7C00, 0x0000, 0x7E05, 0xFC00], np.uint16)
    x = raw.view(np.float16)  # -0, +0, NaN, -NaN(payload), -0, +inf, +0, NaN(payload), -inf
    ks = itertools.cycle(range(len(x) + 1))
    for nan, mode, order in itertools.product(("last", "largest"), ("largest", "smallest"), ORDERS[1:]):
        for _ in range(3):
            values, _ = check(x, (2, 3, 1, 3), next(ks), nan=nan, mode=mode, sorted=order)
            # The values are the input's own elements: -0.0 stays -0.0, NaN payloads survive.
            assert set(bits(values).tolist()) <= set(raw.tolist())


@pytest.mark.parametrize("index_dtype", [np.int32, np.uint32, np.uint64, np.int64])
@pytest.mark.parametrize("dtype", ["int8", "uint64", "int64", "float32", "bfloat16"])
def test_dtypes_and_index_dtypes(dtype, index_dtype):
    try:
        dt = dtype_of(dtype)
    except KeyError:
        pytest.skip(f"{dtype} needs ml_dtypes")
    x = make_values(np.random.default_rng(5), dt, (3, 41), "extremes")
    for axis, order in zip((0, 1, 1), ORDERS[1:], strict=True):
        chunks = ((2, 1), (10, 10, 21))
        check(x, chunks, min(7, x.shape[axis]), axis=axis, sorted=order, index_dtype=index_dtype)


def test_empty_axes_and_k_zero():
    check(np.zeros((0, 10), np.float32), ((0,), (4, 6)), 3)  # no rows
    check(np.zeros((3, 0), np.float32), ((2, 1), (0,)), 0)  # empty axis: k must be 0
    check(np.zeros((3, 7), np.int32), (1, 3), 0, axis=0)


def test_unknown_chunk_sizes_off_the_axis_are_fine_on_the_axis_an_error():
    x = np.arange(40.0).reshape(8, 5) % 7
    d = da.from_array(x, chunks=(3, 2))
    rows = d[d[:, 0] > 2]  # NaN chunk sizes along axis 0
    got = cdask.top_k(rows, 2, axis=1)
    expected = cutopk.top_k(x[x[:, 0] > 2], 2, axis=1)
    assert_same(dask.compute(*got), expected)
    with pytest.raises(ValueError, match="length of axis 0 is unknown"):
        cdask.top_k(rows, 2, axis=0)


@given(
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=8),
    rows=st.integers(1, 3),
    k=st.integers(0, 80),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from(["int8", "float16", "uint64", "float32", "float64"]),
    dist=st.sampled_from(["few_distinct", "nan", "zeros", "extremes", "all_equal"]),
    order=st.sampled_from(ORDERS),
    mode=st.sampled_from(["largest", "smallest"]),
    nan=st.sampled_from(["last", "largest"]),
    split_every=st.integers(2, 5),
)
def test_property_random_chunkings(sizes, rows, k, seed, dtype, dist, order, mode, nan, split_every):
    n = sum(sizes)
    x = make_values(np.random.default_rng(seed), np.dtype(dtype), (rows, n), dist)
    kw = {"sorted": order, "mode": mode, "nan": nan}
    check(x, ((1,) * rows, tuple(sizes)), min(k, n), split_every=split_every, **kw)
    check(x.T.copy(), (tuple(sizes), rows), min(k, n), axis=0, split_every=split_every, **kw)


BAD_ARGUMENTS = [
    ({"k": 11}, ValueError),
    ({"k": -1}, ValueError),
    ({"k": 2.0}, TypeError),
    ({"k": True}, TypeError),
    ({"axis": 2}, np.exceptions.AxisError),
    ({"axis": 1.0}, TypeError),
    ({"mode": "max"}, ValueError),
    ({"sorted": 1}, ValueError),
    ({"nan": "first"}, ValueError),
    ({"index_dtype": np.int16}, ValueError),
    ({"backend": "cuda"}, TypeError),
    ({"backend": "gpu"}, ValueError),
    ({"algorithm": "radix"}, ValueError),
    ({"algorithm": 3}, ValueError),
]


@pytest.mark.parametrize(("bad", "error"), BAD_ARGUMENTS, ids=str)
def test_errors_are_eager_and_match_top_k(bad, error):
    x = np.arange(20.0).reshape(2, 10)

    def must_not_run(block):
        raise AssertionError("the graph was computed")

    d = da.from_array(x, chunks=(1, 3)).map_blocks(must_not_run, dtype=x.dtype)
    kw = {"k": 2, **bad}
    k = kw.pop("k")
    with pytest.raises(error) as expected:
        cutopk.top_k(x, k, **kw)
    for func in (cdask.top_k, cdask.top_k_indices):
        with pytest.raises(error) as got:
            func(d, k, **kw)
        assert str(got.value) == str(expected.value)


def test_unsupported_dtype_and_non_dask_input():
    with pytest.raises(TypeError, match="unsupported dtype bool"):
        cdask.top_k(da.from_array(np.zeros(4, bool), chunks=2), 1)
    with pytest.raises(TypeError, match=r"expected a dask\.array\.Array, got numpy\.ndarray"):
        cdask.top_k(np.arange(4), 1)


def test_algorithm_forced_on_the_chunks():
    x = make_values(np.random.default_rng(6), np.float32, (3, 50), "uniform")
    check(x, (2, 7), 10, algorithm="select", backend="numpy")


def test_graph_is_lazy_and_computes_values_and_indices_in_one_pass():
    calls = []

    def count(block):
        if block.size:  # not Dask's probe of the output type
            calls.append(block.shape)
        return block

    x = np.arange(30.0)
    d = da.from_array(x, chunks=7).map_blocks(count, dtype=x.dtype)
    top = cdask.top_k(d, 3)
    assert calls == []
    _, indices = dask.compute(*top)
    assert len(calls) == 5 and indices.tolist() == [29, 28, 27]


def test_simulator_backend_in_the_chunks():
    reason = sim_unavailable_reason()
    if reason:
        pytest.skip(f"the CPU simulator is unavailable: {reason}")
    x = make_values(np.random.default_rng(7), np.float32, (2, 40), "few_distinct")
    for order in ORDERS:
        check(x, (1, (9, 31)), 12, backend="sim", sorted=order)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_cupy_backed_chunks(dtype):
    reason = cuda_unavailable_reason()
    if reason:
        pytest.skip(f"needs a CUDA GPU: {reason}")
    import cupy

    x = make_values(np.random.default_rng(8), np.dtype(dtype), (6, 3000), "few_distinct")
    d = da.from_array(x, chunks=(4, 700)).map_blocks(cupy.asarray)
    for order, mode in itertools.product(ORDERS, ("largest", "smallest")):
        top = cdask.top_k(d, 50, sorted=order, mode=mode, split_every=2)
        assert isinstance(top.values._meta, cupy.ndarray) and isinstance(top.indices._meta, cupy.ndarray)
        values, indices = dask.compute(*top)
        assert isinstance(values, cupy.ndarray) and isinstance(indices, cupy.ndarray)
        expected = cutopk.top_k(x, 50, sorted=order, mode=mode)
        assert_same((values.get(), indices.get()), expected, order=order)


def test_masked_dask_arrays_are_refused_when_the_graph_is_built():
    """Issue 19 item 8: the chunk type (``_meta``) says the array is masked, so the error comes
    at once, not at ``.compute()``."""
    x = np.array([[5.0, 1.0, 9.0, 3.0], [2.0, 8.0, 4.0, 7.0]])
    masked = da.ma.masked_greater(da.from_array(x, chunks=(1, 2)), 6.0)  # 9 and 8, 7 masked out
    assert isinstance(masked._meta, np.ma.MaskedArray)
    for func in (cdask.top_k, cdask.top_k_indices):
        with pytest.raises(TypeError, match=r"^a: expected a Dask array without a mask.*MaskedArray"):
            func(masked, 2)
    # Filled, as the message says, it is an ordinary array.
    filled = da.ma.filled(masked, -np.inf)
    assert cdask.top_k_indices(filled, 2).compute().tolist() == [[0, 3], [2, 0]]


def test_distributed_local_cluster_of_worker_processes(tmp_path, monkeypatch):
    """Under dask.distributed with two worker processes: the graph's tasks pickle, run on the
    workers and give exactly cutopk.top_k's answer. The workers' scratch folder is the test's
    own (it stayed behind in the temp folder as ``dask-scratch-space``), and nothing is left in
    the temp folder, a fresh one here."""
    distributed = pytest.importorskip(
        "distributed", reason="needs dask.distributed (pip install distributed)"
    )
    import os
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the workers' temp folder, and this process's:
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again

    rng = np.random.default_rng(9)
    x = make_values(rng, np.float32, (5, 203), "nan")
    y = make_values(rng, np.int64, (71, 3), "few_distinct")
    cases = [
        (x, (2, (50, 3, 100, 50)), 40, {"sorted": True, "mode": "largest", "nan": "largest"}),
        (x, (5, 29), 7, {"sorted": "index", "mode": "smallest"}),
        (y, (10, 3), 25, {"axis": 0, "sorted": False, "index_dtype": np.int32}),
    ]
    lazy = [cdask.top_k(da.from_array(a, chunks=c), k, split_every=2, **kw) for a, c, k, kw in cases]
    with (
        # The scratch folder of the workers and of the scheduler (LocalCluster's local_directory
        # is the workers' alone): the test's own.
        dask.config.set({"temporary-directory": str(tmp_path / "dask")}),
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        distributed.Client(cluster, timeout="60s") as client,
    ):
        client.wait_for_workers(2, timeout=60)
        worker_pids = set(client.run(os.getpid).values())
        assert len(worker_pids) == 2 and os.getpid() not in worker_pids
        with distributed.get_task_stream(client) as stream:
            # client.compute, not dask.compute: the autouse fixture makes "sync" the default.
            futures = client.compute([part for top in lazy for part in top])
            results = [future.result(timeout=120) for future in futures]
        ran_on = {task["worker"] for task in stream.data if "cutopk" in str(task["key"])}
        assert ran_on, "no cutopk task ran on a worker"
    assert sorted(p.name for p in temp.iterdir()) == []
    for (a, _, k, kw), values, indices in zip(cases, results[::2], results[1::2], strict=True):
        expected = cutopk.top_k(a, k, **kw)
        axis = kw.get("axis", -1) % a.ndim
        assert_same(
            (values, indices),
            expected,
            index_dtype=kw.get("index_dtype", np.int64),
            order=kw["sorted"],
            axis=axis,
        )


@pytest.mark.parametrize("split_every", [1, 0, -3, True, 2.0, "4", {1: 1}, {5: 4}, {True: 4}, [4]], ids=repr)
def test_split_every_that_cannot_drive_a_tree_reduction_is_refused_at_once(split_every):
    x = da.from_array(np.arange(40.0).reshape(4, 10), chunks=(2, 3))
    with pytest.raises(
        ValueError, match=r"split_every: expected None, an integer >= 2 or a dict \{axis: integer >= 2\}"
    ):
        cdask.top_k(x, 3, split_every=split_every)


@pytest.mark.parametrize("split_every", [2, np.int64(3), {1: 2}, {-1: 5}, None], ids=repr)
def test_split_every_integers_and_dicts_are_accepted(split_every):
    x = da.from_array(np.arange(40.0).reshape(4, 10), chunks=(2, 3))
    values, indices = dask.compute(*cdask.top_k(x, 3, split_every=split_every), scheduler="sync")
    assert indices.tolist() == [[9, 8, 7]] * 4 and values[0].tolist() == [9.0, 8.0, 7.0]


def check_lengths(x: np.ndarray, chunks, k: int, lengths, *, split_every=None, **kw):
    """cutopk.dask.top_k with ``lengths`` against cutopk.top_k with the same lengths, bit for bit."""
    d = da.from_array(x, chunks=chunks)
    expected = cutopk.top_k(x, k, lengths=np.asarray(lengths), **kw)
    axis = kw.get("axis", -1) % x.ndim
    index_dtype = np.dtype(kw.get("index_dtype", np.int64))
    for as_given in (lengths, np.asarray(lengths).tolist(), da.from_array(np.asarray(lengths), chunks=2)):
        lazy = cdask.top_k(d, k, lengths=as_given, split_every=split_every, **kw)
        assert lazy.values.shape == expected.values.shape
        got = dask.compute(*lazy)
        assert_same(got, expected, index_dtype=index_dtype, order=kw.get("sorted", True), axis=axis)
        if kw.get("sorted", True) is not False:
            np.testing.assert_array_equal(got[1], expected.indices)
    only = cdask.top_k_indices(d, k, lengths=lengths, **kw).compute()
    np.testing.assert_array_equal(np.sort(only, axis=axis), np.sort(expected.indices, axis=axis))


@pytest.mark.parametrize("chunks", [(2, 5), (1, 37), (5, (3, 1, 20, 13)), (3, (36, 1))], ids=str)
def test_lengths_give_top_k_of_each_rows_prefix(chunks):
    """Issue 49 (11): lengths (0, below k, k, in one chunk, across chunks, the whole row) chunked
    with the array: each row's answer is top_k's with those lengths, padding included."""
    x = make_values(np.random.default_rng(20), np.float32, (5, 37), "few_distinct")
    lengths = np.array([0, 4, 6, 21, 37])
    orders = itertools.cycle(ORDERS)
    for k, index_dtype in ((6, np.int64), (1, np.int32), (15, np.int64), (0, np.int64)):
        check_lengths(x, chunks, k, lengths, sorted=next(orders), index_dtype=index_dtype, split_every=2)
    check_lengths(x, chunks, 6, lengths, mode="smallest", nan="largest")


def test_lengths_along_an_outer_axis_and_of_a_1d_array():
    x = make_values(np.random.default_rng(21), np.int16, (30, 2, 3), "ties")
    lengths = np.array([[0, 30, 7], [12, 1, 29]])
    check_lengths(x, ((7, 23), 1, (2, 1)), 5, lengths, axis=0)
    one = make_values(np.random.default_rng(22), np.float64, (40,), "nan")
    got = dask.compute(*cdask.top_k(da.from_array(one, chunks=9), 8, lengths=np.array(23)))
    assert_same(got, cutopk.top_k(one, 8, lengths=np.array(23)))


@pytest.mark.parametrize(
    ("lengths", "kw"),
    [
        (np.array([1, 11]), {}),
        ([-1, 2], {}),
        ([1, 2, 3], {}),
        ([1.0, 2.0], {}),
        ([True, 2], {}),
        (np.array([1, 2]), {"index_dtype": np.uint32}),
        (np.ma.array([1, 4], mask=[False, True]), {}),
    ],
    ids=str,
)
def test_bad_lengths_are_eager_errors_with_top_k_messages(lengths, kw):
    x = np.arange(20.0).reshape(2, 10)

    def must_not_run(block):
        raise AssertionError("the graph was computed")

    d = da.from_array(x, chunks=(1, 3)).map_blocks(must_not_run, dtype=x.dtype)
    with pytest.raises((TypeError, ValueError)) as expected:
        cutopk.top_k(x, 2, lengths=lengths, **kw)
    for func in (cdask.top_k, cdask.top_k_indices):
        with pytest.raises(type(expected.value)) as got:
            func(d, 2, lengths=lengths, **kw)
        assert str(got.value) == str(expected.value)


def test_dask_lengths_are_checked_by_dtype_and_shape_at_once_by_value_when_computed():
    x = np.arange(20.0).reshape(2, 10)
    d = da.from_array(x, chunks=(1, 3))
    with pytest.raises(TypeError, match=r"^lengths: expected an integer array, got dtype float64$"):
        cdask.top_k(d, 2, lengths=da.from_array(np.array([1.0, 2.0])))
    with pytest.raises(ValueError, match=r"^lengths: expected shape \(2,\) .* got \(3,\)$"):
        cdask.top_k(d, 2, lengths=da.from_array(np.array([1, 2, 3])))
    lazy = cdask.top_k(d, 2, lengths=da.from_array(np.array([1, 11]), chunks=1))
    with pytest.raises(
        ValueError, match=r"lengths: expected 0 <= lengths\[r\] <= 10 .* got values from 11 to 11"
    ):
        dask.compute(*lazy)


@pytest.mark.gpu
def test_lengths_with_cupy_backed_chunks():
    """Host lengths with CuPy chunks, and lengths in CuPy chunks (on the device: a row out of
    range comes back as all padding, as top_k gives it)."""
    reason = cuda_unavailable_reason()
    if reason:
        pytest.skip(f"needs a CUDA GPU: {reason}")
    import cupy

    x = make_values(np.random.default_rng(23), np.float32, (4, 900), "few_distinct")
    d = da.from_array(x, chunks=(2, 300)).map_blocks(cupy.asarray)
    lengths = np.array([0, 5, 450, 900])
    expected = cutopk.top_k(x, 12, lengths=lengths)
    for as_given in (lengths, da.from_array(lengths, chunks=3).map_blocks(cupy.asarray)):
        values, indices = dask.compute(*cdask.top_k(d, 12, lengths=as_given, split_every=2))
        assert isinstance(values, cupy.ndarray)
        assert_same((values.get(), indices.get()), expected)
    bad = da.from_array(np.array([-3, 5, 901, 900]), chunks=2).map_blocks(cupy.asarray)
    values, indices = dask.compute(*cdask.top_k(d, 12, lengths=bad))
    want = cutopk.top_k(x, 12, lengths=np.array([0, 5, 0, 900]))
    assert_same((values.get(), indices.get()), want)
