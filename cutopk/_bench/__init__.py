"""The benchmark behind ``python -m cutopk``: cutopk side by side with torch.topk, jax.lax.top_k,
CuPy's sort-based routes and NumPy, on the issue's grid of regimes, with every baseline's answer
checked against cutopk's, and the fraction of the measured copy bandwidth.

Modules: ``grid`` (what is measured), ``inputs`` (value distributions), ``baselines`` (the peers),
``timing`` (CUDA events / perf_counter), ``report`` (table, CSV/JSON, plots), ``runner``.
"""

from .runner import main, run

__all__ = ["main", "run"]
