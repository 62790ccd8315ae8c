"""The kernel families by name: adding a family is its kernels' file, its module here and one
line below."""

from __future__ import annotations

from . import bitonic, multiblock, order, radix, sort, thread_row, transpose, warp_radix, warp_row

FAMILIES = {
    "warp_row": warp_row,
    "warp_radix": warp_radix,
    "thread_row": thread_row,
    "bitonic": bitonic,
    "radix": radix,
    "multiblock": multiblock,
    "sort": sort,
}
# Steps other families take, with kernel files of their own (not algorithms to choose).
STEPS = {"order": order, "transpose": transpose}
# The families of one launch each (the launcher's generic path).
SINGLE_LAUNCH = ("warp_row", "warp_radix", "thread_row", "bitonic", "radix")
