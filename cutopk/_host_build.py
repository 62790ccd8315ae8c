"""Shared object files built with the host's compiler, once, into a cache folder.

Used by the simulator (``cutopk.sim``: the kernels as C++) and by the NumPy backend's compiled
route (``cutopk.numpy.compiled``): a build is named by a hash of everything that goes into it,
made in a build folder of its own inside the cache (``.cutopk-build-<host>-<pid>-*``) and moved
into place atomically, so a concurrent build of the same name is harmless and a failed one
leaves nothing behind. A build folder whose process died (killed during a build: SIGTERM and
SIGKILL skip the clean-up) is removed by the next build in that cache, and by the first use of a
built file there in each process (:func:`build_once` finds it built). Where asked, a build record is written
beside the library (:func:`record_path`: its size and SHA-256, and what the caller adds, such as
its ABI) and checked before the library is used: a truncated file must never be loaded (mapping
it dies of SIGBUS), nor a file that something else put under the name. Where asked, the cache
keeps the builds of a name's family that were used last, and no more (:func:`evict`). Imports
nothing of cutopk: either user stays free of the other.
"""

from __future__ import annotations

import hashlib
import json
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
# ``build_once(keep=N)``: a file used (found built, or built) within this long is never evicted,
# whatever the count: a process may be between its check of the file and its loading it. One
# that is older was loaded long ago where it is still used, and unlinking a mapped file leaves
# the mapping be; a process that checks it as it goes finds it missing and builds it again.
EVICT_AFTER_S = 3600
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


def record_path(out: pathlib.Path) -> pathlib.Path:
    """The build record of library ``out``: ``<name>.json`` beside it."""
    return out.with_suffix(".json")


def _digest(path: pathlib.Path) -> str:
    # read(), never a mapping: a file cut short is an error here, not a SIGBUS.
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record_fits(out: pathlib.Path, expected: dict) -> str | None:
    """None where ``out``'s build record is there, holds ``expected``'s entries, and matches the
    file's size and SHA-256; else what is wrong, in words."""
    try:
        record = json.loads(record_path(out).read_text())
    except FileNotFoundError:
        return "it has no build record"
    except (OSError, ValueError) as exc:
        return f"its build record cannot be read ({exc})"
    if not isinstance(record, dict):
        return "its build record is not a record"
    for key, value in expected.items():
        if record.get(key) != value:
            return f"its build record's {key} is {record.get(key)!r}, not {value!r}"
    try:
        size = out.stat().st_size
        if size != record.get("size"):
            return f"its size is {size} bytes, its build record's {record.get('size')}"
        if _digest(out) != record.get("sha256"):
            return "its SHA-256 is not its build record's"
    except OSError as exc:
        return f"it cannot be read ({exc})"
    return None


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


def evict(out: pathlib.Path, keep: int, now: float | None = None) -> list[pathlib.Path]:
    """Remove the files like ``out`` in its folder (the same name up to its first ``-``, the same
    suffix), with their build records, beyond the ``keep`` last used (``out`` among them; used:
    the file's mtime, which :func:`build_once` sets on each use), and unused for
    ``EVICT_AFTER_S``; returns those removed. ``out`` itself stays."""
    prefix, now = out.name.split("-", 1)[0] + "-", time.time() if now is None else now
    used: list[tuple[float, pathlib.Path]] = []
    try:
        entries = list(out.parent.iterdir())
    except OSError:
        return []
    for entry in entries:
        if entry.name.startswith(prefix) and entry.suffix == out.suffix and entry.name != out.name:
            try:
                used.append((entry.stat().st_mtime, entry))
            except OSError:  # gone meanwhile
                pass
    used.sort(reverse=True)
    removed = []
    for when, entry in used[max(0, keep - 1) :]:
        if now - when < EVICT_AFTER_S:
            continue
        try:  # the record first: a reader between the two sees no record and builds again
            record_path(entry).unlink(missing_ok=True)
            entry.unlink(missing_ok=True)
        except OSError:  # another user's file, a read-only cache, a DLL in use: left there
            continue
        removed.append(entry)
    return removed


def _touch(out: pathlib.Path) -> None:
    """Mark ``out`` used now (:func:`evict` keeps the files last used)."""
    try:
        os.utime(out)
    except OSError:  # a read-only cache, another user's file
        pass


def build_once(
    out: pathlib.Path,
    source_name: str,
    source: str,
    commands: Callable[[pathlib.Path, pathlib.Path, pathlib.Path], list[list[str]]],
    record: dict | None = None,
    rebuild: bool = False,
    keep: int | None = None,
) -> pathlib.Path:
    """``out``, built unless it exists: ``source`` is written to ``source_name`` in a build
    folder, ``commands(source_path, built_path, folder)`` gives the command lines that turn it
    into ``built_path`` (run in order; the first failure raises :class:`BuildError`), and the
    result is moved to ``out``.

    ``record``: entries of the build record written beside ``out`` (with its size and SHA-256);
    an ``out`` whose record does not fit (:func:`record_fits`) is built again. ``rebuild``: build
    even where ``out`` fits (it failed to load). ``keep``: the cache holds at most this many
    builds like ``out`` that were used lately (:func:`evict`, after each build); each use marks
    ``out`` used."""
    if not rebuild and out.exists() and (record is None or record_fits(out, record) is None):
        if out.parent not in _swept:  # a builder killed since the last build left its folder
            _swept.add(out.parent)
            sweep(out.parent)
        if keep is not None:
            _touch(out)
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
        if record is not None:
            facts = {**record, "size": built.stat().st_size, "sha256": _digest(built)}
            note = folder / "record.json"
            note.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")
            # The library first: a reader between the two renames sees a record that does
            # not fit and builds again, never a record that vouches for another file.
            built.replace(out)  # atomic: a concurrent build of the same name is harmless
            note.replace(record_path(out))
        else:
            built.replace(out)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if keep is not None:
        evict(out, keep)
    return out


def asan_loaded() -> bool:
    """Whether AddressSanitizer's runtime is in this process (a library built with
    ``-fsanitize=address`` aborts the process when loaded without it)."""
    try:
        with open("/proc/self/maps") as maps:
            return "libasan" in maps.read()
    except OSError:
        return False
