"""Named paths exist: every path the documents (README.md, docs/, tests/README.md,
benchmarks/README.md) name, as a Markdown link or a backticked path or command; and every path,
folder, ``cutopk.*`` module and backticked ``module.name`` the source files name in their comments
and docstrings, and the documents name (no comment may point a reader at a file or name that is
gone). The dated records of benchmarks/results/
name the files of the commit they measured, and are left as they are."""

from __future__ import annotations

import ast
import io
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    ROOT / "tests" / "README.md",
    ROOT / "benchmarks" / "README.md",
]
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
    *(
        path
        for top in ("cutopk", "kernels", "tests", "benchmarks", "tools", ".ci")
        for path in sorted((ROOT / top).rglob("*"))
        if path.suffix in {".py", ".cu", ".cuh", ".h", ".c", ".sh", ""}
        and path.is_file()
        and path != pathlib.Path(__file__).resolve()
        and "__pycache__" not in path.parts
    ),
    ROOT / "pyproject.toml",
]
_SOURCE_PATH = re.compile(
    r"(?<![\w./-])((?:cutopk|kernels|tests|benchmarks|tools|docs|\.ci)/[\w/.-]*\.(?:py|cuh|cu|h|c|sh|md|toml))\b"
)


# A path inside the package or the kernels named from where it lies (``numpy/backend.py``,
# ``cuda/runner.py``, ``runtime/sim_launch.h``, ``common/keys.cuh``), and the folders it may lie in.
_RELATIVE_PATH = re.compile(
    r"(?<![\w./$-])((?:_core|_request|_demo|numpy|cuda|sim|irregular|families|runtime|common)/"
    r"[\w/.-]*\.(?:py|cuh|cu|h|c))\b"
)
_RELATIVE_BASES = ("cutopk", "cutopk/cuda", "cutopk/sim", "kernels")
# A folder of the checkout, named with its closing slash (``cutopk/cuda/families/``).
_FOLDER = re.compile(
    r"(?<![\w./$-])((?:cutopk|kernels|tests|benchmarks|tools|docs)/(?:[\w.-]+/)*)(?![\w.*<-])"
)
# A module of the package by its dotted name (``cutopk.numpy.compiled``, ``cutopk.sim.RawModule``).
_MODULE = re.compile(r"(?<![\w.])(cutopk(?:\.[A-Za-z_]\w*)+)")


def source_paths(text: str) -> list[str]:
    """The checkout paths a source file names (in comments, docstrings or strings alike)."""
    return [p for p in _SOURCE_PATH.findall(text) if "*" not in p]


def relative_paths(text: str) -> list[str]:
    """The paths a source file names from inside the package or the kernels (``numpy/backend.py``)."""
    return _RELATIVE_PATH.findall(text)


def folders(text: str) -> list[str]:
    """The checkout folders a source file names with a closing slash."""
    return _FOLDER.findall(text)


def commentary(path: pathlib.Path, text: str) -> str:
    """The comments and docstrings of a source file: Python's ``#`` comments and docstrings, C
    and CUDA's ``//`` and ``/* */`` comments, the ``#`` comments of shell scripts and TOML."""
    if path.suffix == ".py":
        parts = [
            tok.string
            for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.COMMENT
        ]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                parts.append(ast.get_docstring(node, clean=False) or "")
        return "\n".join(parts)
    if path.suffix in {".cu", ".cuh", ".h", ".c"}:
        return "\n".join(re.findall(r"//[^\n]*|/\*.*?\*/", text, flags=re.S))
    return "\n".join(re.findall(r"#[^\n]*", text))


def module_names(text: str) -> list[str]:
    """The ``cutopk.*`` dotted names in ``text`` (a file name such as ``cutopk.cu`` is not one)."""
    return [m for m in _MODULE.findall(text) if not re.fullmatch(r"cutopk\.(cu|cuh|h|c|py|so)", m)]


def module_exists(name: str) -> bool:
    """Whether ``name`` is a module (or folder) of the package, or a name its module defines or
    imports (``cutopk.sim.RawModule``): read from the files, nothing imported."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        inner = parts[1:i]
        # cutopk.kernels is the checkout's kernels/ folder (pyproject.toml's package-dir).
        base = (
            ROOT.joinpath("kernels", *inner[1:])
            if inner[:1] == ["kernels"]
            else ROOT.joinpath("cutopk", *inner)
        )
        module = next((m for m in (base.with_suffix(".py"), base / "__init__.py") if m.is_file()), None)
        if module is None and not base.is_dir():
            continue
        if i == len(parts):
            return True
        return module is not None and re.search(rf"\b{re.escape(parts[i])}\b", module.read_text()) is not None
    return False


# A module-qualified name in backticks (``_keys.preference_keys``, ``compiled_choice.choose_method``)
# whose first word (less a leading underscore, as import aliases carry) is a module or folder of the
# package. The libraries cutopk has modules named after are left out: ``numpy.ndarray`` is NumPy's.
_QUALIFIED = re.compile(r"`+(_?[a-z]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`+")
_PACKAGE_PARTS = {
    part: sorted(
        ".".join(("cutopk", *p.relative_to(ROOT / "cutopk").with_suffix("").parts))
        for p in (ROOT / "cutopk").rglob("*")
        if (p.suffix == ".py" or p.is_dir()) and p.stem == part and "__pycache__" not in p.parts
    )
    for part in {p.stem for p in (ROOT / "cutopk").rglob("*") if p.suffix == ".py" or p.is_dir()}
    - {"__init__", "__main__", "__pycache__"}
}
_EXTERNAL = {"numpy", "torch", "cupy", "jax", "dask", "onnx", "openvino", "directml"}
# CUDA's own names that read as a package module's (cutopk has a ``cluster`` family module).
_CUDA_NAMES = {"cluster.sync"}


def qualified_names(text: str) -> list[str]:
    """The backticked ``module.name`` words of ``text`` whose module is one of the package's."""
    return [
        m
        for m in _QUALIFIED.findall(text)
        if m.split(".")[0].lstrip("_") in _PACKAGE_PARTS
        and m.split(".")[0] not in _EXTERNAL
        and m.split(".")[-1] not in {"py", "c", "cu", "cuh", "h", "so", "md", "json", "toml"}
    ]


def qualified_exists(name: str) -> bool:
    """Whether some module of the package named as ``name``'s first word holds the rest."""
    head, *rest = name.split(".")
    return any(module_exists(".".join((module, *rest))) for module in _PACKAGE_PARTS[head.lstrip("_")])


def _read(source: pathlib.Path) -> str:
    try:
        return source.read_text()
    except UnicodeDecodeError:
        pytest.skip(f"{source.relative_to(ROOT)} is not text")


def _relative_exists(path: str, source: pathlib.Path) -> bool:
    bases = [source.parent, *source.parents, *(ROOT / b for b in _RELATIVE_BASES)]
    return any((base / path).exists() for base in bases)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_source_file_names_exists(source):
    text = _read(source)
    missing = sorted(
        {p for p in source_paths(text) if not (ROOT / p).exists()}
        | {p for p in relative_paths(text) if not _relative_exists(p, source)}
        | {p for p in folders(text) if not (ROOT / p).is_dir()}
    )
    assert missing == [], f"{source.relative_to(ROOT)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_a_comment_or_docstring_names_exists(source):
    missing = sorted({m for m in module_names(commentary(source, _read(source))) if not module_exists(m)})
    assert missing == [], f"{source.relative_to(ROOT)} names modules that do not exist: {missing}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_qualified_name_a_comment_or_docstring_names_exists(source):
    names = qualified_names(commentary(source, _read(source)))
    missing = sorted({m for m in names if not qualified_exists(m)})
    assert missing == [], f"{source.relative_to(ROOT)} names module attributes that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_and_qualified_name_a_document_names_exists(doc):
    """``cutopk.*`` modules and backticked ``module.name`` words (``call.merge_call``) of a
    document, as of the source files' comments."""
    text = doc.read_text()
    missing = sorted(
        {m for m in module_names(text) if not module_exists(m)}
        | {m for m in qualified_names(text) if m not in _CUDA_NAMES and not qualified_exists(m)}
    )
    assert missing == [], f"{doc.relative_to(ROOT)} names modules or attributes that do not exist: {missing}"


def test_qualified_names_are_the_package_modules_and_resolve():
    text = (
        "``_keys.preference_keys``, `compiled.choose_method()`, `np.argsort`, `numpy.ndarray`, `compiled.py`"
    )
    assert qualified_names(text) == ["_keys.preference_keys", "compiled.choose_method"]
    assert qualified_exists("_keys.preference_keys") and qualified_exists("families.common.carve")
    assert not qualified_exists("compiled.choose_method") and not qualified_exists("threads.POOLS")


def test_source_paths_finds_paths_with_an_extension_only():
    text = "see cutopk/_request/keys.py, kernels/order.cu; not cutopk/cuda/ nor xcutopk/a.py or kernels/*.cu"
    assert source_paths(text) == ["cutopk/_request/keys.py", "kernels/order.cu"]


def test_relative_paths_folders_and_modules_are_found_and_checked():
    text = "see numpy/backend.py and cuda/gone.py; not xnumpy/a.py; kernels/common/ and cutopk/gone/"
    assert relative_paths(text) == ["numpy/backend.py", "cuda/gone.py"]
    assert folders(text) == ["kernels/common/", "cutopk/gone/"]
    source = ROOT / "tests" / "checks" / "test_docs.py"
    assert _relative_exists("numpy/backend.py", source) and not _relative_exists("cuda/gone.py", source)
    assert module_names("cutopk.numpy.compiled, cutopk.cu and torch.ops.cutopk.x") == [
        "cutopk.numpy.compiled"
    ]
    assert module_exists("cutopk.numpy.compiled") and module_exists("cutopk.sim.RawModule")
    assert module_exists("cutopk.kernels") and module_exists("cutopk.sim.runtime")
    assert not module_exists("cutopk.numpy.native") and not module_exists("cutopk.sim.NoSuchThing")


def test_commentary_holds_comments_and_docstrings_not_code():
    py = '"""Doc cutopk.a."""\nx = "cutopk.b"  # cutopk.z\n\n\ndef f():\n    """cutopk.d"""\n'
    assert module_names(commentary(pathlib.Path("m.py"), py)) == ["cutopk.z", "cutopk.a", "cutopk.d"]
    c = 'int x = 1; // cutopk.e\nconst char* s = "cutopk.f"; /* cutopk.g\n */\n'
    assert module_names(commentary(pathlib.Path("k.cu"), c)) == ["cutopk.e", "cutopk.g"]
