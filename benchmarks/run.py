"""The full benchmark grid from a source checkout (no install needed):

    python benchmarks/run.py                      # full grid, saved to benchmarks/results/<date>-<device>/
    python benchmarks/run.py --regime llm --plots # one regime (a GPU session allows 10 minutes a command)
    python benchmarks/run.py --quick --out /tmp/q # the quick grid of ``python -m cutopk``

The benchmark's kit (``benchmarks/cutopk_bench/shims.py``: the demo's loop of ``python -m cutopk``
with CUB's and FlashInfer's peers, the watchdog and ``--plots``) with two other defaults: the full
grid and ``--save``. ``--help`` lists every option.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # this checkout's cutopk

from cutopk_bench.shims import main

if __name__ == "__main__":
    sys.exit(main(prog="benchmarks/run.py", full=True, save=True))
