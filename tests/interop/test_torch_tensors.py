"""torch tensors as arguments: views with the negative bit read with their sign (by top_k and
the front ends alike), the conjugate bit, sparse and quantized tensors refused by type, ``k`` and
``index_dtype`` given as torch values, the reference's answer for a torch input, and every
torch dtype cutopk does not support refused by the same TypeError (operator-free path, operator, fake)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from support.backends import usable
from support.reference import assert_same, reference_top_k

import cutopk
from cutopk import onnx as cutopk_onnx
from cutopk import openvino

torch = pytest.importorskip("torch", reason="these tests concern torch tensors")

BACKENDS = ["numpy", "sim"]


def _neg_view():
    im = torch.tensor([1 + 1j, 2 + 5j, 3 + 3j]).conj().imag  # [-1, -5, -3], stored as [1, 5, 3]
    assert im.is_neg()
    return im


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["largest", "smallest"])
def test_negative_bit_views_are_read_with_their_sign(backend, mode):
    im = _neg_view()
    got = cutopk.top_k(im, 2, mode=mode, backend=usable(backend))
    want = torch.topk(im.resolve_neg(), 2, largest=mode == "largest")
    assert got.values.tolist() == want.values.tolist()
    assert got.indices.tolist() == want.indices.tolist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_conjugate_bit_tensors_are_refused_by_dtype(backend):
    # The conjugate bit exists only on complex tensors: refused for their dtype, never read raw.
    c = torch.tensor([1 + 2j, 3 - 1j]).conj()
    assert c.is_conj()
    with pytest.raises(TypeError, match=r"a: unsupported dtype complex64"):
        cutopk.top_k(c, 1, backend=usable(backend))


def test_negative_bit_in_the_front_ends():
    im = _neg_view()
    assert cutopk_onnx.top_k(im, 1).values.tolist() == [-1.0]
    assert openvino.top_k(im, 1, axis=0, mode="min", sort="value").values.tolist() == [-5.0]


def test_sparse_and_quantized_tensors_are_type_errors():
    with pytest.raises(TypeError, match=r"a: expected a dense .strided. tensor, got layout torch.sparse_coo"):
        cutopk.top_k(torch.tensor([1.0, 2.0]).to_sparse(), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates quantized tensors
        q = torch.quantize_per_tensor(torch.tensor([1.0, 2.0]), 0.1, 0, torch.quint8)
    with pytest.raises(TypeError, match=r"a: unsupported dtype torch.quint8"):
        cutopk.top_k(q, 1)


@pytest.mark.parametrize(
    "k", [np.array(2), np.array(2, dtype=np.uint8), torch.tensor(2), torch.tensor(2, dtype=torch.int16)]
)
def test_k_accepts_0d_integer_arrays_and_tensors(k):
    x = np.array([[1.0, 5.0, 3.0]])
    assert cutopk.top_k(x, k).indices.tolist() == [[1, 2]]
    assert cutopk.plan(x, k).k == 2


@pytest.mark.parametrize(
    "k",
    [np.array([2]), torch.tensor([2]), np.array(True), torch.tensor(True), np.array(2.0), torch.tensor(2.0)],
)
def test_k_refuses_non_0d_and_non_integer_arrays(k):
    with pytest.raises(TypeError, match=r"^k: expected an integer"):
        cutopk.top_k(np.array([1.0, 5.0, 3.0]), k)


def test_index_dtype_accepts_torch_dtypes():
    x = torch.tensor([[1.0, 3.0, 2.0]])
    r = cutopk.top_k(x, 2, index_dtype=torch.int32)
    assert r.indices.dtype == torch.int32 and r.indices.tolist() == [[1, 2]]
    assert cutopk.top_k(x.numpy(), 2, index_dtype=torch.uint32).indices.dtype == np.uint32
    with pytest.raises(ValueError, match=r"^index_dtype: expected one of .*, got torch.int16"):
        cutopk.top_k(x, 2, index_dtype=torch.int16)


def test_reference_agrees_for_torch_inputs():
    x = torch.tensor([[3.0, 1.0, 3.0, float("nan")]])
    got = cutopk.top_k(x, 3, nan="largest")
    assert_same((got.values.numpy(), got.indices.numpy()), reference_top_k(x.numpy(), 3, nan="largest"))


SUPPORTED_TORCH = {"float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64"}
SUPPORTED_TORCH |= {"uint8", "uint16", "uint32", "uint64"}
UNSUPPORTED_TORCH = sorted(
    {d for d in vars(torch).values() if isinstance(d, torch.dtype) and str(d)[6:] not in SUPPORTED_TORCH},
    key=str,
)


def _tensor_of(dtype, device="cpu"):
    """A (3, 10) tensor of ``dtype``, or None where torch makes none."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex32 is experimental, quantized tensors deprecated
        try:
            if str(dtype).startswith("torch.q") and device == "cpu":
                return torch.quantize_per_tensor(torch.randn(3, 10), 0.1, 0, dtype)
            return torch.empty(3, 10, dtype=dtype, device=device)  # refused before it is read
        except (RuntimeError, TypeError, NotImplementedError):
            return None


@pytest.mark.parametrize("dtype", UNSUPPORTED_TORCH, ids=str)
def test_every_unsupported_torch_dtype_is_the_type_error_naming_it_and_the_supported_ones(dtype):
    import cutopk.torch_ops  # registers the operators

    x = _tensor_of(dtype)
    if x is None:
        pytest.skip(f"torch makes no tensor of {dtype}")
    named = str(dtype).removeprefix("torch.")
    message = rf"^a: unsupported dtype (torch\.)?{named} \(expected one of float16, float32, .*bfloat16[;)]"
    calls = [lambda t: cutopk.top_k(t, 2), lambda t: torch.ops.cutopk.top_k(t, 2)]
    calls.append(lambda t: cutopk.segmented_top_k(t[0], [0, 4, 10], 2))
    for call in calls:
        with pytest.raises(TypeError, match=message.replace("^a:", "^(a|data):")):
            call(x)
    meta = _tensor_of(dtype, "meta")
    if meta is not None:  # the operator's fake implementation: what torch.compile sees
        with pytest.raises(TypeError, match=message):
            torch.ops.cutopk.top_k(meta, 2)
