"""The multi-block select's per-row state as tests read it after a call (the one description of
``cutopk::multiblock::State`` in kernels/multiblock.cu on the test side; a static_assert there
pins these offsets), and a recorder of the arrays each multi-block launch sequence makes."""

from __future__ import annotations

import numpy as np

from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda import multiblock as _multiblock_run

MB_STATE = np.dtype(
    {
        "names": ["done", "source", "cand_count", "threshold", "staging", "k_row"],
        "formats": [np.int32, np.int32, np.int64, np.uint64, np.int32, np.int32],
        "offsets": [28, 40, 48, 56, 64, 68],
        "itemsize": _dispatch.MULTIBLOCK_STATE_BYTES,
    }
)


class _Recorder:
    """An array module that keeps every array its ``empty`` makes (the first is the state)."""

    def __init__(self, xp, made):
        self._xp, self._made = xp, made

    def __getattr__(self, name):
        return getattr(self._xp, name)

    def empty(self, *args, **kwargs):
        self._made.append(self._xp.empty(*args, **kwargs))
        return self._made[-1]


def record_states(monkeypatch) -> list:
    """The rows' state arrays of the next multi-block launch sequences, one per chunk of rows."""
    made, states = [], []
    original = _multiblock_run.run

    def run(xp, *args, **kwargs):
        made.clear()
        original(_Recorder(xp, made), *args, **kwargs)
        states.append(made[0])

    monkeypatch.setattr(_multiblock_run, "run", run)
    return states
