"""merge_top_k in cutopk's own kernels (kernels/merge.cu, cutopk/cuda/merge_call.py): the
same results as the library route (concatenation, padding made least preferred, argsort by
index, one top_k: cutopk/irregular/merge.py, on NumPy) for every dtype, ties across parts, NaN
policies, orders, padding, unsorted parts, empty parts and more parts than one launch takes;
and on the CuPy stand-in, at most two launches of cutopk's kernels and none of CuPy's own for
up to 15 parts.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from support.backends import cuda_is_standin, require
from support.inputs import DTYPES, dtype_of, make_values

import cutopk
from cutopk.cuda.families import merge as _family
from cutopk.irregular import merge as _merge

ORDERS = ("value", "index", "none")
SORTED = {"value": True, "index": "index", "none": False}  # each order's sorted=
POLICIES = (("largest", "last"), ("largest", "largest"), ("smallest", "last"), ("smallest", "largest"))


@pytest.fixture(autouse=True)
def _sim():
    require("sim")


def make_parts(rng, dtype, rows, widths, sorted_, padding=True, dist="few_distinct"):
    """Parts as top_k gives them (``sorted_``: each part's order) from disjoint column ranges of
    one array, indices in its index space; with ``padding``, rows of lengths below the part's
    width (padding: index -1, value 0)."""
    total = sum(widths) * 2
    x = make_values(rng, dtype, (rows, total), dist)
    parts, start = [], 0
    for w in widths:
        lengths = rng.integers(0, 2 * w + 1, rows) if padding else np.full(rows, 2 * w)
        lengths = np.minimum(lengths, 2 * w)
        if w == 0:
            parts.append((np.zeros((rows, 0), x.dtype), np.zeros((rows, 0), np.int64)))
            continue
        r = cutopk.top_k(x[:, start : start + 2 * w], w, sorted=sorted_, lengths=lengths)
        parts.append((r.values, np.where(r.indices >= 0, r.indices + start, -1)))
        start += 2 * w
    return parts


def check(parts, k, mode="largest", order="value", nan="last"):
    """The kernel on the simulator against the library route, bit for bit, positions too."""
    assert (
        cutopk.plan(parts, k, mode=mode, sorted=SORTED[order], nan=nan, backend="sim").params["route"]
        == "kernels"
    )
    result, where = _merge.merge_top_k(parts, k, mode, SORTED[order], nan, positions=True, backend="sim")
    got = (*result, where)
    vdt, idt = parts[0][0].dtype, parts[0][1].dtype
    batch = parts[0][0].shape[:-1]
    want = _merge._merge(np, parts, k, mode, order, nan, vdt, idt, batch)
    bits = np.dtype(f"u{vdt.itemsize}")
    assert got[0].dtype == vdt and got[1].dtype == idt
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0].view(bits), want[0].view(bits))
    real = want[1] >= 0 if idt.kind == "i" else np.ones(want[1].shape, bool)
    np.testing.assert_array_equal(got[2][real], want[2][real])  # the gradient's positions


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_every_order_and_policy(dtype):
    rng = np.random.default_rng(abs(hash(dtype)) % 2**32)
    dt = dtype_of(dtype)
    parts = make_parts(rng, dt, 5, [7, 12, 1, 9], True)
    if np.dtype(dt).kind == "f" or np.dtype(dt).name == "bfloat16":
        parts[1][0][0, :3] = np.nan  # NaN in a part: the policy decides where it ranks
        parts[2][0][1, 0] = -0.0
    for order, (mode, nan) in itertools.product(ORDERS, POLICIES):
        check(parts, 15, mode, order, nan)


@pytest.mark.parametrize("sorted_", [True, False, "index"], ids=["value", "any", "index"])
def test_ties_across_parts_go_to_the_lower_index(sorted_):
    rng = np.random.default_rng(1)
    # Two distinct values: every K boundary falls inside a run of ties spread over the parts.
    parts = make_parts(rng, np.int16, 6, [10, 10, 10], sorted_, dist="ties")
    for order in ORDERS:
        check(parts, 12, order=order)
    # The parts' indices interleaved: the lower index sits in a later part.
    x = np.zeros((2, 40), np.float32)
    odd = (x[:, 1::2], np.arange(1, 40, 2) + np.zeros((2, 1), np.int64))
    even = (x[:, ::2], np.arange(0, 40, 2) + np.zeros((2, 1), np.int64))
    check([odd, even], 7)


def test_padding_rows_with_fewer_real_candidates_than_k():
    rng = np.random.default_rng(2)
    parts = make_parts(rng, np.float32, 8, [5, 3, 4], True)
    parts[0][1][0] = -1  # a row whose first part is all padding
    parts[0][0][0] = 0
    for order in ORDERS:
        check(parts, 12, order=order)  # k == every candidate: padding places at each row's end


@pytest.mark.parametrize("index_dtype", [np.int32, np.uint32, np.uint64])
def test_index_dtypes(index_dtype):
    rng = np.random.default_rng(3)
    parts = make_parts(rng, np.float64, 4, [6, 6], True, padding=np.dtype(index_dtype).kind == "i")
    parts = [(v, i.astype(index_dtype)) for v, i in parts]
    check(parts, 9, order="index")
    check(parts, 9)


@pytest.mark.parametrize("count", [1, 8, 9, 15, 16, 23])
def test_more_parts_than_one_launch_takes(count):
    """8 parts per launch; each further launch takes the result so far and 7 more parts."""
    rng = np.random.default_rng(count)
    widths = [int(w) for w in rng.integers(0, 9, count)]
    parts = make_parts(rng, np.float32, 3, widths, bool(count % 2), dist="few_distinct")
    k = min(10, sum(widths))
    for order in ("value", "index") if k else ():
        check(parts, k, order=order)
    assert _family.launches(count) == 1 + max(0, -(-(count - 8) // 7))
    if k:
        assert cutopk.plan(parts, k, backend="sim").launch_count == _family.launches(count)


def test_strided_and_non_native_parts_and_a_batch_shape():
    rng = np.random.default_rng(4)
    x = make_values(rng, np.float32, (2, 3, 60), "uniform")
    a, b = cutopk.top_k(x[..., :30], 6), cutopk.top_k(x[..., 30:], 6)
    strided = (np.repeat(a.values, 2, axis=-1)[..., ::2], a.indices)
    check([strided, (b.values, b.indices + 30)], 8)
    swapped = [(v.astype(">f4"), i) for v, i in ((a.values, a.indices), (b.values, b.indices + 30))]
    check(swapped, 8)


def test_the_plan_of_byte_swapped_parts_lists_their_copies():
    values, indices = np.arange(60.0, dtype=">f4").reshape(2, 30), np.tile(np.arange(30), (2, 1))
    parts = [(values, indices.astype(">i8")), (values.astype("<f4"), indices + 30)]
    planned = cutopk.plan(parts, 4, backend="sim")
    assert planned.params["route"] == "kernels"
    assert planned.copies == (
        "parts[0].values: copied to native byte order (240 bytes)",
        "parts[0].indices: copied to native byte order (480 bytes)",
        "results: values copied to >f4 byte order (32 bytes)",
        "results: indices copied to >i8 byte order (64 bytes)",
    )
    got = _merge.merge_top_k(parts, 4, backend="sim")
    assert got.values.dtype == np.dtype(">f4") and got.indices.dtype == np.dtype(">i8")
    np.testing.assert_array_equal(got.indices, [[29, 59, 28, 58], [29, 59, 28, 58]])


def test_the_plan_of_a_merge_with_nothing_to_select_launches_nothing():
    parts = [(np.ones((3, 5), np.float32), np.zeros((3, 5), np.int64))] * 2
    planned = cutopk.plan(parts, 0, backend="sim")
    assert (planned.params["route"], planned.launches, planned.copies) == ("kernels", (), ())
    got = _merge.merge_top_k(parts, 0, backend="sim")
    assert got.values.shape == got.indices.shape == (3, 0)


def test_too_many_candidates_for_shared_memory_take_the_library_route():
    wide = [(np.arange(40_000.0)[None], np.arange(40_000)[None])]
    planned = cutopk.plan(wide, 5, backend="sim")
    assert planned.params["route"] == "library" and "shared memory" in planned.params["why_not"]
    assert planned.launches[0].kernel == "library: parts concatenated"
    got = _merge.merge_top_k(wide, 5, backend="sim")
    np.testing.assert_array_equal(got.indices, [[39_999, 39_998, 39_997, 39_996, 39_995]])


# ---- on the CuPy stand-in: the launches merge_top_k makes


@pytest.fixture
def cupy():
    require("cuda")
    if not cuda_is_standin():
        pytest.skip("the launch log is the CuPy stand-in's")
    import cupy

    return cupy


@pytest.mark.parametrize(("count", "launches"), [(2, 1), (8, 1), (9, 2), (15, 2)])
def test_merge_top_k_is_at_most_two_launches_of_cutopk_kernels(cupy, count, launches):
    from cupy import _state

    rng = np.random.default_rng(5)
    host = make_parts(rng, np.float32, 16, [50] * count, True)
    parts = [(cupy.asarray(v), cupy.asarray(i)) for v, i in host]
    cutopk.merge_top_k(parts, 50)  # the first call compiles
    start = len(_state.LAUNCHES)
    got = cutopk.merge_top_k(parts, 50)
    log = _state.LAUNCHES[start:]
    assert log == [("kernel", "merge_parts_float32")] * launches, log
    want = cutopk.merge_top_k(host, 50)
    np.testing.assert_array_equal(got.indices.get(), want.indices)
    np.testing.assert_array_equal(got.values.get(), want.values)


@pytest.mark.parametrize("index_dtype", [np.uint32, np.int64])
def test_a_first_launch_with_fewer_candidates_than_k(index_dtype):
    """Eight parts of one candidate, then two of five, K=10: the first launch keeps its 8 (an
    unsigned index has no padding a later launch could tell from a real entry)."""
    rng = np.random.default_rng(6)
    parts = make_parts(rng, np.float32, 3, [1] * 8 + [5, 5], True, padding=False)
    parts = [(v, i.astype(index_dtype)) for v, i in parts]
    for order in ("value", "index"):
        check(parts, 10, order=order)


def test_gradients_of_cuda_tensor_parts_reach_the_winners(cupy, monkeypatch):
    """The kernel's positions carry the gradient to each winner's place in its part, as on the
    CPU (torch CUDA tensors of the stand-in)."""
    torch = pytest.importorskip("torch")
    from standin import torch_cuda

    torch_cuda.install(monkeypatch)
    rng = np.random.default_rng(7)
    host = [rng.permutation(40).reshape(2, 20)[:, :6].astype(np.float32) for _ in range(3)]
    indices = [np.arange(6)[None].repeat(2, 0) + 10 * j for j in range(3)]
    cpu = [torch.tensor(v, requires_grad=True) for v in host]
    gpu = [torch_cuda.to_cuda(v).requires_grad_(True) for v in host]
    weights = torch.arange(5.0)
    r = cutopk.merge_top_k([(v, torch.from_numpy(i)) for v, i in zip(cpu, indices, strict=True)], 5)
    (r.values * weights).sum().backward()
    parts = [(v, torch_cuda.to_cuda(i)) for v, i in zip(gpu, indices, strict=True)]
    assert cutopk.plan(parts, 5).params["route"] == "kernels"  # the GPU parts take the kernel
    r = cutopk.merge_top_k(parts, 5)
    (r.values * torch_cuda.to_cuda(weights)).sum().backward()
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.cpu().numpy())
