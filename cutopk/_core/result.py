"""The result type of every selection, ``TopK(values, indices)``, and the types the public
signatures name."""

from __future__ import annotations

from typing import Any, NamedTuple, SupportsIndex, TypeAlias

# An array is a NumPy or CuPy ndarray or a torch tensor (docs/SPEC.md): CuPy ships no
# annotations and torch is optional, so the signatures say Array, which is Any to a type
# checker; so is a dtype argument (a NumPy dtype, its name or type, or a torch dtype).
Array: TypeAlias = Any
DType: TypeAlias = Any
# A count or an index: anything operator.index accepts (Python and NumPy integers, 0-d arrays).
Integer: TypeAlias = SupportsIndex


class TopK(NamedTuple):
    """The result of :func:`top_k`: the selected values and their indices along the axis."""

    values: Any
    indices: Any
