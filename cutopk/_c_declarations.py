"""Reading kernel declarations out of CUDA C source text: the one parser of C declarations.

Two readers need the same facts from a kernel's declaration: the launcher's source generator
(``cutopk/cuda/kernel_source.py``: a ``CUTOPK_KERNEL`` template's launch bounds, template
parameters and parameter list, to write its ``extern "C"`` entry points and check launches by
name) and the simulator (``cutopk/sim/_rewrite.py``: which kernels are not templates, their
cluster shapes and parameter names, for its error messages). Written once here, they cannot read
the same declaration two ways.

This is not a C parser: it reads declarations as this project writes them, after comments are
blanked out, with object-like macros expanded where a parameter list uses them (function-like
macros are not expanded). It knows nothing of top-k, so both the CUDA backend and the simulator
(which must know nothing of it) may import it; it imports nothing of cutopk.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_OBJECT_MACRO = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)(?![\w(])(?P<body>(?:[^\n\\]|\\.)*)$", re.M | re.S
)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_GLOBAL = re.compile(r"\b__global__\s+")
_BOUNDS_OPEN = re.compile(r"__launch_bounds__\s*\(")
_CLUSTER_OPEN = re.compile(r"__cluster_dims__\s*\(")
_PREPROCESSOR = re.compile(r"#[^\n]*\n\s*")
_VOID = re.compile(r"void\s+")
_NAME = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*\(")
# After blanks and preprocessor lines (continued with backslashes or not).
_TEMPLATE = re.compile(r"(?:\s|#(?:[^\n\\]|\\[\s\S])*\n)*template\s*<")
_ARRAY = re.compile(r"\[[^\]]*\]")
_LAST_WORD = re.compile(r"([A-Za-z_]\w*)\s*$")
# Words that end a parameter's type rather than name it: ``unsigned int`` is an unnamed parameter.
_TYPE_WORDS = frozenset(
    "bool char short int long signed unsigned float double void const volatile __restrict__ __restrict "
    "restrict __half __nv_bfloat16 typename struct class union enum".split()
)
MAX_MACRO_DEPTH = 8  # deeper than any real parameter list; a loop (A -> B -> A) ends here


class MacroLoopError(ValueError):
    """Object-like macros nested deeper than :data:`MAX_MACRO_DEPTH` (most likely a loop)."""


class Kernel(NamedTuple):
    """One kernel declaration found in a source text (positions index that text).

    ``name`` is "" when nothing named follows the declaration's head (the readers decide whether
    that is an error); ``bounds`` is the launch bounds' argument text, whitespace collapsed, ""
    when the declaration gives none; ``template`` is the text between the angle brackets of a
    ``template <...>`` right before the declaration, ``None`` for a kernel that is not a template.
    """

    name: str
    start: int  # where the declaration's head (``__global__`` or the kernel macro) starts
    bounds: str
    template: str | None
    open_at: int  # just past the parameter list's opening parenthesis
    close_at: int  # just past its closing parenthesis


def strip_comments(text: str) -> str:
    """``text`` with each comment replaced by a space (string literals are not looked at: the
    declarations read here hold none)."""
    return _COMMENT.sub(" ", text)


def object_macros(text: str) -> dict[str, str]:
    """The object-like macros (``#define NAME body``, continuation lines joined) of a text whose
    comments are stripped, by name; a later definition wins, as it would after an ``#undef``."""
    return {m["name"]: m["body"].replace("\\\n", " ").strip() for m in _OBJECT_MACRO.finditer(text)}


def expand(fragment: str, macros: dict[str, str], depth: int = 0) -> str:
    """``fragment`` with the object-like ``macros`` expanded, recursively; raises
    :class:`MacroLoopError` past :data:`MAX_MACRO_DEPTH` levels."""
    if depth > MAX_MACRO_DEPTH:
        raise MacroLoopError("macros nested too deeply in a parameter list")
    return _IDENTIFIER.sub(
        lambda m: expand(macros[m[0]], macros, depth + 1) if m[0] in macros else m[0], fragment
    )


def closing(text: str, at: int) -> int:
    """The index just past the parenthesis that closes the one before ``at`` (the end of the
    text if it never closes)."""
    depth = 1
    while at < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[at], 0)
        at += 1
    return at


def split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside brackets (a template argument list keeps its
    commas), each part stripped."""
    # Angle brackets count only outside parentheses: in ``N = (3 > 2)`` the ``>`` compares.
    parts, parens, angles, start = [], 0, 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            parens += 1
        elif ch in ")]}":
            parens -= 1
        elif ch == "<" and parens == 0:
            angles += 1
        elif ch == ">" and parens == 0:
            angles -= 1
        elif ch == "," and parens == 0 and angles == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def parameter(declaration: str) -> tuple[str, str]:
    """One parameter's name and type: ``const T* __restrict__ in`` -> ``("in", "const T*
    __restrict__")``; a default value and array brackets are dropped; an unnamed parameter
    (``unsigned int``, ``int /*unused*/``) has the name "" and its whole text as its type."""
    text = " ".join(_ARRAY.sub(" ", declaration.split("=")[0]).split())
    m = _LAST_WORD.search(text)
    if not m or m[1] in _TYPE_WORDS or not text[: m.start()].strip():
        return "", text
    return m[1], text[: m.start()].strip()


def parameters(inner: str) -> tuple[tuple[str, str], ...]:
    """Each parameter of a parameter list's text (between its parentheses) as (name, type);
    ``()`` for an empty list or ``(void)``."""
    if inner.strip() in ("", "void"):
        return ()
    return tuple(parameter(p) for p in split_top_level(inner))


def _skip_space(text: str, at: int) -> int:
    """The index of the first character at or after ``at`` that is not white space."""
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _template_before(text: str, start: int) -> str | None:
    """The parameters of the ``template <...>`` that the declaration at ``start`` is part of:
    the first thing after the last ``;``, ``{`` or ``}`` before it but blanks and preprocessor
    lines (an ``#endif`` closing what came before); qualifiers and preprocessor lines may come
    between it and the declaration; ``None`` if there is none."""
    tail_at = max(text.rfind(c, 0, start) for c in ";{}") + 1
    m = _TEMPLATE.match(text, tail_at, start)
    if not m:
        return None
    angles, parens, at = 1, 0, m.end()
    while at < start and angles:
        ch = text[at]
        parens += {"(": 1, ")": -1}.get(ch, 0)
        if not parens:  # a comparison inside a default's parentheses is no bracket
            angles += {"<": 1, ">": -1}.get(ch, 0)
        at += 1
    return " ".join(text[m.end() : at - 1].split()) if angles == 0 else None


def kernels(text: str, macro: str | None = None) -> list[Kernel]:
    """Each kernel declaration of ``text`` (comments already stripped), in the order of the text.

    A declaration opens with ``__global__``, or with ``macro(<launch bounds>)`` when ``macro``
    names a kernel macro (``CUTOPK_KERNEL``, which stands for the ``void`` before the name).
    ``__launch_bounds__`` may come before or after ``void``, span lines and nest parentheses to
    any depth (``sizeof(T) == 8 ? (sizeof(T) > 4 ? 4 : 3) : 2``); ``__cluster_dims__(...)`` and
    preprocessor lines (an ``#if`` around it) may come before the name. A head on a preprocessor
    line (the macro's own ``#define``) is not a declaration.
    """
    heads = [(m.start(), m.end(), False) for m in _GLOBAL.finditer(text)]
    if macro:
        opener = re.compile(rf"\b{re.escape(macro)}\s*\(")
        heads += [(m.start(), m.end(), True) for m in opener.finditer(text)]
    found = []
    for start, at, is_macro in sorted(heads):
        if text[text.rfind("\n", 0, start) + 1 : start].lstrip().startswith("#"):
            continue  # a macro's definition (``#define CUTOPK_KERNEL(...) ...``), not a kernel
        bounds, void = "", is_macro
        if is_macro:
            end = closing(text, at)
            bounds = " ".join(text[at : end - 1].split())
            at = _skip_space(text, end)
        while True:
            if m := _BOUNDS_OPEN.match(text, at) or _CLUSTER_OPEN.match(text, at):
                end = closing(text, m.end())
                if m.re is _BOUNDS_OPEN:
                    bounds = " ".join(text[m.end() : end - 1].split())
                at = _skip_space(text, end)
            elif m := _PREPROCESSOR.match(text, at):
                at = m.end()
            elif not void and (m := _VOID.match(text, at)):
                at, void = m.end(), True
            else:
                break
        name = _NAME.match(text, at) if void else None
        open_at = name.end() if name else at
        close_at = closing(text, open_at) if name else at
        found.append(
            Kernel(
                name["name"] if name else "", start, bounds, _template_before(text, start), open_at, close_at
            )
        )
    return found
