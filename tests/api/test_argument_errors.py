"""Every error of docs/SPEC.md's table: the right type, a message naming the argument, the expected and
the given value, raised before any work is done; and the checks' other inputs (NumPy booleans for
``sorted``, an unhashable value checked against a table of choices)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.exceptions import AxisError
from support.reference import check_top_k

import cutopk
from cutopk._request import checks

X = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("k", [2.0, True, "2", None, np.float32(1)])
def test_k_not_an_integer(k):
    with pytest.raises(TypeError, match=r"k: expected an integer"):
        cutopk.top_k(X, k)


@pytest.mark.parametrize("k", [-1, 5, np.int64(99)])
def test_k_out_of_range(k):
    with pytest.raises(
        ValueError, match=rf"k: expected 0 <= k <= 4 \(the length of axis 1\), got k={int(k)}"
    ):
        cutopk.top_k(X, k)


def test_numpy_integer_k_accepted():
    assert cutopk.top_k(X, np.uint8(2)).values.shape == (3, 2)


@pytest.mark.parametrize("axis", [2, -3, 100])
def test_axis_out_of_range(axis):
    with pytest.raises(AxisError):
        cutopk.top_k(X, 1, axis=axis)


def test_axis_not_an_integer():
    with pytest.raises(TypeError, match="axis: expected an integer"):
        cutopk.top_k(X, 1, axis=1.0)


def test_rank0():
    with pytest.raises(ValueError, match="rank >= 1"):
        cutopk.top_k(np.float32(3), 1)
    with pytest.raises(ValueError, match="rank >= 1"):
        cutopk.top_k(np.array(3.0), 0)


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"mode": "max"}, "mode"),
        ({"sorted": "yes"}, "sorted"),
        ({"sorted": 1}, "sorted"),
        ({"sorted": None}, "sorted"),
        ({"nan": "first"}, "nan"),
        ({"backend": "gpu"}, "backend"),
        ({"algorithm": "magic"}, "algorithm"),
        ({"algorithm": 3}, "algorithm"),
        ({"index_dtype": np.int16}, "index_dtype"),
        ({"index_dtype": "float32"}, "index_dtype"),
        ({"index_dtype": "nonsense"}, "index_dtype"),
    ],
)
def test_unknown_choices(kw, name):
    with pytest.raises(ValueError, match=rf"^{name}: expected"):
        cutopk.top_k(X, 1, **kw)


def test_choices_are_listed():
    with pytest.raises(ValueError, match="'largest', 'smallest', got 'max'"):
        cutopk.top_k(X, 1, mode="max")


@pytest.mark.parametrize("dtype", [np.complex64, np.bool_, object, "U3", "datetime64[s]", "V4"])
def test_unsupported_dtypes(dtype):
    with pytest.raises(TypeError, match="a: unsupported dtype"):
        cutopk.top_k(np.zeros(4, dtype=dtype), 1)


def test_backend_mismatch():
    with pytest.raises(
        TypeError, match="backend: backend='cuda' expects a CuPy/CUDA array, got a NumPy array"
    ):
        cutopk.top_k(X, 1, backend="cuda")


def test_gpu_array_with_numpy_backend():
    class FakeCudaArray:
        shape = (4,)
        dtype = np.dtype(np.float32)
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False), "version": 3}  # noqa: RUF012

    with pytest.raises(TypeError, match="backend='numpy' expects a NumPy array, got a GPU array"):
        cutopk.top_k(FakeCudaArray(), 1, backend="numpy")


def test_not_an_array():
    with pytest.raises(TypeError, match="a: expected a NumPy array"):
        cutopk.top_k([3, 1, 2], 1)


@pytest.mark.parametrize("index_dtype", [np.int32, np.uint32])
def test_index_dtype_too_narrow(index_dtype):
    # A zero-stride view gives a long axis without allocating it.
    huge = np.broadcast_to(np.float32(0), (2**32 + 1,))
    with pytest.raises(ValueError, match=rf"index_dtype: {np.dtype(index_dtype)} cannot hold indices"):
        cutopk.top_k(huge, 1, index_dtype=index_dtype)


def test_int32_holds_exactly_its_range():
    from cutopk._request import checks as _checks

    assert _checks.check_index_dtype(np.int32, 2**31) == np.int32
    with pytest.raises(ValueError):
        _checks.check_index_dtype(np.int32, 2**31 + 1)


def test_error_checks_come_before_any_work(monkeypatch):
    from cutopk.numpy import backend as _numpy_backend

    def boom(*args, **kwargs):
        raise AssertionError("backend reached")

    monkeypatch.setattr(_numpy_backend, "top_k", boom)
    with pytest.raises(ValueError):
        cutopk.top_k(X, 9)


def test_cuda_backend_without_cupy_is_a_runtime_error(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)  # import cupy fails

    class FakeCudaArray:
        shape = (4,)
        dtype = np.dtype(np.float32)
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False), "version": 3}  # noqa: RUF012

    with pytest.raises(RuntimeError, match="CuPy"):
        cutopk.top_k(FakeCudaArray(), 1)


def test_algorithms_backend_checked():
    with pytest.raises(ValueError, match="backend: expected one of 'numpy', 'cuda', 'sim'"):
        cutopk.algorithms("auto")


def test_torch_dtype_without_a_numpy_equivalent_is_named():
    torch = pytest.importorskip("torch")
    from cutopk._request import dtypes as _dtypes

    with pytest.raises(TypeError, match=r"^torch.qint8 has no NumPy equivalent$"):
        _dtypes.as_numpy_dtype(torch.qint8)
    with pytest.raises(TypeError, match=r"^a: unsupported dtype torch.qint8 \(expected one of float16, "):
        _dtypes.check_dtype(torch.qint8, "a")


def test_without_ml_dtypes_bfloat16_is_unsupported_and_says_what_to_install(monkeypatch):
    import sys

    from cutopk._request import dtypes as _dtypes

    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes raises ImportError
    assert _dtypes._bfloat16_dtype() is None
    assert "bfloat16" not in {i.name for i in _dtypes._base_table().values()}
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"^bfloat16 needs the ml_dtypes package \(pip install ml_dtypes\)$"):
        _dtypes.as_numpy_dtype(torch.bfloat16)


@pytest.mark.parametrize(("flag", "order"), [(np.True_, True), (np.False_, False)])
def test_a_numpy_bool_for_sorted_is_the_python_bool(flag, order):
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0])
    want = check_top_k(x, 4, sorted=order)  # the Python bool, against the reference
    got = cutopk.top_k(x, 4, sorted=flag)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.values, want.values)
    assert checks.check_order(flag) == ("value" if order else "none")


def test_an_unhashable_value_against_a_table_of_choices_lists_them():
    names = {"value": True, "index": "index", "none": False}
    with pytest.raises(
        ValueError, match=r"^sorted: expected one of 'value', 'index', 'none', got \['value'\]$"
    ):
        checks.check_choice("sorted", ["value"], names)
    checks.check_choice("sorted", "index", names)  # a listed name passes
