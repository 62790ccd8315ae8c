"""Gradients where the registered torch operators cannot carry an argument: ``top_k`` with an
order given as a NumPy bool or an axis of an int subclass, ``segmented_top_k`` with a NumPy-bool
order (``max_length=`` is on its schema: tested here against the same scatter), ``merge_top_k`` with NumPy indices or a NumPy-bool order. Those calls take the
autograd functions of cutopk/_core/autograd.py: the same values and indices as the operator or
the operator-free path, the gradient of torch.topk (or the expected scatter, padding passing none), and
the operator-free path's errors; masked lengths and offsets are refused, never unmasked."""

from __future__ import annotations

import enum

import numpy as np
import pytest

import cutopk

torch = pytest.importorskip("torch", reason="autograd needs torch")


class Axis(enum.IntEnum):
    """An axis that is an int but not of type int: the operator's schema takes exact ints."""

    ROWS = 0
    COLUMNS = 1


def _route(result) -> str:
    return type(result.values.grad_fn).__name__


def _distinct(shape, seed=0):
    """float64 values without ties (torch.topk then orders exactly as cutopk)."""
    n = int(np.prod(shape))
    perm = np.random.default_rng(seed).permutation(n).astype(np.float64) / 7
    return torch.tensor(perm.reshape(shape), requires_grad=True)


@pytest.mark.parametrize(
    ("kw", "dim"),
    [({"sorted": np.True_}, 1), ({"axis": Axis.ROWS}, 0), ({"axis": Axis.COLUMNS, "sorted": np.True_}, 1)],
)
def test_top_k_arguments_off_the_schema_carry_torch_topks_gradient(kw, dim):
    x = _distinct((4, 6))
    r = cutopk.top_k(x, 3, **kw)
    assert _route(r) == "_TopKBackward" and not r.indices.requires_grad
    want = cutopk.top_k(x.detach(), 3, axis=dim)
    assert torch.equal(r.values.detach(), want.values) and torch.equal(r.indices, want.indices)
    g = torch.randn(r.values.shape, dtype=torch.float64)
    (ours,) = torch.autograd.grad(r.values, x, g)
    (theirs,) = torch.autograd.grad(torch.topk(x, 3, dim=dim).values, x, g)
    assert torch.equal(ours, theirs)
    assert torch.autograd.gradcheck(lambda t: cutopk.top_k(t, 3, **kw).values, (x,))


def test_top_k_with_lengths_off_the_schema_passes_no_gradient_to_padding():
    x = _distinct((4, 6), seed=1)
    lengths = np.array([0, 2, 6, 3])
    r = cutopk.top_k(x, 3, sorted=np.True_, lengths=lengths)
    assert _route(r) == "_TopKBackward"
    want = cutopk.top_k(x.detach(), 3, lengths=lengths)
    assert torch.equal(r.values.detach(), want.values) and torch.equal(r.indices, want.indices)
    assert r.indices[0].tolist() == [-1, -1, -1] and r.indices[1, 2] == -1
    g = torch.arange(1.0, 13.0, dtype=torch.float64).reshape(4, 3)
    (grad,) = torch.autograd.grad(r.values, x, g)
    expected = torch.zeros(4, 6, dtype=torch.float64)
    for row, col in zip(*np.nonzero(r.indices.numpy() >= 0), strict=True):
        expected[row, r.indices[row, col]] += g[row, col]
    assert torch.equal(grad, expected)


def test_integer_k_and_axis_of_numpy_types_cross_to_the_operator():
    x = _distinct((5, 4), seed=2)
    r = cutopk.top_k(x, np.int64(2), axis=np.int32(0))
    assert _route(r) == "GeneratedBackwardFor_cutopk_top_k_defaultBackward"
    want = cutopk.top_k(x.detach(), 2, axis=0)
    assert torch.equal(r.values.detach(), want.values) and torch.equal(r.indices, want.indices)
    g = torch.randn(2, 4, dtype=torch.float64)
    (ours,) = torch.autograd.grad(r.values, x, g)
    (theirs,) = torch.autograd.grad(torch.topk(x, 2, dim=0).values, x, g)
    assert torch.equal(ours, theirs)


MASKED = np.ma.masked_array(np.array([1, 2, 3]), mask=[False, True, False])


@pytest.mark.parametrize(
    ("kw", "error", "message"),
    [
        ({"index_dtype": "bogus"}, ValueError, r"^index_dtype: expected one of int64, int32, uint32, uint64, got 'bogus'$"),
        ({"index_dtype": np.int16}, ValueError, r"^index_dtype: expected one of int64, int32, uint32, uint64, got <class 'numpy\.int16'>$"),
        ({"lengths": [1, 2.5, 3]}, TypeError, r"^lengths: expected an integer array or a sequence of integers, got a list holding float 2\.5$"),
        ({"lengths": [1, 2, 6]}, ValueError, r"^lengths: expected 0 <= lengths\[r\] <= 5 \(the length of axis 1\), got values from 1 to 6$"),
        ({"lengths": MASKED}, TypeError, r"^lengths: expected an integer array without a mask, got a numpy\.ma\.MaskedArray"),
        ({"mode": None}, ValueError, r"^mode: expected one of 'largest', 'smallest', got None$"),
        ({"sorted": 1}, ValueError, r"^sorted: expected one of True, 'value', 'index', False, got 1$"),
    ],
)  # fmt: skip
def test_top_k_arguments_off_the_schema_keep_the_operator_free_paths_errors(kw, error, message):
    """With an input that requires grad as without: the same error, and no mask dropped."""
    x = torch.randn(3, 5, requires_grad=True)
    for a in (x, x.detach()):
        with pytest.raises(error, match=message):
            cutopk.top_k(a, 2, **kw)


def test_top_k_with_lengths_as_a_list_carries_the_gradient():
    """A list of lengths (off the operator's schema: the autograd route) as a NumPy array."""
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    r = cutopk.top_k(x, 2, lengths=[1, 5, 0])
    want = cutopk.top_k(x.detach(), 2, lengths=np.array([1, 5, 0]))
    assert torch.equal(r.values.detach(), want.values) and torch.equal(r.indices, want.indices)
    r.values.sum().backward()
    assert x.grad.sum().item() == 3.0  # one winner in row 0, two in row 1, none in row 2


DATA = [5.0, 1.0, 7.0, 3.0, 4.0, 9.0, 2.0, 8.0]  # no ties: gradcheck differentiates
OFFSETS = [0, 3, 3, 8]


OPERATOR = "GeneratedBackwardFor_cutopk_segmented_top_k_defaultBackward"


@pytest.mark.parametrize(
    ("kw", "route"),
    [({"max_length": 5}, OPERATOR), ({"max_length": np.int64(5)}, OPERATOR), ({"sorted": np.True_}, "_SegmentedBackward")],
)  # fmt: skip
def test_segmented_off_the_schema_scatters_to_offsets_plus_index(kw, route):
    data = torch.tensor(DATA, dtype=torch.float64, requires_grad=True)
    r = cutopk.segmented_top_k(data, OFFSETS, 2, **kw)
    assert _route(r) == route and not r.indices.requires_grad
    assert r.indices.tolist() == [[2, 0], [-1, -1], [2, 4]]
    assert r.values.tolist() == [[7.0, 5.0], [0.0, 0.0], [9.0, 8.0]]
    (r.values * torch.tensor([1.0, 10.0], dtype=torch.float64)).sum().backward()
    # Segment 0's winners at 0 + (2, 0), segment 2's at 3 + (2, 4); padding passes nothing.
    assert data.grad.tolist() == [10.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 10.0]
    assert torch.autograd.gradcheck(
        lambda t: cutopk.segmented_top_k(t, OFFSETS, 3, max_length=5).values,
        (data.detach().requires_grad_(),),
    )


def test_segmented_with_max_length_too_small_is_the_operator_free_paths_error():
    data = torch.tensor(DATA, requires_grad=True)
    with pytest.raises(
        ValueError, match=r"^offsets: expected segments of at most max_length=4 elements, got segment 2 of 5$"
    ):
        cutopk.segmented_top_k(data, OFFSETS, 2, max_length=4)


@pytest.mark.parametrize(
    ("offsets", "error", "message"),
    [
        ([], ValueError, r"^offsets: expected S \+ 1 >= 1 positions \(a CSR indptr\), got an empty array$"),
        ([0, 2.0, 8], TypeError, r"^offsets: expected an integer array, got dtype float64$"),
        (np.ma.masked_array([0, 3, 8], mask=[False, True, False]), TypeError, r"^offsets: expected an array without a mask"),
    ],
)  # fmt: skip
def test_segmented_offsets_off_the_schema_keep_the_operator_free_paths_errors(offsets, error, message):
    data = torch.tensor(DATA, requires_grad=True)
    for d in (data, data.detach()):
        with pytest.raises(error, match=message):
            cutopk.segmented_top_k(d, offsets, 2)


@pytest.mark.parametrize("max_length", [0, None])
def test_segmented_gradient_of_empty_data(max_length):
    """No element: every segment is padding, and the gradient is empty (no scatter)."""
    data = torch.zeros(0, dtype=torch.float64, requires_grad=True)
    r = cutopk.segmented_top_k(data, [0, 0, 0], 2, max_length=max_length)
    assert _route(r) == OPERATOR
    assert r.indices.tolist() == [[-1, -1], [-1, -1]] and r.values.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    r.values.sum().backward()
    assert data.grad.shape == (0,)


def _merge_parts(seed=3):
    """Three parts of a (3, 18) array without ties, as top_k gives them with lengths (so with
    padding), indices in the array's index space; their values require grad."""
    x = _distinct((3, 18), seed=seed).detach()
    parts = []
    for p, lengths in enumerate(([6, 1, 0], [2, 6, 0], [6, 0, 3])):
        r = cutopk.top_k(x[:, 6 * p : 6 * p + 6], 4, lengths=np.array(lengths))
        indices = torch.where(r.indices >= 0, r.indices + 6 * p, r.indices)
        parts.append((r.values.clone().requires_grad_(), indices))
    return parts


@pytest.mark.parametrize("how", ["numpy indices", "numpy bool order"])
def test_merge_off_the_schema_gives_the_operators_values_and_gradients(how):
    parts = _merge_parts()
    by_op = cutopk.merge_top_k(parts, 5)
    assert _route(by_op) == "GeneratedBackwardFor_cutopk_merge_top_k_defaultBackward"
    g = torch.arange(1.0, 16.0, dtype=torch.float64).reshape(3, 5)
    want = torch.autograd.grad(by_op.values, [v for v, _ in parts], g)
    if how == "numpy indices":
        r = cutopk.merge_top_k([(v, i.numpy()) for v, i in parts], 5)
    else:
        r = cutopk.merge_top_k(parts, 5, sorted=np.True_)
    assert _route(r) == "_MergeBackward" and not r.indices.requires_grad
    assert torch.equal(r.values.detach(), by_op.values) and torch.equal(
        torch.as_tensor(r.indices), by_op.indices
    )
    # Row 2 has 3 real candidates: 2 padding winners, last.
    assert sorted(r.indices[2, :3].tolist()) == [12, 13, 14] and r.indices[2, 3:].tolist() == [-1, -1]
    got = torch.autograd.grad(r.values, [v for v, _ in parts], g)
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)
    # Each output slot's gradient lands on the part entry of the winner's index; padding on none.
    for (_, indices), grad in zip(parts, got, strict=True):
        expected = torch.zeros_like(grad)
        for row, slot in zip(*np.nonzero(r.indices.numpy() >= 0), strict=True):
            expected[row] += torch.where(indices[row] == r.indices[row, slot], g[row, slot], 0.0)
        assert torch.equal(grad, expected)


def test_merge_gradient_of_rows_of_no_candidates():
    """A batch of zero rows: no candidate, an empty gradient for each part (no scatter)."""
    for numpy_indices in (True, False):
        values = [torch.zeros(0, 3, requires_grad=True), torch.zeros(0, 2, requires_grad=True)]
        indices = [np.zeros((0, 3), np.int64), np.zeros((0, 2), np.int64)]
        parts = [
            (v, i if numpy_indices else torch.from_numpy(i)) for v, i in zip(values, indices, strict=True)
        ]
        r = cutopk.merge_top_k(parts, 4)
        assert r.values.shape == (0, 4) and r.indices.shape == (0, 4)
        r.values.sum().backward()
        assert [v.grad.shape for v in values] == [(0, 3), (0, 2)]


def test_merge_parts_off_the_schema_keep_the_operator_free_paths_errors():
    (v0, i0), (v1, i1) = _merge_parts()[:2]
    with pytest.raises(
        TypeError,
        match=r"^parts\[1\]: expected a TopK result or a \(values, indices\) pair, got builtins\.tuple$",
    ):
        cutopk.merge_top_k([(v0, i0), (v1, i1, i1)], 2)
    with pytest.raises(ValueError, match=r"^mode: expected one of 'largest', 'smallest', got 1$"):
        cutopk.merge_top_k([(v0, i0), (v1, i1)], 2, mode=1)


def test_merge_off_the_schema_under_no_grad_records_nothing():
    parts = [(v, i.numpy()) for v, i in _merge_parts()]
    with torch.no_grad():
        r = cutopk.merge_top_k(parts, 5)
    assert r.values.grad_fn is None and not r.values.requires_grad
    want = cutopk.merge_top_k([(v.detach(), i) for v, i in parts], 5)
    assert torch.equal(r.values, want.values) and torch.equal(r.indices, want.indices)
