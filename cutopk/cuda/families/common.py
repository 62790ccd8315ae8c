"""What the family modules share: what a family's launches depend on (:class:`Planned`), what
a family gives the runner (:class:`Part`: its steps, scratch and scalars), the scratch table's
entries, the kernels' common parameter lists and their C scalar types, and the traffic formulas
the families' ``global_bytes`` are built from."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import numpy as np


@dataclasses.dataclass(frozen=True)
class Scratch:
    """One scratch array of a launch: its name (the kernel parameter it is passed as), its element
    type (a NumPy dtype name, ``"key"`` for the unsigned key of the input's width, or ``"value"``
    for the input's own type, of the same width) and its number of elements. (A dataclass, not a
    NamedTuple: a tuple's field ``count`` would hide ``tuple.count``.)"""

    name: str
    dtype: str
    count: int

    def resolve(self, key_dtype, value_dtype=None) -> np.dtype:
        if self.dtype == TICKET:
            return np.dtype(np.uint32)
        if self.dtype == "value" and value_dtype is not None:
            return np.dtype(value_dtype)
        return np.dtype(key_dtype) if self.dtype in ("key", "value") else np.dtype(self.dtype)

    def nbytes(self, key_bytes: int) -> int:
        if self.dtype == TICKET:
            return 0  # not in the scratch buffer: the stream's zeroed tickets (see TICKET)
        return self.count * (key_bytes if self.dtype in ("key", "value") else np.dtype(self.dtype).itemsize)


# A Scratch dtype: uint32 arrival tickets that must be 0 when a launch starts and that the kernel
# leaves 0 when it ends (kernels/split.cu). They come from the stream's zeroed ticket array
# (`tickets` in cutopk/cuda/workspace.py), not from the scratch buffer, whose bytes other calls reuse.
TICKET = "ticket"


def ticket_count(table) -> int:
    """The tickets a scratch table's TICKET entries take together."""
    return sum(entry.count for entry in table if entry.dtype == TICKET)


def carve_tickets(tickets, table) -> dict:
    """Each TICKET entry of a scratch table, by name, as consecutive views of ``tickets``."""
    out, start = {}, 0
    for entry in table:
        if entry.dtype == TICKET:
            out[entry.name] = tickets[start : start + entry.count]
            start += entry.count
    return out


class Geometry(NamedTuple):
    """A family's launch for one request: the kernel template, grid and block (1-D), dynamic
    shared memory per block and the family's parameters."""

    kernel: str
    grid: int
    block: int
    shared_bytes: int
    params: dict


# Each scratch array starts at a multiple of this many bytes of its call's one buffer (CUDA's
# own allocations are 256-byte aligned: every vector load and every element type is aligned).
ALIGN = 256


def offsets(table, key_bytes: int) -> tuple[tuple[int, ...], int]:
    """``(offsets, total)``: where each entry of a scratch table starts in the call's one buffer
    (each at a multiple of ALIGN), and the bytes of that buffer."""
    starts, end = [], 0
    for entry in table:
        starts.append(end)
        end += -(-entry.nbytes(key_bytes) // ALIGN) * ALIGN
    return tuple(starts), end


def scratch_bytes(table, key_bytes: int) -> int:
    """The bytes of a scratch table as one buffer (each entry aligned): what the launcher takes
    from the workspace for it, and what plan() reports."""
    return offsets(table, key_bytes)[1]


def carve(buffer, table, key_dtype, value_dtype=None) -> dict:
    """Each array of a scratch table, by name (1-D, C-contiguous), as views of ``buffer`` (a 1-D
    uint8 array of at least :func:`scratch_bytes` bytes, itself aligned)."""
    key_dtype = np.dtype(key_dtype)
    starts, _ = offsets(table, key_dtype.itemsize)
    out = {}
    for entry, start in zip(table, starts, strict=True):
        if entry.dtype == TICKET:
            continue  # not carved from the buffer (carve_tickets)
        dtype = entry.resolve(key_dtype, value_dtype)
        out[entry.name] = buffer[start : start + entry.count * dtype.itemsize].view(dtype)
    return out


def allocate(xp, table, key_dtype) -> dict:
    """Each array of a scratch table, by name (1-D, C-contiguous), carved from one allocation of
    ``xp.empty`` (the launcher's ``xp`` takes it from the call's cached workspace)."""
    total = scratch_bytes(table, np.dtype(key_dtype).itemsize)
    return carve(xp.empty(max(1, total), dtype=np.uint8), table, key_dtype)


class Step(NamedTuple):
    """One launch of a family's sequence, as data: the runner (cutopk/cuda/runner.py) launches it
    and plan() lists it, from the same list.

    ``kernel``: the kernel's name (its C parameters are its descriptor's, by name), or "" for a
    step of the array library. ``templated``: instantiated for the element type. ``args``:
    ``(parameter, value)`` pairs where a parameter takes another value than the one named as
    itself: a str names a value of the call (a scratch array, ``"in"``, ...), anything else is
    a constant. A library step says what it does in ``library`` and copies ``copy`` =
    ``(dst, src, rows, src_len, dst_len)``: the first ``dst_len`` of each of ``rows`` rows of
    ``src`` into ``dst`` (converting the element type). ``global_bytes``: what the step moves in
    global memory, each 32-byte sector it touches once (plan()'s ``Launch.global_bytes``, from
    the family's formula; tests/gpu/test_family_traffic.py compares it with the simulator's
    count)."""

    kernel: str
    templated: bool
    grid: tuple
    block: int
    shared_bytes: int = 0
    args: tuple = ()
    library: str = ""
    copy: tuple = ()
    global_bytes: int = 0


class Planned(NamedTuple):
    """What a family's launches over ``rows`` rows depend on, from the planned call: the
    request's sizes and options, the dispatcher's geometry (``params``, ``grid``, ``block``,
    ``shared_bytes``) and the C++ type the kernels are instantiated for."""

    rows: int
    n: int
    k: int
    key_bytes: int
    index_dtype: np.dtype
    order: str  # "value", "index" or "none"
    params: dict
    grid: int
    block: int
    shared_bytes: int
    cxx: str


class Part(NamedTuple):
    """What a family gives the runner for a call (cutopk/cuda/runner.py; one generic runner, no
    branch per family): ``steps``, its launches over ``Planned.rows`` rows; ``scratch``, their
    table; ``scalars``, values its kernels take by parameter name beyond the call's own (rows,
    n, strides, k, ...). The rest belongs to the whole call, also where the steps run per chunk of
    rows (``params["rows_per_chunk"]``; the runner then asks for each chunk's steps, scratch and
    scalars): ``outputs`` redirects the call's outputs to scratch arrays of ``call_scratch``
    (shaped by ``shapes``), and ``after`` runs once the family's steps are done; in a step of ``after``, ``"final:<output>"`` names where that output
    went before the redirection (the call's own array, or its staged copy)."""

    steps: list
    scratch: tuple = ()
    scalars: dict = {}  # noqa: RUF012 - a default never written to
    outputs: dict = {}  # noqa: RUF012
    call_scratch: tuple = ()
    shapes: dict = {}  # noqa: RUF012
    after: list = []  # noqa: RUF012


def single_launch(family, planned: Planned) -> Part:
    """The part of a family of one launch (its module gives ``kernel_name``, ``scratch`` and
    ``global_bytes``; the dispatcher gave its geometry)."""
    f = planned
    moved = family.global_bytes(f.rows, f.n, f.k, f.key_bytes, f.index_dtype.itemsize, f.params)
    name = family.kernel_name(f.params, f.cxx)
    step = Step(name, True, (f.grid,), f.block, f.shared_bytes, global_bytes=moved)
    return Part([step], tuple(family.scratch(f.rows, f.n, f.k, f.params)))


def copy_step(what: str, dst: str, src: str, shape: tuple, dst_bytes: int, src_bytes: int) -> Step:
    """A copy by the array library (on a GPU, one asynchronous launch): the first ``dst_len`` of
    each of ``rows`` rows of ``src`` (``shape`` = ``(rows, src_len, dst_len)``) into ``dst``,
    elements of ``src_bytes`` read and of ``dst_bytes`` written."""
    rows, _, dst_len = shape
    count = rows * dst_len
    moved = sectors(count * src_bytes) + sectors(count * dst_bytes)
    return Step("", False, (), 0, library=what, copy=(dst, src, *shape), global_bytes=moved)


def pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def round16(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of 16: the kernels align each shared-memory region to
    16 bytes (the 16-byte copies and vector loads that fill it)."""
    return -(-nbytes // 16) * 16


# The parameters the single-launch kernels share, by their C names (kernels/<family>.cu): the
# input and its rows (kernels/row_extent.cuh), the selection, the outputs.
ROWS = ("in", "rows", "n", "row_stride", "col_stride", "extents", "rows_kind")
SELECT = ("k", "largest", "nan_first", "by_index")
OUTPUTS = ("out_vals", "out_idx", "index_bytes")
# The C types of the kernels' scalar parameters, by name (long long or int; a family module's
# own SCALAR_TYPES overrides a name its kernels declare otherwise). Every other parameter is an
# array. tests/gpu/test_kernel_arguments.py checks them against the C signatures.
SCALAR_TYPES = {
    "rows": np.int64, "n": np.int64, "row_stride": np.int64, "col_stride": np.int64,
    "buf_cap": np.int64, "len": np.int64, "width": np.int64, "k": np.int32, "largest": np.int32,
    "nan_first": np.int32, "by_index": np.int32, "size": np.int32, "cap": np.int32,
    "index_bytes": np.int32, "rows_kind": np.int32, "with_idx": np.int32, "tile": np.int32,
}  # fmt: skip


def order_tile(length: int, key_bytes: int, device) -> int:
    """Pairs per tile of the global-memory ordering (kernels/order.cu): the largest power of
    two whose (key, 64-bit index) pairs fit shared memory, at most ``length`` rounded up to one."""
    tile = 1 << ((device.shared_bytes // (8 + key_bytes)).bit_length() - 1)
    return max(2, min(tile, pow2_at_least(length)))


SECTOR = 32  # bytes: the unit in which global memory moves


def sectors(nbytes: int) -> int:
    """``nbytes`` of one array, rounded up to whole 32-byte sectors (arrays start sector-aligned)."""
    return -(-nbytes // SECTOR) * SECTOR


def one_read_bytes(rows: int, n: int, k: int, key_bytes: int, index_bytes: int) -> int:
    """Global bytes of a launch that reads the input (rows x n) and writes the K values and
    indices of each row: each sector once (a second pass over a row, and the winners' values
    read back, hit sectors already counted)."""
    return sectors(rows * n * key_bytes) + sectors(rows * k * key_bytes) + sectors(rows * k * index_bytes)


def read_once_bytes(rows: int, n: int, k: int, key_bytes: int, index_bytes: int, params: dict) -> int:
    """``global_bytes`` of a family of one launch that reads its input once: :func:`one_read_bytes`."""
    return one_read_bytes(rows, n, k, key_bytes, index_bytes)


def no_scratch(rows: int, n: int, k: int, params: dict) -> tuple:
    """``scratch`` of a family that needs none: an empty table."""
    return ()


def gathered(count: int, source_bytes: int) -> int:
    """Bytes moved reading ``count`` elements at random places of an array of ``source_bytes``:
    the expected number of distinct sectors among ``count`` drawn from the array's."""
    total = sectors(source_bytes) // SECTOR
    if not total:
        return 0
    return round(total * -math.expm1(-count / total)) * SECTOR


def order_bytes(
    rows: int, length: int, key_bytes: int, merges: int, with_indices: bool = True, pos: int = 8
) -> list:
    """Global bytes of order_pairs' launches over ``rows`` rows of ``length`` pairs
    (kernels/order.cu), their indices of ``pos`` bytes: order_tiles reads the keys (and their
    indices) and writes the pairs; each of the ``merges`` order_merge launches reads and writes
    the pairs."""
    keys, indices = sectors(rows * length * key_bytes), sectors(rows * length * pos)
    tiles = keys + (indices if with_indices else 0) + keys + indices
    return [tiles] + [2 * (keys + indices)] * merges


def gather_bytes(rows: int, k: int, n: int, value_bytes: int) -> int:
    """Global bytes of gather_values: the K int64 indices of each row, the values at them
    (scattered over the input), the values written."""
    count = rows * k
    return sectors(count * 8) + gathered(count, rows * n * value_bytes) + sectors(count * value_bytes)
