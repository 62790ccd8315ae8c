"""The documents: every path README.md and docs/ name (a Markdown link, or a backticked path or
command) exists in the checkout."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
TOP = ("cutopk", "kernels", "tests", "docs", "benchmarks", "tools", ".ci", "specs")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"^(?:\./)?(?:[\w.-]+/)*[\w.*-]+/?$")


def named_paths(text: str) -> list[str]:
    """The relative paths a document names: link targets, and the backticked words that are
    paths under one of the checkout's top folders (the files of commands too)."""
    paths = [m.split("#")[0] for m in _LINK.findall(text) if not re.match(r"^[a-z]+:|^#", m)]
    for code in _CODE.findall(text):
        for word in code.split():
            word = word.rstrip(".,;:")
            if "<" in word or not _PATH.match(word) or "/" not in word:
                continue
            if word.split("/")[0].lstrip(".") in {t.lstrip(".") for t in TOP} or word.startswith(".ci/"):
                paths.append(word)
    return [p for p in paths if p]


def _exists(path: str, doc: pathlib.Path) -> bool:
    for base in (doc.parent, ROOT):
        if any(ch in path for ch in "*?["):
            if list(base.glob(path)):
                return True
        elif (base / path).exists():
            return True
    return False


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_document_names_exists(doc):
    missing = [p for p in named_paths(doc.read_text()) if not _exists(p, doc)]
    assert missing == [], f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_named_paths_finds_links_paths_and_command_files():
    text = "See [the spec](docs/SPEC.md), `kernels/*.cu`, `python tools/x.py --a`, `a/b`, `np.int32`."
    assert named_paths(text) == ["docs/SPEC.md", "kernels/*.cu", "tools/x.py"]
    assert named_paths("[site](https://example.org) and `specs/` and `<date>/x`") == ["specs/"]


# Source files whose comments and docstrings may name other files of the checkout (a path with a
# file extension under one of the top folders). This file is left out: its own examples above
# name made-up paths on purpose.
SOURCES = [
    path
    for top in ("cutopk", "kernels", "tests", "benchmarks", "tools", ".ci")
    for path in sorted((ROOT / top).rglob("*"))
    if path.suffix in {".py", ".cu", ".cuh", ".h", ".c", ".sh", ""}
    and path.is_file()
    and path != pathlib.Path(__file__).resolve()
    and "__pycache__" not in path.parts
]
_SOURCE_PATH = re.compile(
    r"(?<![\w./-])((?:cutopk|kernels|tests|benchmarks|tools|docs|\.ci)/[\w/.-]*\.(?:py|cuh|cu|h|c|sh|md|toml))\b"
)


def source_paths(text: str) -> list[str]:
    """The checkout paths a source file names (in comments, docstrings or strings alike)."""
    return [p for p in _SOURCE_PATH.findall(text) if "*" not in p]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_source_file_names_exists(source):
    try:
        text = source.read_text()
    except UnicodeDecodeError:
        pytest.skip(f"{source.relative_to(ROOT)} is not text")
    missing = sorted({p for p in source_paths(text) if not (ROOT / p).exists()})
    assert missing == [], f"{source.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_source_paths_finds_paths_with_an_extension_only():
    text = "see cutopk/_request/keys.py, kernels/order.cu; not cutopk/cuda/ nor xcutopk/a.py or kernels/*.cu"
    assert source_paths(text) == ["cutopk/_request/keys.py", "kernels/order.cu"]
