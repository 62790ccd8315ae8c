"""``torch.func`` transforms and forward-mode AD through cutopk's public functions (issue 49).

torch's custom-op autograd, which the operators use, is refused by ``torch.func.grad`` and has
no forward-mode formula (``jacfwd`` gave a zero Jacobian, silently). Under a transform the public
functions take the indices from the operator and gather the values from the input
(cutopk/_core/transforms.py): the derivatives are torch.topk's (the scatter to the selected
positions, none to padding), the values bit for bit the eager ones, and ``vmap`` runs the
batch without torch's per-sample fallback (whose warning reached the user)."""

from __future__ import annotations

import numpy as np
import pytest

import cutopk

torch = pytest.importorskip("torch", reason="torch.func needs torch")
func = torch.func


def _distinct(shape, seed=0):
    """float64 values without ties (torch.topk then orders exactly as cutopk)."""
    n = int(np.prod(shape))
    perm = np.random.default_rng(seed).permutation(n).astype(np.float64) / 7 - 3
    return torch.tensor(perm.reshape(shape))


def _ours(t):
    return cutopk.top_k(t, 3).values


def _torchs(t):
    return torch.topk(t, 3).values


@pytest.mark.parametrize(
    "transform",
    [
        lambda f, x: func.grad(lambda t: (f(t) ** 2).sum())(x),
        lambda f, x: func.vjp(f, x)[1](torch.ones(3, 3, dtype=x.dtype))[0],
        lambda f, x: func.jacrev(f)(x),
        lambda f, x: func.jacfwd(f)(x),
        lambda f, x: func.hessian(lambda t: (f(t) ** 3).sum())(x[0]),
        lambda f, x: func.vmap(func.grad(lambda t: f(t).sum()))(x[None].expand(2, 3, 8)),
    ],
    ids=["grad", "vjp", "jacrev", "jacfwd", "hessian", "vmap-grad"],
)
def test_every_transform_gives_torch_topks_derivatives(transform):
    x = _distinct((3, 8))
    got, want = transform(_ours, x), transform(_torchs, x)
    assert got.abs().sum() > 0 and torch.equal(got, want)


def test_forward_mode_ad_carries_the_tangent_of_the_selected_elements():
    from torch.autograd import forward_ad

    x, tangent = _distinct((3, 8)), _distinct((3, 8), seed=1)
    with forward_ad.dual_level():
        got = forward_ad.unpack_dual(cutopk.top_k(forward_ad.make_dual(x, tangent), 3).values)
        want = forward_ad.unpack_dual(torch.topk(forward_ad.make_dual(x, tangent), 3).values)
    assert got.tangent is not None and torch.equal(got.tangent, want.tangent)
    assert torch.equal(got.primal, want.primal)


def test_values_under_a_transform_are_the_eager_values_bit_for_bit():
    x = torch.tensor([[float("nan"), -0.0, 0.0, 1.0, -float("inf"), 1.0]], dtype=torch.float32)
    for kw in ({}, {"nan": "largest"}, {"mode": "smallest", "sorted": "index"}):
        eager = cutopk.top_k(x, 4, **kw)
        values, _ = func.vjp(lambda t, kw=kw: cutopk.top_k(t, 4, **kw).values, x)
        assert torch.equal(values.view(torch.int32), eager.values.view(torch.int32))


def test_padding_passes_no_derivative_in_either_mode():
    x, lengths = _distinct((3, 8)), torch.tensor([1, 0, 8])
    for jacobian in (func.jacrev, func.jacfwd):
        jac = jacobian(lambda t: cutopk.top_k(t, 3, lengths=lengths).values)(x)
        # row 0: one real element, then padding; row 1: padding only; row 2: three real ones
        assert jac.sum(dim=(2, 3)).tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]


def test_vmap_equals_the_batched_call_and_warns_of_no_fallback(capfd):
    xs = _distinct((4, 3, 10))
    lengths = torch.tensor([[1, 5, 10], [0, 2, 3], [10, 10, 10], [4, 4, 4]])
    for got, want in [
        (func.vmap(lambda t: cutopk.top_k(t, 2))(xs), cutopk.top_k(xs, 2)),
        (func.vmap(lambda t: cutopk.top_k(t, 2, axis=0), in_dims=2)(xs), cutopk.top_k(xs.movedim(2, 0), 2, axis=1)),
        (func.vmap(lambda t, n: cutopk.top_k(t, 3, lengths=n))(xs, lengths), cutopk.top_k(xs, 3, lengths=lengths)),
        (func.vmap(lambda n: cutopk.top_k(xs[0], 3, lengths=n))(lengths), cutopk.top_k(xs[0].expand(4, 3, 10), 3, lengths=lengths)),
    ]:  # fmt: skip
        assert torch.equal(got[0], want.values) and torch.equal(got[1], want.indices)
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds for array of dimension 2"):
        func.vmap(lambda t: cutopk.top_k(t, 2, axis=2))(xs)
    assert "performance drop" not in capfd.readouterr().err


def test_segmented_and_merge_under_transforms(capfd):
    data, offsets = _distinct((4, 10)), torch.tensor([0, 3, 3, 10])

    def scattered(d, o):  # the expected gradient of the values' sum
        got = cutopk.segmented_top_k(d, o, 2)
        where = (got.indices + o[:-1, None])[got.indices >= 0]
        return torch.zeros_like(d).index_put_((where,), torch.ones(where.shape, dtype=d.dtype))

    seg = func.vmap(lambda d: cutopk.segmented_top_k(d, offsets, 2))(data)
    assert torch.equal(seg[0][1], cutopk.segmented_top_k(data[1], offsets, 2).values)
    grads = func.vmap(func.grad(lambda d: cutopk.segmented_top_k(d, offsets, 2).values.sum()))(data)
    assert torch.equal(grads[2], scattered(data[2], offsets))
    jac = func.jacfwd(lambda d: cutopk.segmented_top_k(d, offsets, 2).values)(data[0])
    assert torch.equal(jac.sum(dim=(0, 1)), scattered(data[0], offsets))

    def merged(t):
        left, right = cutopk.top_k(t[:, :5], 2), cutopk.top_k(t[:, 5:], 2)
        return cutopk.merge_top_k([left, (right.values, right.indices + 5)], 3)

    x = _distinct((3, 10))
    want = merged(x)
    got = func.vmap(merged)(x[None].expand(2, 3, 10))
    assert torch.equal(got[0][1], want.values) and torch.equal(got[1][0], want.indices)
    for jacobian in (func.jacrev, func.jacfwd):
        jac = jacobian(lambda t: merged(t).values)(x)
        assert torch.equal(jac.sum(dim=(0, 1)), torch.zeros_like(x).scatter_(1, want.indices, 1.0))
    assert "performance drop" not in capfd.readouterr().err


OFF_THE_SCHEMA = [
    lambda t: func.grad(lambda u: cutopk.top_k(u, 2, sorted=np.True_).values.sum())(t),
    lambda t: func.vmap(lambda u: cutopk.top_k(u, 2, sorted=np.True_).values)(t),
    lambda t: func.vmap(
        lambda u: cutopk.top_k(u, 2, out=(torch.empty(2), torch.empty(2, dtype=torch.int64)))
    )(t),
    lambda t: func.grad(lambda u: cutopk.merge_top_k([(u, np.zeros((3, 8), np.int64))], 2).values.sum())(t),
]


def test_max_length_crosses_the_schema_under_a_transform():
    # max_length is the segmented operator's last argument: grad takes it like any other.
    x = _distinct((8,)).float()

    def total(max_length):
        return func.grad(
            lambda u: cutopk.segmented_top_k(u, [0, 4, 8], 2, max_length=max_length).values.sum()
        )(x)

    assert torch.equal(total(4), total(None)) and total(4).sum() == 4


@pytest.mark.parametrize("call", OFF_THE_SCHEMA, ids=["grad-sorted", "vmap-sorted", "vmap-out", "grad-merge"])
def test_arguments_the_operators_cannot_take_are_refused_by_name_under_a_transform(call):
    # torch.func refuses the autograd functions those arguments take, and a wrapped tensor has no
    # memory to read: the error says which arguments work.
    with pytest.raises(
        TypeError, match=r"under a torch\.func transform, cutopk takes only the arguments its torch"
    ):
        call(_distinct((3, 8)).float())
