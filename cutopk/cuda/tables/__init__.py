"""The dispatch tables a device's plans use, found and read once per device.

In order of preference:

1. ``$CUTOPK_DISPATCH_TABLE``: a table file named by the user (``off``: no table, the hand rules
   alone);
2. the user's own table from ``python -m cutopk tune``, in ``$XDG_CACHE_HOME/cutopk/tables/``
   (``~/.cache/cutopk/tables/``), one file per device name, used only when its key (device,
   cutopk, CUDA runtime and driver versions) is the device's now;
3. the package's table for the device's compute capability (``sm90.json`` here), else
   ``default.json`` (no entries: the hand rules of :mod:`cutopk.cuda.dispatch`).

A table that is missing (named but absent), stale (another key) or corrupt (not JSON, not a
table, a family cutopk does not have) is ignored with one warning, and the next one is tried:
never an error, and never a wrong answer, since the choice of family changes no result.
"""

from __future__ import annotations

import json
import pathlib
import re
import warnings

from ..._environ import get as _env
from ..._host_build import cache_home
from ..._version import __version__
from ..dispatch_table import DispatchTable, TableError, from_json
from ..families.registry import FAMILIES

HERE = pathlib.Path(__file__).parent
ENV = "CUTOPK_DISPATCH_TABLE"


class TableWarning(RuntimeWarning):
    """A dispatch table was ignored (missing, stale or corrupt); the next one is used."""


def device_key(name: str, compute_capability: str, cuda_runtime: int, driver: int) -> dict[str, str]:
    """What a user's table is valid for: a table measured on another device, another cutopk (its
    kernels), or another CUDA runtime or driver (their compilers and schedulers) is stale."""
    return {
        "device": name, "compute_capability": str(compute_capability), "cutopk": __version__,
        "cuda_runtime": str(cuda_runtime), "driver": str(driver),
    }  # fmt: skip


def user_dir() -> pathlib.Path:
    return cache_home() / "cutopk" / "tables"


def user_path(device_name: str) -> pathlib.Path:
    """The user's table for a device of this name (``tune`` writes it)."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device_name).strip("-").lower() or "device"
    return user_dir() / f"{slug}.json"


def package_path(compute_capability: str) -> pathlib.Path:
    """The package's table for a compute capability ("90"), or the default where it has none."""
    path = HERE / f"sm{compute_capability}.json"
    return path if path.is_file() else HERE / "default.json"


def read(path: pathlib.Path, name: str) -> DispatchTable:
    """The table in ``path``; :class:`TableError` (or ``OSError``) when it cannot be one."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TableError(f"not JSON: {exc}") from None
    return from_json(obj, name, tuple(FAMILIES))


def _try(path: pathlib.Path, name: str, key: dict[str, str] | None) -> DispatchTable | None:
    """The table in ``path`` if it is one (and, with ``key``, measured on that key), else None
    with a warning."""
    try:
        table = read(path, name)
    except FileNotFoundError:
        _warn(f"the dispatch table {path} does not exist")
        return None
    except (OSError, TableError, ValueError, TypeError) as exc:
        _warn(f"the dispatch table {path} cannot be read ({exc})")
        return None
    if key is not None and dict(table.key) != key:
        changed = sorted(
            f for f in key.keys() | dict(table.key).keys() if key.get(f) != dict(table.key).get(f)
        )
        _warn(
            f"the dispatch table {path} is stale: measured with another {', '.join(changed)} "
            f"(run `python -m cutopk tune` again)"
        )
        return None
    return table


def _warn(message: str) -> None:
    warnings.warn(
        f"cutopk: {message}; ignored, the next table or the hand rules choose", TableWarning, stacklevel=3
    )


def load(compute_capability: str, key: dict[str, str] | None) -> DispatchTable | None:
    """The table a device's plans use (module docstring), None for the hand rules alone.
    ``key``: the device's :func:`device_key` (None: no user table, the simulator)."""
    named = _env(ENV)
    if named == "off":
        return None
    if named:
        table = _try(pathlib.Path(named), f"{ENV}={named}", None)
        if table is not None:
            return table
    if key is not None:
        mine = user_path(key["device"])
        if mine.exists():
            table = _try(mine, f"tuned ({mine.name})", key)
            if table is not None:
                return table
    path = package_path(compute_capability)
    table = _try(path, path.stem, None)
    return table if table is not None and table.entries else None
