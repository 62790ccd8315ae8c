"""NumPy ``lengths`` and ``offsets`` beside a torch tensor that requires grad (issue 49): the
call crosses torch's operator, which takes them as tensors, and must take them as the call
without grad does: byte-swapped, read-only (no warning of torch's reaches the caller), and with
the operator-free path's errors for a dtype torch cannot hold."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import cutopk

torch = pytest.importorskip("torch", reason="autograd needs torch")


def _distinct(shape, seed=0):
    n = int(np.prod(shape))
    perm = np.random.default_rng(seed).permutation(n).astype(np.float64).reshape(shape) / 7
    return torch.tensor(perm, requires_grad=True)


def _read_only(arr):
    arr = arr.copy()
    arr.flags.writeable = False
    return arr


LENGTHS = np.array([1, 2, 3, 10])
SWAPPED_LENGTHS = [
    LENGTHS.astype(">i8"),
    LENGTHS.astype(">u4"),
    _read_only(LENGTHS),
    _read_only(LENGTHS.astype(">i2")),
]


@pytest.mark.parametrize(
    "lengths", SWAPPED_LENGTHS, ids=["big-i8", "big-u4", "read-only", "read-only-big-i2"]
)
def test_top_k_with_grad_takes_byte_swapped_and_read_only_lengths(lengths):
    x = _distinct((4, 10))
    want = cutopk.top_k(x.detach(), 3, lengths=LENGTHS)
    with warnings.catch_warnings():
        # torch's "not writable" warning must not reach the caller (torch gives it once per
        # process: each read-only case fails alone before the fix, the first one in a run)
        warnings.simplefilter("error")
        got = cutopk.top_k(x, 3, lengths=lengths)
    assert torch.equal(got.values.detach(), want.values) and torch.equal(got.indices, want.indices)
    got.values.sum().backward()
    expected = torch.zeros(4, 10, dtype=x.dtype)
    real = want.indices >= 0
    expected.scatter_add_(1, torch.where(real, want.indices, 0), real.to(x.dtype))
    assert torch.equal(x.grad, expected)


OFFSETS = np.array([0, 3, 10])


@pytest.mark.parametrize(
    "offsets",
    [OFFSETS.astype(">i8"), OFFSETS.astype(">u2"), _read_only(OFFSETS)],
    ids=["big-i8", "big-u2", "read-only"],
)
def test_segmented_with_grad_takes_byte_swapped_and_read_only_offsets(offsets):
    data = _distinct((10,))
    want = cutopk.segmented_top_k(data.detach(), OFFSETS, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cutopk.segmented_top_k(data, offsets, 2)
    assert torch.equal(got.values.detach(), want.values) and torch.equal(got.indices, want.indices)
    got.values.sum().backward()
    chosen = (want.indices + torch.from_numpy(OFFSETS[:-1])[:, None]).reshape(-1)
    assert torch.equal(torch.nonzero(data.grad).reshape(-1), chosen.sort().values)


@pytest.mark.parametrize("grad", [False, True])
def test_lengths_and_offsets_of_a_dtype_torch_cannot_hold_get_the_operator_free_paths_error(grad):
    x = _distinct((2, 4)).requires_grad_(grad)
    with pytest.raises(TypeError, match=r"^lengths: expected an integer array, got dtype object"):
        cutopk.top_k(x, 2, lengths=np.array([1, 2], dtype=object))
    with pytest.raises(TypeError, match=r"^offsets: expected an integer array, got dtype object"):
        cutopk.segmented_top_k(x[0], np.array([0, 4], dtype=object), 2)


def _mixed_parts(first_numpy: bool):
    """A requires-grad tensor part and a NumPy part (read-only, so torch would warn of it)."""
    values = torch.tensor([[5.0, 1.0, 3.0], [0.5, 2.5, 1.5]], requires_grad=True)
    tensor_part = (values, torch.tensor([[0, 1, 2], [0, 1, 2]]))
    numpy_part = (
        _read_only(np.array([[4.0, 2.0], [3.0, 0.0]], dtype=np.float32)),
        np.array([[3, 4], [3, 4]]),
    )
    return values, [numpy_part, tensor_part] if first_numpy else [tensor_part, numpy_part]


@pytest.mark.parametrize("first_numpy", [False, True], ids=["tensor-first", "numpy-first"])
def test_merge_with_grad_takes_numpy_parts_beside_tensors_as_without_grad(first_numpy):
    values, parts = _mixed_parts(first_numpy)
    plain = cutopk.merge_top_k([(v.detach() if isinstance(v, torch.Tensor) else v, i) for v, i in parts], 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cutopk.merge_top_k(parts, 3)
    # Values that carry a gradient are a tensor, whichever part comes first.
    assert isinstance(got.values, torch.Tensor) and got.values.grad_fn is not None
    assert got.values.tolist() == plain.values.tolist() == [[5.0, 4.0, 3.0], [3.0, 2.5, 1.5]]
    assert got.indices.tolist() == plain.indices.tolist() == [[0, 3, 2], [3, 1, 2]]
    got.values.sum().backward()
    assert values.grad.tolist() == [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]


@pytest.mark.parametrize("grad", [False, True])
def test_merge_takes_a_numpy_part_of_another_byte_order_with_or_without_grad(grad):
    # merge_top_k takes parts in either byte order (issue 49, item 9), beside tensors too.
    values, parts = _mixed_parts(False)
    native = cutopk.merge_top_k([(values.detach(), parts[0][1]), parts[1]], 3)
    parts[0] = (values.requires_grad_(grad), parts[0][1])
    parts[1] = (parts[1][0].astype(">f4"), parts[1][1].astype(">i8"))
    got = cutopk.merge_top_k(parts, 3)
    assert got.values.tolist() == native.values.tolist() and got.indices.tolist() == native.indices.tolist()
    assert (got.values.grad_fn is not None) == grad
