"""Environment variables read on a call's hot path.

``os.environ.get`` encodes the name and searches ``os.environ``'s own mapping of encoded names
on every read (some 1.8 us on the development machine; a warm NumPy call read three settings,
``CUTOPK_COMPILED`` twice with its deprecated name, ``CUTOPK_NUM_THREADS`` once: a tenth of a
0.1 ms call). :func:`get` reads the same mapping with the name encoded once (0.1-0.2 us), so it
sees every change made through ``os.environ`` (and ``monkeypatch.setenv``), as ``os.environ.get``
does; like it, not one made by C code calling ``setenv`` behind ``os.environ``'s back.

Every ``CUTOPK_*`` variable is parsed here (:func:`flag`, :func:`integer`, :func:`number`,
:func:`path`), one way: unset or blank is the default, and any other value that is not what
the variable takes raises a ``ValueError`` naming the variable, what it takes and what was
given (:func:`bad`); nothing is passed over in silence.
"""

from __future__ import annotations

import math
import os
import pathlib

_environ = os.environ
# os._Environ keeps the variables in ``_data`` under ``encodekey(name)``, values ``decodevalue``
# reverses; an os.environ without them (another interpreter) is read the plain way.
_data = getattr(_environ, "_data", None)
_encode_key = getattr(_environ, "encodekey", None)
_decode_value = getattr(_environ, "decodevalue", None)
_keys: dict[str, object] = {}


def get(name: str, default: str | None = None) -> str | None:
    """``os.environ.get(name, default)``."""
    if _data is None or _encode_key is None or _decode_value is None or os.environ is not _environ:
        return os.environ.get(name, default)
    key = _keys.get(name)
    if key is None:
        key = _keys[name] = _encode_key(name)
    value = _data.get(key)
    return default if value is None else _decode_value(value)


# The words a flag takes, by the value they spell.
_FLAG_WORDS = {
    **dict.fromkeys(("1", "true", "yes", "on"), True),
    **dict.fromkeys(("0", "false", "no", "off"), False),
}
FLAG_EXPECTED = "1 or 0 (or true/false, yes/no, on/off)"


def bad(name: str, expected: str, text: str) -> ValueError:
    """The error of variable ``name`` set to ``text``, which is not ``expected``."""
    return ValueError(f"{name}: expected {expected}, got {text!r}")


def flag(name: str, default: bool = False, text: str | None = None) -> bool:
    """Variable ``name`` (or ``text``, already read from it) as a flag: ``FLAG_EXPECTED``."""
    text = get(name) if text is None else text
    if text is None or not text.strip():
        return default
    found = _FLAG_WORDS.get(text.strip().lower())
    if found is None:
        raise bad(name, FLAG_EXPECTED, text)
    return found


def integer(
    name: str, default: int, minimum: int | None = None, below: int | None = None, expected: str = ""
) -> int:
    """Variable ``name`` as an integer, at least ``minimum`` and below ``below`` where given;
    ``expected``: what it takes, in words, for the message (default: its bounds)."""
    expected = expected or _bounded("an integer", minimum, below)
    return _parsed(name, default, int, expected,
                   lambda v: (minimum is None or v >= minimum) and (below is None or v < below))  # fmt: skip


def number(name: str, default: float, minimum: float | None = None, expected: str = "") -> float:
    """Variable ``name`` as a number (never NaN; inf is one), at least ``minimum`` where given;
    ``expected`` as in :func:`integer`."""
    expected = expected or _bounded("a number", minimum, None)
    return _parsed(name, default, float, expected,
                   lambda v: not math.isnan(v) and (minimum is None or v >= minimum))  # fmt: skip


def _parsed(name: str, default, convert, expected: str, fits):
    """Variable ``name`` read by ``convert``: ``default`` where unset or blank, the value where it
    converts and ``fits``, else the :func:`bad` error."""
    text = get(name)
    if text is None or not text.strip():
        return default
    try:
        value = convert(text.strip())
    except ValueError:
        raise bad(name, expected, text) from None
    if not fits(value):
        raise bad(name, expected, text)
    return value


def path(name: str, text: str | None = None) -> pathlib.Path | None:
    """Variable ``name`` (or ``text``, already read from it) as a path, None where unset or
    blank. A folder is made where it is used; :func:`unusable` words a failure there."""
    text = get(name) if text is None else text
    if text is None or not text.strip():
        return None
    return pathlib.Path(text)


def unusable(name: str, path: pathlib.Path, exc: OSError) -> OSError:
    """The error of a folder from variable ``name`` that cannot be made or written (``exc``)."""
    why = exc.strerror or str(exc)
    return type(exc)(f"{name}: expected a folder that can be made and written, got {str(path)!r} ({why})")


def _bounded(kind: str, minimum: float | None, below: float | None) -> str:
    if minimum is not None and below is not None:
        return f"{kind} in [{minimum}, {below})"
    if minimum is not None:
        return f"{kind} >= {minimum}"
    return kind
