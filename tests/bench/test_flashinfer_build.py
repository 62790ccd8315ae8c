"""The FlashInfer shim's build steps (benchmarks/cutopk_bench/flashinfer_build.py) without a package index or
nvcc: the wheel's download through pip (its command line, a wheel already there, pip's failure),
the extraction reused or redone, and the compile with a stand-in nvcc (a shell script that writes
its ``-o`` file, or fails), which must leave either the library or nothing under its name."""

from __future__ import annotations

import os
import subprocess
import types
import zipfile

import pytest
from cutopk_bench import flashinfer as fi
from cutopk_bench import flashinfer_build as fb

CUB_SOURCE = """#include "topk_transform_checks.h"
namespace {
cudaError_t CUBBatchedTopK(int) { return cudaSuccess; }
// Input-side validation shared by every CUB entry and workspace-size query.
}  // namespace
"""


def wheel(folder, version=fi.VERSION):
    path = folder / fb.wheel_name(version)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("flashinfer/data/include/flashinfer/topk.cuh", "// topk\n")
        z.writestr("flashinfer/data/csrc/cub_topk.cu", CUB_SOURCE)
    return path


def fake_nvcc(folder, fails: bool = False):
    """A stand-in nvcc: writes its command line into its ``-o`` file, or fails with a message."""
    script = folder / "nvcc"
    body = (
        'echo "error: unsupported gpu architecture" >&2; exit 2'
        if fails
        else 'printf "%s\\n" "$all" > "$out"'
    )
    script.write_text(
        '#!/bin/sh\nall="$*"\nout=""\n'
        'while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then out="$2"; fi; shift; done\n' + body + "\n"
    )
    script.chmod(0o755)
    return str(script)


# --- the download -----------------------------------------------------------------------------------


def test_download_asks_pip_for_the_pinned_wheel_without_its_dependencies(monkeypatch, tmp_path):
    calls = []

    def run(cmd, **kwargs):
        calls.append(cmd)
        (tmp_path / "wheels" / fb.wheel_name()).write_bytes(b"wheel")
        return types.SimpleNamespace(returncode=0, stdout="Saved", stderr="")

    monkeypatch.setattr(subprocess, "run", run)
    got = fb.download(dest=tmp_path / "wheels")
    assert got == tmp_path / "wheels" / fb.wheel_name() and got.read_bytes() == b"wheel"
    assert calls[0][1:] == ["-m", "pip", "download", f"flashinfer-python=={fi.VERSION}", "--no-deps", "-d",
                            str(tmp_path / "wheels")]  # fmt: skip
    assert fb.download(dest=tmp_path / "wheels") == got and len(calls) == 1  # there already: no pip


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "said"),
    [
        (1, "", "ERROR: No matching distribution found", "ERROR: No matching distribution found"),
        (0, "Saved nothing useful", "", "Saved nothing useful"),  # pip "succeeded" but no wheel came
    ],
)
def test_download_failure_passes_on_pips_message(monkeypatch, tmp_path, returncode, stdout, stderr, said):
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda cmd, **kw: types.SimpleNamespace(returncode=returncode, stdout=stdout, stderr=stderr),
    )
    with pytest.raises(fi.FlashInferUnavailable, match=f"^pip download failed: {said}$"):
        fb.download(dest=tmp_path)


# --- the extraction ---------------------------------------------------------------------------------


def test_extraction_is_reused_when_complete_and_redone_over_a_partial_one(tmp_path):
    dest = tmp_path / "src"
    (dest / "flashinfer").mkdir(parents=True)
    (dest / "flashinfer" / "left-over.h").write_text("from a build that was killed")
    w = wheel(tmp_path)
    assert fb.extract(w, dest) == dest
    assert not (dest / "flashinfer" / "left-over.h").exists()  # no .complete: removed, extracted again
    assert (dest / ".complete").read_text() == w.name
    w.unlink()  # complete: the wheel is not read again
    assert fb.extract(w, dest) == dest
    assert (dest / "flashinfer/data/include/flashinfer/topk.cuh").read_text() == "// topk\n"


# --- the compile --------------------------------------------------------------------------------------


def test_build_without_nvcc_says_so(tmp_path):
    with pytest.raises(fi.FlashInferUnavailable, match=r"^nvcc not found on PATH \('no-such-nvcc'\)$"):
        fb.build(wheel(tmp_path), "sm_90", tmp_path / "x.so", nvcc="no-such-nvcc")


def test_build_refuses_another_version_before_extracting(monkeypatch, tmp_path):
    monkeypatch.setattr(fb, "SRC_ROOT", tmp_path / "src")
    with pytest.raises(fi.FlashInferUnavailable, match=r"the wheel is FlashInfer 0\.7\.3; .* follows"):
        fb.build(wheel(tmp_path, "0.7.3"), "sm_90", tmp_path / "x.so", nvcc=fake_nvcc(tmp_path))
    assert not (tmp_path / "src").exists()


def test_build_runs_nvcc_on_the_extracted_sources_and_moves_the_library_into_place(monkeypatch, tmp_path):
    monkeypatch.setattr(fb, "SRC_ROOT", tmp_path / "src")
    out = tmp_path / "lib" / "libcutopk_flashinfer.so"
    assert fb.build(wheel(tmp_path), "sm_90", out, nvcc=fake_nvcc(tmp_path)) == out
    src = tmp_path / "src" / fi.VERSION
    assert (src / "gen" / "fi_cub_core.inc").is_file()  # the CUB core cut for the cub backend
    command = out.read_text().split()
    assert command == fb.nvcc_command(out.with_suffix(".so.tmp"), "sm_90", src, True, fi.VERSION, "x")[1:]
    assert not out.with_suffix(".so.tmp").exists()


def test_a_failing_nvcc_leaves_no_library_and_passes_on_its_messages(monkeypatch, tmp_path):
    monkeypatch.setattr(fb, "SRC_ROOT", tmp_path / "src")
    out = tmp_path / "libcutopk_flashinfer.so"
    with pytest.raises(
        fi.FlashInferUnavailable, match=r"^nvcc failed \(2\): error: unsupported gpu architecture"
    ):
        fb.build(wheel(tmp_path), "sm_80", out, with_cub=False, nvcc=fake_nvcc(tmp_path, fails=True))
    assert not out.exists() and not (tmp_path / "src" / fi.VERSION / "gen").exists()  # no CUB core asked
    assert os.listdir(tmp_path / "src" / fi.VERSION)  # the extraction stays for the next try
