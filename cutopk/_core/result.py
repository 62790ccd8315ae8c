"""The result type of every selection: ``TopK(values, indices)``."""

from __future__ import annotations

from typing import Any, NamedTuple


class TopK(NamedTuple):
    """The result of :func:`top_k`: the selected values and their indices along the axis."""

    values: Any
    indices: Any
