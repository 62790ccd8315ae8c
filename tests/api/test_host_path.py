"""The host path (issue 12): cached call plans, ``out=``, launches and allocations per call, lazy
submodules, values in the input's own dtype and byte order, and the contract's copy in docs/."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, require, to_backend, to_host, usable
from support.inputs import make_values, misaligned
from support.launches import recording_launches
from support.reference import assert_same, reference_top_k

import cutopk
from cutopk._core import call as _call

ROOT = pathlib.Path(__file__).resolve().parents[2]
BACKENDS = ["numpy", "sim"]


# --- cached plans ---

CASES = [
    # (shape, k, kwargs): one per kernel family on the simulator, and layouts
    ((6, 100), 5, {}),
    ((3, 2000), 40, {"algorithm": "bitonic"}),
    ((2, 5000), 300, {"algorithm": "radix", "mode": "smallest"}),
    ((2, 5000), 40, {"algorithm": "multiblock", "sorted": "index"}),
    ((300, 40), 3, {"axis": 0, "nan": "largest"}),
    ((4, 3, 50), 2, {"axis": 1, "sorted": False}),
    ((1030, 300), 20, {"algorithm": "warp_radix"}),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("shape", "k", "kw"), CASES)
def test_cached_and_uncached_calls_agree(backend, shape, k, kw):
    backend = usable(backend)
    if backend == "numpy":
        kw = {key: v for key, v in kw.items() if key != "algorithm"}
    rng = np.random.default_rng(len(shape) * 7 + k)
    x = make_values(rng, np.float32, shape, "ties")
    _call.CACHE.clear()
    assert cutopk.plan(x, k, backend=backend, **kw).cached is False
    first = cutopk.top_k(x, k, backend=backend, **kw)
    assert cutopk.plan(x, k, backend=backend, **kw).cached is True
    second = cutopk.top_k(x, k, backend=backend, **kw)
    ref_kw = {key: v for key, v in kw.items() if key != "algorithm"}
    same = {"order": kw.get("sorted", True), "axis": kw.get("axis", -1)}
    assert_same(first, reference_top_k(x, k, **ref_kw), **same)
    assert_same(second, reference_top_k(x, k, **ref_kw), **same)
    # New data under the same signature: the plan is reused, the answer is the new data's.
    y = make_values(rng, np.float32, shape, "uniform")
    assert_same(cutopk.top_k(y, k, backend=backend, **kw), reference_top_k(y, k, **ref_kw), **same)


@pytest.mark.parametrize(
    ("good", "bad", "error"),
    [
        ({"k": 1}, {"k": True}, TypeError),
        ({"k": 1}, {"k": 1.0}, TypeError),
        ({"sorted": True}, {"sorted": 1}, ValueError),
        ({"axis": 1}, {"axis": True}, TypeError),
        ({"axis": 1}, {"axis": 1.0}, TypeError),
    ],
)
def test_a_cached_signature_never_answers_an_invalid_call(good, bad, error):
    # True == 1 == 1.0 with equal hashes: the key holds the argument types, so these are misses
    # and are refused by the checks every time.
    x = np.arange(12.0).reshape(3, 4)
    base = {"k": 2, "axis": -1, "sorted": True} | good
    k = base.pop("k")
    cutopk.top_k(x, k, **base)
    cutopk.top_k(x, k, **base)
    call = {"k": 2, "axis": -1, "sorted": True} | bad
    k = call.pop("k")
    for _ in range(2):
        with pytest.raises(error):
            cutopk.top_k(x, k, **call)


def test_unhashable_arguments_are_checked_uncached():
    x = np.arange(6.0)
    with pytest.raises(ValueError, match="mode: expected"):
        cutopk.top_k(x, 2, mode=["largest"])
    assert cutopk.top_k(x, np.array(2)).indices.tolist() == [5, 4]  # 0-d arrays do not hash


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_a_0d_k_changed_in_place_is_read_again_at_every_call(backend, kind):
    """The cache key holds the value of ``k``, never the object: a 0-d array or tensor changed in
    place between two calls gives the new K."""
    require(backend)
    if kind == "torch":
        torch = pytest.importorskip("torch", reason="torch is not installed")
        k = torch.tensor(3)
    else:
        k = np.array(3)
    x = to_backend(np.arange(40.0).reshape(4, 10), backend)
    assert cutopk.top_k(x, k, backend=backend).values.shape == (4, 3)
    k.fill_(5) if kind == "torch" else k.fill(5)
    r = cutopk.top_k(x, k, backend=backend)
    assert r.values.shape == (4, 5)
    assert to_host(r.indices).tolist() == [[9, 8, 7, 6, 5]] * 4
    assert cutopk.plan(x, k, backend=backend).k == 5


def test_a_cached_k_never_answers_a_refused_one():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    x = np.arange(12.0).reshape(3, 4)
    cutopk.top_k(x, torch.tensor(2))
    for bad in (torch.tensor([2]), torch.tensor(True), np.array([2])):
        with pytest.raises(TypeError, match="k: expected an integer"):
            cutopk.top_k(x, bad)


def test_the_cache_is_bounded(monkeypatch):
    cache = _call.CallCache(maxsize=4)
    monkeypatch.setattr(_call, "CACHE", cache)
    for n in range(5, 15):
        cutopk.top_k(np.zeros(n), 1)
    assert cache.info()["size"] == 4
    assert cutopk.plan(np.zeros(14), 1).cached and not cutopk.plan(np.zeros(5), 1).cached


def test_get_or_make_makes_once_and_counts_one_miss():
    cache = _call.CallCache()
    made = []
    for _ in range(3):
        entry = cache.get_or_make("key", lambda: made.append(object()) or made[-1])
    assert len(made) == 1 and entry is made[0]
    assert cache.info() == {"hits": 2, "misses": 1, "size": 1, "maxsize": _call.CACHE_SIZE}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_repeated_numpy_array_call_is_one_miss_then_hits(backend, monkeypatch):
    # top_k's short path for a NumPy array looks the signature up itself: a miss there must not
    # be counted twice (once there, once by the full preamble it falls back to).
    backend = usable(backend)
    cache = _call.CallCache()
    monkeypatch.setattr(_call, "CACHE", cache)
    x = make_values(np.random.default_rng(5), np.float32, (3, 50), "few_distinct")
    results = [cutopk.top_k(x, 4, backend=backend) for _ in range(4)]
    assert cache.info() == {"hits": 3, "misses": 1, "size": 1, "maxsize": _call.CACHE_SIZE}
    for result in results:
        assert_same(result, reference_top_k(x, 4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_cache_under_threads(backend, monkeypatch):
    backend = usable(backend)
    monkeypatch.setattr(_call, "CACHE", _call.CallCache(maxsize=3))  # constant eviction too
    rng = np.random.default_rng(3)
    inputs = [make_values(rng, np.float32, (4, n), "ties") for n in (50, 60, 70, 80, 90)]
    expected = [reference_top_k(x, 4) for x in inputs]
    errors = []

    def work(seed):
        order = np.random.default_rng(seed).permutation(len(inputs) * 6) % len(inputs)
        try:
            for i in order:
                assert_same(cutopk.top_k(inputs[i], 4, backend=backend), expected[i])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


# --- out= ---


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("axis", [-1, 0])
def test_out_is_written_and_returned(backend, axis):
    backend = usable(backend)
    x = make_values(np.random.default_rng(1), np.float32, (6, 40), "ties")
    shape = (6, 3) if axis == -1 else (3, 40)
    values, indices = np.full(shape, -7, np.float32), np.full(shape, -7, np.int32)
    r = cutopk.top_k(x, 3, axis=axis, index_dtype=np.int32, backend=backend, out=(values, indices))
    assert r.values is values and r.indices is indices
    assert_same((values, indices.astype(np.int64)), reference_top_k(x, 3, axis=axis))


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
@pytest.mark.parametrize("container", [tuple, list])
def test_out_is_a_tuple_or_a_list_of_the_two_arrays(backend, container):
    require(backend)
    x = to_backend(np.arange(12.0, dtype=np.float32).reshape(3, 4), backend)
    out = container(
        [to_backend(np.empty((3, 2), np.float32), backend), to_backend(np.empty((3, 2), np.int64), backend)]
    )
    r = cutopk.top_k(x, 2, backend=backend, out=out)
    assert r.values is out[0] and r.indices is out[1]
    assert to_host(out[1]).tolist() == [[3, 2]] * 3
    for other in (iter(out), {0: out[0], 1: out[1]}, (out[0],)):
        with pytest.raises(TypeError, match=r"out: expected a pair \(values, indices\) of arrays"):
            cutopk.top_k(x, 2, backend=backend, out=other)


def test_out_with_a_non_native_input():
    x = np.array([[1, 3, 2, 3]], dtype=">f4")
    out = (np.empty((1, 2), ">f4"), np.empty((1, 2), np.int64))
    for backend in BACKENDS:
        cutopk.top_k(x, 2, backend=usable(backend), out=out)
        assert out[0].tolist() == [[3, 3]] and out[1].tolist() == [[1, 3]]


def test_plan_of_a_byte_swapped_input_lists_the_swap_first():
    x = np.arange(600.0, dtype=">f4").reshape(3, 200)
    p = cutopk.plan(x, 4, backend="sim")
    assert p.launches[0].kernel == "library: byte swap of the input"
    assert "input: byte-swapped to native order (2400 bytes)" in p.copies


# Every view with 4-byte keys; the 8- and 2-byte keys with the stepped and the transposed view,
# which show the copy's strides follow the element's size (the reversed and broadcast views add
# only their sign and zero stride, the same for every size): 16 of the 24 (view, dtype) pairs
# cost ~40 s on the simulator with every algorithm. CUTOPK_FULL_MATRIX=1 runs all 24.
SWAP_VIEWS = ("columns", "rows_reversed", "transposed", "broadcast")
SWAP_CASES = [
    (view, dtype)
    for view in SWAP_VIEWS
    for dtype in (">f4", ">f8", ">i2")
    if os.environ.get("CUTOPK_FULL_MATRIX") == "1" or dtype == ">f4" or view in ("columns", "transposed")
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("view", "dtype"), SWAP_CASES, ids=[f"{v}-{d}" for v, d in SWAP_CASES])
@pytest.mark.parametrize("lengths", [False, True])
def test_a_strided_byte_swapped_input_gives_the_native_answer(backend, dtype, view, lengths):
    """A byte-swapped input that is not contiguous: every algorithm reads the swapped copy's
    layout, not the input's."""
    backend = usable(backend)
    base = make_values(np.random.default_rng(3), np.dtype(dtype).newbyteorder("="), (6, 120), "ties")
    x = base.astype(dtype)
    x = {
        "columns": x[:, ::2],
        "rows_reversed": x[::-2, 1::3],
        "transposed": x.T[::3],
        "broadcast": np.broadcast_to(x[:1, :50], (3, 50)),
    }[view]
    native = x.astype(x.dtype.newbyteorder("="))
    algorithms = ["auto"] if backend == "numpy" else cutopk.algorithms(backend)
    for algorithm in algorithms:
        for axis in (-1, 0):
            kw = {"axis": axis, "backend": backend, "algorithm": algorithm}
            if lengths:
                kw["lengths"] = np.arange(x.shape[1 - (axis % 2)]) % (x.shape[axis] + 1)
            try:
                want = cutopk.top_k(native, 3, **kw)
            except ValueError:  # the forced algorithm does not serve this shape
                continue
            got = cutopk.top_k(x, 3, **kw)
            assert got.values.dtype == x.dtype
            np.testing.assert_array_equal(got.indices, want.indices, err_msg=algorithm)
            np.testing.assert_array_equal(got.values, want.values, err_msg=algorithm)


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
@pytest.mark.parametrize("view", ["whole", "columns", "transposed"])
def test_a_misaligned_input_gives_the_aligned_answer(backend, view):
    """A float32 view 2 bytes into a buffer: copied to an aligned buffer before any kernel reads it
    (a misaligned read faults on a GPU), on every backend, with and without lengths."""
    require(backend)
    values = make_values(np.random.default_rng(5), np.float32, (4, 300), "ties")
    # The transposed view: 32 of its 300 rows of 4 (its first element, the misaligned one,
    # kept), which prove the same copy: all 300 cost ~40 s on the simulator (a forced "cluster"
    # simulates 4096 threads a row).
    pick = {"whole": lambda a: a, "columns": lambda a: a[:, 1::3], "transposed": lambda a: a.T[:32]}[view]
    x, aligned = pick(misaligned(values, backend)), pick(to_backend(values, backend))
    algorithms = ["auto"] if backend == "numpy" else cutopk.algorithms(backend)
    for algorithm in algorithms:
        lengths = to_backend(np.arange(x.shape[0]) % 5 + 3, backend)
        for kw in ({}, {"lengths": lengths}):
            kw |= {"backend": backend, "algorithm": algorithm}
            try:
                want = cutopk.top_k(aligned, 3, **kw)
            except ValueError:  # the forced algorithm does not serve this shape
                continue
            got = cutopk.top_k(x, 3, **kw)
            assert to_host(got.indices).tolist() == to_host(want.indices).tolist(), algorithm
            assert to_host(got.values).tolist() == to_host(want.values).tolist(), algorithm
    data = misaligned(values[0], backend)
    got = cutopk.segmented_top_k(data, [0, 7, 7, 300], 2, backend=backend)
    want = cutopk.segmented_top_k(to_backend(values[0], backend), [0, 7, 7, 300], 2, backend=backend)
    assert to_host(got.indices).tolist() == to_host(want.indices).tolist()


@pytest.mark.parametrize("backend", [p for p in BACKEND_PARAMS if p.values[0] != "numpy"])
def test_misaligned_outputs_are_refused_on_the_kernel_backends(backend):
    require(backend)
    x = to_backend(np.arange(40.0, dtype=np.float32).reshape(4, 10), backend)
    values, indices = (
        misaligned(np.zeros((4, 2), np.float32), backend),
        to_backend(np.zeros((4, 2), np.int64), backend),
    )
    with pytest.raises(ValueError, match=r"out: values must be aligned to its element size \(4 bytes\)"):
        cutopk.top_k(x, 2, backend=backend, out=(values, indices))


@pytest.mark.parametrize("backend", [p for p in BACKEND_PARAMS if p.values[0] != "numpy"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_misaligned_lengths_are_read_from_an_aligned_copy(backend, dtype):
    """On a GPU, CuPy's own reduction or cast of a misaligned lengths array faults, as our kernels
    would: it is copied byte by byte first."""
    require(backend)
    x = to_backend(np.arange(40.0, dtype=np.float32).reshape(4, 10), backend)
    lengths = misaligned(np.array([10, 3, 0, 1], dtype), "cuda" if backend == "cuda" else "numpy")
    r = cutopk.top_k(x, 2, lengths=lengths, backend=backend)
    assert to_host(r.indices).tolist() == [[9, 8], [2, 1], [-1, -1], [0, -1]]


OUT_X = np.zeros((3, 5), np.float32)


@pytest.mark.parametrize(
    ("out", "error", "message"),
    [
        ([np.empty((3, 2), np.float32)], TypeError, r"out: expected a pair \(values, indices\)"),
        (np.empty((3, 2)), TypeError, r"out: expected a pair"),
        ((np.empty((3, 3), np.float32), np.empty((3, 2), np.int64)), ValueError, r"out: values must have shape \(3, 2\), got \(3, 3\)"),
        ((np.empty((3, 2), np.float64), np.empty((3, 2), np.int64)), TypeError, "out: values must have dtype float32, got float64"),
        ((np.empty((3, 2), np.float32), np.empty((3, 2), np.int32)), TypeError, "out: indices must have dtype int64, got int32"),
        ((np.empty((2, 3), np.float32).T, np.empty((3, 2), np.int64)), ValueError, "out: values must be C-contiguous"),
        (([[0.0] * 2] * 3, np.empty((3, 2), np.int64)), TypeError, "out: values must be a NumPy array like the input, got list"),
        ((np.ma.zeros((3, 2), np.float32), np.empty((3, 2), np.int64)), TypeError, "out: values must be a NumPy array"),
        ((OUT_X.reshape(-1)[4:10].reshape(3, 2), np.empty((3, 2), np.int64)), ValueError, "out: values overlaps the input"),
    ],
)  # fmt: skip
def test_out_errors(out, error, message):
    for backend in BACKENDS:
        with pytest.raises(error, match=message):
            cutopk.top_k(OUT_X, 2, backend=usable(backend), out=out)


def test_out_read_only_and_overlapping_outputs():
    ro = np.empty((3, 2), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out: values is read-only"):
        cutopk.top_k(OUT_X, 2, out=(ro, np.empty((3, 2), np.int64)))
    buf = np.empty(48, np.uint8)
    values, indices = buf[:24].view(np.float32).reshape(3, 2), buf[:48].view(np.int64).reshape(3, 2)
    with pytest.raises(ValueError, match="out: values and indices overlap each other"):
        cutopk.top_k(OUT_X, 2, out=(values, indices))


def test_out_errors_come_before_any_work():
    # A misfit out is refused before the outputs are touched (the good one stays as it was).
    values = np.full((3, 2), 5.0, np.float32)
    with pytest.raises(TypeError):
        cutopk.top_k(OUT_X, 2, out=(values, np.empty((3, 2), np.int16)))
    assert (values == 5.0).all()


def test_out_with_torch_cpu_tensors():
    torch = pytest.importorskip("torch", reason="torch tensors as outputs")
    x = torch.tensor([[1.0, 4.0, 2.0]])
    values, indices = torch.empty(1, 2), torch.empty(1, 2, dtype=torch.int64)
    r = cutopk.top_k(x, 2, out=(values, indices))
    assert r.values is values and values.tolist() == [[4.0, 2.0]] and indices.tolist() == [[1, 2]]
    with pytest.raises(TypeError, match="out: values must have dtype float32, got float64"):
        cutopk.top_k(x, 2, out=(torch.empty(1, 2, dtype=torch.float64), indices))
    with pytest.raises(ValueError, match="out: values is a lazily negated"):
        cutopk.top_k(x, 2, out=(torch.empty(1, 2)._neg_view(), indices))


# --- launches and allocations per call, on the CUDA code path ---

SMALL = [
    ((4096, 128), 8, "warp_row"),
    ((1030, 3000), 64, "warp_radix"),
    ((64, 2048), 100, "bitonic"),
    ((64, 4000), 100, "radix"),
]


def test_observed_launches_end_with_the_observation():
    """The launch observer is the runner's seam, not a patch: inside it a call's launches are
    recorded and none runs; after it no observer is left, and the same call (prepared again, not
    the recorded one from the call cache) runs its kernels and gives the answer."""
    from cutopk.cuda import launcher

    x = np.arange(4 * 3000, dtype=np.float32).reshape(4, 3000)
    with recording_launches() as rec:
        cutopk.top_k(x, 5, backend="sim")
        assert rec.launches and len(launcher.OBSERVERS) == 1
    assert launcher.OBSERVERS == [] and launcher.array_module("sim") is np
    assert_same(cutopk.top_k(x, 5, backend="sim"), reference_top_k(x, 5))


def test_the_recorder_counts_a_copy_to_contiguous_rows_without_making_it():
    from cutopk.cuda import launcher

    a = np.arange(24.0).reshape(4, 6).T  # F-order: needs a copy
    with recording_launches() as rec:
        xp = launcher.array_module("sim")
        same = xp.ascontiguousarray(np.ones((2, 3)))
        assert rec.allocations == 0 and rec.allocated == []  # already C-contiguous: NumPy's own
        copy = xp.ascontiguousarray(a)
        assert copy.shape == a.shape and copy.dtype == a.dtype and copy.flags.c_contiguous
        assert rec.allocations == 1 and rec.allocated == [a.nbytes]
    assert same.flags.c_contiguous
    with recording_launches(count_allocations=False) as rec:
        launcher.array_module("sim").ascontiguousarray(a)
        assert rec.allocations == 0 and rec.allocated == []


@pytest.mark.parametrize(("shape", "k", "algorithm"), SMALL)
def test_small_problems_are_one_launch_and_allocate_only_outputs(shape, k, algorithm):
    x = np.zeros(shape, np.float32)
    with recording_launches() as rec:
        assert cutopk.plan(x, k, backend="sim").algorithm == algorithm
        cutopk.top_k(x, k, backend="sim")  # the first call also makes the module's placeholders
        launches, allocations = len(rec.launches), rec.allocations
        cutopk.top_k(x, k, backend="sim")
        assert len(rec.launches) - launches == 1
        assert rec.allocations - allocations == 2  # values and indices
        out = (np.empty((shape[0], k), np.float32), np.empty((shape[0], k), np.int64))
        launches, allocations = len(rec.launches), rec.allocations
        cutopk.top_k(x, k, backend="sim", out=out)
        assert len(rec.launches) - launches == 1 and rec.allocations == allocations  # nothing


EVERY_FAMILY = [
    ((64, 128), 8, {"algorithm": "warp_row"}),
    ((64, 3000), 16, {"algorithm": "warp_radix"}),
    ((64, 300), 5, {"algorithm": "thread_row"}),
    ((8, 2048), 100, {"algorithm": "bitonic"}),
    ((4, 100_000), 100, {"algorithm": "radix"}),  # with its candidate buffer
    ((3, 200), 7, {"algorithm": "sort"}),
    ((3, 200), 7, {"algorithm": "sort", "sorted": "index", "index_dtype": np.int32}),
    ((2, 5000), 40, {"algorithm": "multiblock"}),
    ((1, 100_000), 2000, {"algorithm": "multiblock", "index_dtype": np.uint32}),
    ((600, 50), 10, {"algorithm": "radix", "axis": 0}),  # transposed in, outputs moved back
]


@pytest.mark.parametrize(("shape", "k", "kw"), EVERY_FAMILY, ids=repr)
def test_a_warm_call_of_every_family_allocates_its_outputs_and_plans_nothing(shape, k, kw, monkeypatch):
    from cutopk.cuda import dispatch as _dispatch
    from cutopk.cuda import runner as _runner

    x = np.zeros(shape, np.float32)
    with recording_launches() as rec:
        cutopk.top_k(x, k, backend="sim", **kw)
        planned = []
        monkeypatch.setattr(_dispatch, "plan", lambda *a, **k_: planned.append(a))
        monkeypatch.setattr(_runner, "Schedule", lambda *a: planned.append(a))
        allocations, allocated = rec.allocations, len(rec.allocated)
        cutopk.top_k(x, k, backend="sim", **kw)
        assert rec.allocations - allocations == 2  # values and indices: the scratch is the workspace's
        rows = x.size // shape[kw.get("axis", -1)]
        index_bytes = np.dtype(kw.get("index_dtype", np.int64)).itemsize
        assert sorted(rec.allocated[allocated:]) == sorted([rows * k * 4, rows * k * index_bytes])
        assert planned == []  # a cache hit: neither the dispatcher nor the runner ran again


@pytest.mark.parametrize(
    ("shape", "k", "kw"),
    [
        ((2, 5000), 40, {"algorithm": "multiblock"}),
        ((2, 5000), 40, {"algorithm": "multiblock", "index_dtype": np.int32}),
        ((300, 40), 20, {"axis": 0}),
        ((3, 200), 7, {"algorithm": "sort", "sorted": "index"}),
        ((4, 300), 3, {}),
    ],
)
def test_plan_lists_the_launches_that_run(shape, k, kw):
    x = np.zeros(shape, np.float32)
    with recording_launches() as rec:
        plan = cutopk.plan(x, k, backend="sim", **kw)
        cutopk.top_k(x, k, backend="sim", **kw)
    kernels = [entry.kernel for entry in plan.launches for _ in range(entry.count) if entry.grid]
    assert kernels == rec.launches


# --- the package ---


def test_submodules_are_reachable_and_lazy():
    code = (
        "import sys, cutopk; assert 'dask' not in sys.modules and 'cutopk.onnx' not in sys.modules; "
        "import numpy as np; print(cutopk.onnx.top_k(np.array([1., 3.]), 1).indices.tolist(), "
        "cutopk.openvino.__name__, cutopk.directml.__name__, 'dask' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["[1]", "cutopk.openvino", "cutopk.directml", "False"]
    with pytest.raises(AttributeError, match="has no attribute 'nonsense'"):
        _ = cutopk.nonsense


def _contract_copy(root: pathlib.Path) -> tuple[pathlib.Path, str]:
    """The workspace's copy of docs/SPEC.md (a ``shared`` folder beside the checkout ``root``),
    and the reason to skip where there is none: it names the file of the checkout, since a path
    outside it means nothing on another machine (issue 49)."""
    copy = root.parent / "shared" / "SPEC.md"
    return copy, "docs/SPEC.md: this checkout has no workspace copy beside it to compare with"


def test_the_contract_copy_is_in_step():
    copy, reason = _contract_copy(ROOT)
    if not copy.is_file():
        pytest.skip(reason)
    assert (ROOT / "docs" / "SPEC.md").read_text() == copy.read_text()


def test_the_contract_copys_skip_reason_names_only_the_checkouts_file(tmp_path):
    copy, reason = _contract_copy(tmp_path / "checkout")
    assert not copy.is_file() and "docs/SPEC.md" in reason
    assert str(tmp_path) not in reason and "shared" not in reason


def test_out_ndarray_subclasses_are_written_in_place():
    class Tagged(np.ndarray):
        pass

    x = np.array([[1.0, 4.0, 2.0]], np.float32)
    values = np.zeros((1, 2), np.float32).view(Tagged)
    indices = np.zeros((1, 2), np.int64).view(Tagged)
    r = cutopk.top_k(x, 2, out=(values, indices))
    assert r.values is values and values.tolist() == [[4.0, 2.0]] and indices.tolist() == [[1, 2]]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [">f4", ">i2", ">f8", ">u8"])
def test_values_keep_a_non_native_byte_order(backend, dtype):
    x = np.array([[1, 3, 2, 3]], dtype=dtype)
    r = cutopk.top_k(x, 2, backend=usable(backend))
    assert r.values.dtype == x.dtype
    assert r.values.tolist() == [[3, 3]] and r.indices.tolist() == [[1, 3]]
    r = cutopk.top_k(x.T, 1, axis=0, backend=backend)
    assert r.values.dtype == x.dtype


SUBCLASS_CASES = [  # (backend, dtype, shape, axis): NumPy's routes on every width, the simulator's kernels
    *[("numpy", d, s, a) for d in ("f2", "f4", "f8", "i1", "i4", "u8") for s, a in
      (((4, 5), -1), ((4, 5), 0), ((4, 20000), -1), ((40, 8), 0))],
    ("sim", "f4", (4, 5), -1),
    ("sim", "i4", (40, 8), 0),
]  # fmt: skip


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("backend, dtype, shape, axis", SUBCLASS_CASES)
def test_ndarray_subclass_inputs_give_plain_ndarrays(backend, dtype, shape, axis, tmp_path):
    # np.matrix (which some routes' NumPy calls kept and others dropped), np.memmap and a user's
    # own subclass: the result is one type, numpy.ndarray, whatever route serves the call.
    class Tagged(np.ndarray):
        pass

    base = make_values(np.random.default_rng(3), dtype, shape)
    mapped = np.memmap(tmp_path / "x.bin", dtype=base.dtype, mode="w+", shape=shape)
    mapped[...] = base
    for x in (np.asmatrix(base), mapped, base.view(Tagged)):
        for _ in range(2):  # the uncached call, then the cached one
            r = cutopk.top_k(x, 2, axis=axis, backend=backend)
            assert type(r.values) is np.ndarray and type(r.indices) is np.ndarray, type(x)
            assert_same(r, reference_top_k(base, 2, axis=axis), axis=axis)
    del mapped
