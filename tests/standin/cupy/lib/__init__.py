"""``cupy.lib`` of the stand-in."""

from . import stride_tricks

__all__ = ["stride_tricks"]
