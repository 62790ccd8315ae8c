"""merge: the top K of the union of partial results, read where they lie (kernels/merge.cu), for
:func:`cutopk.merge_top_k`. A step of its own, not an algorithm the dispatcher chooses: a block
per row, up to :data:`PARTS` parts per launch; more parts take one more launch per ``PARTS - 1``
of them (each takes the previous launch's result as its part 0), so up to ``2 * PARTS - 1``
parts are merged in two launches.
"""

from __future__ import annotations

import numpy as np

from ..kernel_constants import MERGE_PARTS, MERGE_THREADS

PARTS = MERGE_PARTS
_SLOTS = tuple(name for p in range(PARTS) for name in (f"v{p}", f"i{p}", f"w{p}", f"o{p}"))
# The kernel's C parameters, in order (kernels/merge.cu), and the C types of its scalars.
ARGUMENTS = {
    "merge_parts": (
        *_SLOTS,
        "pos0",
        "parts",
        "rows",
        "k",
        "largest",
        "nan_first",
        "by_index",
        "index_bytes",
        "index_signed",
        "out_vals",
        "out_idx",
        "out_pos",
    )
}
SCALAR_TYPES = {
    **{f"w{p}": np.int64 for p in range(PARTS)},
    **{f"o{p}": np.int64 for p in range(PARTS)},
    "parts": np.int32,
    "index_signed": np.int32,
}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/merge.cu
THREADS = MERGE_THREADS


def shared_bytes(candidates: int, key_bytes: int) -> int:
    """Dynamic shared memory of a launch over rows of ``candidates``: per candidate its 8-byte
    index, its key and its 4-byte rank, the count rounded up to 8 (kernels/merge.cu's layout)."""
    padded = -(-candidates // 8) * 8
    return padded * (8 + key_bytes + 4)


def launches(parts: int) -> int:
    """Launches that merge ``parts`` parts: one per ``PARTS``, then one per ``PARTS - 1`` more."""
    return 1 + max(0, -(-(parts - PARTS) // (PARTS - 1)))


def groups(widths: list[int]) -> list[list[int]]:
    """The parts (by number) each launch reads: ``PARTS`` first, then ``PARTS - 1`` more each
    (the previous result is part 0 of every launch after the first)."""
    out = [list(range(min(PARTS, len(widths))))]
    for start in range(PARTS, len(widths), PARTS - 1):
        out.append(list(range(start, min(len(widths), start + PARTS - 1))))
    return out


def why_not(widths: list[int], k: int, key_bytes: int, shared_limit: int) -> str | None:
    """None when the kernel can merge parts of these widths into K winners per row, else why
    not (merge_top_k then takes the library route)."""
    for group in groups(widths):
        # A later launch's part 0: the previous launch's winners (at most k).
        head = min(k, sum(widths[: group[0]]))
        candidates = head + sum(widths[p] for p in group)
        if candidates >= 2**31:
            return f"a row of {candidates} candidates is past the kernel's 32-bit counts"
        need = shared_bytes(candidates, key_bytes)
        if need > shared_limit:
            return f"a row of {candidates} candidates needs {need} bytes of shared memory, the device gives {shared_limit}"
    return None
