"""Kernel source lines for fault addresses: what addr2line's answer becomes."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

from cutopk.sim import _lines


@pytest.fixture
def addr2line(monkeypatch):
    """addr2line "found", its output given by the test."""
    monkeypatch.setattr(_lines, "_addr2line", lambda: "/usr/bin/addr2line")

    def answer(stdout: str | Exception):
        def run(cmd, **kwargs):
            if isinstance(stdout, Exception):
                raise stdout
            return subprocess.CompletedProcess(cmd, 0, stdout=stdout, stderr="")

        monkeypatch.setattr(_lines.subprocess, "run", run)

    return answer


def test_innermost_frame_in_the_kernel_source_is_named(addr2line):
    addr2line(
        "memcpy\n/usr/include/string.h:40\nselect_row\nkernel.cu:17 (discriminator 3)\nmain\nkernel.cu:90\n"
    )
    assert _lines.kernel_location(pathlib.Path("m.so"), [0x10, 0x20]) == "kernel.cu line 17 (in select_row)"


@pytest.mark.parametrize("stdout", ["memcpy\n/usr/include/string.h:40\n", "f\nkernel.cu:?\n", ""])
def test_frames_outside_the_kernel_source_give_no_line(addr2line, stdout):
    addr2line(stdout)
    assert _lines.kernel_location(pathlib.Path("m.so"), [0x10]) is None


def test_addr2line_that_cannot_run_gives_no_line(addr2line):
    addr2line(subprocess.TimeoutExpired("addr2line", 20))
    assert _lines.kernel_location(pathlib.Path("m.so"), [0x10]) is None
    addr2line(OSError("exec format error"))
    assert _lines.kernel_location(pathlib.Path("m.so"), [0x10]) is None
