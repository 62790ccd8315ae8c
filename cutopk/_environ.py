"""Environment variables read on a call's hot path.

``os.environ.get`` encodes the name and searches ``os.environ``'s own mapping of encoded names
on every read (some 1.8 us on the development machine; a warm NumPy call read three settings,
``CUTOPK_COMPILED`` twice with its deprecated name, ``CUTOPK_NUM_THREADS`` once: a tenth of a
0.1 ms call). :func:`get` reads the same mapping with the name encoded once (0.1-0.2 us), so it
sees every change made through ``os.environ`` (and ``monkeypatch.setenv``), as ``os.environ.get``
does; like it, not one made by C code calling ``setenv`` behind ``os.environ``'s back.
"""

from __future__ import annotations

import os

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
