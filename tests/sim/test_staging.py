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
    from cutopk.sim._arguments import byte_bounds

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
        assert byte_bounds(v, pointer) == expected, (v.shape, v.strides)


class _FailingLibc:
    """libc's allocators, failing from the ``fail_at``-th call on; frees are recorded."""

    def __init__(self, real, fail_at: int):
        self.real, self.fail_at, self.calls, self.freed = real, fail_at, 0, []

    def _next(self):
        self.calls += 1
        return self.calls >= self.fail_at

    def malloc(self, n):
        return None if self._next() else self.real.malloc(n)

    def mmap(self, *args):
        return st._MAP_FAILED if self._next() else self.real.mmap(*args)

    def free(self, address):
        self.freed.append(address)
        self.real.free(address)

    def munmap(self, address, n):
        self.freed.append(address)
        self.real.munmap(address, n)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("malloc", "cannot allocate 8 bytes for an AddressSanitizer copy"),
        ("shared", "cannot map 8 bytes of shared memory for an isolated launch"),
    ],
)
def test_a_failed_allocation_frees_the_copies_made_so_far(monkeypatch, kind, message):
    a, b = np.zeros(2, np.int32), np.zeros(2, np.int32)
    libc = _FailingLibc(st._libc, fail_at=2)
    monkeypatch.setattr(st, "_libc", libc)
    with pytest.raises(MemoryError, match=message):
        st.Staging(regions_of(a, b), kind)
    assert len(libc.freed) == 1  # the first copy, and only it


def test_a_pointer_outside_every_staged_region_is_an_error():
    a = np.zeros(4, np.int32)
    s = st.Staging(regions_of(a), "malloc")
    try:
        with pytest.raises(ValueError, match=r"pointer 0x[0-9a-f]+ is in none of the staged regions"):
            s.translate(a.ctypes.data + 64)
    finally:
        s.finish(write_back=False)


def test_a_read_only_view_of_a_written_array_is_no_error():
    out = np.zeros(4, np.int32)
    view = out[:]
    view.flags.writeable = False  # the same memory passed again as a const argument (first)
    s = st.Staging(regions_of(view, out), "shared")
    np.ctypeslib.as_array((np.ctypeslib.ctypes.c_int32 * 4).from_address(s.translate(out.ctypes.data)))[:] = 3
    s.finish(write_back=True)
    assert out.tolist() == [3] * 4
