"""The compiled route's library, built by ``pip install .`` (pyproject.toml holds the rest).

One optional extension, ``_cutopk_compiled``: a plain shared library (no CPython module: it
includes no Python header, and ``cutopk/numpy/compiled.py`` loads it with ctypes after finding it
with importlib, as a top-level module of ``sys.path``). ``ENTRY`` (the C file that includes every
part of the route) is compiled once per instruction-set variant of ``VARIANTS``, its entry points
renamed ``<name>_<variant>``, and linked with ``compiled_variants.c``, which picks the widest
variant the processor runs when the library is loaded: no ``-march=native``, so a wheel built here
runs on any processor of its architecture. Optional: where no C compiler works (or the build
fails) setuptools warns and the install goes on without it; the NumPy backend then runs its NumPy
routes, with the same answers, and ``cutopk.plan()`` says why. ``CC``, ``CFLAGS`` and ``LDFLAGS``
work as for any setuptools build (``.ci/run``'s ``compiled-asan`` step builds with
AddressSanitizer that way). A source checkout without an install: ``python setup.py build_ext
--inplace`` puts the library at the top of the checkout, where ``python -m pytest`` and
``PYTHONPATH=.`` find it.
"""

from __future__ import annotations

import os
import platform

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError
from setuptools.modified import newer_group

# The route's C entry file (it includes the others): the one path to change if it moves.
ENTRY = "cutopk/numpy/compiled.c"
DISPATCH = "cutopk/numpy/compiled_variants.c"
ENTRY_POINTS = (
    "cutopk_compiled_abi",
    "cutopk_compiled_select",
    "cutopk_compiled_set_spin",
    "cutopk_compiled_workers",
)
# Every variant's flags, after COMMON; the order of compiled_variants.c's choice.
_AVX2 = ("-mavx2", "-mfma", "-mbmi", "-mbmi2", "-mpopcnt")
X86_VARIANTS = {
    "avx512": (*_AVX2, "-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl"),
    "avx2": _AVX2,
    "baseline": (),
}
COMMON = ("-O3", "-std=gnu11", "-fvisibility=hidden", "-fno-strict-aliasing", "-pthread")


def _sources_of(entry: str) -> list[str]:
    """The C sources and headers beside ``entry`` and below it (its parts): a change to any of
    them builds the library again."""
    found = []
    for folder, _, names in os.walk(os.path.dirname(entry)):
        found += [
            os.path.join(folder, n) for n in names if n.endswith((".c", ".h")) and "__pycache__" not in folder
        ]
    return sorted(found)


def _variants() -> dict[str, tuple[str, ...]]:
    if platform.machine().lower() in ("x86_64", "amd64"):
        return X86_VARIANTS
    return {"baseline": ()}


class BuildVariants(build_ext):
    """build_ext, with ``ENTRY`` compiled once per variant into the extension's objects; a
    variant that this compiler cannot build is left out (the baseline must build)."""

    def build_extension(self, ext: Extension) -> None:
        if ext.name != "_cutopk_compiled":
            return super().build_extension(ext)
        target = self.get_ext_fullpath(ext.name)
        if not self.force and not newer_group([*ext.sources, *ext.depends], target, "newer"):
            return super().build_extension(ext)  # up to date: it says so and skips
        if self.compiler.compiler_type != "unix":
            raise CompileError("the compiled route needs GCC or Clang (GNU C: attributes, pthreads)")
        objects, built = [], []
        for name, flags in reversed(_variants().items()):  # baseline first: no compiler fails at once
            try:
                objects += self.compiler.compile(
                    [ENTRY],
                    output_dir=os.path.join(self.build_temp, f"variant-{name}"),
                    macros=[(entry, f"{entry}_{name}") for entry in ENTRY_POINTS],
                    extra_postargs=[*COMMON, *flags],
                    depends=ext.depends,
                )
            except CompileError:
                if name == "baseline":
                    raise
                # A compiler without this instruction set's flags: the narrower variants serve.
                print(f"warning: the compiled route's {name} variant cannot be built here: left out")
                continue
            built.append(name)
        ext.extra_objects = objects
        ext.define_macros = [(f"CUTOPK_VARIANT_{name.upper()}", "1") for name in built if name != "baseline"]
        super().build_extension(ext)


setup(
    ext_modules=[
        Extension(
            "_cutopk_compiled",
            sources=[DISPATCH],
            depends=_sources_of(ENTRY),
            extra_compile_args=list(COMMON),
            extra_link_args=["-pthread"],
            optional=True,
        )
    ],
    cmdclass={"build_ext": BuildVariants},
)
