"""merge_top_k's GPU parts as they come: strided and misaligned CuPy parts read by the kernel
through a contiguous or aligned copy, the same answer as NumPy parts; parts of mixed array kinds
refused; and the kernel's 32-bit counts, past which the merge takes the library route."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import cuda_is_standin, require
from support.inputs import misaligned

import cutopk
from cutopk.cuda.families import merge as _family


@pytest.fixture
def cupy():
    require("cuda")
    if not cuda_is_standin():
        pytest.skip("the misaligned views are built on the CuPy stand-in's memory")
    import cupy

    return cupy


def _parts(rng):
    """Two parts of a (3, 20) float32 array with ties, indices in its index space."""
    x = rng.integers(-3, 4, (3, 20)).astype(np.float32)
    left, right = cutopk.top_k(x[:, :10], 6), cutopk.top_k(x[:, 10:], 6)
    return [(left.values, left.indices), (right.values, right.indices + 10)]


@pytest.mark.parametrize("layout", ["strided", "misaligned"])
def test_strided_and_misaligned_gpu_parts_give_the_host_answer(cupy, layout):
    host = _parts(np.random.default_rng(3))
    want = cutopk.merge_top_k(host, 7)
    if layout == "strided":  # every other column of a wider array: not C-contiguous
        parts = []
        for v, i in host:
            wide_v, wide_i = cupy.zeros((3, 12), v.dtype), cupy.zeros((3, 12), i.dtype)
            wide_v[:, ::2], wide_i[:, ::2] = cupy.asarray(v), cupy.asarray(i)
            parts.append((wide_v[:, ::2], wide_i[:, ::2]))
        assert not parts[0][0].flags.c_contiguous
    else:
        parts = [(misaligned(v, "cuda"), misaligned(i, "cuda")) for v, i in host]
    planned = cutopk.plan(parts, 7)  # the GPU parts take the kernel, reading copies of these
    assert planned.params["route"] == "kernels" and planned.copies, planned
    got = cutopk.merge_top_k(parts, 7)
    assert isinstance(got.values, cupy.ndarray)
    np.testing.assert_array_equal(got.indices.get(), want.indices)
    np.testing.assert_array_equal(got.values.get(), want.values)


def test_parts_of_mixed_array_kinds_are_refused(cupy):
    (v0, i0), (v1, i1) = _parts(np.random.default_rng(4))
    with pytest.raises(
        TypeError,
        match=r"^parts\[1\]\.values: expected a CPU array like parts\[0\]\.values, got a GPU array$",
    ):
        cutopk.merge_top_k([(v0, i0), (cupy.asarray(v1), i1)], 3)
    with pytest.raises(
        TypeError,
        match=r"^parts\[0\]\.indices: expected a GPU array like parts\[0\]\.values, got a CPU array$",
    ):
        cutopk.merge_top_k([(cupy.asarray(v0), i0)], 3)


def test_rows_past_the_kernels_32_bit_counts_take_the_library_route():
    """The kernel counts a row's candidates in 32 bits: a launch over 2**31 or more candidates
    is refused (merge_top_k then takes the library route), whatever shared memory allows."""
    plenty = 2**40
    assert _family.why_not([2**30, 2**30 - 1], 5, 4, plenty) is None
    assert (
        _family.why_not([2**30, 2**30], 5, 4, plenty)
        == "a row of 2147483648 candidates is past the kernel's 32-bit counts"
    )
    # A later launch counts the earlier launch's k winners too (its part 0).
    widths = [1] * _family.PARTS + [2**31 - 8]
    assert _family.why_not(widths, 7, 4, plenty) is None
    assert _family.why_not(widths, 8, 4, plenty) == (
        "a row of 2147483648 candidates is past the kernel's 32-bit counts"
    )
