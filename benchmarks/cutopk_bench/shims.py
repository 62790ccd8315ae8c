"""The benchmark's kit: the demo's loop (``cutopk/_demo/loop.py``) with CUB's and FlashInfer's
peers beside the demo's, the watchdog around every call of a GPU run, and PNG plots.

``cub`` and ``cub-sorted``: CUB's ``DeviceTopK``/``DeviceBatchedTopK`` through a small shared
library (:mod:`.cub`; unordered output, compared as a multiset, and the same plus an argsort of
the K); ``flashinfer`` and ``flashinfer-unsorted``: FlashInfer's ``top_k`` through a shim built from
its wheel (:mod:`.flashinfer`; ``sorted=True``, and its default, compared as a multiset). Each is
skipped, with the reason, when its shim is not built for this GPU.

``benchmarks/run.py`` and ``benchmarks/scoreboard.py`` run :func:`main` and :func:`run`.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from contextlib import AbstractContextManager

from cutopk._demo import baselines, cli, grid, loop, report
from cutopk._demo.route import Route

from . import watchdog

SHIM_PEERS = ("cub", "cub-sorted", "flashinfer", "flashinfer-unsorted")
GPU_PEERS = (*baselines.GPU_PEERS, *SHIM_PEERS)


def cub_route(x, axis: int, k: int, mode: str, dtype: str, sort: bool = False) -> Route:
    """CUB's top-K through the shim (:mod:`.cub`; ``sort``: then an argsort of the K), skipped
    with the reason when the shim is not built for this GPU."""
    import cupy

    from . import cub

    lib, reason = cub.available(cub.arch_of(cupy.cuda.Device().compute_capability))
    if lib is None:
        return Route("cub-sorted" if sort else "cub", None, reason)
    return cub.route(x, axis, k, mode, dtype, lib, sort)


def flashinfer_route(x, axis: int, case, sort: bool) -> Route:
    """FlashInfer's top_k through its shim (:mod:`.flashinfer`; ``sort``: ``sorted=True``), skipped
    with the reason when the shim is not built for this GPU or FlashInfer refuses the case."""
    import cupy

    from . import flashinfer

    name = "flashinfer" if sort else "flashinfer-unsorted"
    if why := flashinfer.refusal(case.mode, case.dtype, case.layout, case.n, case.k):
        return Route(name, None, why)
    if reason := baselines.missing("torch"):
        return Route(name, None, f"{reason} (FlashInfer's top_k allocates and sorts with torch)")
    device = cupy.cuda.Device()
    lib, reason = flashinfer.available(flashinfer.arch_of(device.compute_capability))
    if lib is None:
        return Route(name, None, reason)
    attrs = device.attributes
    limits = (attrs["MultiProcessorCount"], attrs.get("MaxSharedMemoryPerBlockOptin", 0))
    return flashinfer.route(x, axis, case, lib, int(device.compute_capability) // 10, sort, limits)


def shim_unavailable(name: str) -> str | None:
    """Why the shim peer ``name`` cannot run on this GPU, or None."""
    import cupy

    if name in ("cub", "cub-sorted"):
        from . import cub

        return cub.available(cub.arch_of(cupy.cuda.Device().compute_capability))[1]
    from . import flashinfer

    return (
        baselines.missing("torch")
        or flashinfer.available(flashinfer.arch_of(cupy.cuda.Device().compute_capability))[1]
    )


def cub_facts(facts: dict, peers: tuple[str, ...]) -> dict | None:
    """Load the CUB shim for this GPU once, say whether the ``cub`` peer runs, and return what
    the files record about it."""
    if peers and not {"cub", "cub-sorted"} & set(peers):
        return None
    from . import cub

    lib, why = cub.available(cub.arch_of(facts["compute_capability"]))
    if lib is None:
        report.say(f"CUB peer skipped: {why}")
        return {"available": False, "reason": why}
    v = lib.version
    report.say(f"CUB peer: CUB {v // 100000}.{v // 100 % 1000}.{v % 100} from {lib.path}; {cub.NOTE}")
    return {"available": True, "cub_version": v, "library": str(lib.path), "note": cub.NOTE}


def flashinfer_facts(facts: dict, peers: tuple[str, ...]) -> dict | None:
    """Load the FlashInfer shim for this GPU once and say whether its peers run (as cub_facts)."""
    if peers and not {"flashinfer", "flashinfer-unsorted"} & set(peers):
        return None
    from . import flashinfer

    lib, why = flashinfer.available(flashinfer.arch_of(facts["compute_capability"]))
    if lib is None:
        report.say(f"FlashInfer peers skipped: {why}")
        return {"available": False, "reason": why}
    cub = "with" if lib.has_cub else "without"
    report.say(
        f"FlashInfer peers: FlashInfer {lib.version} ({cub} its CUB backend) from {lib.path}; {flashinfer.NOTE}"
    )
    return {"available": True, "version": lib.version, "cub_backend": lib.has_cub, "library": str(lib.path),
            "note": flashinfer.NOTE}  # fmt: skip


class ShimKit(loop.Kit):
    """The demo's peers, then CUB's and FlashInfer's on a GPU; the watchdog; the plots."""

    records = ("cub", "flashinfer")
    unsorted = ("cub", "flashinfer-unsorted")
    plots = True

    def peer_names(self, gpu: bool) -> tuple[str, ...]:
        return (*super().peer_names(True), *SHIM_PEERS) if gpu else super().peer_names(False)

    def routes(self, x, axis: int, case: grid.Case, gpu: bool, only: tuple[str, ...] = ()) -> list[Route]:
        found = baselines.builders(x, axis, case, gpu)
        if gpu:
            k, mode = case.k, case.mode
            found |= {
                "cub": lambda: cub_route(x, axis, k, mode, case.dtype),
                "cub-sorted": lambda: cub_route(x, axis, k, mode, case.dtype, sort=True),
                "flashinfer": lambda: flashinfer_route(x, axis, case, sort=True),
                "flashinfer-unsorted": lambda: flashinfer_route(x, axis, case, sort=False),
            }
        return baselines.build(found, only)

    def unavailable(self, name: str, gpu: bool) -> str | None:
        if gpu and name in SHIM_PEERS:
            return shim_unavailable(name)
        return super().unavailable(name, gpu)  # on the CPU: a GPU peer, said so

    def start(self, record: dict, peers: tuple[str, ...]) -> dict[str, dict | None]:
        return {"cub": cub_facts(record, peers), "flashinfer": flashinfer_facts(record, peers)}

    def absent(self, name: str, loaded: dict[str, dict | None]) -> str | None:
        shim = loaded.get("cub" if name.startswith("cub") else "flashinfer") if name in SHIM_PEERS else None
        return shim["reason"] if shim is not None and not shim["available"] else None

    def guard(self, gpu: bool) -> Callable[[str], AbstractContextManager]:
        """On a GPU the watchdog (``$CUTOPK_WATCHDOG_S``): a call that never returns ends the run."""
        return watchdog.Watchdog(watchdog.limit_from_env() if gpu else 0).watch

    def plot(self, results: list[dict], names: list[str], out: pathlib.Path, stem: str) -> list[pathlib.Path]:
        from . import plots

        return plots.plot(results, names, out, stem)


KIT = ShimKit()


def run(**options) -> list[dict]:
    """:func:`cutopk._demo.loop.run` with the benchmark's kit (the same options)."""
    return loop.run(**options, kit=KIT)


def main(argv: list[str] | None = None, prog: str = "benchmarks/run.py", **defaults) -> int:
    """The demo's command line with the benchmark's kit (``--plots``, CUB and FlashInfer)."""
    return cli.main(argv, prog, kit=KIT, **defaults)
