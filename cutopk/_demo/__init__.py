"""What ``python -m cutopk`` runs: the demo (cutopk side by side with torch.topk, jax.lax.top_k,
CuPy's sort-based route and NumPy on a tour of the grid's regimes, every peer's answer checked
against cutopk's, with the fraction of the copy bandwidth measured in the same run) and ``tune``
(this GPU's dispatch table, which later calls on the device prefer).

Modules, one job each: ``grid`` (what is measured), ``inputs`` (value distributions and layouts),
``baselines`` (the routes), ``check`` (the answer checker), ``timing`` (CUDA events, graph replay,
perf_counter), ``env`` (GPU detection, metadata, output folder), ``report`` (table, CSV/JSON),
``pairs`` (like with like, the summary), ``loop`` (the measuring loop and its :class:`loop.Kit`),
``cli`` (the command line); ``tune`` and ``tabulate`` (dispatch tables from forced-family
results). The benchmark's workshop (CUB and FlashInfer peers, the scoreboard, the lease, the
watchdog, plots) is ``benchmarks/cutopk_bench/``, which builds on these; the package never imports it.
"""

import sys

from . import cli
from .loop import run


def main(argv: list[str] | None = None, prog: str = "python -m cutopk", **defaults) -> int:
    """``python -m cutopk [options]`` (the demo, :func:`cli.main`) or ``python -m cutopk tune
    [options]`` (:func:`tune.main`)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["tune"]:
        from . import tune

        return tune.main(args[1:], prog=f"{prog} tune")
    return cli.main(argv, prog, **defaults)


__all__ = ["main", "run"]
