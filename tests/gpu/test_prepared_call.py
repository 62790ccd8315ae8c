"""The prepared GPU call (cutopk/cuda/launcher.py) on the simulator: a failed launch that is not
out of memory reaches the caller as it was raised, on the in-place and the transposed layouts;
the call reading lengths is planned once, in the core's cache; and a misaligned strided input is run, call after
call, by the one aligned-layout call planned for it."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import require
from support.launches import failing_launches

import cutopk
from cutopk._core import call as _call


@pytest.fixture(autouse=True)
def _sim():
    require("sim")


class LaunchFailure(RuntimeError):
    """Stands in for a CUDA launch error (cudaErrorLaunchFailure): not out of memory."""


@pytest.mark.parametrize(
    ("shape", "axis", "into_out"),
    [((2, 300), -1, False), ((2, 300), -1, True), ((300, 2), 0, False)],
    ids=["in place", "in place into out", "transposed"],
)
def test_a_launch_error_that_is_not_out_of_memory_propagates_unchanged(shape, axis, into_out):
    failure = LaunchFailure("unspecified launch failure")
    out = (np.zeros((2, 100), np.float32), np.zeros((2, 100), np.int64)) if into_out else None
    with failing_launches(failure), pytest.raises(LaunchFailure) as caught:
        cutopk.top_k(np.zeros(shape, np.float32), 100, axis=axis, backend="sim", algorithm="radix", out=out)
    assert caught.value is failure


def test_the_call_that_reads_lengths_is_planned_once_and_kept_in_the_core_cache():
    from cutopk.cuda import kernel_constants as _kernel_constants

    _call.CACHE.clear()
    x = np.zeros((3, 50), np.float32)
    _, _, _, call, _ = _call.prepare(x, 4, -1, "largest", True, "last", np.int64, "sim", "auto")
    lengths_call = _call.lengths_call(x, call)
    assert lengths_call is not call and lengths_call.rows_kind == _kernel_constants.ROWS_LENGTHS
    assert call.rows_kind == _kernel_constants.ROWS_REGULAR
    assert _call.lengths_call(x, call) is lengths_call  # planned once
    assert (
        _call.CACHE.info()["size"] == 2
    )  # the plain call and the one reading lengths, each keyed by the core
    _, _, _, numpy_call, _ = _call.prepare(x, 4, -1, "largest", True, "last", np.int64, "numpy", "auto")
    assert _call.lengths_call(x, numpy_call) is None  # the NumPy backend's generic route (masked rows)


def _misaligned_columns(values: np.ndarray) -> np.ndarray:
    """Every other column of ``values`` copied into a buffer 2 bytes off alignment."""
    wide = np.repeat(values, 2, axis=1)
    x = np.zeros(wide.nbytes + 2, np.uint8)[2:].view(values.dtype).reshape(wide.shape)
    x[...] = wide
    assert not x.flags.aligned
    return x[:, ::2]


def test_misaligned_strided_inputs_share_one_aligned_call():
    rng = np.random.default_rng(8)
    values = rng.integers(-4, 5, (4, 60)).astype(np.float32)
    want = cutopk.top_k(values, 5, backend="numpy")
    _call.CACHE.clear()
    aligned = []
    for _ in range(2):
        x = _misaligned_columns(values)
        got = cutopk.top_k(x, 5, backend="sim")
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.values, want.values)
        _, _, _, call, cached = _call.prepare(x, 5, -1, "largest", True, "last", np.int64, "sim", "auto")
        aligned.append(call._aligned)
    assert cached and aligned[0] is aligned[1]


def test_kernels_are_looked_up_by_a_supported_element_types_cxx_name():
    from cutopk.cuda import launcher as _launcher

    family_modules = _launcher._build_module("sim", "float")  # compiles nothing until a kernel is asked for
    with pytest.raises(
        KeyError, match=r"no kernel 'no_such_kernel<float>' for element type 'float' in any family"
    ):
        family_modules.get_function("no_such_kernel<float>")
    with pytest.raises(
        ValueError, match=r"^cxx: expected the C\+\+ name of a supported element type, got 'complex'$"
    ):
        _launcher._build_module("sim", "complex").get_function("warp_row_topk<complex, 4>")
    assert family_modules.modules == {}


@pytest.mark.parametrize("where", ["kernel", "copy"])
def test_a_family_step_naming_no_value_of_the_call_is_a_clear_error(monkeypatch, where):
    """A family table naming an array the call does not have (a developer's slip) fails while
    the call is prepared, naming the kernel and the parameter, before anything is launched."""
    from cutopk.cuda.families import common as _common
    from cutopk.cuda.families import registry as _registry

    real = _registry.part

    def with_a_slip(algorithm, facts):
        part = real(algorithm, facts)
        first = part.steps[0]
        if where == "kernel":
            slip = first._replace(args=(*first.args, ("out_vals", "no_such_array")))
        else:
            slip = _common.Step("", False, (1,), 1, library="a copy", copy=("no_such_array", "in", 2, 50, 50))
        return part._replace(steps=[slip, *part.steps[1:]])

    monkeypatch.setattr(_registry, "part", with_a_slip)
    _call.CACHE.clear()
    x = np.zeros((2, 50), np.float32)
    message = {
        "kernel": r"^warp_row_topk: no value for its parameter 'out_vals' \('no_such_array'\)$",
        "copy": r"^a copy: no array 'no_such_array' in the call$",
    }[where]
    with pytest.raises(RuntimeError, match=message):
        cutopk.top_k(x, 3, backend="sim")
    _call.CACHE.clear()  # nor may a later test reuse a call prepared under the patch
