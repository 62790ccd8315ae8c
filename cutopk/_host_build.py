"""Shared object files built with the host's compiler, once, into a cache folder.

Used by the simulator (``cutopk.sim``: the kernels as C++) and by the NumPy backend's compiled
route (``cutopk.numpy.native``): a build is named by a hash of everything that goes into it,
made in a temporary folder beside the cache and moved into place atomically, so a concurrent
build of the same name is harmless and a failed one leaves nothing behind. Imports nothing of
cutopk: either user stays free of the other.
"""

from __future__ import annotations

import pathlib
import subprocess
import tempfile
from collections.abc import Callable


class BuildError(RuntimeError):
    """A compile or link step failed; ``stderr`` holds the tool's message."""

    def __init__(self, stderr: str):
        super().__init__(stderr)
        self.stderr = stderr


def build_once(
    out: pathlib.Path,
    source_name: str,
    source: str,
    commands: Callable[[pathlib.Path, pathlib.Path, pathlib.Path], list[list[str]]],
) -> pathlib.Path:
    """``out``, built unless it exists: ``source`` is written to ``source_name`` in a temporary
    folder, ``commands(source_path, built_path, folder)`` gives the command lines that turn it
    into ``built_path`` (run in order; the first failure raises :class:`BuildError`), and the
    result is moved to ``out``."""
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        folder = pathlib.Path(tmp)
        src, built = folder / source_name, folder / f"built{out.suffix}"
        src.write_text(source)
        for command in commands(src, built, folder):
            proc = subprocess.run(command, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise BuildError(proc.stderr)
        built.replace(out)  # atomic: a concurrent build of the same name is harmless
    return out


def asan_loaded() -> bool:
    """Whether AddressSanitizer's runtime is in this process (a library built with
    ``-fsanitize=address`` aborts the process when loaded without it)."""
    try:
        with open("/proc/self/maps") as maps:
            return "libasan" in maps.read()
    except OSError:
        return False
