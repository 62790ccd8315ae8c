"""The benchmark behind ``python -m cutopk``: cutopk side by side with torch.topk, jax.lax.top_k,
CuPy's sort-based route and NumPy, on the issue's grid of regimes, every peer's answer checked
against cutopk's, with the fraction of the copy bandwidth measured in the same run.

Modules, one job each: ``grid`` (what is measured), ``inputs`` (value distributions and layouts),
``baselines`` (the routes), ``check`` (the answer checker), ``timing`` (CUDA events /
perf_counter), ``env`` (GPU detection, metadata, output folder), ``report`` (table, CSV/JSON),
``plots`` (PNG), ``runner`` (the loop and the command line).
"""

from .runner import main, run

__all__ = ["main", "run"]
