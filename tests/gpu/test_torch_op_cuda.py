"""The torch operators on CUDA tensors (issue 41): captured in a CUDA graph on torch's current
stream, and compiled with ``mode="reduce-overhead"`` (torch's CUDA graphs) on a real GPU.

Without a GPU the capture runs on the torch stand-in (tests/standin/torch_cuda.py) over the CuPy
stand-in, whose capture records launches on the capturing stream and runs them on replay; the
``reduce-overhead`` test needs a real GPU and a CUDA build of torch (inductor cannot compile for
the stand-in)."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import cuda_is_standin
from support.reference import assert_same

import cutopk

pytestmark = pytest.mark.gpu

torch = pytest.importorskip(
    "torch", reason="the torch operators need torch (CI runs these in its torch venv)"
)


@pytest.fixture
def torch_cuda(cupy, monkeypatch):
    """torch with CUDA tensors: the stand-in's (a real CUDA torch is not in CI)."""
    if not cuda_is_standin():
        pytest.skip("the torch stand-in goes with the CuPy stand-in; on a GPU the reduce-overhead test runs")
    from standin import torch_cuda

    torch_cuda.install(monkeypatch)
    import cutopk.torch_ops  # noqa: F401 - registers torch.ops.cutopk.*

    return torch_cuda


def _values(rng, shape):
    x = rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float32)
    x[..., ::5] = 7.0  # ties at the K boundary
    return x


def test_the_operator_is_captured_in_a_cuda_graph_on_torchs_stream(torch_cuda):
    rng = np.random.default_rng(41)
    host = _values(rng, (16, 3000))
    t = torch_cuda.to_cuda(host)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # the warm-up, on the stream that captures
        torch.ops.cutopk.top_k(t, 8, -1, "largest", "index")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        values, indices = torch.ops.cutopk.top_k(t, 8, -1, "largest", "index")
    assert isinstance(values, torch_cuda.CudaTensor) and values.device == t.device
    for _ in range(2):  # each replay reads the input in place
        g.replay()
        assert_same(
            (values.cpu().numpy(), indices.cpu().numpy()),
            cutopk.top_k(host, 8, sorted="index"),
            order="index",
        )
        host = _values(rng, (16, 3000))
        t.copy_(torch.from_numpy(host))


def test_reduce_overhead_compile_of_a_sampling_step():
    """Unmeasured without a GPU: torch.compile(mode="reduce-overhead") records the compiled step
    (cutopk's operator inside) in a CUDA graph and replays it; the answers equal eager ones."""
    if cuda_is_standin() or not torch.cuda.is_available():
        pytest.skip("needs a real GPU and a CUDA build of torch (inductor cannot target the stand-in)")
    gen = torch.Generator(device="cuda").manual_seed(41)
    logits = torch.randn(8, 32000, device="cuda", generator=gen)

    def step(logits):
        top = cutopk.top_k(logits * 2.0, 50)  # exact in any fusion
        probs = torch.softmax(top.values, dim=-1)
        choice = torch.argmax(probs, dim=-1, keepdim=True)  # greedy: deterministic
        return torch.gather(top.indices, -1, choice).squeeze(-1), top.values, top.indices

    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):  # warm-up, recording, then replays of the CUDA graph
        logits.copy_(torch.randn(8, 32000, device="cuda", generator=gen))
        token, values, indices = (t.clone() for t in compiled(logits))
        _, want_values, want_indices = step(logits)
        assert torch.equal(values, want_values) and torch.equal(indices, want_indices)
        # argmax of a softmax of values in descending order: the first (rounding may tie, and
        # argmax then takes the first too).
        assert torch.equal(token, indices[:, 0])


def test_opcheck_on_cuda_tensors():
    """Unmeasured without a GPU: opcheck needs torch's own CUDA (on the stand-in, its fake-tensor
    step asks torch.cuda for the device and fails: "Torch not compiled with CUDA enabled")."""
    if cuda_is_standin() or not torch.cuda.is_available():
        pytest.skip("needs a real GPU and a CUDA build of torch")
    import cutopk.torch_ops  # noqa: F401 - registers torch.ops.cutopk.*

    x = torch.randint(-3, 4, (16, 3000), device="cuda").float().requires_grad_()
    torch.library.opcheck(torch.ops.cutopk.top_k.default, (x, 8))
    torch.library.opcheck(
        torch.ops.cutopk.top_k.default, (x, 8, 0, "smallest", "index", "largest", torch.int32)
    )
    lengths = torch.randint(0, 3001, (16,), device="cuda")
    torch.library.opcheck(torch.ops.cutopk.top_k.default, (x, 8), {"lengths": lengths})
