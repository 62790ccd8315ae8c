"""Kernel arguments by name: every launch's parameter names, order and types on the Python side
(the runner's ``Params`` descriptor of each kernel, from its family module's ``ARGUMENTS`` and the
scalar types) match the kernel's C declaration in kernels/<family>.cu, and the launcher's and
the simulator's readings of those declarations agree."""

from __future__ import annotations

import numpy as np
import pytest

from cutopk._request import dtypes as _dtypes
from cutopk.cuda import kernel_source as _kernel_source
from cutopk.cuda import runner as _runner
from cutopk.cuda.families import registry as _registry
from cutopk.sim import _rewrite

# The C scalar types the kernels take, and the NumPy type a launch must pass for each.
C_SCALARS = {"long long": np.int64, "int": np.int32}
ALL_KERNELS = [(f, k) for f, fam in _kernel_source.FAMILIES.items() for k in fam.kernels]


def _python_side(kernel: str) -> tuple[tuple[str, ...], dict[str, type]]:
    """The names a launch of ``kernel`` passes, in order, and the NumPy type of each scalar."""
    params = _runner.DESCRIPTORS[kernel]
    return params.names, params.scalars


def _mismatches(c_params, names, scalars) -> list[str]:
    problems = []
    if tuple(n for n, _ in c_params) != tuple(names):
        problems.append(f"names: C {[n for n, _ in c_params]}, Python {list(names)}")
    for name, ctype in c_params:
        if "*" in ctype:
            if name in scalars:
                problems.append(f"{name}: C pointer ({ctype}), Python scalar {scalars[name].__name__}")
            continue
        want = C_SCALARS.get(" ".join(w for w in ctype.split() if w != "const"))
        if want is None:
            problems.append(f"{name}: C type {ctype!r} has no NumPy scalar type here")
        elif scalars.get(name) is not want:
            got = scalars[name].__name__ if name in scalars else "an array"
            problems.append(f"{name}: C {ctype} wants {want.__name__}, Python passes {got}")
    return problems


@pytest.mark.parametrize(("family", "kernel"), ALL_KERNELS, ids=[k for _, k in ALL_KERNELS])
def test_each_launch_passes_the_kernels_parameters_by_name_in_order_and_type(family, kernel):
    names, scalars = _python_side(kernel)
    assert _mismatches(_kernel_source.signature(family, kernel), names, scalars) == []


def test_every_kernel_has_one_descriptor_from_one_module():
    modules = [*_registry.FAMILIES.values(), *_registry.STEPS.values()]
    named = [kernel for module in modules for kernel in module.ARGUMENTS]
    assert len(named) == len(set(named))  # no kernel described twice
    assert set(_runner.DESCRIPTORS) == set(named) == {k for _, k in ALL_KERNELS}


def test_a_swapped_or_retyped_argument_is_caught():
    c_params = _kernel_source.signature("multiblock", "digit_pass")
    params = _runner.DESCRIPTORS["digit_pass"]
    assert _mismatches(c_params, params.names, params.scalars) == []
    swapped = (params.names[1], params.names[0], *params.names[2:])
    assert _mismatches(c_params, swapped, params.scalars)
    assert _mismatches(c_params, params.names, {**params.scalars, "cap": np.int32})
    assert _mismatches(c_params, params.names, {**params.scalars, "state": np.int64})


def test_pack_orders_the_values_by_name_and_types_the_scalars():
    params = _kernel_source.params("k", ("a", "n", "flag"), {"n": np.int64, "flag": np.int32})
    packed = params.pack({"flag": True, "a": "array", "n": 7, "unused": 1})
    assert packed == ("array", 7, 1)
    assert type(packed[1]) is np.int64 and type(packed[2]) is np.int32
    with pytest.raises(TypeError, match=r"k: no value for its parameters \['n'\]"):
        params.pack({"a": 1, "flag": 0})


# A multi-line __launch_bounds__ with nested parentheses, before and after the kernel name's
# macro, in both kinds of declaration.
SOURCE = """
template <class T>
CUTOPK_KERNEL(CUTOPK_SOME_THREADS,
              sizeof(T) == 8 ? (sizeof(T) > 4 ? 4 : 3)
                             : 2)
templated(const T* __restrict__ in, long long n, int k, T* __restrict__ out) {}
extern "C" __global__ void __launch_bounds__(256,
                                             (sizeof(int) == 4 ? 2 : 1))
    plain(int* out, long long n) {}
"""


def test_both_parsers_read_a_multiline_launch_bounds_with_nested_parentheses():
    expected = {
        "templated": (
            ("in", "const T* __restrict__"),
            ("n", "long long"),
            ("k", "int"),
            ("out", "T* __restrict__"),
        ),
        "plain": (("out", "int*"), ("n", "long long")),
    }
    assert _kernel_source.signatures(SOURCE) == expected
    entry = SOURCE.replace("CUTOPK_KERNEL(", "__global__ void __launch_bounds__(")
    names = _rewrite.kernel_parameter_names(entry)
    assert names == {k: [tuple(n for n, _ in v)] for k, v in expected.items()}
    assert _rewrite.untemplated_kernels(entry) == ["plain"]


@pytest.mark.parametrize("family", list(_kernel_source.FAMILIES))
def test_the_simulator_reads_the_same_parameter_names_as_the_launcher(family):
    # The simulator reads the compiled module (its entry points); the launcher's
    # generator reads the kernel file's declarations.
    dtype = next(iter(_dtypes.SUPPORTED.values())).name
    names = _rewrite.kernel_parameter_names(_kernel_source.source(family, dtype))
    for entry in _kernel_source.entries(family, dtype):
        kernel = entry.expression.split("<")[0]
        assert names[entry.name] == [tuple(n for n, _ in _kernel_source.signature(family, kernel))]


@pytest.mark.parametrize("family", list(_kernel_source.FAMILIES))
def test_each_family_module_lists_exactly_the_kernels_its_file_declares(family):
    # kernel_source.FAMILIES is built from the family modules' KERNELS: a kernel added to the
    # file but not to the module (or the other way round) would never be compiled or launched.
    declared = set(_kernel_source._declarations(_kernel_source.file_of(family)))
    assert set(_kernel_source.FAMILIES[family].kernels) == declared
