"""What the launcher compiles: one module per (element type, kernel family), built on the first
use of one of its kernels, of ``extern "C"`` entry points (no name expressions, so CuPy's on-disk
cache serves a new process; cutopk/cuda/kernel_source.py)."""

from __future__ import annotations

import re
import threading
from unittest import mock

import numpy as np
import pytest
from support.launches import recording_launches

import cutopk
from cutopk import sim
from cutopk._request import dtypes as _dtypes
from cutopk.cuda import device as _device
from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda import kernel_source as _kernel_source
from cutopk.cuda import launcher as _launcher

# Calls that, between them, plan every family (but merge: a merge_top_k in _asked_for) and every
# template value the launcher picks.
CALLS = [
    *[((5, n), 3, {"algorithm": "warp_row"}) for n in (20, 64, 128, 256, 512, 1024)],
    *[((40, 300), k, {"algorithm": "thread_row", "axis": 0}) for k in (1, 2, 3, 8)],
    ((3, 2000), 40, {"algorithm": "warp_radix"}),
    ((3, 2000), 40, {"algorithm": "bitonic"}),
    ((3, 2000), 40, {"algorithm": "radix"}),
    ((3, 2000), 40, {"algorithm": "resident"}),
    ((3, 2000), 40, {"algorithm": "block_row"}),
    ((2, 2000), 40, {"algorithm": "cluster"}),
    ((2, 2000), 40, {"algorithm": "split"}),
    ((300, 40), 5, {"algorithm": "radix", "axis": 0}),  # rows along an outer axis: transposed
    ((2, 5000), 40, {"algorithm": "multiblock"}),
    ((2, 200_000), 2000, {"algorithm": "multiblock"}),
    ((3, 200), 7, {"algorithm": "sort", "sorted": "index"}),
]


BIG = _dispatch.Device(shared_bytes=_dispatch.shared_limit(48 * 1024, 227 * 1024), clusters=True)


def _dtype(name: str) -> np.dtype:
    return next(dt for dt, info in _dtypes.SUPPORTED.items() if info.name == name)


def _asked_for(dtype: np.dtype) -> list[str]:
    """The kernel names the launchers ask a module for, over CALLS (launches recorded, not run)."""
    from cutopk.irregular import merge as _merge

    with recording_launches(count_allocations=False) as rec:
        for shape, k, kw in CALLS:
            cutopk.top_k(np.zeros(shape, dtype), k, backend="sim", **kw)
        # streaming, which a 48 KB device (the simulator's) cannot hold: on an H100's facts.
        with mock.patch.object(_device, "device_facts", lambda target, dev: BIG):
            cutopk.top_k(np.zeros((2, 9000), dtype), 40, backend="sim", algorithm="streaming")
        # merge_top_k's kernel (kernels/merge.cu), which no top_k call reaches.
        part = (np.zeros((2, 3), dtype), np.zeros((2, 3), np.int64))
        _merge.merge_top_k([part, part], 3, backend="sim")
    return rec.launches


def test_every_kernel_the_launchers_ask_for_is_an_entry_point_of_its_family():
    programs = {(p.dtype, p.family): p for p in _launcher.programs()}
    assert set(programs) == {(i.name, f) for i in _dtypes.SUPPORTED.values() for f in _kernel_source.FAMILIES}
    for info in _dtypes.SUPPORTED.values():
        asked = set(_asked_for(_dtype(info.name)))
        families = set()
        for name in asked:
            family, entry = _launcher._entry_points(info.cxx)[name.replace(" ", "")]
            program = programs[(info.name, family)]
            assert entry in program.kernels, (name, family)
            assert not program.name_expressions
            # The entry point is defined in its module's source, as an extern "C" kernel.
            assert re.search(
                # (a cluster kernel's __cluster_dims__ sits between, inside an #if for sm_90)
                rf'extern "C" __global__ void __launch_bounds__\(.*\)\s+(?:#if .*\n.*__cluster_dims__\(.*\)\n#endif\n)?\s*{entry}\(',
                program.source,
            )
            families.add(family)
        assert families == set(_kernel_source.FAMILIES), info.name  # CALLS reach every family
        # Every template value the launcher can pick was asked for.
        for items in _kernel_source.WARP_ROW_ITEMS:
            assert f"warp_row_topk<{info.cxx}, {items}>" in asked
        for kmax in _kernel_source.THREAD_ROW_KMAX:
            assert f"thread_row_topk<{info.cxx}, {kmax}>" in asked


def test_a_module_holds_only_its_family_file_and_the_headers_it_includes():
    source = _kernel_source.source("warp_row", "float32")
    assert "// ---- warp_row.cu" in source and "// ---- radix.cu" not in source
    assert "// ---- multiblock.cu" not in source and "digit_pass" not in source
    assert "// ---- key_traits.cuh" in source and "// ---- row_loads.cuh" not in source
    # Headers before the files that include them, each once.
    files = _kernel_source.files_of("multiblock.cu")
    assert files[-1] == "multiblock.cu" and len(set(files)) == len(files)
    assert files.index("block_sort.cuh") < files.index("radix_digit.cuh")


def test_each_kernel_file_is_named_as_its_family_and_its_code_is_in_namespace_cutopk():
    folder = _launcher.kernel_dir()
    assert sorted(p.stem for p in folder.glob("*.cu")) == sorted(_kernel_source.FAMILIES)
    # Comments and preprocessor lines out: macros (CUTOPK_*) are global by nature, and so are the
    # extern "C" symbols the host reads by name (phase_clock.cuh's stamps).
    noise = re.compile(r'//[^\n]*|/\*.*?\*/|^[ \t]*#(?:[^\n\\]|\\.)*$|extern "C" \{[^{}]*\}', re.S | re.M)
    for path in sorted(folder.glob("*.cu*")):
        text = noise.sub(" ", path.read_text())
        if path.suffix == ".cu":
            assert f"namespace cutopk::{path.stem} {{" in text, path.name
        elif "__device__" in text:
            assert "namespace cutopk {" in text, path.name
        # The simulator's namespace (cutopk_sim, which async_copy.cuh calls on the host) is not a
        # prefixed kernel name.
        prefixed = set(re.findall(r"\b(?:cutopk_(?!sim\b)\w+|Cutopk\w+|Mb[A-Z]\w*|mb_\w+)", text))
        assert prefixed == set(), path.name


def test_an_unknown_kernel_name_is_a_clear_error():
    mod = _launcher._FamilyModules("sim", "float")
    with pytest.raises(KeyError, match=r"no kernel 'radix_topk<double>' for element type 'float'"):
        mod.get_function("radix_topk<double>")
    assert mod.modules == {}  # nothing compiled


@pytest.fixture
def built(monkeypatch):
    """The (target, cxx, family) of every module compiled, with an empty module cache."""
    log = []
    build = _launcher._build_family

    def counted(target, cxx, family):
        log.append((target, cxx, family))
        return build(target, cxx, family)

    monkeypatch.setattr(_launcher, "_build_family", counted)  # no public seam sees a compilation
    cutopk._core.call.CACHE.clear()
    with _launcher.emptied_caches():
        yield log
    cutopk._core.call.CACHE.clear()


@pytest.mark.skipif(not sim.is_available(), reason="the CPU simulator cannot run here")
def test_a_call_compiles_only_its_familys_module(built):
    x = np.random.default_rng(1).standard_normal((4, 40)).astype(np.float32)
    values, _ = cutopk.top_k(x, 3, backend="sim", algorithm="warp_row")
    assert np.array_equal(values, -np.sort(-x, axis=1)[:, :3])
    assert built == [("sim", "float", "warp_row")]
    cutopk.top_k(x, 5, backend="sim", algorithm="warp_row")  # another instantiation, same module
    cutopk.top_k(x[:, :20], 3, backend="sim", algorithm="warp_row")
    assert built == [("sim", "float", "warp_row")]
    cutopk.top_k(x, 3, backend="sim", algorithm="bitonic")
    cutopk.top_k(x.astype(np.int16), 3, backend="sim", algorithm="bitonic")
    assert built[1:] == [("sim", "float", "bitonic"), ("sim", "short", "bitonic")]


@pytest.mark.skipif(not sim.is_available(), reason="the CPU simulator cannot run here")
def test_threads_asking_for_one_family_compile_it_once(built):
    mod = _launcher._FamilyModules("sim", "float")
    barrier = threading.Barrier(4)

    def one(name):
        barrier.wait()
        return mod.get_function(name)

    names = ["order_tiles<float>", "order_merge<float>", "order_tiles_float32", "order_merge<float>"]
    threads = [threading.Thread(target=one, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert built == [("sim", "float", "order")]


@pytest.mark.skipif(not sim.is_available(), reason="the CPU simulator cannot run here")
@pytest.mark.parametrize(
    "algorithm, kwargs",
    [("warp_row", {}), ("multiblock", {}), ("resident", {"lengths": np.array([40, 7, 0, 33])})],
)
def test_a_plan_builds_nothing_and_says_whether_the_modules_are_built(built, algorithm, kwargs):
    x = np.random.default_rng(2).standard_normal((4, 40)).astype(np.float32)
    p = cutopk.plan(x, 3, backend="sim", algorithm=algorithm, **kwargs)
    assert built == [] and p.built is False, (built, p)
    assert "modules: not built yet (the first call compiles them)" in str(p)
    values, _ = cutopk.top_k(x, 3, backend="sim", algorithm=algorithm, **kwargs)
    assert built and {family for _, _, family in built} <= {algorithm, "order"}, built
    if not kwargs:
        assert np.array_equal(values, -np.sort(-x, axis=1)[:, :3])
    again = cutopk.plan(x, 3, backend="sim", algorithm=algorithm, **kwargs)
    assert again.built is True and "modules: built" in str(again)


@pytest.mark.skipif(not sim.is_available(), reason="the CPU simulator cannot run here")
def test_a_merge_plan_builds_nothing_and_lists_the_launches_the_merge_makes(built):
    from cutopk.irregular import merge as _merge

    rng = np.random.default_rng(3)
    parts = []
    for p in range(9):  # more parts than one launch takes: two launches, scratch between them
        values = -np.sort(-rng.standard_normal((3, 4)).astype(np.float32), axis=1)
        parts.append((values, np.arange(4)[None].repeat(3, 0) + 4 * p))
    p = cutopk.plan(parts, 5, backend="sim")
    assert built == [] and p.built is False, (built, p)
    assert p.launch_count == 2 and p.scratch_bytes > 0 and p.params["route"] == "kernels"
    with cutopk._core.call.observe_launches() as rec:
        _merge.merge_top_k(parts, 5, backend="sim")
    assert [(launch.kernel, launch.grid, (launch.block,), launch.shared_bytes) for launch in p.launches] == [
        (name, grid, block, shared) for name, grid, block, shared in rec.shapes
    ]
    got = _merge.merge_top_k(parts, 5, backend="sim")
    assert built == [("sim", "float", "merge")]
    want = cutopk.top_k(np.concatenate([v for v, _ in parts], axis=1), 5)
    np.testing.assert_array_equal(got.values, want.values)
    np.testing.assert_array_equal(got.indices, want.indices)
    again = cutopk.plan(parts, 5, backend="sim")
    assert again.built is True and again.cached


def test_a_numpy_plan_says_nothing_of_kernel_modules():
    p = cutopk.plan(np.zeros((2, 10), np.float32), 3, backend="numpy")
    assert p.built is None and "modules:" not in str(p)
