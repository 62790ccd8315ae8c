"""The NumPy backend's compiled route against its NumPy routes, one thread each, on the CPU grid.

For each case of the quick CPU grid and ``cpu_numpy.EXTRA_CASES``: cutopk on one thread as it
runs by default (``cutopk-1t``: ``CUTOPK_COMPILED`` unset, the route the backend picks, ``plan()``'s
``route``), with the compiled route turned off (``CUTOPK_COMPILED=0``: the NumPy routes), and ``torch.topk`` on
one thread when torch is installed. The answers are checked identical first; the times are
medians of ``--repeat`` turns (routes alternate within a turn), each the mean of as many calls
as fit in some 2 ms. Prints a Markdown table::

    PYTHONPATH=. python benchmarks/cpu_compiled_route.py --repeat 11
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
from cpu_numpy import EXTRA_CASES

import cutopk
from cutopk._demo import grid, inputs
from cutopk.numpy import compiled as compiled_route


def _timed(call) -> float:
    call()
    start, count = time.perf_counter(), 0
    while True:
        call()
        count += 1
        elapsed = time.perf_counter() - start
        if elapsed > 2e-3:
            return elapsed / count


def _with_compiled(allowed: bool, call):
    def run():
        before = os.environ.get(compiled_route.ENV_VAR)
        if allowed:
            os.environ.pop(compiled_route.ENV_VAR, None)
        else:
            os.environ[compiled_route.ENV_VAR] = "0"
        try:
            return call()
        finally:
            if before is None:
                os.environ.pop(compiled_route.ENV_VAR, None)
            else:
                os.environ[compiled_route.ENV_VAR] = before

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    print(
        f"{platform.processor() or platform.machine()}, one thread each; compiled route: "
        f"{compiled_route.unavailable_reason() or 'available'}; NumPy {np.__version__}"
        + (f", torch {torch.__version__}" if torch else "")
    )
    print()
    print(
        "| case | route | cutopk-1t | NumPy routes | torch-1t | NumPy routes / cutopk-1t | torch-1t / cutopk-1t |"
    )
    print("|---|---|---|---|---|---|---|")
    cases = [*grid.quick_grid(gpu=False), *EXTRA_CASES]
    for case in cases:
        x, axis = inputs.arrange(inputs.values(case), case)
        with cutopk.num_threads(1):
            plan = cutopk.plan(x, case.k, axis=axis, mode=case.mode).params["route"]

            def ours(x=x, case=case, axis=axis):
                return cutopk.top_k(x, case.k, axis=axis, mode=case.mode)

            compiled, numpy_routes = _with_compiled(True, ours), _with_compiled(False, ours)
            a, b = compiled(), numpy_routes()
            assert np.array_equal(a.indices, b.indices), case
            routes = {"compiled": compiled, "numpy": numpy_routes}
            if torch is not None and x.dtype.name != "bfloat16":
                t = torch.from_numpy(np.ascontiguousarray(x))
                routes["torch"] = lambda t=t, case=case, axis=axis: torch.topk(
                    t, case.k, dim=axis, largest=case.mode == "largest"
                )
            times: dict[str, list[float]] = {name: [] for name in routes}
            for _ in range(args.repeat):
                for name, call in routes.items():
                    times[name].append(_timed(call))
        med = {name: statistics.median(v) for name, v in times.items()}
        torch_cell = f"{med['torch'] * 1e6:.0f} us" if "torch" in med else "-"
        torch_ratio = f"{med['torch'] / med['compiled']:.2f}x" if "torch" in med else "-"
        print(
            f"| {case.label()} | {plan} | {med['compiled'] * 1e6:.0f} us | {med['numpy'] * 1e6:.0f} us | "
            f"{torch_cell} | {med['numpy'] / med['compiled']:.2f}x | {torch_ratio} |"
        )


if __name__ == "__main__":
    main()
