"""Arrays of the wrong kind where the input decides the kind: device lengths for a NumPy input
named with their module, torch lengths refused by their torch dtype (a bfloat16 one needs no
ml_dtypes to be refused), and cutopk.dask without Dask."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from support.backends import require

import cutopk

X = np.arange(12.0, dtype=np.float32).reshape(3, 4)


def test_device_lengths_for_a_numpy_input_are_refused_by_name():
    require("cuda")
    import cupy

    with pytest.raises(
        TypeError, match=r"^lengths: expected a NumPy integer array for a NumPy input, got cupy\.ndarray$"
    ):
        cutopk.top_k(X, 2, lengths=cupy.asarray(np.array([1, 2, 3])))


@pytest.mark.parametrize("ml_dtypes", ["installed", "missing"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "bool"])
def test_torch_lengths_of_a_non_integer_dtype_are_refused_by_it(monkeypatch, ml_dtypes, dtype):
    torch = pytest.importorskip("torch", reason="torch lengths need torch")
    if ml_dtypes == "missing":
        monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes raises ImportError
    lengths = torch.tensor([1, 2, 3]).to(getattr(torch, dtype))
    for a in (X, torch.from_numpy(X), torch.from_numpy(X).requires_grad_()):
        with pytest.raises(TypeError, match=rf"^lengths: expected an integer array, got dtype {dtype}$"):
            cutopk.top_k(a, 2, lengths=lengths)


def test_torch_lengths_of_every_integer_dtype_are_taken():
    torch = pytest.importorskip("torch", reason="torch lengths need torch")
    for dtype in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64):
        r = cutopk.top_k(X, 2, lengths=torch.tensor([1, 0, 4], dtype=dtype))
        assert r.indices.tolist() == [[0, -1], [-1, -1], [3, 2]]


def test_cutopk_dask_without_dask_says_what_to_install(monkeypatch):
    pytest.importorskip("dask.array", reason="cutopk.dask needs dask[array]")
    import cutopk.dask as cdask

    monkeypatch.setitem(sys.modules, "dask.array", None)  # import dask.array raises ImportError
    with pytest.raises(ImportError, match=r"^cutopk\.dask needs dask\[array\]: import of dask\.array halted"):
        cdask.top_k(X, 2)


@pytest.mark.parametrize("ml_dtypes", ["installed", "missing"])
def test_a_bfloat16_torch_out_for_another_dtype_is_refused_by_its_dtype(monkeypatch, ml_dtypes):
    """Whether ml_dtypes is there or not: the misfit is the dtype, not a missing package."""
    torch = pytest.importorskip("torch", reason="torch outputs need torch")
    if ml_dtypes == "missing":
        monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes raises ImportError
    out = (torch.empty(3, 2, dtype=torch.bfloat16), torch.empty(3, 2, dtype=torch.int64))
    for a in (X, torch.from_numpy(X)):
        with pytest.raises(TypeError, match=r"^out: values must have dtype float32, got bfloat16$"):
            cutopk.top_k(a, 2, out=out)
