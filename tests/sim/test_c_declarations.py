"""The one parser of C declarations (cutopk/_c_declarations.py), read by both the launcher's
source generator (cutopk/cuda/kernel_source.py) and the simulator (cutopk/sim/_rewrite.py):
the two readers agree on every declaration, including the shapes either of them misread when
each had its own regular expressions."""

from __future__ import annotations

import pytest

from cutopk import _c_declarations as _c
from cutopk.cuda import kernel_source as _kernel_source
from cutopk.sim import _rewrite


def test_a_commented_out_kernel_is_not_an_untemplated_kernel():
    # The simulator builds a table entry for each untemplated kernel: one that exists only in a
    # comment would be a compile error of the whole module.
    source = "// __global__ void gone(int x)\n/* __global__ void gone2(int x) {} */\n"
    source += 'extern "C" __global__ void kept(int x) {}\n'
    assert _rewrite.untemplated_kernels(source) == ["kept"]


# A template whose defaults hold angle brackets and a comparison, after an #endif and a
# continued #define, with a qualifier before __global__: still a template, for both readers.
TEMPLATED = """
#if 1
__device__ int helper() { return 1; }
#endif
#define LONG_PARAMS const T* in, \\
    long long n
template <class T, int N = (3 > 2), class U = Pair<int, 2>>
static __global__ void __launch_bounds__(256) k(LONG_PARAMS, U* out) {}
"""


def test_a_template_with_brackets_in_its_defaults_is_read_the_same_by_both_readers():
    (kernel,) = [k for k in _c.kernels(_c.strip_comments(TEMPLATED)) if k.name]
    assert kernel.template == "class T, int N = (3 > 2), class U = Pair<int, 2>"
    assert _rewrite.untemplated_kernels(TEMPLATED) == []
    assert _rewrite.kernel_parameter_names(TEMPLATED) == {"k": [("in", "n", "out")]}
    assert _kernel_source.signatures(TEMPLATED) == {
        "k": (("in", "const T*"), ("n", "long long"), ("out", "U*"))
    }


def test_the_kernel_macro_is_a_declaration_but_its_own_define_is_not():
    source = (
        "#define CUTOPK_KERNEL(...) __device__ __forceinline__ void\n"
        "template <class T, int ITEMS>\n"
        "CUTOPK_KERNEL(CUTOPK_SOME_THREADS, 2)\n"
        "    body(const T* __restrict__ in, int k) {}\n"
    )
    decls = _kernel_source._parse(source, "macro.cu")
    assert list(decls) == ["body"]
    assert decls["body"].template == (("class", "T"), ("int", "ITEMS"))
    assert decls["body"].bounds == "CUTOPK_SOME_THREADS, 2"
    assert decls["body"].names == ("in", "k")


@pytest.mark.parametrize(
    ("declaration", "expected"),
    [
        ("const T* __restrict__ in", ("in", "const T* __restrict__")),
        ("int values[ 4 ]", ("values", "int")),
        ("int n = 3", ("n", "int")),
        ("unsigned int", ("", "unsigned int")),
        ("const float*", ("", "const float*")),
        ("Pair<T, N>* pairs", ("pairs", "Pair<T, N>*")),
    ],
)
def test_a_parameter_gives_its_name_and_type(declaration, expected):
    assert _c.parameter(declaration) == expected


def test_macros_without_end_leave_the_simulator_without_names_and_stop_the_launcher():
    source = '#define A B\n#define B A\nextern "C" __global__ void __launch_bounds__(64) loop(A x) {}\n'
    # The simulator's names only label messages: a list it cannot read is absent.
    assert _rewrite.kernel_parameter_names(source) == {}
    with pytest.raises(RuntimeError, match=r"loop\.cu: macros nested too deeply in a parameter list"):
        _kernel_source._parse(source, "loop.cu")
