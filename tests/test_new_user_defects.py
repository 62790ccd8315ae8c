"""Defects a new user hit (issue 19): torch views with the negative or conjugate bit, torch tensors
in the front ends, error types and the names in their messages, values dtype across backends,
autograd, DirectML's K < N rule, and what ``cutopk.plan`` reports. Each test failed before its fix."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from support.backends import sim_unavailable_reason
from support.reference import assert_same, reference_top_k

import cutopk
from cutopk import directml, openvino
from cutopk import onnx as cutopk_onnx

torch = pytest.importorskip("torch", reason="these defects concern torch tensors")

BACKENDS = ["numpy", "sim"]


def _backend(name):
    if name == "sim" and sim_unavailable_reason():
        pytest.skip(sim_unavailable_reason())
    return name


# --- 1. lazily negated / conjugated torch views ---


def _neg_view():
    im = torch.tensor([1 + 1j, 2 + 5j, 3 + 3j]).conj().imag  # [-1, -5, -3], stored as [1, 5, 3]
    assert im.is_neg()
    return im


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["largest", "smallest"])
def test_negative_bit_views_are_read_with_their_sign(backend, mode):
    im = _neg_view()
    got = cutopk.top_k(im, 2, mode=mode, backend=_backend(backend))
    want = torch.topk(im.resolve_neg(), 2, largest=mode == "largest")
    assert got.values.tolist() == want.values.tolist()
    assert got.indices.tolist() == want.indices.tolist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_conjugate_bit_tensors_are_refused_by_dtype(backend):
    # The conjugate bit exists only on complex tensors: refused for their dtype, never read raw.
    c = torch.tensor([1 + 2j, 3 - 1j]).conj()
    assert c.is_conj()
    with pytest.raises(TypeError, match=r"a: unsupported dtype complex64"):
        cutopk.top_k(c, 1, backend=_backend(backend))


def test_negative_bit_in_the_front_ends():
    im = _neg_view()
    assert cutopk_onnx.top_k(im, 1).values.tolist() == [-1.0]
    assert openvino.top_k(im, 1, axis=0, mode="min", sort="value").values.tolist() == [-5.0]


# --- 2. torch tensors in every front end ---


def test_front_ends_take_torch_tensors():
    x = torch.tensor([[1.0, 3.0, 2.0, 3.0]])
    r = cutopk_onnx.top_k(x, torch.tensor([2]))
    assert isinstance(r.values, torch.Tensor) and r.indices.tolist() == [[1, 3]]
    r = directml.top_k(x, axis=1, k=2)
    assert r.values.tolist() == [[3.0, 3.0]] and r.indices.dtype == torch.uint32
    r = openvino.top_k(x, torch.tensor(2), axis=1, mode="max", sort="index")
    assert r.indices.tolist() == [[1, 3]] and r.indices.dtype == torch.int32


# --- 3. error types ---


def test_lists_are_type_errors_naming_the_spec_argument():
    with pytest.raises(TypeError, match=r"^X: expected a tensor"):
        cutopk_onnx.top_k([1.0, 3.0, 2.0], 2)
    with pytest.raises(TypeError, match=r"^input: expected a tensor"):
        directml.top_k([1.0, 3.0], axis=0, k=1)
    with pytest.raises(TypeError, match=r"^data: expected a tensor"):
        openvino.top_k([1.0, 3.0], 1, axis=0, mode="max", sort="value")


def test_onnx_K_as_a_torch_tensor():
    x = np.array([1.0, 3.0, 2.0], np.float32)
    assert cutopk_onnx.top_k(x, torch.tensor([2])).indices.tolist() == [1, 2]
    with pytest.raises(TypeError, match=r"K: expected a tensor of dtype int64, got torch.int32"):
        cutopk_onnx.top_k(x, torch.tensor([2], dtype=torch.int32))


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


# --- 4. messages name the right thing ---


def test_front_end_messages_use_the_spec_names():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"^K: expected 0 <= K <= 3 \(the length of axis 1\), got K=4"):
        cutopk_onnx.top_k(x, np.array([4]))
    with pytest.raises(ValueError, match=r"^data: expected an array of rank >= 1"):
        openvino.top_k(np.float32(1.0), 1, axis=0, mode="max", sort="value")
    with pytest.raises(TypeError, match=r"^input: DirectML TOP_K1 does not support dtype float64"):
        directml.top_k(x.astype(np.float64), axis=1, k=1)
    with pytest.raises(ValueError, match=r"^k: expected 0 <= k <= 2"):
        openvino.top_k(x, 3, axis=0, mode="max", sort="value")


def test_index_dtype_accepts_torch_dtypes():
    x = torch.tensor([[1.0, 3.0, 2.0]])
    r = cutopk.top_k(x, 2, index_dtype=torch.int32)
    assert r.indices.dtype == torch.int32 and r.indices.tolist() == [[1, 2]]
    assert cutopk.top_k(x.numpy(), 2, index_dtype=torch.uint32).indices.dtype == np.uint32
    with pytest.raises(ValueError, match=r"^index_dtype: expected one of .*, got torch.int16"):
        cutopk.top_k(x, 2, index_dtype=torch.int16)


# --- 5. values dtype is the input's on every backend ---


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [">f4", ">i2", ">f8", ">u8"])
def test_values_keep_a_non_native_byte_order(backend, dtype):
    x = np.array([[1, 3, 2, 3]], dtype=dtype)
    r = cutopk.top_k(x, 2, backend=_backend(backend))
    assert r.values.dtype == x.dtype
    assert r.values.tolist() == [[3, 3]] and r.indices.tolist() == [[1, 3]]
    r = cutopk.top_k(x.T, 1, axis=0, backend=backend)
    assert r.values.dtype == x.dtype


# --- 6. autograd ---


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_carry_the_gradient(backend):
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    r = cutopk.top_k(x, 2, backend=_backend(backend))
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


# --- 11. plan(): one type, true to what runs ---


@pytest.mark.parametrize("backend", BACKENDS)
def test_plan_is_one_type_and_prints(backend):
    x = np.zeros((3, 50), np.float32)
    p = cutopk.plan(x, 2, backend=_backend(backend))
    assert isinstance(p, cutopk.Plan)
    text = str(p)
    assert "launches" in text and "scratch" in text and "copies" in text


def test_plan_copy_flag_is_true_to_the_layout():
    a = np.zeros((64, 512), np.float32)
    # A 2-D array along axis 0 is a transposed view of rows: read in place on either backend
    # (thread_row on the simulator); only the small outputs are moved to axis 0.
    for backend in BACKENDS:
        p = cutopk.plan(a, 2, axis=0, backend=_backend(backend))
        assert p.copy is False and p.copies[-1] == "outputs: moved to axis 0 (12288 bytes)"
        assert all(not c.startswith("input") for c in p.copies)
        assert cutopk.plan(a.T, 2, backend=backend).copy is False
    # Batch axes that do not collapse are copied, and the plan says so with the size.
    b = np.zeros((4, 5, 6), np.float32)[:, ::2, :]
    p = cutopk.plan(b, 2, axis=1, backend="numpy")
    assert p.copy and any("row-major" in c for c in p.copies)


@pytest.mark.parametrize("backend", BACKENDS)
def test_plan_for_nothing_to_do_has_no_launch(backend):
    assert cutopk.plan(np.zeros((3, 8)), 0, backend=_backend(backend)).launches == ()
    assert cutopk.plan(np.zeros((0, 8)), 2, backend=backend).launches == ()
    assert cutopk.plan(np.zeros((0, 8)), 2, backend=backend).scratch_bytes == 0


def test_multiblock_plan_lists_every_kernel():
    if sim_unavailable_reason():
        pytest.skip(sim_unavailable_reason())
    p = cutopk.plan(np.zeros((2, 5000), np.float32), 40, backend="sim", algorithm="multiblock")
    names = [launch.kernel for launch in p.launches]
    assert names[0] == "mb_init" and "mb_collect<float>" in names and names[-1] == "mb_order<float>"
    assert p.launch_count == 12  # init, 4 x (histogram, select), move, collect, order
    assert "mb_select" in str(p)


def test_reference_agrees_for_torch_inputs():
    x = torch.tensor([[3.0, 1.0, 3.0, float("nan")]])
    got = cutopk.top_k(x, 3, nan="largest")
    assert_same((got.values.numpy(), got.indices.numpy()), reference_top_k(x.numpy(), 3, nan="largest"))
