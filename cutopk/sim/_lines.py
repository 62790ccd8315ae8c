"""Source lines for the code addresses the runtime records at a fault (crash, hang, overrun).

Modules are built with ``-g`` and the kernel text carries ``#line 1 "kernel.cu"``, so
``addr2line`` turns an address inside the module into a line of the kernel source as given.
"""

from __future__ import annotations

import functools
import pathlib
import re
import shutil
import subprocess

# The copy API of kernels/async_copy.cuh: a fault the runtime finds inside these wrappers (pasted
# into the kernel source with the header) names the line of the kernel that called them.
_WRAPPERS = re.compile(
    r"(?:^|\s)cutopk::(?:copy16_async|commit_copies|wait_copies|wait_at_most<|wait_group<|bulk_copy_async|copy_barrier_)"
)


@functools.cache
def _addr2line() -> str | None:
    return shutil.which("addr2line")


def kernel_location(shared_object: pathlib.Path, frames: list[int]) -> str | None:
    """``"kernel.cu line N (in f)"`` for the innermost frame in the kernel source, or None (a
    frame inside a wrapper of kernels/async_copy.cuh counts only when no caller is found).

    Parameters
    ----------
    shared_object : pathlib.Path
        The module the offsets refer to.
    frames : list of int
        Code offsets into it, innermost first.
    """
    tool = _addr2line()
    if not frames or tool is None:
        return None
    cmd = [tool, "-e", str(shared_object), "-f", "-C", "-i", *(f"{f:#x}" for f in frames)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.splitlines()
    # Pairs of lines: the function, then file:line (inlined frames come as more pairs).
    wrapper = None
    for function, place in zip(lines[0::2], lines[1::2], strict=False):
        file, _, line = place.rpartition(":")
        if file.endswith("kernel.cu") and line.split()[0].isdigit():
            found = f"kernel.cu line {line.split()[0]} (in {function})"
            if not _WRAPPERS.search(function):
                return found
            wrapper = wrapper or found
    return wrapper
