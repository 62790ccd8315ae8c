"""What :func:`cutopk.plan` reports: one type for every backend, readable with ``print``."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Launch:
    """One kernel launch of a call (``count`` times when a pass repeats), or an array-library
    operation (no grid).

    ``global_bytes``: the global memory the launch moves, all ``count`` of them together, in
    32-byte sectors (each sector it reads or writes counted once per launch, as the simulator's
    ``LaunchTraffic.sectors`` counts them: a re-read within a launch is taken as a cache hit),
    from the family's formula; data-dependent parts (candidate buffers) at their expected size
    for keys spread over their range."""

    kernel: str
    grid: tuple[int, ...] = ()  # () for an array-library operation (a copy, a sort)
    block: int = 0
    shared_bytes: int = 0
    count: int = 1
    global_bytes: int = 0

    def __str__(self) -> str:
        moved = f" [{self.global_bytes} B global]" if self.global_bytes else ""
        if not self.grid:
            return (f"{self.count} x {self.kernel}" if self.count != 1 else self.kernel) + moved
        grid = "x".join(str(g) for g in self.grid)
        times = f"{self.count} x " if self.count != 1 else ""
        shared = f", {self.shared_bytes} B shared" if self.shared_bytes else ""
        return f"{times}{self.kernel} <<<{grid}, {self.block}{shared}>>>{moved}"


@dataclasses.dataclass(frozen=True)
class Plan:
    """What :func:`cutopk.top_k` does for one call signature, without running anything.

    Attributes
    ----------
    backend, algorithm : str
        The backend that runs and the algorithm it chose (``"select"`` on the NumPy backend).
    rows, n, k : int
        The batch of rows, the length of the selection axis, and K.
    launches : tuple of Launch
        The kernel launches in order (empty on the NumPy backend, and when there is nothing to
        select: ``k == 0`` or no rows). A library sort is listed by name, without a launch shape.
    copies : tuple of str
        Every copy of the input or the outputs the call makes, with its size.
    scratch_bytes : int
        Memory the call allocates besides its outputs, at most, at any one time (copies included).
    cached : bool
        Whether this signature was already planned (a repeated call skips the checks and planning).
    params : dict
        The chosen kernel's parameters (the dispatcher's, on the CUDA and simulator backends). On
        the NumPy backend: ``route``, ``threads`` and ``threads_why``, and the compiled route's
        state: ``compiled`` (loaded, with ``compiled_variant``, or not loaded yet), or
        ``compiled_unavailable`` (why it cannot run). A plan builds and loads nothing.
    batch : str
        ``"regular"`` (every row ``n`` long), or how rows of their own lengths are served:
        ``lengths`` read by the kernels or through a masked copy, CSR segments.
    chosen_by : str
        What chose the algorithm on the CUDA and simulator backends: ``"forced"`` (the
        ``algorithm=`` argument), ``"table <name>: <file and case>"`` (a measured dispatch table:
        the package's for the device's architecture, or the user's from ``python -m cutopk tune``)
        or ``"rules"`` (the dispatcher's hand rules, where no table covers the shape); "" on the
        NumPy backend.
    built : bool or None
        On the CUDA and simulator backends, whether every kernel module the call launches is
        compiled and loaded already: a plan compiles nothing, the call's first launch of a family
        compiles that family's module (for its element type). None on the NumPy backend (its
        compiled route's state is in ``params``) and where nothing launches.
    """

    backend: str
    algorithm: str
    rows: int
    n: int
    k: int
    launches: tuple[Launch, ...]
    copies: tuple[str, ...]
    scratch_bytes: int
    cached: bool
    params: dict = dataclasses.field(default_factory=dict)
    batch: str = "regular"
    chosen_by: str = ""
    built: bool | None = None

    @property
    def copy(self) -> bool:
        """Whether the whole input is copied before the selection."""
        return any(c.startswith("input") for c in self.copies)

    @property
    def launch_count(self) -> int:
        return sum(launch.count for launch in self.launches)

    @property
    def global_bytes(self) -> int:
        """Global-memory bytes the call moves: its launches' and library operations'
        :attr:`Launch.global_bytes` summed."""
        return sum(launch.global_bytes for launch in self.launches)

    def __str__(self) -> str:
        lines = [
            f"cutopk plan: {self.algorithm!r} on backend {self.backend!r}, {self.rows} rows of "
            f"{self.n}, k={self.k}{' (cached)' if self.cached else ''}",
            *([f"  chosen by: {self.chosen_by}"] if self.chosen_by else []),
            *([f"  rows: {self.batch}"] if self.batch != "regular" else []),
            f"  launches: {self.launch_count}" + ("" if self.launches else " (nothing runs on a GPU)"),
        ]
        lines += [f"    {launch}" for launch in self.launches]
        if self.built is not None:
            lines.append(
                "  modules: " + ("built" if self.built else "not built yet (the first call compiles them)")
            )
        lines.append(f"  scratch: {self.scratch_bytes} bytes besides the outputs")
        if self.launches:
            lines.append(f"  global memory: {self.global_bytes} bytes moved (32-byte sectors, per launch)")
        lines.append("  copies: " + ("none" if not self.copies else "; ".join(self.copies)))
        return "\n".join(lines)


def copy_lines(copies: dict[str, int]) -> tuple[str, ...]:
    """:attr:`Plan.copies` from ``{what: bytes}`` (a size of 0 is left unsaid: a copy of unknown
    size, made a block at a time)."""
    return tuple(f"{what} ({size} bytes)" if size else what for what, size in copies.items())
