"""The kernel families by name: adding a family is its kernels' file, its module here and one
line below."""

from __future__ import annotations

from . import (
    bitonic,
    block_row,
    cluster,
    common,
    merge,
    multiblock,
    order,
    radix,
    resident,
    sort,
    split,
    streaming,
    thread_row,
    transpose,
    warp_radix,
    warp_row,
)

FAMILIES = {
    "warp_row": warp_row,
    "warp_radix": warp_radix,
    "thread_row": thread_row,
    "bitonic": bitonic,
    "radix": radix,
    "resident": resident,
    "block_row": block_row,
    "cluster": cluster,
    "split": split,
    "streaming": streaming,
    "multiblock": multiblock,
    "sort": sort,
}
# Steps other families take, with kernel files of their own (not algorithms to choose).
STEPS = {"order": order, "transpose": transpose, "merge": merge}


def part(algorithm: str, planned: common.Planned) -> common.Part:
    """What family ``algorithm`` gives the runner for a call: its module's ``part``, or for a
    family of one launch (a module without one) the generic :func:`common.single_launch`."""
    family = FAMILIES[algorithm]
    own = getattr(family, "part", None)
    return own(planned) if own is not None else common.single_launch(family, planned)
