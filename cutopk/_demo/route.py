"""The one record of the benchmark's ways of computing a top-K (cutopk, its peers, CUB)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass
class Route:
    """One way of computing the top-K of one input.

    Attributes
    ----------
    name : str
        Column name in the table and the files.
    call : callable or None
        Returns ``(values, indices)``; None when the route is skipped.
    reason : str or None
        Why the route is skipped (``call`` is None).
    sorts : bool
        The output is ordered by value (the checker then compares in order).
    nan : str
        The NaN rule the route follows, as cutopk's ``nan=`` argument spells it.
    own_stream : bool
        The route runs on a stream of its own and waits for itself (the timer synchronizes the
        device before it starts the clock).
    detail : str or None
        How the route ran this input, when that varies (CUB: batched or one call per row); kept
        in the result as ``route``.
    capture : str
        How ``--timing graph`` captures it: ``"cupy"`` (CuPy's stream capture: the route launches
        on CuPy's current stream), ``"torch"`` (``torch.cuda.CUDAGraph``: on torch's stream), or
        why it cannot be captured (said once under the table).
    """

    name: str
    call: Callable | None
    reason: str | None = None
    sorts: bool = True
    nan: str = "largest"
    own_stream: bool = False
    detail: str | None = None
    capture: str = "cupy"
