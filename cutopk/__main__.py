"""``python -m cutopk``: the short demo benchmark (see cutopk/_bench)."""

import sys

from ._bench import main

if __name__ == "__main__":
    sys.exit(main())
