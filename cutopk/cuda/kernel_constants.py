"""Constants that both the Python side (dispatcher, launcher) and the CUDA kernels use, written
once, in ``kernels/constants.cuh``: this module reads that header's ``#define CUTOPK_<NAME>
<integer>`` lines and gives each as ``<NAME>``. The kernels include the header (``kernel_source()``
inlines it), so the two sides cannot drift apart.
"""

from __future__ import annotations

import pathlib
import re

_HERE = pathlib.Path(__file__).resolve().parents[1]  # the cutopk package
# Inside the installed package (cutopk/kernels), else the source checkout's kernels/ folder (as
# cutopk.cuda.launcher.kernel_dir() looks).
HEADER = next(
    (
        p
        for p in (_HERE / "kernels" / "constants.cuh", _HERE.parent / "kernels" / "constants.cuh")
        if p.is_file()
    ),
    _HERE / "kernels" / "constants.cuh",
)
_DEFINE = re.compile(r"#\s*define\s+CUTOPK_(?P<name>\w+)\s+(?P<value>-?\d+)\s*(//.*)?")


def read_header(path: pathlib.Path = HEADER) -> dict[str, int]:
    """The ``CUTOPK_<NAME> <integer>`` defines of a constants header, in order, as {NAME: value}."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise RuntimeError(
            f"cutopk's kernel constants ({path}) could not be read: the installation is incomplete"
        ) from exc
    values: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not re.match(r"#\s*define\b", line):
            continue
        m = _DEFINE.fullmatch(line)
        if m is None or m["name"] in values:
            raise RuntimeError(
                f"{path}:{number}: expected '#define CUTOPK_<NAME> <integer>' (each name once), got {line!r}"
            )
        values[m["name"]] = int(m["value"])
    return values


_VALUES = read_header()
_EXPORTED = tuple(_VALUES)


def _value(name: str) -> int:
    if name not in _VALUES:
        raise RuntimeError(f"{HEADER} does not define CUTOPK_{name}")
    return _VALUES[name]


# Threads per block of each kernel family (each kernel's __launch_bounds__).
WARP_ROW_THREADS = _value("WARP_ROW_THREADS")
WARP_RADIX_THREADS = _value("WARP_RADIX_THREADS")
THREAD_ROW_THREADS = _value("THREAD_ROW_THREADS")
BITONIC_THREADS = _value("BITONIC_THREADS")
RADIX_THREADS = _value("RADIX_THREADS")
MULTIBLOCK_THREADS = _value("MULTIBLOCK_THREADS")
KEYS_THREADS = _value("KEYS_THREADS")
TRANSPOSE_THREADS = _value("TRANSPOSE_THREADS")
ORDER_TILE_THREADS = _value("ORDER_TILE_THREADS")
ORDER_MERGE_THREADS = _value("ORDER_MERGE_THREADS")
MERGE_THREADS = _value("MERGE_THREADS")
# merge_parts: the parts one launch reads (kernels/merge.cu).
MERGE_PARTS = _value("MERGE_PARTS")
RESIDENT_THREADS = _value("RESIDENT_THREADS")
# block_row: threads per block (8-bit keys: fewer), copy groups per row at most, candidate pairs at most.
BLOCK_ROW_THREADS = _value("BLOCK_ROW_THREADS")
BLOCK_ROW_8BIT_THREADS = _value("BLOCK_ROW_8BIT_THREADS")
BLOCK_ROW_CHUNKS = _value("BLOCK_ROW_CHUNKS")
BLOCK_ROW_CAP = _value("BLOCK_ROW_CAP")
# warp_radix: rows per block, shared (key, index) pairs per warp, the largest K.
WARP_RADIX_WARPS = _value("WARP_RADIX_WARPS")
WARP_RADIX_CAP = _value("WARP_RADIX_CAP")
WARP_RADIX_MAX_K = _value("WARP_RADIX_MAX_K")
# multiblock: bytes of a row's state, keys of sample_threshold's sample of a row, the widest digit.
MULTIBLOCK_STATE_BYTES = _value("MULTIBLOCK_STATE_BYTES")
MULTIBLOCK_SAMPLES = _value("MULTIBLOCK_SAMPLES")
MULTIBLOCK_DIGIT_BITS = _value("MULTIBLOCK_DIGIT_BITS")
# multiblock: candidate offsets a warp of pass 1's streaming filter stages in shared memory.
MULTIBLOCK_STAGE = _value("MULTIBLOCK_STAGE")
# resident: the widest digit (2^12 bins).
RESIDENT_DIGIT_BITS = _value("RESIDENT_DIGIT_BITS")
# order_winners.cuh: the digit sorted=True scatters the winners on, the longest range a warp sorts.
ORDER_DIGIT_BITS = _value("ORDER_DIGIT_BITS")
ORDER_WARP_SORT = _value("ORDER_WARP_SORT")
# cluster: blocks per row (one thread-block cluster).
CLUSTER_BLOCKS = _value("CLUSTER_BLOCKS")
# split: blocks per row at most.
SPLIT_MAX_BLOCKS = _value("SPLIT_MAX_BLOCKS")
# streaming: threads per block, the stages of its ring, and the 16-byte vectors a thread copies per stage.
STREAMING_THREADS = _value("STREAMING_THREADS")
STREAMING_STAGES = _value("STREAMING_STAGES")
STREAMING_THREAD_VECS = _value("STREAMING_THREAD_VECS")
# Independent loads per thread of a streaming pass (kernels/row_loads.cuh).
STREAM_LOADS = _value("STREAM_LOADS")
# The kinds of batch a kernel reads (kernels/row_extent.cuh).
ROWS_REGULAR = _value("ROWS_REGULAR")
ROWS_LENGTHS = _value("ROWS_LENGTHS")
ROWS_SEGMENTS = _value("ROWS_SEGMENTS")
