"""The kernel sources' readers and the launch helpers fail with a message naming what is wrong: a
missing or unreadable file, an #include cycle, a kernel a family's file does not declare, a
parameter list whose macros do not end, a __launch_bounds__ with no kernel after it, a missing
constant, more shared memory than the device has."""

from __future__ import annotations

import pathlib

import pytest

from cutopk.cuda import kernel_constants as _kernel_constants
from cutopk.cuda import kernel_source as _kernel_source


def test_an_unreadable_constants_header_says_the_installation_is_incomplete(tmp_path):
    with pytest.raises(RuntimeError, match="could not be read: the installation is incomplete"):
        _kernel_constants.read_header(tmp_path / "constants.cuh")


def test_a_constant_the_header_does_not_define_is_named():
    with pytest.raises(RuntimeError, match="does not define CUTOPK_NO_SUCH_CONSTANT"):
        _kernel_constants._value("NO_SUCH_CONSTANT")


def test_missing_kernel_sources_say_where_they_were_looked_for(monkeypatch, tmp_path):
    module = tmp_path / "cutopk" / "cuda" / "kernel_source.py"
    module.parent.mkdir(parents=True)
    monkeypatch.setattr(_kernel_source, "__file__", str(module))
    with pytest.raises(
        RuntimeError, match=r"CUDA sources were not found next to .*installation is incomplete"
    ):
        _kernel_source.kernel_dir()


@pytest.fixture
def kernel_files(monkeypatch, tmp_path):
    """Kernel sources read from ``tmp_path`` (the readers' caches cleared before and after)."""

    def clear():
        _kernel_source._file.cache_clear()
        _kernel_source._declarations.cache_clear()

    clear()
    monkeypatch.setattr(_kernel_source, "kernel_dir", lambda: pathlib.Path(tmp_path))
    yield tmp_path
    clear()


def test_an_include_cycle_is_named_with_its_path(kernel_files):
    (kernel_files / "a.cuh").write_text('#include "b.cuh"\n')
    (kernel_files / "b.cuh").write_text('#include "a.cuh"\n')
    with pytest.raises(RuntimeError, match=r"kernels/a\.cuh: #include cycle through a\.cuh -> b\.cuh"):
        _kernel_source.files_of("a.cuh")


def test_a_kernel_the_family_file_does_not_declare_is_named(kernel_files):
    (kernel_files / "radix.cu").write_text("// no kernels here\n")
    with pytest.raises(KeyError, match=r"kernels/radix\.cu declares no kernel 'radix_topk'"):
        _kernel_source.signature("radix", "radix_topk")


def test_macros_that_expand_without_end_in_a_parameter_list_are_refused():
    source = "#define A B\n#define B A\ntemplate <typename T>\nCUTOPK_KERNEL(256) loop(A x) {}\n"
    with pytest.raises(RuntimeError, match=r"loop\.cu: macros nested too deeply in a parameter list"):
        _kernel_source._parse(source, "loop.cu")


def test_launch_bounds_without_a_kernel_name_are_refused():
    source = 'extern "C" __global__ void __launch_bounds__(256) (int x) {}\n'
    with pytest.raises(
        RuntimeError, match=r"plain.cu: __launch_bounds__\(256\) is not followed by a kernel name"
    ):
        _kernel_source._parse(source, "plain.cu")


def test_more_shared_memory_than_the_device_has_is_refused_before_a_launch():
    from cutopk.cuda import shared_memory as _shared_memory

    class Kernel:  # nothing may be set on it
        __slots__ = ()

    with pytest.raises(
        ValueError, match=r"asks for 1000000000 bytes of shared memory, the device allows \d+"
    ):
        _shared_memory.opt_in(Kernel(), 10**9, "sim")
