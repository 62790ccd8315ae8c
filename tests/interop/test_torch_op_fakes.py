"""The fake implementations of ``torch.ops.cutopk.segmented_top_k`` and ``merge_top_k`` (what
meta tensors and torch.compile see): every misfit the operator-free path refuses without reading data is
refused with the operator-free path's message, never answered with a made-up shape; the operators
called directly with as many values as indices, or not; and a bad ``sorted`` given to an
operator, answered with the choices its schema takes."""

from __future__ import annotations

import pytest

import cutopk

torch = pytest.importorskip("torch", reason="the torch operators need torch")


def _both(device: str):
    """Constructors of float32 values and int64 indices on ``device``."""
    return (
        lambda *shape: torch.zeros(*shape, device=device),
        lambda *shape: torch.zeros(*shape, device=device, dtype=torch.int64),
    )


def _raises_alike(call, error, message):
    """``call(device)`` raises ``error`` matching ``message`` on CPU tensors (the operator-free path) and
    on meta tensors (the operator's fake implementation)."""
    for device in ("cpu", "meta"):
        with pytest.raises(error, match=message):
            call(device)


SEGMENTED_MISFITS = [
    (lambda v, i: (v(2, 3), i(3)), ValueError, r"^data: expected a 1-D array, got shape \(2, 3\)$"),
    (lambda v, i: (v(6), v(3)), TypeError, r"^offsets: expected an integer array, got dtype (torch\.)?float32$"),
    (lambda v, i: (v(6), i(3, 2)), ValueError, r"^offsets: expected a 1-D array of S \+ 1 positions, got shape \(3, 2\)$"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "error", "message"), SEGMENTED_MISFITS)
def test_segmented_misfits_are_refused_on_meta_tensors_as_on_the_cpu(args, error, message):
    _raises_alike(lambda device: cutopk.segmented_top_k(*args(*_both(device)), 1), error, message)


def test_segmented_on_meta_tensors_gives_the_shapes():
    v, i = _both("meta")
    r = cutopk.segmented_top_k(v(6), i(4), 2, index_dtype=torch.int32)
    assert r.values.device.type == "meta" and r.values.shape == (3, 2) and r.indices.dtype == torch.int32


MERGE_MISFITS = [
    (lambda v, i: [(v(2, 3), i(2, 3)), (v(4, 3), i(4, 3))], 2, ValueError,
     r"^parts\[1\]: expected shape \(2, '\*'\) \(that of parts\[0\] except the last axis\), got \(4, 3\)$"),
    (lambda v, i: [(v(2, 3), i(2, 3)), (v(3), i(3))], 2, ValueError,
     r"^parts\[1\]: expected shape \(2, '\*'\) \(that of parts\[0\] except the last axis\), got \(3,\)$"),
    (lambda v, i: [(v(2, 3), i(2, 3)), (v(2, 3), i(2, 2))], 2, ValueError,
     r"^parts\[1\]\.indices: expected the shape of parts\[1\]\.values \(2, 3\), got \(2, 2\)$"),
    (lambda v, i: [(v(()), i(()))], 0, ValueError, r"^parts\[0\]\.values: expected an array of rank >= 1, got a rank-0 array$"),
    (lambda v, i: [(v(2, 3), i(2, 3)), (v(2, 4), i(2, 4))], 8, ValueError,
     r"^k: expected 0 <= k <= 7 \(the number of candidates in all parts together\), got k=8$"),
]  # fmt: skip


@pytest.mark.parametrize(("parts", "k", "error", "message"), MERGE_MISFITS)
def test_merge_misfits_are_refused_on_meta_tensors_as_on_the_cpu(parts, k, error, message):
    _raises_alike(lambda device: cutopk.merge_top_k(parts(*_both(device)), k), error, message)


def test_merge_dtype_misfits_are_refused_on_meta_tensors():
    v, i = _both("meta")
    for other in [(v(2, 3).double(), i(2, 3)), (v(2, 3), i(2, 3).int())]:
        with pytest.raises(
            TypeError, match=r"^parts: expected one values dtype and one index dtype across the parts$"
        ):
            cutopk.merge_top_k([(v(2, 3), i(2, 3)), other], 2)


def test_merge_on_meta_tensors_gives_the_shapes():
    v, i = _both("meta")
    r = cutopk.merge_top_k([(v(2, 5, 3), i(2, 5, 3)), (v(2, 5, 4), i(2, 5, 4))], 6)
    assert r.values.device.type == "meta" and r.values.shape == (2, 5, 6) and r.indices.dtype == torch.int64


def test_the_merge_operator_needs_as_many_values_as_indices():
    cutopk.merge_top_k([(torch.zeros(1, 1), torch.zeros(1, 1, dtype=torch.int64))], 1)  # registers it
    op = torch.ops.cutopk.merge_top_k
    for device, message in [
        ("cpu", r"^parts: expected as many values as indices, got 2 and 1$"),
        ("meta", r"^parts: expected one or more parts, as many values as indices, got 2 and 1$"),
    ]:
        v, i = _both(device)
        with pytest.raises(ValueError, match=message):
            op([v(2, 3), v(2, 3)], [i(2, 3)], 2)
    values = [torch.tensor([[4.0, 1.0, 0.0]]), torch.tensor([[6.0, 4.0, 2.0]])]
    indices = [torch.tensor([[5, 0, 2]]), torch.tensor([[7, 3, 9]])]
    got_values, got_indices, where = op(values, indices, 3)
    # 4.0 ties at indices 5 and 3: the lower index first.
    assert got_values.tolist() == [[6.0, 4.0, 4.0]] and got_indices.tolist() == [[7, 3, 5]]
    assert where.tolist() == [[3, 4, 0]]  # the winners' places along the concatenated parts


OPERATOR_CALLS = {
    "top_k": lambda v, i, **kw: torch.ops.cutopk.top_k(v(3, 10), 2, **kw),
    "segmented_top_k": lambda v, i, **kw: torch.ops.cutopk.segmented_top_k(v(10), i(2), 2, **kw),
    "merge_top_k": lambda v, i, **kw: torch.ops.cutopk.merge_top_k([v(2, 3)], [i(2, 3)], 2, **kw),
}


@pytest.mark.parametrize("op", sorted(OPERATOR_CALLS))
def test_an_operators_bad_sorted_lists_what_its_schema_takes(op):
    import cutopk.torch_ops  # noqa: F401 - registers the operators

    # The schema's sorted is a string: top_k's True and False cannot cross, and "none" can.
    message = r"^sorted: expected one of 'value', 'index', 'none', got 'bogus'$"
    _raises_alike(lambda device: OPERATOR_CALLS[op](*_both(device), sorted="bogus"), ValueError, message)


COMPILED_ERRORS = [
    (lambda t: cutopk.top_k(t, 11), ValueError, r"^k: expected 0 <= k <= 10 \(the length of axis 1\), got k=11(\n|$)"),
    (lambda t: cutopk.top_k(t, -1), ValueError, r"^k: expected 0 <= k <= 10 \(the length of axis 1\), got k=-1(\n|$)"),
    (lambda t: cutopk.top_k(t, 2, mode="max"), ValueError, r"^mode: expected one of 'largest', 'smallest', got 'max'(\n|$)"),
    (lambda t: cutopk.top_k(t, 2, lengths=torch.tensor([1])), ValueError, r"^lengths: expected shape \(2,\) .*, got \(1,\)(\n|$)"),
    (lambda t: cutopk.top_k(t.to(torch.complex64), 2), TypeError, r"^a: unsupported dtype complex64 \(expected one of"),
    (lambda t: cutopk.segmented_top_k(t[0], torch.tensor([0, 10]), -1), ValueError, r"^k: expected k >= 0, got k=-1(\n|$)"),
    (lambda t: cutopk.merge_top_k([(t, t.long())], 21), ValueError, r"^k: expected 0 <= k <= 10 \(the number of candidates"),
]  # fmt: skip


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize(("call", "error", "message"), COMPILED_ERRORS)
def test_compiled_calls_raise_the_eager_errors(call, error, message, dynamic):
    # TorchDynamo turns a fake implementation's error into a TorchRuntimeError unless it is an
    # IndexError: the eager ValueError (TypeError) comes through, message first, in either case.
    torch._dynamo.reset()
    t = torch.zeros(2, 10)
    with pytest.raises(error, match=message):
        call(t)
    with pytest.raises(error, match=message):
        torch.compile(call, fullgraph=True, dynamic=dynamic)(t)
