"""The operator-spec front ends: the official ONNX node cases, the worked examples of specs/,
onnxruntime as an external oracle, and each front end's own argument rules."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from support.reference import assert_same, reference_top_k

from cutopk import directml, openvino
from cutopk import onnx as cutopk_onnx


def _onnx_cases():
    onnx = pytest.importorskip("onnx", reason="the onnx package generates the official TopK node cases")
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in collect_testcases(None) if c.name.startswith("test_top_k")]
    assert len(cases) >= 7, [c.name for c in cases]
    out = []
    for case in cases:
        node = case.model.graph.node[0]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        for inputs, outputs in case.data_sets:
            out.append(pytest.param(attrs, inputs, outputs, id=case.name))
    return out


@pytest.mark.parametrize(("attrs", "inputs", "outputs"), _onnx_cases())
def test_official_onnx_node_cases(attrs, inputs, outputs):
    X, K = inputs
    values, indices = cutopk_onnx.top_k(X, K, **attrs)
    assert values.dtype == outputs[0].dtype
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(values, outputs[0])
    np.testing.assert_array_equal(indices, outputs[1])


def _run_onnxruntime(X, k, axis, largest, sorted_):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the external oracle")
    from onnx import TensorProto, helper

    elem = helper.np_dtype_to_tensor_dtype(X.dtype)
    node = helper.make_node("TopK", ["X", "K"], ["V", "I"], axis=axis, largest=largest, sorted=sorted_)
    graph = helper.make_graph(
        [node],
        "topk",
        [
            helper.make_tensor_value_info("X", elem, None),
            helper.make_tensor_value_info("K", TensorProto.INT64, [1]),
        ],
        [
            helper.make_tensor_value_info("V", elem, None),
            helper.make_tensor_value_info("I", TensorProto.INT64, None),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"X": X, "K": np.array([k], dtype=np.int64)})


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("largest", [1, 0])
def test_matches_onnxruntime_with_ties(dtype, largest):
    rng = np.random.default_rng(1)
    X = rng.integers(0, 5, size=(6, 300)).astype(dtype)
    for axis, k in ((1, 17), (0, 3), (-1, 300)):
        ort_values, ort_indices = _run_onnxruntime(X, k, axis, largest, 1)
        values, indices = cutopk_onnx.top_k(X, np.array([k]), axis=axis, largest=largest)
        np.testing.assert_array_equal(values, ort_values)
        np.testing.assert_array_equal(indices, ort_indices)


def test_onnxruntime_nan_ranks_above_inf():
    X = np.array([[1.0, np.nan, np.inf, -np.inf, np.nan, 0.0]], dtype=np.float32)
    for largest in (1, 0):
        ort_values, ort_indices = _run_onnxruntime(X, 4, -1, largest, 1)
        values, indices = cutopk_onnx.top_k(X, np.array([4]), largest=largest)
        np.testing.assert_array_equal(indices, ort_indices)
        np.testing.assert_array_equal(values, ort_values)


def test_onnx_opset1_int_k_and_sorted0():
    X = np.array([[3, 1, 3, 2]], dtype=np.float32)
    assert cutopk_onnx.top_k(X, 2).indices.tolist() == [[0, 2]]
    res = cutopk_onnx.top_k(X, np.array([3]), sorted=0)
    assert sorted(res.indices[0].tolist()) == [0, 2, 3]


@pytest.mark.parametrize(
    ("K", "error"),
    [
        (np.array([2], dtype=np.int32), TypeError),
        (np.array([[2]]), ValueError),
        (np.array([1, 2]), ValueError),
        (2.0, TypeError),
        ("2", TypeError),
    ],
)
def test_onnx_bad_K(K, error):
    with pytest.raises(error, match=r"^K: "):
        cutopk_onnx.top_k(np.zeros((2, 3), np.float32), K)


def test_onnx_bad_attributes():
    X = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match="largest: expected 0 or 1"):
        cutopk_onnx.top_k(X, 1, largest=2)
    with pytest.raises(TypeError, match="sorted: expected the integer 0 or 1"):
        cutopk_onnx.top_k(X, 1, sorted=True)
    with pytest.raises(TypeError, match="X: unsupported dtype object"):
        cutopk_onnx.top_k(X.astype(object), 1)
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays need ml_dtypes")
    with pytest.raises(TypeError, match="ONNX TopK does not support dtype bfloat16"):
        cutopk_onnx.top_k(X.astype(ml_dtypes.bfloat16), 1)


# --- DirectML worked examples (specs/directml-top-k.md and directml-top-k1.txt) ---

DML_X = np.array([[[[0, 1, 10, 11], [3, 2, 9, 8], [4, 5, 6, 7]]]], dtype=np.float32)
DML_TIES = np.array([[[[1, 2, 2, 3], [3, 4, 5, 5], [6, 6, 6, 6]]]], dtype=np.float32)


@pytest.mark.parametrize(
    ("x", "axis", "k", "direction", "values", "indices"),
    [
        (DML_X, 3, 2, "decreasing", [[11, 10], [9, 8], [7, 6]], [[3, 2], [2, 3], [3, 2]]),
        (DML_X, 2, 2, "decreasing", [[4, 5, 10, 11], [3, 2, 9, 8]], [[2, 2, 0, 0], [1, 1, 1, 1]]),
        (DML_TIES, 3, 3, "decreasing", [[3, 2, 2], [5, 5, 4], [6, 6, 6]], [[3, 1, 2], [2, 3, 1], [0, 1, 2]]),
        (DML_TIES, 3, 3, "increasing", [[1, 2, 2], [3, 4, 5], [6, 6, 6]], [[0, 1, 2], [0, 1, 2], [0, 1, 2]]),
    ],
)
def test_directml_examples(x, axis, k, direction, values, indices):
    res = directml.top_k(x, axis=axis, k=k, axis_direction=direction)
    assert res.indices.dtype == np.uint32
    assert res.values[0, 0].tolist() == values
    assert res.indices[0, 0].tolist() == indices


def test_directml_rules():
    x = np.zeros((1, 4), np.float32)
    with pytest.raises(
        ValueError, match=r"K: DirectML requires that K .must be greater than 0, but less than"
    ):
        directml.top_k(x, axis=1, k=0)
    # Both DirectML documents: K is "less than the number of elements ... along Axis".
    with pytest.raises(ValueError, match=r"\(4 along axis 1\), got K=4"):
        directml.top_k(x, axis=1, k=4)
    with pytest.raises(ValueError, match="axis: expected a non-negative integer"):
        directml.top_k(x, axis=-1, k=1)
    with pytest.raises(ValueError, match="axis: expected an axis below the dimension count 2"):
        directml.top_k(x, axis=2, k=1)
    with pytest.raises(ValueError, match="1 to 8 dimensions"):
        directml.top_k(np.zeros((1,) * 9, np.float32), axis=0, k=1)
    with pytest.raises(TypeError, match="does not support dtype float64"):
        directml.top_k(x.astype(np.float64), axis=1, k=1)
    with pytest.raises(ValueError, match="index_dtype: expected one of 'uint32', 'uint64'"):
        directml.top_k(x, axis=1, k=1, index_dtype="int64")
    assert directml.top_k(x, axis=1, k=2, index_dtype="uint64").indices.dtype == np.uint64


# --- OpenVINO TopK-1 ---


def test_openvino_example_shape():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((6, 12, 10, 24)).astype(np.float32)
    res = openvino.top_k(data, 3, axis=1, mode="max", sort="value")
    assert res.values.shape == (6, 3, 10, 24)
    assert res.indices.dtype == np.int32
    assert_same(
        (res.values, res.indices.astype(np.int64)), reference_top_k(data, 3, axis=1), index_dtype=np.int64
    )


@pytest.mark.parametrize(
    ("mode", "sort"), [(m, s) for m in ("max", "min") for s in ("value", "index", "none")]
)
def test_openvino_modes_and_sorts(mode, sort):
    data = np.array([[4, 1, 4, 7, 1, 7]], dtype=np.int32)
    res = openvino.top_k(data, 4, axis=-1, mode=mode, sort=sort, index_element_type="i64")
    expected = reference_top_k(
        data,
        4,
        mode="largest" if mode == "max" else "smallest",
        sorted={"value": True, "index": "index", "none": False}[sort],
        nan="largest",
    )
    assert_same(res, expected, order={"none": False}.get(sort, True))


def test_openvino_rules():
    data = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="mode: expected one of 'max', 'min'"):
        openvino.top_k(data, 1, axis=0, mode="largest", sort="value")
    with pytest.raises(ValueError, match="sort: expected one of 'value', 'index', 'none'"):
        openvino.top_k(data, 1, axis=0, mode="max", sort=True)
    with pytest.raises(ValueError, match="index_element_type: expected one of 'i32', 'i64'"):
        openvino.top_k(data, 1, axis=0, mode="max", sort="value", index_element_type="u32")
    with pytest.raises(TypeError, match="k: expected an integer scalar"):
        openvino.top_k(data, 1.5, axis=0, mode="max", sort="value")
    assert openvino.top_k(data, np.array(2), axis=1, mode="min", sort="index").values.shape == (2, 2)


def test_openvino_k_as_a_one_element_tensor_is_a_scalar():
    x = np.arange(10.0)
    want = openvino.top_k(x, 2, 0, "max", "value")
    got = openvino.top_k(x, np.array([2]), 0, "max", "value")
    assert_same(got, want, index_dtype=np.int32)


def test_directml_k_that_is_not_an_integer_is_refused():
    with pytest.raises(TypeError, match=r"^K: expected a non-negative integer \(UINT\), got float 2.5$"):
        directml.top_k(np.arange(10, dtype=np.float32), 0, 2.5)


def test_onnx_k_tensor_of_a_dtype_numpy_lacks_is_refused():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"^K: expected a tensor of dtype int64, got torch.qint8$"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # quantized tensors are deprecated in torch
            k = torch.quantize_per_tensor(torch.ones(1), 1.0, 0, torch.qint8)
        cutopk_onnx.top_k(np.arange(10.0), k)


def test_lists_are_type_errors_naming_the_spec_argument():
    with pytest.raises(TypeError, match=r"^X: expected a tensor"):
        cutopk_onnx.top_k([1.0, 3.0, 2.0], 2)
    with pytest.raises(TypeError, match=r"^input: expected a tensor"):
        directml.top_k([1.0, 3.0], axis=0, k=1)
    with pytest.raises(TypeError, match=r"^data: expected a tensor"):
        openvino.top_k([1.0, 3.0], 1, axis=0, mode="max", sort="value")


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
