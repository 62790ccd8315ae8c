"""Turning a CUDA source into a host C++ translation unit for the simulator.

Only the declarations of shared memory are rewritten (everything else is macros and functions of
the runtime header): CUDA gives one copy of a ``__shared__`` variable to each block, which no C++
storage class can express, so each declaration becomes a reference into the running block's
arena. Replacements keep every declaration on its own line, so line numbers in faults and
compiler messages are the kernel file's own.
"""

from __future__ import annotations

import bisect
import itertools
import re

_ALIGN = r"__align__\s*\(\s*(?P<{0}>\d+)\s*\)\s*"
_TYPE = r"(?P<type>(?:[\w:]+(?:\s*<[^;{}()]*?>)?[\s\*&]*?)+?)"

DYNAMIC = re.compile(
    r"extern\s+__shared__\s+(?:"
    + _ALIGN.format("a1")
    + r")?"
    + _TYPE
    + r"\s*(?:"
    + _ALIGN.format("a2")
    + r")?"
    r"(?P<name>[A-Za-z_]\w*)\s*\[\s*\]\s*;"
)
STATIC = re.compile(
    r"(?:static\s+)?__shared__\s+(?:"
    + _ALIGN.format("a1")
    + r")?"
    + _TYPE
    + r"\s+(?:"
    + _ALIGN.format("a2")
    + r")?"
    r"(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\];]+\]\s*)*);"
)
_GLOBAL = re.compile(r"\b__global__\s+")
_BOUNDS_OPEN = re.compile(r"__launch_bounds__\s*\(")
_CLUSTER_OPEN = re.compile(r"__cluster_dims__\s*\(")
_PREPROCESSOR = re.compile(r"#[^\n]*\n\s*")
_VOID = re.compile(r"void\s+")
_NAME = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*\(")
_SPACE = re.compile(r"\s*")


def _closing(text: str, at: int) -> int:
    """The index just past the parenthesis that closes the one before ``at`` (or the end)."""
    depth = 1
    while at < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[at], 0)
        at += 1
    return at


def kernels(text: str) -> list[tuple[str, int, int]]:
    """Each ``__global__`` function of ``text``: its name, where its declaration starts, and the
    index just past its parameter list's opening parenthesis. ``__launch_bounds__`` may come
    before or after ``void``, span lines and nest parentheses to any depth
    (``sizeof(T) == 8 ? (sizeof(T) > 4 ? 4 : 3) : 2``); ``__cluster_dims__(...)`` and
    preprocessor lines (an ``#if`` around it) may come before the name."""
    found = []
    for g in _GLOBAL.finditer(text):
        at, void = g.end(), False
        while True:
            if m := _BOUNDS_OPEN.match(text, at) or _CLUSTER_OPEN.match(text, at):
                at = _SPACE.match(text, _closing(text, m.end())).end()
            elif m := _PREPROCESSOR.match(text, at):
                at = m.end()
            elif not void and (m := _VOID.match(text, at)):
                at, void = m.end(), True
            else:
                break
        if void and (m := _NAME.match(text, at)):
            found.append((m["name"], g.start(), m.end()))
    return found


def cluster_dims(text: str) -> dict[str, tuple[int, int, int]]:
    """The compile-time cluster shape (``__cluster_dims__(x, y, z)`` between ``__global__`` and
    the name) of each kernel of ``text`` that names one: the shape its launches take."""
    out = {}
    for name, start, end in kernels(text):
        m = re.search(r"__cluster_dims__\s*\(([^()]*)\)", text[start:end])
        if m:
            dims = tuple(int(d, 0) for d in m[1].split(","))
            out[name] = (*dims, *(1,) * (3 - len(dims)))
    return out


_NAMESPACE_OPENER = re.compile(r'(?:namespace(?:\s+[\w:]+)?|extern\s*"C(?:\+\+)?")\s*$')
_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[{};]', re.S)


def _scopes(source: str) -> tuple[list[tuple[int, int]], list[tuple[int, bool]]]:
    """Comment and literal spans, and the positions where "inside a function body" changes.

    A brace opened after ``namespace x`` or ``extern "C"`` keeps file scope; any other brace at
    file scope (a function body; a class body cannot declare ``__shared__``) starts code scope.
    """
    skipped, changes, stack = [], [(0, False)], []
    last_stop = 0
    for m in _TOKEN.finditer(source):
        tok = m.group()
        if tok not in ";{}":
            skipped.append(m.span())
            continue
        was_code = bool(stack) and stack[-1]
        if tok == "{":
            opener = _NAMESPACE_OPENER.search(source[last_stop : m.start()].strip())
            stack.append(was_code or not opener)
        elif tok == "}" and stack:
            stack.pop()
        is_code = bool(stack) and stack[-1]
        if is_code != was_code:
            changes.append((m.start() if is_code else m.end(), is_code))
        last_stop = m.end()
    return skipped, changes


def _inside(spans: list[tuple[int, int]], pos: int) -> bool:
    i = bisect.bisect_right(spans, (pos, float("inf"))) - 1
    return i >= 0 and spans[i][0] <= pos < spans[i][1]


def _in_function(changes: list[tuple[int, bool]], pos: int) -> bool:
    return changes[bisect.bisect_right(changes, (pos, True)) - 1][1]


def _logical_line(text: str, pos: int) -> int:
    """The line number the compiler gives position ``pos``, honouring ``#line`` directives."""
    directive = text.rfind("\n#line ", 0, pos)
    if directive < 0:
        return text.count("\n", 0, pos) + 1
    eol = text.index("\n", directive + 1)
    number = int(text[directive + 7 : eol].split()[0])
    return number + text.count("\n", eol + 1, pos)


def _substitute(pattern: re.Pattern, source: str, local, file_scope) -> str:
    """Rewrite each match of ``pattern`` outside comments with ``local`` (inside a function) or
    ``file_scope`` (a namespace-level declaration, which becomes a macro)."""
    skipped, changes = _scopes(source)
    out, last = [], 0
    for m in pattern.finditer(source):
        if _inside(skipped, m.start()):
            continue
        out.append(source[last : m.start()])
        if _in_function(changes, m.start()):
            out.append(local(m))
        else:
            # A macro needs lines of its own; #line puts the numbering back.
            line = _logical_line(source, m.start())
            out.append(f'\n{file_scope(m)}\n#line {line} "kernel.cu"\n')
        last = m.end()
    out.append(source[last:])
    return "".join(out)


def rewrite_shared(source: str) -> str:
    """Replace ``__shared__`` declarations with references into the simulator's block arenas."""
    counter = itertools.count()

    def dynamic(m: re.Match) -> str:
        t = m["type"].strip()
        return f"{t}* {m['name']} = reinterpret_cast<{t}*>(::cutopk_sim::dynamic_shared());"

    def dynamic_global(m: re.Match) -> str:
        t = m["type"].strip()
        return f"#define {m['name']} (reinterpret_cast<{t}*>(::cutopk_sim::dynamic_shared()))"

    def parts(m: re.Match) -> tuple[str, str, str]:
        t = m["type"].strip()
        full = f"{t} {m['dims'].strip()}" if m["dims"] else t
        align = m["a1"] or m["a2"]
        align_expr = (
            f"(alignof({full}) > {align} ? alignof({full}) : {align})" if align else f"alignof({full})"
        )
        site = f"cutopk_sim_site_{next(counter)}"
        access = (
            f"*reinterpret_cast<std::add_pointer_t<{full}>>("
            f"::cutopk_sim::shared_at({site}, sizeof({full}), {align_expr}, __LINE__))"
        )
        return site, access, full

    def static(m: re.Match) -> str:
        site, access, _ = parts(m)
        return f"static ::cutopk_sim::SharedSite {site}; auto& {m['name']} = {access};"

    def static_global(m: re.Match) -> str:
        site, access, _ = parts(m)
        return f"static ::cutopk_sim::SharedSite {site};\n#define {m['name']} ({access})"

    source = _substitute(DYNAMIC, source, dynamic, dynamic_global)
    return _substitute(STATIC, source, static, static_global)


def plain_kernels(source: str) -> list[str]:
    """Names of the kernels that are not templates (those CuPy finds without name expressions)."""
    names = []
    for name, start, _ in kernels(source):
        before = source[max(0, start - 400) : start]
        tail = re.split(r"[;}]", before)[-1]
        if "template" not in tail and name not in names:
            names.append(name)
    return names


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_OBJECT_MACRO = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)(?![\w(])(?P<body>(?:[^\n\\]|\\.)*)$", re.M | re.S
)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# Words that end a parameter's type rather than name it: ``unsigned int`` is an unnamed parameter.
_TYPE_WORDS = frozenset(
    "bool char short int long signed unsigned float double void const volatile __restrict__ __restrict "
    "restrict __half __nv_bfloat16 typename struct class union enum".split()
)


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside brackets (a template argument list keeps its commas)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _parameter_name(declaration: str) -> str:
    """The name a parameter declaration gives (``const T* __restrict__ in`` -> ``in``), "" if none."""
    declaration = re.sub(r"\[[^\]]*\]", " ", declaration.split("=")[0]).strip()
    m = re.search(r"([A-Za-z_]\w*)\s*$", declaration)
    if not m or m[1] in _TYPE_WORDS or not declaration[: m.start()].strip():
        return ""
    return m[1]


def kernel_parameter_names(source: str) -> dict[str, list[tuple[str, ...]]]:
    """For each kernel name, the parameter names of each of its definitions (several for overloads
    or for definitions under ``#if``), read from the source: parameter lists written through
    object-like macros (``#define PARAMS const T* in, int n``) are expanded; function-like macros
    are not (such a list gets names only as far as they can be read).

    The compiled signature has types but no names; these names only label error messages, so a
    list that cannot be read is simply absent.
    """
    text = _COMMENT.sub(" ", source)
    macros = {m["name"]: m["body"].replace("\\\n", " ").strip() for m in _OBJECT_MACRO.finditer(text)}

    def expand(fragment: str, depth: int = 0) -> str:
        if depth > 8:
            return fragment
        return _IDENTIFIER.sub(
            lambda m: expand(macros[m[0]], depth + 1) if m[0] in macros else m[0], fragment
        )

    found: dict[str, list[tuple[str, ...]]] = {}
    for name, _, open_at in kernels(text):
        end = _closing(text, open_at)
        inner = expand(text[open_at : end - 1]).strip()
        names = () if inner in ("", "void") else tuple(_parameter_name(p) for p in _split_top_level(inner))
        if names not in found.setdefault(name, []):
            found[name].append(names)
    return found


def translation_unit(source: str, entries: list[str]) -> str:
    """The complete host C++ source: runtime, rewritten kernels, and the table of ``entries``."""
    parts = [
        '#include "sim_runtime.h"\n#line 1 "kernel.cu"\n',
        rewrite_shared(source),
        '\n#include "sim_launch.h"\n',
    ]
    for i, name in enumerate(entries):
        parts.append(
            f"static void cutopk_sim_k{i}(void** cutopk_sim_args) "
            f"{{ ::cutopk_sim::invoke(&{name}, cutopk_sim_args); }}\n"
            f"static int cutopk_sim_d{i}(::cutopk_sim::ParamInfo* cutopk_sim_out, int cutopk_sim_n) "
            f"{{ return ::cutopk_sim::describe(&{name}, cutopk_sim_out, cutopk_sim_n); }}\n"
        )
    table = (
        ", ".join(f"{{cutopk_sim_k{i}, cutopk_sim_d{i}}}" for i in range(len(entries)))
        or "{nullptr, nullptr}"
    )
    parts.append(
        f"static const ::cutopk_sim::KernelEntry cutopk_sim_table[] = {{{table}}};\n"
        'extern "C" __attribute__((visibility("default"))) int cutopk_sim_describe('
        "int i, ::cutopk_sim::ParamInfo* p, int c) { return cutopk_sim_table[i].describe(p, c); }\n"
        'extern "C" __attribute__((visibility("default"))) int cutopk_sim_launch(int i, unsigned gx, unsigned gy, '
        "unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned long long dyn, void** args, int resident, "
        "unsigned long long seed, unsigned long long block_seed, int poison, unsigned long long spin_budget, "
        "double watchdog_s) {\n"
        "  return ::cutopk_sim::run(cutopk_sim_table[i].launch, args, dim3(gx, gy, gz), dim3(bx, by, bz), dyn, "
        "resident, seed, block_seed, poison, spin_budget, watchdog_s);\n}\n"
    )
    return "".join(parts)
