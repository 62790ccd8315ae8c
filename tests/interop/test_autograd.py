"""Autograd through cutopk.top_k on torch tensors: the values carry torch.topk's gradient on
every backend, the indices none; no gradient under no_grad, and ``out=`` refused for an input
that requires grad."""

from __future__ import annotations

import pytest
from support.backends import usable

import cutopk

torch = pytest.importorskip("torch", reason="autograd needs torch")

BACKENDS = ["numpy", "sim"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_carry_the_gradient(backend):
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    r = cutopk.top_k(x, 2, backend=usable(backend))
    assert r.values.requires_grad and not r.indices.requires_grad
    assert torch.autograd.gradcheck(lambda t: cutopk.top_k(t, 2, backend=backend).values, (x,))
    assert torch.autograd.gradcheck(lambda t: cutopk.top_k(t, 2, axis=0, mode="smallest").values, (x,))
    # The same gradient as torch.topk's.
    g = torch.randn(3, 2, dtype=torch.float64)
    (ours,) = torch.autograd.grad(cutopk.top_k(x, 2).values, x, g)
    (theirs,) = torch.autograd.grad(torch.topk(x, 2).values, x, g)
    assert torch.equal(ours, theirs)


def test_no_grad_and_out_with_grad():
    x = torch.randn(2, 4, requires_grad=True)
    with torch.no_grad():
        assert not cutopk.top_k(x, 1).values.requires_grad
    with pytest.raises(ValueError, match="out: cannot be used with an input that requires grad"):
        cutopk.top_k(x, 1, out=(torch.empty(2, 1), torch.empty(2, 1, dtype=torch.int64)))
