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

from .. import _c_declarations as _c

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


def cluster_dims(text: str) -> dict[str, tuple[int, int, int]]:
    """The compile-time cluster shape (``__cluster_dims__(x, y, z)`` between ``__global__`` and
    the name) of each kernel of ``text`` that names one: the shape its launches take."""
    out = {}
    for kernel in _c.kernels(text):
        m = re.search(r"__cluster_dims__\s*\(([^()]*)\)", text[kernel.start : kernel.open_at])
        if kernel.name and m:
            x, y, z = (*(int(d, 0) for d in m[1].split(",")), 1, 1)[:3]
            out[kernel.name] = (x, y, z)
    return out


_NAMESPACE_OPENER = re.compile(r'(?:namespace(?:\s+[\w:]+)?|extern\s*"C(?:\+\+)?")\s*$')
_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[{};]', re.S)


def _scopes(source: str) -> tuple[list[tuple[int, int]], list[tuple[int, bool]]]:
    """Comment and literal spans, and the positions where "inside a function body" changes.

    A brace opened after ``namespace x`` or ``extern "C"`` keeps file scope; any other brace at
    file scope (a function body; a class body cannot declare ``__shared__``) starts code scope.
    """
    skipped: list[tuple[int, int]] = []
    changes: list[tuple[int, bool]] = [(0, False)]
    stack: list[bool] = []
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


def untemplated_kernels(source: str) -> list[str]:
    """Names of the kernels that are not templates (those CuPy finds without name expressions)."""
    names = []
    for kernel in _c.kernels(_c.strip_comments(source)):
        if kernel.name and kernel.template is None and kernel.name not in names:
            names.append(kernel.name)
    return names


def kernel_parameter_names(source: str) -> dict[str, list[tuple[str, ...]]]:
    """For each kernel name, the parameter names of each of its definitions (several for overloads
    or for definitions under ``#if``), read from the source: parameter lists written through
    object-like macros (``#define PARAMS const T* in, int n``) are expanded; function-like macros
    are not (such a list gets names only as far as they can be read).

    The compiled signature has types but no names; these names only label error messages, so a
    list that cannot be read (macros that expand without end) is simply absent.
    """
    text = _c.strip_comments(source)
    macros = _c.object_macros(text)
    found: dict[str, list[tuple[str, ...]]] = {}
    for kernel in _c.kernels(text):
        if not kernel.name:
            continue
        try:
            inner = _c.expand(text[kernel.open_at : kernel.close_at - 1], macros)
        except _c.MacroLoopError:
            continue
        names = tuple(name for name, _ in _c.parameters(inner))
        if names not in found.setdefault(kernel.name, []):
            found[kernel.name].append(names)
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
