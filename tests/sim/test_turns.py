"""The order in which the simulator runs a block's threads: turn by turn, each runnable thread in
the block's thread order (shuffled by ``seed``) until it gives way. A thread that gives way
resumes the next runnable thread of the turn itself, without a return to the scheduler; the
order is the scheduler's all the same, which these tests pin."""

from __future__ import annotations

import numpy as np
import pytest

from cutopk import sim

# Each thread writes its index at the next slot of `seen` (a plain counter: one OS thread runs
# every fiber, and a fiber is never interrupted between two yields) at three places: before a
# barrier, after it, and after a shuffle within its warp.
TURNS = r"""
extern "C" __global__ void turns(unsigned* clock, unsigned* seen) {
  seen[(*clock)++] = threadIdx.x;
  __syncthreads();
  seen[(*clock)++] = threadIdx.x;
  unsigned other = __shfl_xor_sync(0xffffffffu, threadIdx.x, 1);
  seen[(*clock)++] = threadIdx.x + 1000 * (other != (threadIdx.x ^ 1u));
}
"""


def _seen(seed: int) -> list[int]:
    mod = sim.RawModule(code=TURNS, seed=seed)
    clock, seen = np.zeros(1, np.uint32), np.full(3 * 64, 9999, np.uint32)
    mod.get_function("turns")((1,), (64,), (clock, seen))
    assert clock[0] == 3 * 64
    return seen.tolist()


def test_threads_take_their_turns_in_thread_order():
    # `seen` is one timeline. Turn 1: every thread in order to the barrier; the last to arrive (63)
    # releases it and goes on, past it to its shuffle, where its warp is incomplete. Turn 2: 0..30
    # pass the barrier and wait at the shuffle; lane 31 completes warp 0's shuffle and goes on to
    # its end; 32..61 wait at the shuffle; lane 62 completes warp 1's and goes on to its end, and
    # then 63, released by 62 and later in the order, in the same turn. Turn 3: the lanes the
    # shuffles released, in order.
    turn_1 = [*range(64), 63]
    turn_2 = [*range(31), 31, 31, *range(32, 62), 62, 62, 63]
    turn_3 = [*range(31), *range(32, 62)]
    assert _seen(0) == turn_1 + turn_2 + turn_3


@pytest.mark.parametrize("seed", [1, 7])
def test_a_seeded_order_is_reproducible_and_every_thread_reaches_every_place(seed):
    seen = _seen(seed)
    assert seen == _seen(seed)
    assert seen != _seen(0)
    assert sorted(seen) == sorted(3 * list(range(64)))  # every shuffle read its partner
