"""The shared memory of the step that orders a block's K winners without a power-of-two sort
(kernels/order_winners.cuh, ``winners::scratch_bytes``): the families that call it size their
dynamic shared memory with :func:`scratch_bytes`."""

from __future__ import annotations

from ..kernel_constants import ORDER_DIGIT_BITS
from .common import round16

# sizeof(winners::Head), rounded to 16 bytes (a static_assert in the header holds it): a block
# scan's 33 counts, 3 ints, 32 warps' 64-bit least and greatest keys and 64 ranges of two ints.
HEAD_BYTES = 1168
BINS = 1 << ORDER_DIGIT_BITS


def scratch_bytes(n: int) -> int:
    """Scratch bytes for a row of ``n`` positions: the head, then the digit's histogram (2^11
    32-bit counts) or the bitmap of the winners' positions and one 32-bit prefix per word."""
    words = -(-n // 32)
    tail = max(8 * words, 4 * BINS)
    return HEAD_BYTES + round16(tail)
