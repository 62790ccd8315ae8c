"""The CUDA source of each compiled module: one per (element type, kernel family), holding only
the headers that family's file includes and the file itself, then one ``extern "C"`` entry point
per instantiation the launcher runs.

Why entry points (docs/kernels.md): CuPy looks a module up in its on-disk kernel cache by its
source text and options, but with ``name_expressions`` CuPy 13.x and 14.0.x skip that look-up
(``cupy/cuda/compiler.py``: ``if os.path.exists(path) and not name_expressions``) to get the
mangled names from a fresh NVRTC compile, so every new process recompiled every module. A
module of ``extern "C"`` kernels needs no name expressions: ``RawModule(code=...)`` and
``get_function("<entry>")`` hit the cache on every CuPy version.

A kernel is written once in ``kernels/``, as a template ``CUTOPK_KERNEL(<launch bounds>)
name(<parameters>)`` (a ``__device__ __forceinline__`` body, ``kernels/entry.cuh``); its entry
points are generated here from that declaration, so the parameter list and the launch bounds
are written only there.
"""

from __future__ import annotations

import functools
import pathlib
import re
from typing import NamedTuple

from .. import _c_declarations as _c
from .._request import dtypes as _dtypes
from .families import registry as _registry

# Each family module names its file's kernels (``KERNELS``) and the values of a kernel's second
# template parameter, for the kernels that have one (``TEMPLATE_VALUES``).
_MODULES = {**_registry.FAMILIES, **_registry.STEPS}
TEMPLATE_VALUES = {k: v for m in _MODULES.values() for k, v in getattr(m, "TEMPLATE_VALUES", {}).items()}
WARP_ROW_ITEMS = TEMPLATE_VALUES["warp_row_topk"]
THREAD_ROW_KMAX = TEMPLATE_VALUES["thread_row_topk"]


class Family(NamedTuple):
    """A kernel family: the kernels the launcher runs from its file, ``kernels/<family>.cu``, where
    they and their helpers live in ``namespace cutopk::<family>``."""

    kernels: tuple[str, ...]


# From the family modules (cutopk/cuda/families/registry.py): a family's file and its kernels are
# written once, in its module.
FAMILIES = {name: Family(tuple(module.KERNELS)) for name, module in _MODULES.items()}


def file_of(family: str) -> str:
    """The kernel file of ``family``: named as the family."""
    return f"{family}.cu"


class Params(NamedTuple):
    """One launch's arguments by name: the kernel it launches (``digit_pass``; the template's
    name, or a plain ``extern "C"`` kernel's) and its C parameter names in the order of the
    kernel's declaration, with the numpy type of each scalar (the others are arrays, passed as
    they are). Written once next to the launch; tests/gpu/test_kernel_arguments.py checks names,
    order and types against the kernel files, so no argument tuple is built by position."""

    kernel: str
    names: tuple[str, ...]
    scalars: dict[str, type]

    def pack(self, values: dict) -> tuple:
        """The positional argument tuple of a launch, from ``values`` by name (the values of a
        whole launch sequence: each launch takes the ones it declares), each scalar converted to
        its C type."""
        missing = [n for n in self.names if n not in values]
        if missing:
            raise TypeError(f"{self.kernel}: no value for its parameters {missing}")
        return tuple(self.scalars[n](values[n]) if n in self.scalars else values[n] for n in self.names)


def params(kernel: str, names: tuple[str, ...], scalar_types: dict[str, type]) -> Params:
    """The :class:`Params` of ``kernel`` whose parameters are ``names``, typed by the launching
    module's table of scalar types (a name that is not in it is an array)."""
    return Params(kernel, tuple(names), {n: scalar_types[n] for n in names if n in scalar_types})


_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"(?P<file>[^"]+)"[ \t]*(?://[^\n]*)?$', re.MULTILINE)
# The kernel macro of kernels/entry.cuh: ``CUTOPK_KERNEL(<launch bounds>) name(<parameters>)``.
_KERNEL_MACRO = "CUTOPK_KERNEL"


def kernel_dir() -> pathlib.Path:
    """Where the CUDA sources are: inside the installed package (``cutopk/kernels``), else the
    ``kernels/`` folder of the source checkout this package was imported from."""
    here = pathlib.Path(__file__).resolve().parents[1]  # the cutopk package
    for candidate in (here / "kernels", here.parent / "kernels"):
        if (candidate / "entry.cuh").is_file():
            return candidate
    raise RuntimeError(f"cutopk's CUDA sources were not found next to {here}: the installation is incomplete")


@functools.cache
def _file(name: str) -> str:
    return (kernel_dir() / name).read_text()


def files_of(name: str) -> list[str]:
    """``name`` and the local files it includes, each once, every file after those it includes."""
    order: list[str] = []

    def visit(file: str, stack: tuple[str, ...]) -> None:
        if file in order:
            return
        if file in stack:
            raise RuntimeError(f"kernels/{file}: #include cycle through {' -> '.join(stack)}")
        for m in _LOCAL_INCLUDE.finditer(_file(file)):
            visit(m["file"], (*stack, file))
        order.append(file)

    visit(name, ())
    return order


def _inline(files: list[str]) -> str:
    """The files as one translation unit (CuPy's cache key is the source text, so the headers are
    in it; kernels/constants.cuh, the constants shared with Python, among them)."""
    return "\n".join(f"// ---- {name}\n" + _LOCAL_INCLUDE.sub("", _file(name)) for name in files)


class Entry(NamedTuple):
    """One ``extern "C"`` entry point: its name, the name expression the launcher asks for it by
    (``warp_row_topk<float, 4>``), and its source text."""

    name: str
    expression: str
    text: str


class _Declaration(NamedTuple):
    template: tuple[tuple[str, str], ...]  # (kind, name): ("class", "T"), ("int", "ITEMS"); () if plain
    bounds: str
    parameters: str  # with the file's object-like macros expanded
    names: tuple[str, ...]


@functools.cache
def _declarations(file: str) -> dict[str, _Declaration]:
    """The kernel declarations of a kernel file, by kernel name."""
    return _parse(_file(file), f"kernels/{file}")


def _parse(source: str, where: str) -> dict[str, _Declaration]:
    """The ``CUTOPK_KERNEL`` templates and plain ``extern "C"`` kernels of ``source``, by name
    (read by the one parser of C declarations, :mod:`cutopk._c_declarations`, which the
    simulator reads its kernels with too)."""
    text = _c.strip_comments(source)
    # The project's own macros (constants, CUTOPK_KERNEL) stay as written in the entry points.
    macros = {n: body for n, body in _c.object_macros(text).items() if not n.startswith("CUTOPK_")}
    found = {}
    for kernel in _c.kernels(text, _KERNEL_MACRO):
        if not kernel.name:
            head = f"__launch_bounds__({kernel.bounds})" if kernel.bounds else "__global__"
            raise RuntimeError(f"{where}: {head} is not followed by a kernel name")
        try:
            inner = _c.expand(text[kernel.open_at : kernel.close_at - 1], macros)
        except _c.MacroLoopError as e:
            raise RuntimeError(f"{where}: {e}") from None
        params = " ".join(inner.split())
        template = (
            tuple(_template_parameter(p) for p in _c.split_top_level(kernel.template))
            if kernel.template is not None
            else ()
        )
        names = tuple(name for name, _ in _c.parameters(params))
        found[kernel.name] = _Declaration(template, kernel.bounds, params, names)
    return found


def _template_parameter(text: str) -> tuple[str, str]:
    """A template parameter's kind and name: ``int ITEMS`` -> ``("int", "ITEMS")``; a default
    (``int N = 4``) is dropped."""
    kind, name = text.split("=", 1)[0].rsplit(None, 1)
    return kind, name


def signature(family: str, kernel: str) -> tuple[tuple[str, str], ...]:
    """The parameters of ``kernel`` (a ``CUTOPK_KERNEL`` template's or a plain ``extern "C"``
    kernel's) in ``kernels/<family>.cu``, in order, as (name, C type) with the file's object-like
    macros expanded: what a launch's :class:`Params` must match."""
    decl = _declarations(file_of(family)).get(kernel)
    if decl is None:
        raise KeyError(f"kernels/{file_of(family)} declares no kernel {kernel!r}")
    return _c.parameters(decl.parameters)


def signatures(source: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """:func:`signature` of every kernel declared in a kernel source text."""
    return {name: _c.parameters(d.parameters) for name, d in _parse(source, "source").items()}


def _entry(family: str, kernel: str, info: _dtypes.DtypeInfo, value: int | None) -> Entry:
    file = file_of(family)
    decl = _declarations(file).get(kernel)
    if decl is None:
        raise RuntimeError(f"kernels/{file} declares no CUTOPK_KERNEL {kernel}")
    (_, type_param), *rest = decl.template
    name = f"{kernel}_{info.name}"
    aliases = [f"typedef {info.cxx} {type_param};"]
    args = [info.cxx]
    if rest:
        ((kind, param),) = rest
        name += f"_{param.lower()}{value}"
        aliases.append(f"constexpr {kind} {param} = {value};")
        args.append(str(value))
    expression = f"{kernel}<{', '.join(args)}>"
    # Inside the family's namespace, so that the parameter list's types (KeyTraits, State) mean
    # what they mean in the kernel file; the extern "C" name is global all the same.
    space = f"cutopk::{family}::entry_{name}"
    template_args = ", ".join(p for _, p in decl.template)
    # A kernel of thread-block clusters (a family's CLUSTER_BLOCKS) names its cluster shape at
    # compile time, as a plain launch (CuPy's) requires; sm_90 only (NVRTC refuses it before), and
    # the simulator (no __CUDA_ARCH__) reads it from the text. The shape is a number of blocks, or
    # the name of the kernel's second template parameter: each entry point's value of it.
    blocks = getattr(_MODULES[family], "CLUSTER_BLOCKS", {}).get(kernel)
    if isinstance(blocks, str):
        blocks = value if rest and rest[0][1] == blocks else None
    cluster = (
        f"#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900\n    __cluster_dims__({blocks}, 1, 1)\n#endif\n"
        if blocks
        else ""
    )
    text = (
        f"namespace {space} {{\n{chr(10).join(aliases)}\n"
        f'extern "C" __global__ void __launch_bounds__({decl.bounds})\n'
        f"{cluster}"
        f"    {name}({decl.parameters}) {{\n"
        f"  ::cutopk::{family}::{kernel}<{template_args}>({', '.join(decl.names)});\n}}\n}}  // namespace {space}\n"
        f"using {space}::{name};\n"
    )
    return Entry(name, expression, text)


@functools.cache
def entries(family: str, dtype_name: str) -> tuple[Entry, ...]:
    """The entry points of ``family`` for one element type (its NumPy name), in launch-table order."""
    fam = FAMILIES[family]
    info = next(i for i in _dtypes.SUPPORTED.values() if i.name == dtype_name)
    out = []
    for kernel in fam.kernels:
        for value in TEMPLATE_VALUES.get(kernel, (None,)):
            out.append(_entry(family, kernel, info, value))
    return tuple(out)


def module_source(family: str, dtype_names: tuple[str, ...]) -> str:
    """The source of ``family``'s module with the entry points of ``dtype_names`` (one element
    type for the launcher; every type at once for tools/check_kernels.py)."""
    text = _inline(files_of(file_of(family)))
    generated = [e.text for d in dtype_names for e in entries(family, d)]
    header = "\n// ---- entry points (generated by cutopk/cuda/kernel_source.py)\n"
    return text + header + "\n".join(generated)


@functools.cache
def source(family: str, dtype_name: str) -> str:
    """The source the launcher compiles for (``family``, element type ``dtype_name``)."""
    return module_source(family, (dtype_name,))


def all_files() -> list[str]:
    """Every kernel file, each after the files it includes."""
    order: list[str] = []
    for family in FAMILIES:
        order += [f for f in files_of(file_of(family)) if f not in order]
    return order


def kernel_source() -> str:
    """Every kernel file as one translation unit, without entry points."""
    return _inline(all_files())
