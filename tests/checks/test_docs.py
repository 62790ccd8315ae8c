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
