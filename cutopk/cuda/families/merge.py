"""merge: the top K of the union of partial results, read where they lie (kernels/merge.cu), for
:func:`cutopk.merge_top_k`. A step of its own, not an algorithm the dispatcher chooses: a block
per row, up to :data:`PARTS` parts per launch; more parts take one more launch per ``PARTS - 1``
of them (each takes the previous launch's result as its part 0), so up to ``2 * PARTS - 1``
parts are merged in two launches.

:func:`steps` gives the launches as the runner's steps (cutopk/cuda/runner.py :class:`StepRunner`):
the parts are per-call arrays named ``vals<p>``/``idx<p>``, a launch before the last writes its
winners into the call's scratch (``mid<j>_vals``, ...), and plan() lists the same steps.
"""

from __future__ import annotations

import numpy as np

from ..kernel_constants import MERGE_PARTS, MERGE_THREADS
from .common import Scratch, Step, sectors

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


def per_call(parts: int) -> tuple[str, ...]:
    """The arrays a merge call passes the runner, in order: each part's values and indices, then
    the outputs (``out_pos``: the winners' positions along the concatenated parts)."""
    return (
        *(name for p in range(parts) for name in (f"vals{p}", f"idx{p}")),
        "out_vals",
        "out_idx",
        "out_pos",
    )


def steps(widths: list[int], rows: int, k: int, key_bytes: int, index_dtype, by_index: bool, positions: bool):
    """``(steps, scratch)``: the launches that merge parts of ``widths`` candidates per row into
    ``k`` winners (in index order with ``by_index``), and the scratch table of the results between launches. An unused slot takes
    the ``spare_vals``/``spare_idx`` placeholders (width 0), a pointer the launch does not take
    (``pos0`` of the first, ``out_pos`` without ``positions``) the ``no_array`` constant."""
    index_bytes = np.dtype(index_dtype).itemsize
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(int).tolist()
    fixed = (("rows", rows), ("index_signed", int(np.dtype(index_dtype).kind == "i")))
    table: list = []
    out: list = []
    previous: tuple | None = None  # the last launch's (values, indices, width, 0, positions)
    groups_ = groups(widths)
    for number, group in enumerate(groups_):
        last = number == len(groups_) - 1
        # (values, indices, width, offset) of each part the launch reads: the last one's first.
        slots: list[tuple] = [previous[:4]] if previous is not None else []
        slots += [(f"vals{p}", f"idx{p}", widths[p], offsets[p]) for p in group]
        # A launch before the last keeps the best min(k, candidates so far): no place of its
        # result is padding unless a part's entry was (an unsigned index has no padding).
        kk = k if last else min(k, offsets[group[-1] + 1])
        if last:
            outputs = ("out_vals", "out_idx", "out_pos" if positions else "no_array")
        else:
            outputs = (f"mid{number}_vals", f"mid{number}_idx", f"mid{number}_pos")
            table += [
                Scratch(outputs[0], "value", rows * kk),
                Scratch(outputs[1], np.dtype(index_dtype).name, rows * kk),
                Scratch(outputs[2], "int64", rows * kk),
            ]
        # Index order in the last launch only: the ones before keep rank order for the next.
        args: list = [*fixed, ("k", kk), ("parts", len(slots)), ("by_index", int(by_index and last))]
        for s in range(PARTS):
            v, i, w, o = slots[s] if s < len(slots) else ("spare_vals", "spare_idx", 0, 0)
            args += [(f"v{s}", v), (f"i{s}", i), (f"w{s}", w), (f"o{s}", o)]
        pos0 = previous[4] if previous is not None else "no_array"
        args += [("pos0", pos0), ("out_vals", outputs[0]), ("out_idx", outputs[1]), ("out_pos", outputs[2])]
        candidates = sum(int(slot[2]) for slot in slots)
        read = sectors(rows * candidates * (key_bytes + index_bytes))
        written = sectors(rows * kk * key_bytes) + sectors(rows * kk * index_bytes)
        if outputs[2] != "no_array":
            written += sectors(rows * kk * 8)
        if previous is not None:
            read += sectors(rows * previous[2] * 8)
        step = Step(
            "merge_parts", True, (max(1, rows),), THREADS, shared_bytes(candidates, key_bytes), tuple(args),
            global_bytes=read + written,
        )  # fmt: skip
        out.append(step)
        previous = (outputs[0], outputs[1], kk, 0, outputs[2])
    return out, tuple(table)
