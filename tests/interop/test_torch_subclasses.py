"""Subclasses of torch.Tensor are torch tensors (issue 49): every entry point hands back
tensors of the class torch's own ops keep (``torch.topk`` keeps a plain subclass), never NumPy
arrays, and with ``requires_grad`` the values carry the gradient. A tensor is told by
``isinstance``, not by the module its class was defined in."""

from __future__ import annotations

import numpy as np
import pytest

import cutopk

torch = pytest.importorskip("torch", reason="these tests concern torch tensors")


class Tagged(torch.Tensor):
    """A subclass defined outside torch (its type's module is this test module)."""


def _tagged(shape, seed=0):
    n = int(np.prod(shape))
    perm = np.random.default_rng(seed).permutation(n).astype(np.float32).reshape(shape)
    return torch.from_numpy(perm).as_subclass(Tagged)


def test_top_k_gives_tensors_of_the_class_torch_topk_keeps():
    x = _tagged((3, 10))
    got, want = cutopk.top_k(x, 2), torch.topk(x, 2)
    assert type(got.values) is type(want.values) is Tagged
    assert type(got.indices) is type(want.indices) is Tagged
    assert torch.equal(got.values.as_subclass(torch.Tensor), want.values.as_subclass(torch.Tensor))
    assert torch.equal(got.indices.as_subclass(torch.Tensor), want.indices.as_subclass(torch.Tensor))


def test_top_k_of_a_subclass_that_requires_grad_carries_torch_topks_gradient():
    x = _tagged((3, 10)).requires_grad_()
    got = cutopk.top_k(x, 2)
    assert type(got.values) is Tagged and got.values.grad_fn is not None
    got.values.sum().backward()
    mine = x.grad.clone()
    x.grad = None
    torch.topk(x, 2).values.sum().backward()
    assert torch.equal(mine, x.grad)


def test_segmented_and_merge_of_subclasses_give_tensors_and_gradients():
    data = _tagged((10,)).requires_grad_()
    seg = cutopk.segmented_top_k(data, torch.tensor([0, 3, 10]), 2)
    assert type(seg.values) is Tagged and type(seg.indices) is Tagged
    seg.values.sum().backward()
    assert data.grad.sum().item() == 4.0
    left, right = cutopk.top_k(_tagged((2, 8), 1), 3), cutopk.top_k(_tagged((2, 8), 2), 3)
    merged = cutopk.merge_top_k([left, (right.values, right.indices + 8)], 3)
    assert type(merged.values) is Tagged and type(merged.indices) is Tagged


def test_a_subclass_as_lengths_and_as_out_is_a_tensor():
    x = torch.arange(12.0).reshape(3, 4)
    got = cutopk.top_k(x, 2, lengths=torch.tensor([1, 4, 0]).as_subclass(Tagged))
    assert got.indices.tolist() == [[0, -1], [3, 2], [-1, -1]]
    out = (torch.empty(3, 2).as_subclass(Tagged), torch.empty(3, 2, dtype=torch.int64).as_subclass(Tagged))
    got = cutopk.top_k(x, 2, out=out)
    assert got.values is out[0] and out[1].tolist() == [[3, 2]] * 3
