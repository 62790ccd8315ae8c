"""``python -m cutopk``: the short demo benchmark on the GPU when there is one, else on the CPU.

    python -m cutopk [--quick | --full] [--regime moe,llm] [--out DIR | --save | --no-save] [--plots]
    python -m cutopk tune [--shapes 16x32000:50,...] [--timing eager,graph]   # this GPU's dispatch table

Files: ``--out DIR``, or ``--save``: ``benchmarks/results/<date>-<device>/`` when run from a source
checkout (the default for a GPU run there), ``./cutopk-results/<date>-<device>/`` otherwise. Every
option is checked before anything is measured. ``--help`` lists them all.

See ``cutopk/_bench`` and ``benchmarks/README.md``.
"""

import sys

from ._bench import main

if __name__ == "__main__":
    sys.exit(main())
