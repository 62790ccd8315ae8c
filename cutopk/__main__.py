"""``python -m cutopk``: the short demo benchmark on the GPU when there is one, else on the CPU.

    python -m cutopk [--quick | --full] [--regime moe,llm] [--out DIR | --save | --no-save]
    python -m cutopk tune [--shapes 16x32000:50,...] [--timing eager,graph]   # this GPU's dispatch table

Files: ``--out DIR``, or ``--save``: ``benchmarks/results/<date>-<device>/`` when run from a source
checkout (the default for a GPU run there), ``./cutopk-results/<date>-<device>/`` otherwise. Every
option is checked before anything is measured. ``--help`` lists them all.

See ``cutopk/_demo`` and ``benchmarks/README.md`` (``benchmarks/run.py``: the benchmark, with
CUB's and FlashInfer's peers and plots).
"""

import sys

from ._demo import main

if __name__ == "__main__":
    sys.exit(main())
