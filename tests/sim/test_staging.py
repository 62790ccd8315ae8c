"""The copies of array memory used by ASan and isolated launches."""

from __future__ import annotations

import numpy as np
import pytest

from cutopk.sim import _staging as st


def regions_of(*arrays):
    return [st.Region(*np.lib.array_utils.byte_bounds(a), a.flags.writeable) for a in arrays]


@pytest.mark.parametrize("kind", ["malloc", "shared"])
def test_overlapping_views_share_one_copy_touching_arrays_do_not(kind):
    buf = np.arange(16, dtype=np.uint8)
    s = st.Staging(regions_of(buf[:8], buf[8:], buf[4:12]), kind)
    assert len(s.regions) == 1  # [0, 8) and [4, 12) overlap, and [8, 16) overlaps the latter
    s.finish(write_back=False)
    s = st.Staging(regions_of(buf[:8], buf[8:]), kind)
    assert len(s.regions) == 2
    # The boundary address is the start of the second array, not the end of the first.
    assert s.translate(buf[8:].ctypes.data) == s.copies[1]
    s.finish(write_back=False)


def test_changes_go_back_only_to_writeable_arguments():
    out = np.zeros(4, np.int32)
    const = np.broadcast_to(np.int32(5), (4,))  # read-only, zero strides
    s = st.Staging(regions_of(out, const), "malloc")
    np.ctypeslib.as_array((np.ctypeslib.ctypes.c_int32 * 4).from_address(s.translate(out.ctypes.data)))[:] = 7
    s.finish(write_back=True)
    assert out.tolist() == [7] * 4
    s = st.Staging(regions_of(const), "malloc")
    (np.ctypeslib.ctypes.c_int32).from_address(s.translate(const.ctypes.data)).value = 1
    with pytest.raises(ValueError, match="read-only"):
        s.finish(write_back=True)
    assert const[0] == 5


def test_byte_bounds_match_numpy():
    from cutopk.sim._module import _byte_bounds

    base = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
    views = [
        base,
        base.T,
        base[:, ::2],
        base[::-1, :, 1:4],
        base[:, ::-3, ::2],
        base[2:, 1],
        base[:, :0],
        base[1, 2, 3:4],
        np.lib.stride_tricks.as_strided(base, shape=(3, 4), strides=(0, 8)),
    ]
    for v in views:
        pointer = v.__array_interface__["data"][0]
        expected = np.lib.array_utils.byte_bounds(v) if v.size else (pointer, pointer)
        assert _byte_bounds(v, pointer) == expected, (v.shape, v.strides)
