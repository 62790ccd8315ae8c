"""``top_k(..., lengths=...)`` (docs/SPEC.md): each row's own valid length, padding past it,
against an independent per-row reference, on every backend and forced algorithm."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, require, sim_unavailable_reason, to_backend, to_host, usable
from support.inputs import make_values
from support.reference import reference_with_lengths

import cutopk

ALGORITHMS = [
    "auto",
    "warp_row",
    "warp_radix",
    "bitonic",
    "radix",
    "resident",
    "cluster",
    "split",
    "multiblock",
    "sort",
]


def expected_rows(x, k, lengths, **kw):
    """The reference with lengths (tests/support/reference.py) on the rows of ``x`` (last axis), in the
    batch shape."""
    rows = x.reshape(-1, x.shape[-1])
    values, indices = reference_with_lengths(rows, k, lengths.reshape(-1), **kw)
    return values.reshape(*x.shape[:-1], k), indices.reshape(*x.shape[:-1], k)


def check(x, k, lengths, backend, **kw):
    got = cutopk.top_k(x, k, lengths=lengths, backend=backend, **kw)
    ref_kw = {key: v for key, v in kw.items() if key not in ("algorithm",)}
    order = ref_kw.pop("sorted", True)
    want = expected_rows(x, k, lengths, sorted=True if order is False else order, **ref_kw)
    if order is False:  # any order of the selected set, padding last: compare by index
        rank = np.where(got.indices < 0, np.iinfo(np.int64).max, got.indices).argsort(axis=-1, kind="stable")
        got = (np.take_along_axis(got.values, rank, -1), np.take_along_axis(got.indices, rank, -1))
        rank = np.where(want[1] < 0, np.iinfo(np.int64).max, want[1]).argsort(axis=-1, kind="stable")
        want = (np.take_along_axis(want[0], rank, -1), np.take_along_axis(want[1], rank, -1))
    np.testing.assert_array_equal(got[1], want[1])
    assert got[0].dtype == x.dtype
    np.testing.assert_array_equal(got[0].view(np.uint8), want[0].view(np.uint8))


@pytest.mark.parametrize("backend", ["numpy", "sim"])
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.float64])
@pytest.mark.parametrize("order", [True, "index", False])
def test_random_lengths_including_0_1_below_k_and_n(backend, dtype, order):
    rng = np.random.default_rng(11)
    x = make_values(rng, dtype, (9, 300), "ties")
    lengths = np.array([0, 1, 5, 8, 9, 150, 299, 300, 37])
    for mode in ("largest", "smallest"):
        for nan in ("last", "largest"):
            check(x, 8, lengths, usable(backend), mode=mode, nan=nan, sorted=order)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_algorithm_on_the_simulator(algorithm):
    rng = np.random.default_rng(12)
    x = make_values(rng, np.float32, (4, 1000), "few_distinct")
    lengths = np.array([1000, 0, 3, 700])
    k = 8 if algorithm != "bitonic" else 20
    check(x, k, lengths, usable("sim"), algorithm=algorithm)


@pytest.mark.parametrize("backend", ["numpy", "sim"])
def test_other_axes_batch_shapes_and_out(backend):
    rng = np.random.default_rng(13)
    x = make_values(rng, np.float32, (3, 40, 2), "uniform")  # select along axis 1
    lengths = np.array([[40, 0], [3, 39], [1, 20]], dtype=np.int32)
    got = cutopk.top_k(x, 4, axis=1, lengths=lengths, backend=usable(backend))
    want = expected_rows(np.moveaxis(x, 1, -1), 4, lengths)
    np.testing.assert_array_equal(np.moveaxis(got.indices, 1, -1), want[1])
    out = (np.empty((3, 4, 2), np.float32), np.empty((3, 4, 2), np.int32))
    r = cutopk.top_k(x, 4, axis=1, lengths=lengths, index_dtype=np.int32, backend=backend, out=out)
    assert r.values is out[0] and (out[1] == got.indices).all()


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_a_1d_input_with_0d_lengths_gives_a_1d_result(backend):
    require(backend)
    x = to_backend(np.arange(10.0), backend)
    lengths = to_backend(np.array(7), backend)
    r = cutopk.top_k(x, 3, lengths=lengths, backend=backend)
    assert r.values.shape == r.indices.shape == (3,)
    assert to_host(r.indices).tolist() == [6, 5, 4] and to_host(r.values).tolist() == [6.0, 5.0, 4.0]
    short = cutopk.top_k(x, 3, lengths=to_backend(np.array(1), backend), backend=backend)
    assert to_host(short.indices).tolist() == [0, -1, -1]


def test_non_native_input_keeps_its_dtype():
    x = np.array([[1, 9, 3, 7]], dtype=">f4")
    r = cutopk.top_k(x, 3, lengths=np.array([2]))
    assert (
        r.values.dtype == x.dtype and r.values.tolist() == [[9, 1, 0]] and r.indices.tolist() == [[1, 0, -1]]
    )


@pytest.mark.parametrize(
    ("lengths", "kw", "error", "message"),
    [
        (np.array([1, 5]), {}, ValueError, r"lengths: expected 0 <= lengths\[r\] <= 4 .* got values from 1 to 5"),
        (np.array([-1, 2]), {}, ValueError, "got values from -1 to 2"),
        (np.array([1, 2, 3]), {}, ValueError, r"lengths: expected shape \(2,\)"),
        (np.array([1.0, 2.0]), {}, TypeError, "lengths: expected an integer array, got dtype float64"),
        ([1, 5], {}, ValueError, r"lengths: expected 0 <= lengths\[r\] <= 4 .* got values from 1 to 5"),
        ((-1, 2), {}, ValueError, "got values from -1 to 2"),
        ([1, 2**70], {}, ValueError, f"got values from 1 to {2**70}"),
        ([1, 2, 3], {}, ValueError, r"lengths: expected shape \(2,\)"),
        ([1.0, 2.0], {}, TypeError, "lengths: expected an integer array or a sequence of integers, got a list holding float"),
        ([True, 2], {}, TypeError, "lengths: .* got a list holding bool True"),
        ((np.True_, np.False_), {}, TypeError, "lengths: .* got a tuple holding bool"),
        ([1, "2"], {}, TypeError, "lengths: .* got a list holding str '2'"),
        ([1, 2], {"index_dtype": np.uint32}, ValueError, "index_dtype: with lengths, padding is index -1"),
        (np.ma.array([1, 4], mask=[False, True]), {}, TypeError, "lengths: expected an integer array without a mask, got a numpy.ma.MaskedArray"),
        (np.array([1, 2]), {"index_dtype": np.uint32}, ValueError, "index_dtype: with lengths, padding is index -1"),
    ],
)  # fmt: skip
def test_errors(lengths, kw, error, message):
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(error, match=message):
        cutopk.top_k(x, 2, lengths=lengths, **kw)
    with pytest.raises(error, match=message):
        cutopk.plan(x, 2, lengths=lengths, **kw)


@pytest.mark.parametrize("backend", ["numpy", "sim"])
def test_lengths_as_a_sequence_act_as_a_numpy_array(backend):
    """Issue 49 (10): lists and tuples (nested for a batch of several axes) of ints, NumPy ints
    among them, are lengths on the host, as docs/SPEC.md allows."""
    rng = np.random.default_rng(14)
    x = make_values(rng, np.float32, (3, 2, 50), "ties")
    lengths = np.array([[0, 50], [3, 49], [7, 1]])
    want = cutopk.top_k(x, 5, lengths=lengths, backend=usable(backend))
    for given in (
        lengths.tolist(),
        tuple(map(tuple, lengths.tolist())),
        [[0, np.int32(50)], (3, 49), [7, 1]],
    ):
        got = cutopk.top_k(x, 5, lengths=given, backend=usable(backend))
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.values.view(np.uint32), want.values.view(np.uint32))
    check(x.reshape(6, 50), 5, lengths.reshape(6), usable(backend))  # the reference agrees
    empty = cutopk.top_k(np.zeros((0, 4), np.float32), 2, lengths=[], backend=usable(backend))
    assert empty.indices.shape == (0, 2)


def test_plan_names_the_masked_copy():
    p = cutopk.plan(np.zeros((2, 400), np.float32), 3, lengths=np.array([5, 400]))
    assert p.copies[0].startswith("input: rows copied with elements past each row's length masked")


def test_torch_lengths_and_gradient():
    torch = pytest.importorskip("torch", reason="torch inputs")
    x = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([6, 1, 0])
    r = cutopk.top_k(x, 2, lengths=lengths)
    assert r.indices[1].tolist()[1] == -1 and r.indices[2].tolist() == [-1, -1]
    assert torch.autograd.gradcheck(lambda t: cutopk.top_k(t, 2, lengths=lengths).values, (x,))


@pytest.mark.parametrize("backend", ["numpy", "sim"])
def test_torch_out_tensors_are_returned_with_lengths(backend):
    """``out=`` torch tensors come back as themselves on both routes (kernel and masked copy)."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    x = torch.from_numpy(make_values(np.random.default_rng(14), np.float32, (3, 50), "uniform"))
    lengths = np.array([50, 2, 0])
    out = (torch.empty(3, 4), torch.empty(3, 4, dtype=torch.int64))
    got = cutopk.top_k(x, 4, lengths=lengths, backend=usable(backend), out=out)
    assert got.values is out[0] and got.indices is out[1]
    want = expected_rows(x.numpy(), 4, lengths)
    np.testing.assert_array_equal(out[1].numpy(), want[1])
    np.testing.assert_array_equal(out[0].numpy(), want[0])


def test_no_rows_with_no_lengths_give_empty_results():
    r = cutopk.top_k(np.zeros((0, 5)), 2, lengths=np.zeros(0, np.int64))
    assert r.values.shape == r.indices.shape == (0, 2)


def test_cpu_torch_lengths_for_a_numpy_input_act_as_numpy_lengths():
    torch = pytest.importorskip("torch")
    x = np.arange(10.0).reshape(2, 5)
    got = cutopk.top_k(x, 2, lengths=torch.tensor([3, 5]))
    want = cutopk.top_k(x, 2, lengths=np.array([3, 5]))
    assert np.array_equal(got.values, want.values) and np.array_equal(got.indices, want.indices)
    assert got.indices.tolist() == [[2, 1], [4, 3]]


@pytest.mark.skipif(sim_unavailable_reason() is not None, reason=str(sim_unavailable_reason()))
def test_plan_with_lengths_read_by_the_kernels_says_so():
    p = cutopk.plan(np.arange(10.0).reshape(2, 5), 2, lengths=np.array([3, 5]), backend="sim")
    assert p.batch == "lengths read by the kernels, rows planned as 5 long (the longest, rounded up)"
