"""Shared object files built with the host's compiler, once, into a cache folder: the simulator's
(``cutopk.sim``: the kernels as C++).

A build is named by a hash of everything that goes into it, made in a build folder of its own
inside the cache (``.cutopk-build-<host>-<pid>-*``) and moved into place atomically, so a
concurrent build of the same name is harmless and a failed one leaves nothing behind. A build
folder whose process died (killed during a build: SIGTERM and SIGKILL skip the clean-up) is
removed by the next build in that cache, and by the first use of a built file there in each
process (:func:`build_once` finds it built). Imports nothing of cutopk.
"""

from __future__ import annotations

import os
import pathlib
import platform
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable

# The build folders' names: the host and the process that made them, so that the next build
# can tell one whose process is gone (a cache may be shared between machines: another host's
# folder is removed only when old).
_BUILD_PREFIX = ".cutopk-build-"
_HOST = re.sub(r"[^A-Za-z0-9_.]", "_", platform.node() or "host")
# Another host's build folder, or one whose process id may have been reused, counts as
# abandoned after this long (no build takes a day).
STALE_BUILD_S = 24 * 3600
# Earlier versions built in ``tmp*`` folders of the cache; one holding only their files and this
# old is theirs, abandoned.
_OLD_BUILD_FILES = frozenset(("select_rows.c", "built.so", "module.cpp", "module.o"))
_OLD_BUILD_S = 3600


class BuildError(RuntimeError):
    """A compile or link step failed; ``stderr`` holds the tool's message."""

    def __init__(self, stderr: str):
        super().__init__(stderr)
        self.stderr = stderr


def cache_home() -> pathlib.Path:
    """``$XDG_CACHE_HOME``, else ``~/.cache``; a relative ``$XDG_CACHE_HOME`` is ignored, as
    the XDG Base Directory specification asks (it would follow the current folder)."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return pathlib.Path(xdg)
    return pathlib.Path(os.path.expanduser("~")) / ".cache"


def _alive(pid: int) -> bool:
    if os.name != "posix":  # os.kill(pid, 0) is no probe elsewhere (Windows: CTRL_C_EVENT)
        return True  # the folder's age decides
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _abandoned(entry: pathlib.Path, now: float) -> bool:
    try:
        age = now - entry.stat().st_mtime
        if entry.name.startswith(_BUILD_PREFIX):
            host, pid, _ = entry.name[len(_BUILD_PREFIX) :].rsplit("-", 2)
            if host == _HOST and int(pid) != os.getpid() and not _alive(int(pid)):
                return True
            return age > STALE_BUILD_S
        if entry.name.startswith("tmp") and entry.is_dir() and age > _OLD_BUILD_S:
            return {child.name for child in entry.iterdir()} <= _OLD_BUILD_FILES
    except (OSError, ValueError):
        pass
    return False


# The cache folders swept by this process where a build was found built (once each: a build
# sweeps every time).
_swept: set[pathlib.Path] = set()


def sweep(folder: pathlib.Path) -> list[pathlib.Path]:
    """Remove the build folders in ``folder`` whose build was abandoned (see the module doc);
    returns those removed."""
    removed: list[pathlib.Path] = []
    now = time.time()
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith((_BUILD_PREFIX, "tmp")):  # a build's own files: no stat
            continue
        if entry.is_dir() and _abandoned(entry, now):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def build_once(
    out: pathlib.Path,
    source_name: str,
    source: str,
    commands: Callable[[pathlib.Path, pathlib.Path, pathlib.Path], list[list[str]]],
) -> pathlib.Path:
    """``out``, built unless it exists: ``source`` is written to ``source_name`` in a build
    folder, ``commands(source_path, built_path, folder)`` gives the command lines that turn it
    into ``built_path`` (run in order; the first failure raises :class:`BuildError`), and the
    result is moved to ``out``."""
    if out.exists():
        if out.parent not in _swept:  # a builder killed since the last build left its folder
            _swept.add(out.parent)
            sweep(out.parent)
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    sweep(out.parent)
    folder = pathlib.Path(tempfile.mkdtemp(prefix=f"{_BUILD_PREFIX}{_HOST}-{os.getpid()}-", dir=out.parent))
    try:
        src, built = folder / source_name, folder / f"built{out.suffix}"
        src.write_text(source)
        for command in commands(src, built, folder):
            proc = subprocess.run(command, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise BuildError(proc.stderr)
        built.replace(out)  # atomic: a concurrent build of the same name is harmless
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def asan_loaded() -> bool:
    """Whether AddressSanitizer's runtime is in this process (a library built with
    ``-fsanitize=address`` aborts the process when loaded without it)."""
    try:
        with open("/proc/self/maps") as maps:
            return "libasan" in maps.read()
    except OSError:
        return False
