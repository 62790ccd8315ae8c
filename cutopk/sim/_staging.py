"""Copies of the memory that a launch's array arguments cover, for the launch modes that must
not run on the caller's arrays directly.

- AddressSanitizer (``asan=True``): each region is copied into a ``malloc`` block of exactly its
  size, so ASan reports any access past it (NumPy's own buffers are not instrumented).
- Isolation (``isolate=True``): each region is copied into a shared anonymous mapping, so a
  forked child's writes are seen by the parent.

Array arguments that overlap (views of one buffer passed twice) are merged into one region, so
the kernel still sees them alias, as it would on a GPU.
"""

from __future__ import annotations

import ctypes
import mmap
from dataclasses import dataclass

import numpy as np

_libc = ctypes.CDLL(None, use_errno=True)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = (ctypes.c_size_t,)
_libc.free.argtypes = (ctypes.c_void_p,)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value


@dataclass
class Region:
    """Bytes ``[lo, hi)`` of the caller's memory; ``writeable`` says whether they may be written."""

    lo: int
    hi: int
    writeable: bool


def merge(regions: list[Region]) -> list[Region]:
    """Overlapping regions joined into one. Regions that only touch stay apart: they are
    usually different arrays, and ASan must see an overrun from one into the other."""
    merged: list[Region] = []
    for r in sorted(regions, key=lambda r: (r.lo, r.hi)):
        if merged and (r.lo < merged[-1].hi or r.lo == merged[-1].lo):
            merged[-1].hi = max(merged[-1].hi, r.hi)
        else:
            merged.append(Region(r.lo, r.hi, True))
    return merged


class Staging:
    """Copies of ``regions`` in fresh memory (``kind`` "malloc" or "shared"); ``translate`` maps a
    pointer into the originals to the copy, ``finish`` writes changed bytes back and frees."""

    def __init__(self, regions: list[Region], kind: str):
        self.kind = kind
        self.originals = [r for r in regions if r.hi > r.lo]
        self.regions = merge(regions)
        self.copies: list[int] = []
        try:
            for r in self.regions:
                self.copies.append(self._allocate(max(1, r.hi - r.lo)))
                ctypes.memmove(self.copies[-1], r.lo, r.hi - r.lo)
        except BaseException:
            self.finish(write_back=False)
            raise

    def _allocate(self, nbytes: int) -> int:
        if self.kind == "malloc":
            address = _libc.malloc(nbytes)
            if not address:
                raise MemoryError(f"cannot allocate {nbytes} bytes for an AddressSanitizer copy")
            return address
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        address = _libc.mmap(None, nbytes, prot, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS, -1, 0)
        if address in (None, _MAP_FAILED):
            raise MemoryError(f"cannot map {nbytes} bytes of shared memory for an isolated launch")
        return address

    def translate(self, pointer: int) -> int:
        """Where ``pointer`` (into one of the original regions) lies in the copies."""
        # A pointer at the end of one region and the start of the next belongs to the next.
        for r, copy in reversed(list(zip(self.regions, self.copies, strict=False))):
            if r.lo <= pointer <= r.hi:
                return copy + (pointer - r.lo)
        raise ValueError(f"pointer {pointer:#x} is in none of the staged regions")

    def translated_regions(self) -> list[Region]:
        """The copies as regions (all writeable: they are this object's own memory)."""
        return [Region(c, c + (r.hi - r.lo), True) for r, c in zip(self.regions, self.copies, strict=False)]

    def finish(self, write_back: bool) -> None:
        """Copy the bytes the launch changed back into the originals (if ``write_back``), then free."""
        problem = None
        if write_back and self.copies:
            writeable = [r for r in self.originals if r.writeable]
            for r in self.originals:
                n = r.hi - r.lo
                copy = self.translate(r.lo)
                # Only changed bytes go back: a read-only argument may be memory that cannot be written.
                if np.array_equal(_bytes_at(copy, n), _bytes_at(r.lo, n)):
                    continue
                if r.writeable:
                    ctypes.memmove(r.lo, copy, n)
                elif not any(w.lo < r.hi and r.lo < w.hi for w in writeable):
                    problem = "the kernel wrote into a read-only array argument"
        for r, copy in zip(self.regions, self.copies, strict=False):
            if self.kind == "malloc":
                _libc.free(copy)
            else:
                _libc.munmap(copy, max(1, r.hi - r.lo))
        self.copies = []
        if problem:
            raise ValueError(problem)


def _bytes_at(address: int, n: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_ubyte * n).from_address(address))
