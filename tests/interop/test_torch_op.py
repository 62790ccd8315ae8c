"""cutopk inside torch.compile: the registered operators ``torch.ops.cutopk.{top_k,
segmented_top_k, merge_top_k}`` (issue 41).

``cutopk.top_k`` on a torch tensor calls the operator, so ``torch.compile(fullgraph=True)`` traces
it as one node (``fullgraph=True`` turns any graph break into an error): the compiled answer must
equal the eager one bit for bit, and the eager one the reference, for every dtype, with ties, NaN
and signed zeros, static and dynamic shapes, inside a module with other torch ops, and with
gradients flowing through the compiled graph. ``torch.library.opcheck`` checks each operator's
registration (schema, fake implementation, autograd formula, AOT dispatch).
"""

from __future__ import annotations

import numpy as np
import pytest
from support.inputs import DTYPES, dtype_of, make_values
from support.reference import assert_same, bits, reference_top_k

import cutopk

torch = pytest.importorskip(
    "torch", reason="the torch operator needs torch (CI runs these in its torch venv)"
)
from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402
from torch.library import opcheck  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles from scratch (no cached graph hides a recompilation or a break)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _tensor(x: np.ndarray):
    """A torch CPU tensor of NumPy array ``x`` (bfloat16 through its bits)."""
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x))


def _host(t) -> np.ndarray:
    """A torch tensor as NumPy (bfloat16 through ml_dtypes), sharing nothing."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().copy().view(ml_dtypes.bfloat16)
    return t.numpy().copy()


def _assert_identical(got, expected) -> None:
    """Two (values, indices) pairs of torch tensors: same dtypes, shapes and bits."""
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, e.dtype, g.shape, e.shape)
        np.testing.assert_array_equal(bits(_host(g)), bits(_host(e)))


def _hard_values(dtype_name: str, shape=(6, 40)) -> np.ndarray:
    """Few distinct values (ties at the K boundary); floats also get NaN, +-inf and both zeros."""
    rng = np.random.default_rng(41)
    x = make_values(rng, dtype_of(dtype_name), shape, "few_distinct")
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
        flat = x.reshape(-1)
        picks = rng.choice(flat.size, 12, replace=False)
        specials = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, np.nan], dtype=np.float64)
        flat[picks] = np.resize(specials, picks.size).astype(x.dtype)
    return x


def _op_nodes(counter, name: str) -> int:
    """How many calls of ``torch.ops.cutopk.<name>`` the graphs ``counter`` compiled hold."""
    op = getattr(torch.ops.cutopk, name).default
    return sum(node.target is op for gm in counter.graphs for node in gm.graph.nodes)


# Every (mode, nan, sorted) in one compiled graph: one compilation per dtype.
CASES = [
    (m, n, s) for m in ("largest", "smallest") for n in ("last", "largest") for s in (True, "index", False)
]


def _all_cases(t, k):
    return [cutopk.top_k(t, k, mode=m, nan=n, sorted=s) for m, n, s in CASES]


@pytest.mark.parametrize("dtype", DTYPES)
def test_fullgraph_compile_equals_eager_and_the_reference_for_every_dtype(dtype):
    x = _hard_values(dtype)
    t = _tensor(x)
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(_all_cases, backend=counter, fullgraph=True)(t, 7)
    eager = _all_cases(t, 7)
    assert counter.frame_count == 1 and _op_nodes(counter, "top_k") == len(CASES)  # one graph
    for (mode, nan, order), got, want in zip(CASES, compiled, eager, strict=True):
        assert isinstance(got, cutopk.TopK)
        _assert_identical(got, want)
        assert_same(
            (_host(want.values), _host(want.indices)),
            reference_top_k(x, 7, mode=mode, sorted=order, nan=nan),
            order=order,
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"axis": 0},
        {"axis": -2, "mode": "smallest", "sorted": "index"},
        {"index_dtype": np.int32},
        {"index_dtype": torch.uint32, "nan": "largest"},
        {"index_dtype": np.uint64, "sorted": False},
        {"backend": "sim"},
        {"backend": "numpy", "algorithm": "select"},
    ],
    ids=lambda kw: ",".join(f"{k}={getattr(v, '__name__', v)}" for k, v in kw.items()),
)
def test_keywords_cross_the_compiled_graph(kwargs):
    t = _tensor(_hard_values("float32", (12, 30)))
    compiled = torch.compile(lambda t: cutopk.top_k(t, 5, **kwargs), fullgraph=True)(t)
    eager = cutopk.top_k(t, 5, **kwargs)
    _assert_identical(compiled, eager)
    want = kwargs.get("index_dtype", torch.int64)
    want = want if isinstance(want, torch.dtype) else getattr(torch, np.dtype(want).name)
    assert compiled.indices.dtype == want


def test_lengths_cross_the_compiled_graph_as_a_tensor_and_padding_gets_no_gradient():
    x = torch.tensor(_hard_values("float32", (4, 10)), requires_grad=True)
    lengths = torch.tensor([0, 3, 10, 6])

    def f(t, lens):
        return cutopk.top_k(t * 3.0, 5, lengths=lens, sorted="index")

    compiled = torch.compile(f, fullgraph=True)(x, lengths)
    eager = f(x, lengths)
    _assert_identical(compiled, eager)
    assert compiled.indices[0].tolist() == [-1] * 5 and (compiled.indices[1, 3:] == -1).all()
    weights = torch.arange(20.0).reshape(4, 5)
    (g_compiled,) = torch.autograd.grad((compiled.values * weights).sum(), x)
    (g_eager,) = torch.autograd.grad((eager.values * weights).sum(), x)
    assert torch.equal(g_compiled, g_eager)
    assert g_compiled[0].abs().sum() == 0  # a row of length 0 is all padding
    assert g_compiled[1, 3:].abs().sum() == 0  # past its length: never selected
    # A NumPy lengths array is carried as a tensor too.
    _assert_identical(cutopk.top_k(x, 5, lengths=lengths.numpy(), sorted="index"), f(x / 3.0, lengths))


def test_dynamic_shapes_compile_once_and_equal_eager():
    counter = CompileCounterWithBackend("inductor")

    def f(t):
        # k follows the shape: a symbolic k in the graph.
        return cutopk.top_k(t, t.shape[-1] // 4, mode="smallest")

    compiled = torch.compile(f, backend=counter, fullgraph=True, dynamic=True)
    for shape in [(3, 40), (5, 64), (2, 100), (7, 8)]:  # sizes 0 and 1 are specialised by torch
        t = _tensor(_hard_values("float32", shape))
        got = compiled(t)
        assert got.values.shape == (shape[0], shape[1] // 4)
        _assert_identical(got, f(t))
    assert counter.frame_count == 1


def test_automatic_dynamic_shapes_recompile_once_and_equal_eager():
    """The default (``dynamic=None``): a second shape makes the one recompilation, symbolic."""
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(lambda t: cutopk.top_k(t, 3), backend=counter, fullgraph=True)
    for shape in [(3, 40), (5, 64), (2, 33)]:
        t = _tensor(_hard_values("float64", shape))
        _assert_identical(compiled(t), cutopk.top_k(t, 3))
    assert counter.frame_count == 2


class _Sampler(torch.nn.Module):
    """A small sampling head: logits, the top K, a softmax over them, the chosen token ids."""

    def __init__(self, vocab: int = 97, hidden: int = 16, k: int = 8):
        super().__init__()
        self.proj = torch.nn.Linear(hidden, vocab, dtype=torch.float64)
        self.k = k

    def forward(self, h):
        logits = self.proj(h)
        top = cutopk.top_k(logits, self.k, nan="largest")
        probs = torch.softmax(top.values / 0.7, dim=-1)
        token = torch.gather(top.indices, -1, probs.argmax(-1, keepdim=True))
        return logits, top, probs, token


def test_inside_a_module_with_other_torch_ops_and_gradients_through_the_compiled_graph():
    torch.manual_seed(41)
    model = _Sampler()
    h = torch.randn(5, 16, dtype=torch.float64)
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    logits, top, probs, token = compiled(h)
    assert counter.frame_count == 1
    # The selection inside the graph is exactly top_k of the graph's own logits ...
    _assert_identical(top, cutopk.top_k(logits.detach(), 8, nan="largest"))
    # ... and the whole module agrees with eager (the matmul may round differently when fused).
    e_logits, e_top, e_probs, e_token = model(h)
    torch.testing.assert_close(logits, e_logits)
    assert torch.equal(top.indices, e_top.indices) and torch.equal(token, e_token)
    torch.testing.assert_close(probs, e_probs)
    # Gradients reach the module's parameters through the compiled graph.
    target = torch.arange(5 * 8, dtype=torch.float64).reshape(5, 8)
    compiled_grads = torch.autograd.grad((probs * target).sum(), list(model.parameters()))
    eager_grads = torch.autograd.grad((e_probs * target).sum(), list(model.parameters()))
    for g, e in zip(compiled_grads, eager_grads, strict=True):
        assert g.abs().sum() > 0
        torch.testing.assert_close(g, e)


def test_gradient_through_the_compiled_graph_equals_eager_exactly():
    x = torch.tensor(_hard_values("float32", (6, 40)), requires_grad=True)
    weights = torch.arange(42.0).reshape(6, 7)

    def loss(t):
        return (cutopk.top_k(t * 2.0, 7, axis=-1).values * weights).sum()

    (compiled,) = torch.autograd.grad(torch.compile(loss, fullgraph=True)(x), x)
    (eager,) = torch.autograd.grad(loss(x), x)
    assert torch.equal(compiled, eager)
    # torch.topk's gradient where there are no ties to break differently (float64, distinct).
    y = torch.randn(4, 30, dtype=torch.float64, requires_grad=True)
    (ours,) = torch.autograd.grad(
        torch.compile(lambda t: cutopk.top_k(t, 3, axis=0).values.sum(), fullgraph=True)(y), y
    )
    (theirs,) = torch.autograd.grad(torch.topk(y, 3, dim=0).values.sum(), y)
    assert torch.equal(ours, theirs)


def test_the_operator_passes_gradcheck():
    x = torch.randn(3, 9, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: torch.ops.cutopk.top_k(t, 2, 0)[0], (x,))
    lens = torch.tensor([2, 9, 0])
    assert torch.autograd.gradcheck(lambda t: torch.ops.cutopk.top_k(t, 4, lengths=lens)[0], (x,))


def test_segmented_and_merge_compile_to_their_operators_with_gradients():
    data = torch.tensor([5.0, 1.0, 7.0, 3.0, 3.0, 9.0, -0.0, float("nan")], requires_grad=True)
    offsets = torch.tensor([0, 3, 3, 8])
    counter = CompileCounterWithBackend("inductor")

    def segmented(d, o):
        return cutopk.segmented_top_k(d * 1.0, o, 3, nan="largest")

    got = torch.compile(segmented, backend=counter, fullgraph=True)(data, offsets)
    want = segmented(data, offsets)
    _assert_identical(got, want)
    assert got.indices.tolist() == [[2, 0, 1], [-1, -1, -1], [4, 2, 0]]
    (g_compiled,) = torch.autograd.grad((got.values * torch.arange(9.0).reshape(3, 3)).sum(), data)
    (g_eager,) = torch.autograd.grad((want.values * torch.arange(9.0).reshape(3, 3)).sum(), data)
    assert torch.equal(g_compiled, g_eager) and g_compiled.tolist() == [1.0, 2.0, 0.0, 8.0, 0, 7.0, 0, 6.0]

    x = torch.tensor(_hard_values("float32", (4, 20)), requires_grad=True)

    def merged(t):
        left, right = cutopk.top_k(t[:, :8], 5), cutopk.top_k(t[:, 8:], 5)
        return cutopk.merge_top_k([left, (right.values, right.indices + 8)], 6)

    got = torch.compile(merged, backend=counter, fullgraph=True)(x)
    _assert_identical(got, merged(x))
    _assert_identical(got, cutopk.top_k(x, 6))  # the merge of the halves is the top of the whole
    weights = torch.arange(24.0).reshape(4, 6)
    (g_compiled,) = torch.autograd.grad((got.values * weights).sum(), x)
    (g_whole,) = torch.autograd.grad((cutopk.top_k(x, 6).values * weights).sum(), x)
    assert torch.equal(g_compiled, g_whole)
    assert counter.frame_count == 2
    assert _op_nodes(counter, "segmented_top_k") == 1 and _op_nodes(counter, "merge_top_k") == 1


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((3,), {}),
        ((3, 0, "smallest", "index", "largest", torch.int32), {}),
        ((5,), {"sorted": "none", "index_dtype": torch.uint32}),
        ((4,), {"lengths": torch.tensor([1, 0, 7, 4, 2])}),
        ((0,), {}),
        ((7,), {"backend": "sim"}),
    ],
)
def test_opcheck_top_k(args, kwargs):
    # Ties but no NaN: opcheck compares outputs with assert_close, where NaN != NaN.
    x = torch.tensor(np.random.default_rng(41).integers(-2, 3, (5, 7)), dtype=torch.float32)
    opcheck(torch.ops.cutopk.top_k.default, (x.requires_grad_(), *args), kwargs)


def test_opcheck_segmented_and_merge():
    cutopk.segmented_top_k(torch.zeros(1), [0, 1], 1)  # registers the irregular operators
    data = torch.tensor([5.0, 1.0, 7.0, 3.0, 3.0, 9.0], requires_grad=True)
    opcheck(torch.ops.cutopk.segmented_top_k.default, (data, torch.tensor([0, 3, 3, 6]), 2))
    opcheck(
        torch.ops.cutopk.segmented_top_k.default,
        (data, torch.tensor([1, 4, 6]), 4, "smallest", "index", "last", torch.int32),
    )
    opcheck(
        torch.ops.cutopk.segmented_top_k.default, (data, torch.tensor([0, 3, 3, 6]), 2), {"max_length": 3}
    )
    x = torch.randn(3, 10)
    left, right = cutopk.top_k(x[:, :4], 3), cutopk.top_k(x[:, 4:], 3)
    values = [left.values.clone().requires_grad_(), right.values.clone().requires_grad_()]
    opcheck(torch.ops.cutopk.merge_top_k.default, (values, [left.indices, right.indices + 4], 4))
    opcheck(
        torch.ops.cutopk.merge_top_k.default,
        (values, [left.indices, right.indices + 4], 6, "smallest", "none"),
    )


def test_segmented_operator_takes_max_length_and_checks_it():
    """max_length is the schema's last argument, with a default (a graph saved before it was
    added still calls the operator): a segment longer than it is the operator-free path's ValueError,
    a bad value its TypeError/ValueError, also from the fake implementation (torch.compile)."""
    cutopk.segmented_top_k(torch.zeros(1), [0, 1], 1)  # registers the irregular operators
    op = torch.ops.cutopk.segmented_top_k.default
    assert op._schema.arguments[-1].name == "max_length"
    assert str(op._schema.arguments[-1].default_value) == "None"
    data, offsets = torch.tensor([5.0, 1.0, 7.0, 3.0, 3.0, 9.0]), torch.tensor([0, 3, 3, 6])
    want = cutopk.segmented_top_k(data.numpy(), offsets.numpy(), 2)
    got = op(data, offsets, 2, max_length=3)
    assert got[0].tolist() == want.values.tolist() and got[1].tolist() == want.indices.tolist()
    with pytest.raises(
        ValueError, match="offsets: expected segments of at most max_length=2 elements, got segment 0 of 3"
    ):
        op(data, offsets, 2, max_length=2)
    with pytest.raises(ValueError, match="max_length: expected None or an int >= 0, got -1"):
        cutopk.segmented_top_k(data, offsets, 2, max_length=-1)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fake = (mode.from_tensor(data), mode.from_tensor(offsets))
        assert op(*fake, 2, max_length=3)[0].shape == (3, 2)
        with pytest.raises(ValueError, match="max_length: expected None or an int >= 0, got -1"):
            op(*fake, 2, max_length=-1)


def test_the_operator_equals_the_operator_free_path():
    """``torch.ops.cutopk.top_k`` called directly, ``sorted`` by its schema name."""
    x = _hard_values("float64", (6, 40))
    values, indices = torch.ops.cutopk.top_k(_tensor(x), 4, 0, "smallest", "index", "largest", torch.int32)
    assert_same(
        (values.numpy(), indices.numpy()),
        reference_top_k(x, 4, axis=0, mode="smallest", sorted="index", nan="largest"),
        index_dtype=np.int32,
        order="index",
    )


def test_errors_keep_their_messages():
    t = torch.zeros(2, 10)
    with pytest.raises(ValueError, match=r"^k: expected 0 <= k <= 10"):
        cutopk.top_k(t, 11)
    with pytest.raises(ValueError, match=r"^mode: expected one of"):
        cutopk.top_k(t, 1, mode="max")
    with pytest.raises(ValueError, match=r"^sorted: expected one of"):
        cutopk.top_k(t, 1, sorted=1)
    with pytest.raises(ValueError, match=r"^index_dtype: expected one of"):
        cutopk.top_k(t, 1, index_dtype=np.int16)
    with pytest.raises(
        TypeError,
        match=r"^lengths: expected an integer array or a sequence of integers, got a list holding float",
    ):
        cutopk.top_k(t, 1, lengths=[1, 2.0])
    with pytest.raises(
        ValueError, match=r"^lengths: expected 0 <= lengths\[r\] <= 10 .* got values from 1 to 11$"
    ):
        cutopk.top_k(t, 1, lengths=[1, 11])
    assert cutopk.top_k(t, 1, lengths=[0, 2]).indices.tolist() == [[-1], [0]]
    # Under compilation the fake implementation raises the same error (test_torch_op_fakes.py).
    with pytest.raises(ValueError, match=r"^k: expected 0 <= k <= 10"):
        torch.compile(lambda t: cutopk.top_k(t, 11), fullgraph=True)(t)


def test_the_readme_compiled_example_and_the_torch_ops_doctest_run():
    import doctest
    import pathlib
    import re

    import cutopk.torch_ops

    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "fullgraph=True" in b]
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)  # the example's own call runs it once
    assert scope["sample"](torch.randn(3, 100)).shape == (3, 1)
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(cutopk.torch_ops, "cutopk.torch_ops", globs={}):
        runner.run(test)
    assert runner.failures == 0 and runner.tries > 0


def test_meta_tensors_and_dispatch_modes_see_the_operator():
    """An ordinary eager call skips torch's dispatcher (same kernel, half the host time); a meta
    tensor, a dispatch mode or a tensor autograd records must still see the operator."""
    from torch.utils._python_dispatch import TorchDispatchMode

    meta = cutopk.top_k(torch.empty(4, 10, device="meta"), 3, axis=0, index_dtype=np.int32)
    assert meta.values.device.type == "meta" and meta.values.shape == (3, 10)
    assert meta.indices.dtype == torch.int32

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(str(func))
            return func(*args, **(kwargs or {}))

    x = torch.tensor(_hard_values("float32", (3, 20)))
    with Recorder() as recorder:
        got = cutopk.top_k(x, 4)
    assert "cutopk.top_k.default" in recorder.seen
    _assert_identical(got, cutopk.top_k(x, 4))


def test_k_as_a_symbolic_int_or_a_0d_tensor_compiles_once():
    x = torch.tensor(_hard_values("float32", (20, 7)))
    counter = CompileCounterWithBackend("inductor")
    by_int = torch.compile(
        lambda t, k: cutopk.top_k(t, k, axis=0), backend=counter, dynamic=True, fullgraph=True
    )
    by_tensor = torch.compile(lambda t, k: cutopk.top_k(t, k), backend=counter, fullgraph=True)
    for k in (3, 5, 2, 7):  # not 0 or 1: torch specialises those
        _assert_identical(by_int(x, k), cutopk.top_k(x, k, axis=0))
        _assert_identical(by_tensor(x, torch.tensor(k)), cutopk.top_k(x, k))  # k read by .item()
    assert counter.frame_count == 2
    with pytest.raises(ValueError, match=r"^k: expected 0 <= k <= 20 \(the length of axis 0\), got k=21"):
        by_int(x, 21)  # past the axis: refused by the operator's checks, never read out of bounds


def test_torch_export_keeps_the_operator_with_static_and_dynamic_shapes():
    class Head(torch.nn.Module):
        def forward(self, x):
            top = cutopk.top_k(x, 3, mode="smallest")
            return top.values * 2.0, top.indices

    x = torch.tensor(_hard_values("float64", (4, 10)))
    static = torch.export.export(Head(), (x,))
    assert "torch.ops.cutopk.top_k.default" in static.graph_module.code
    want = Head()(x)
    _assert_identical(static.module()(x), want)
    dims = {"x": {0: torch.export.Dim("rows"), 1: torch.export.Dim("n", min=3, max=1 << 20)}}
    dynamic = torch.export.export(Head(), (x,), dynamic_shapes=dims)
    y = torch.tensor(_hard_values("float64", (6, 33)))
    _assert_identical(dynamic.module()(y), Head()(y))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gradients_with_dynamic_shapes_and_lengths_compile_once_per_dtype(dtype):
    counter = CompileCounterWithBackend("inductor")

    def loss(t, lens, w):
        return (cutopk.top_k(t, 4, lengths=lens).values * w).sum()

    compiled = torch.compile(loss, backend=counter, dynamic=True, fullgraph=True)
    rng = np.random.default_rng(41)
    for rows, n in [(3, 20), (5, 33), (4, 9)]:
        x = _tensor(_hard_values(dtype, (rows, n))).requires_grad_()
        lens = torch.from_numpy(rng.integers(0, n + 1, rows))
        w = torch.arange(rows * 4.0).reshape(rows, 4).to(x.dtype)
        (got,) = torch.autograd.grad(compiled(x, lens, w), x)
        (want,) = torch.autograd.grad(loss(x, lens, w), x)
        assert torch.equal(got, want)
    assert counter.frame_count == 1
