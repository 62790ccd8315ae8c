"""``python -m cutopk``: the short demo benchmark on the GPU when there is one, else on the CPU.

    python -m cutopk [--quick | --full] [--regime moe,llm] [--out DIR | --save | --no-save] [--plots]

On a GPU, run from a source checkout, the results are saved to benchmarks/results/<date>-<device>/.

See ``cutopk/_bench`` and ``benchmarks/README.md``.
"""

import sys

from ._bench import main

if __name__ == "__main__":
    sys.exit(main())
