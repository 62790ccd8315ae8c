"""The operator-spec front ends (onnx, directml, openvino) take torch tensors for the data and
for K, and hand torch tensors back."""

from __future__ import annotations

import numpy as np
import pytest

from cutopk import directml, openvino
from cutopk import onnx as cutopk_onnx

torch = pytest.importorskip("torch", reason="these tests concern torch tensors")


def test_front_ends_take_torch_tensors():
    x = torch.tensor([[1.0, 3.0, 2.0, 3.0]])
    r = cutopk_onnx.top_k(x, torch.tensor([2]))
    assert isinstance(r.values, torch.Tensor) and r.indices.tolist() == [[1, 3]]
    r = directml.top_k(x, axis=1, k=2)
    assert r.values.tolist() == [[3.0, 3.0]] and r.indices.dtype == torch.uint32
    r = openvino.top_k(x, torch.tensor(2), axis=1, mode="max", sort="index")
    assert r.indices.tolist() == [[1, 3]] and r.indices.dtype == torch.int32


def test_onnx_K_as_a_torch_tensor():
    x = np.array([1.0, 3.0, 2.0], np.float32)
    assert cutopk_onnx.top_k(x, torch.tensor([2])).indices.tolist() == [1, 2]
    with pytest.raises(TypeError, match=r"K: expected a tensor of dtype int64, got torch.int32"):
        cutopk_onnx.top_k(x, torch.tensor([2], dtype=torch.int32))
