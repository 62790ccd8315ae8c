"""The benchmark behind ``python -m cutopk``: cutopk side by side with torch.topk, jax.lax.top_k,
CuPy's sort-based route and NumPy, on the issue's grid of regimes, every peer's answer checked
against cutopk's, with the fraction of the copy bandwidth measured in the same run.

Modules, one job each: ``grid`` (what is measured), ``inputs`` (value distributions and layouts),
``baselines`` (the routes), ``check`` (the answer checker), ``timing`` (CUDA events /
perf_counter), ``env`` (GPU detection, metadata, output folder), ``report`` (table, CSV/JSON),
``plots`` (PNG), ``runner`` (the loop and the command line); ``tune`` (``python -m cutopk tune``:
this GPU's dispatch table) and ``tabulate`` (dispatch tables from forced-family results).
"""

import sys

from . import runner
from .runner import run


def main(argv: list[str] | None = None, prog: str = "python -m cutopk", **defaults) -> int:
    """``python -m cutopk [options]`` (the benchmark, :func:`runner.main`) or ``python -m cutopk
    tune [options]`` (:func:`tune.main`)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["tune"]:
        from . import tune

        return tune.main(args[1:], prog=f"{prog} tune")
    return runner.main(argv, prog, **defaults)


__all__ = ["main", "run"]
