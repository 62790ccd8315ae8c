"""The multi-block select's per-row state as tests read it after a call (the one description of
``cutopk::multiblock::State`` in kernels/multiblock.cu on the test side; a static_assert there
pins these offsets), and a recorder of the state arrays of each multi-block launch sequence."""

from __future__ import annotations

import numpy as np

from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda import runner as _runner

MB_STATE = np.dtype(
    {
        "names": [
            "cand_count", "bucket_count", "winners", "mode", "source", "k_row", "passes", "staging",
            "gathered",
        ],
        "formats": [np.uint64, np.uint64, np.uint64, *[np.int32] * 6],
        "offsets": [40, 48, 56, 72, 76, 80, 84, 88, 92],
        "itemsize": _dispatch.MULTIBLOCK_STATE_BYTES,
    }
)  # fmt: skip
# State::mode, State::source and State::gathered (FROM_TIES: the threshold's ties, in pass 2).
FINISHED = 2
ON_INPUT, ON_CANDIDATES = 0, 1
FROM_BUCKET, FROM_CANDIDATES, FROM_INPUT, WHOLE, FROM_TIES = 1, 2, 3, 4, 5
# State::staging after the call: NO_THRESHOLD, or BEHIND (the sampled threshold failed after pass
# 1's streaming filter: the row started over on the input and caught up in its last launch), or
# DIRECT (K ordered apart: the last digit left the winners above its bucket in the candidates).
NO_THRESHOLD, FILTER, BEHIND, DIRECT = 0, 1, 2, 3


def record_states(monkeypatch) -> list:
    """The rows' state arrays of the next multi-block launch sequences, one per chunk of rows (a
    copy: the workspace they live in is reused by the next chunk and the next call)."""
    states = []
    original = _runner._Sequence.run

    def run(self, *args, **kwargs):
        views = original(self, *args, **kwargs)
        if "state" in views:
            states.append(views["state"].copy())
        return views

    monkeypatch.setattr(_runner._Sequence, "run", run)
    return states
