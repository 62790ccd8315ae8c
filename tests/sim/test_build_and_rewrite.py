"""The simulator's build and source rewriting on inputs its other tests do not give: the counting
build's two steps (instrumented compile, plain link) on a small source of its own, GCC detection
without a compiler, ``__shared__`` declarations inside comments, parameter lists written through
macros that expand into each other, and a kernel defined twice alike."""

from __future__ import annotations

import ctypes

import pytest

from cutopk.sim import _rewrite, _toolchain

# The counting build's contract, in little: every load of the module calls __tsan_read<n>, which
# the module defines (the simulator's runtime does the same in sim_launch.cpp), and nothing of the
# sanitizer's own runtime is linked in.
COUNTED = r"""
#define NO_TSAN __attribute__((no_sanitize("thread")))
static int reads = 0;
extern "C" {
NO_TSAN void __tsan_init() {}
NO_TSAN void __tsan_read4(void*) { reads++; }
NO_TSAN void __tsan_write4(void*) {}
__attribute__((visibility("default"))) int sum(const int* p, int n) {
  int s = 0;
  for (int i = 0; i < n; i++) s += p[i];
  return s;
}
NO_TSAN __attribute__((visibility("default"))) int loads() { return reads; }
}
"""


def test_the_counting_build_instruments_loads_and_links_without_the_sanitizer(monkeypatch, tmp_path):
    if not _toolchain.is_gcc():
        pytest.skip("the counting build takes GCC's thread-sanitizer parameters")
    monkeypatch.setenv("CUTOPK_SIM_CACHE", str(tmp_path))
    path = _toolchain.build(COUNTED, (), asan=False, traffic=True)
    assert path.parent == tmp_path and [p.name for p in tmp_path.iterdir()] == [path.name]  # no .o left
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    values = (ctypes.c_int * 5)(1, 2, 3, 4, 5)
    assert lib.sum(values, 5) == 15 and lib.loads() == 5  # each element's load counted once
    assert _toolchain.build(COUNTED, (), asan=False, traffic=True) == path  # built once


def test_without_a_compiler_the_host_compiler_is_not_gcc(monkeypatch):
    monkeypatch.setattr(_toolchain, "compiler", lambda: None)
    assert _toolchain.is_gcc.__wrapped__() is False


# --- rewriting ----------------------------------------------------------------------------------------


def test_shared_declarations_inside_comments_are_left_as_written():
    source = (
        'extern "C" __global__ void k(float* out) {\n'
        "  /* was: __shared__ float old[32]; */\n"
        "  // __shared__ int also_old[8];\n"
        "  __shared__ float tile[32];\n"
        "  out[0] = tile[0];\n"
        "}\n"
    )
    out = _rewrite.rewrite_shared(source)
    assert "/* was: __shared__ float old[32]; */" in out and "// __shared__ int also_old[8];" in out
    assert "__shared__ float tile[32];" not in out
    assert "auto& tile = *reinterpret_cast<std::add_pointer_t<float [32]>>" in out
    assert out.count("cutopk_sim::shared_at(") == 1


def test_a_kernel_defined_twice_alike_is_listed_once_and_differing_ones_each():
    source = """
    #if FAST
    extern "C" __global__ void k(const float* in, int n) {}
    #else
    extern "C" __global__ void k(const float* in, int n) { /* slower */ }
    #endif
    __global__ void g(int a) {}
    __global__ void g(long long a, int b) {}
    """
    assert _rewrite.kernel_parameter_names(source) == {"k": [("in", "n")], "g": [("a",), ("a", "b")]}
