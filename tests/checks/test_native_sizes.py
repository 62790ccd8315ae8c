"""The size rules of the C, C++ and CUDA sources (issue 53), as test_code_sizes.py holds them for
the Python: every ``.c .h .cpp .cu .cuh`` file of cutopk/, kernels/, benchmarks/ and tools/

- is at most ``FILE_MAX_LINES`` lines;
- defines no function longer than ``FUNCTION_MAX_LINES`` lines (from its opening brace to its
  closing one; the simulator's runtime included);
- gives no ``__device__`` function more than ``DEVICE_MAX_PARAMETERS`` parameters (state that
  travels together goes in a struct, as CUB's agents keep it). The kernel bodies declared with
  ``CUTOPK_KERNEL`` and the ``__global__`` and ``extern "C"`` entry points are exempt: their
  parameters are the launch ABI, which the launcher fills by name;
- has no ``#define`` whose body defines a function (``DEFINE_LANE_STEP(name, ...)``): such a
  macro is a template that compiler errors, sanitizer frames and debuggers cannot point into.
  Write the function once with its width as a parameter, a C++ template, or one function per
  case written out.

The reader is no C parser: comments, string and character literals (raw strings too) and
preprocessor lines are blanked, then braces are matched; a brace whose header (the text since
the last ``;``, ``{`` or ``}``) ends in a parameter list, named, outside any function, opens a
function. A file whose braces do not balance (a definition whose head differs between ``#if``
branches) fails: the reader cannot measure it. The only exceptions are ``EXCEPTIONS``, each with
its reason; an exception that is no longer needed fails too, so that the list only shrinks."""

from __future__ import annotations

import pathlib
import re
from typing import NamedTuple

import pytest

from cutopk import _c_declarations

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDERS = ("cutopk", "kernels", "benchmarks", "tools")
SUFFIXES = (".c", ".h", ".cpp", ".cu", ".cuh")
FILE_MAX_LINES = 600
FUNCTION_MAX_LINES = 120
DEVICE_MAX_PARAMETERS = 12
# Files allowed to break the rules for now, each with its reason.
EXCEPTIONS: dict[str, str] = {}

_LITERALS_AND_DIRECTIVES = re.compile(
    r"""(?P<raw>(?:u8|u|U|L)?R"(?P<delim>[^()\\\s"]{0,16})\((?:.|\n)*?\)(?P=delim)")"""
    r"""|(?P<string>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")"""
    r"""|(?P<char>'(?:\\.|[^'\\\n])+')"""
    r"""|(?P<block>/\*(?:.|\n)*?\*/)"""
    r"""|(?P<line>//[^\n]*)"""
    r"""|(?P<directive>^[ \t]*\#(?:\\\n|[^\n])*)""",
    re.M,
)
_CONTROL = frozenset(("if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "decltype"))
_QUALIFIERS = re.compile(
    r"(\s*(const|volatile|noexcept(\s*\([^()]*\))?|override|final|mutable|&&?|->\s*[\w:<>,\s*&]+))*\s*$"
)


class Function(NamedTuple):
    name: str
    line: int  # of its opening brace
    lines: int  # opening brace to closing brace
    parameters: int
    device: bool  # declared __device__ (a CUDA device function)
    entry: bool  # a CUTOPK_KERNEL body, a __global__ function or an extern "C" one: the launch ABI
    kernel: bool  # declared by CUTOPK_KERNEL


def _blank(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def blanked(source: str) -> tuple[str, list[tuple[int, str]]]:
    """``source`` with comments, string and character literals and preprocessor lines blanked
    (line breaks kept, so that line numbers hold), and the preprocessor lines with their line
    numbers (comments blanked, continuations joined)."""
    directives: list[tuple[int, str]] = []

    def blank(match: re.Match) -> str:
        if match.group("directive") is not None:
            line = source.count("\n", 0, match.start()) + 1
            text = _LITERALS_AND_DIRECTIVES.sub(
                lambda m: " " if m.group("directive") is None else m.group(0), match.group(0)[1:]
            )
            directives.append((line, "#" + text.replace("\\\n", " ")))
        if match.group("string") is not None:  # the quotes kept: ``extern "C"`` stays recognisable
            text = match.group(0)
            return text[: text.index('"')] + '"' + " " * (len(text) - text.index('"') - 2) + '"'
        return _blank(match)

    return _LITERALS_AND_DIRECTIVES.sub(blank, source), directives


def _closing_paren_list(head: str) -> tuple[int, int] | None:
    """Where the last parenthesised group of ``head`` (which ends with ``)``) opens and closes."""
    depth = 0
    for i in range(len(head) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(head[i], 0)
        if depth == 0:
            return i, len(head) - 1
    return None


def count_parameters(inner: str) -> int:
    """The parameters of a parameter list's text (between its parentheses), read by the one parser
    of C declarations (``cutopk/_c_declarations.py``); ``()`` and ``(void)``: 0."""
    return len(_c_declarations.parameters(inner))


def _definition(header: str) -> tuple[str, int] | None:
    """``(name, parameters)`` of the function that a brace's header defines, or None when the
    header is a control statement's, a class's, a namespace's, an initializer's or a lambda's."""
    head = _QUALIFIERS.sub("", header.strip())
    if not head.endswith(")"):
        return None
    group = _closing_paren_list(head)
    if group is None:
        return None
    before = head[: group[0]].rstrip()
    m = re.search(r"(operator\s*(?:\(\)|[^\w\s(]+)|[A-Za-z_~][\w]*)$", before)
    if m is None or m.group(1) in _CONTROL:
        return None
    return m.group(1), count_parameters(head[group[0] + 1 : group[1]])


class UnbalancedBraces(ValueError):
    """The braces of a text do not pair up (after comments, literals and preprocessor lines)."""


def functions(source: str) -> list[Function]:
    """The functions defined in ``source`` at namespace scope or in a class (a lambda or a block
    inside a function is part of it), in order. Raises :class:`UnbalancedBraces`."""
    text, _ = blanked(source)
    found: list[Function] = []
    # (name or None, line of "{", parameters, device, entry, kernel, inside extern "C")
    stack: list[tuple[str | None, int, int, bool, bool, bool, bool]] = []
    header, line = "", 1
    for ch in text:
        if ch == "\n":
            line += 1
        if ch == "{":
            in_function = any(name is not None for name, *_ in stack)
            in_extern_c = any(extern for *_, extern in stack) or bool(
                re.search(r'extern\s*"\s*"\s*$', header)
            )
            defined = None if in_function else _definition(header)
            if defined is None:
                stack.append((None, line, 0, False, False, False, in_extern_c))
            else:
                kernel = bool(re.search(r"\bCUTOPK_KERNEL\b", header))
                entry = kernel or in_extern_c or bool(re.search(r'\b__global__\b|extern\s*"\s*"', header))
                device = bool(re.search(r"\b__device__\b", header))
                stack.append((defined[0], line, defined[1], device, entry, kernel, in_extern_c))
            header = ""
        elif ch == "}":
            if not stack:
                raise UnbalancedBraces(f"line {line}: a '}}' closes nothing")
            name, start, parameters, device, entry, kernel, _ = stack.pop()
            if name is not None:
                found.append(Function(name, start, line - start + 1, parameters, device, entry, kernel))
            header = ""
        elif ch == ";":
            header = ""
        else:
            header += ch
    if stack:
        raise UnbalancedBraces(f"line {stack[-1][1]}: a '{{' is never closed")
    return found


_DEFINE = re.compile(r"#\s*define\s+(?P<name>[A-Za-z_]\w*)(?P<args>\([^()]*\))?(?P<body>.*)", re.S)


def function_macros(source: str) -> list[tuple[int, str, str]]:
    """``(line, macro, function)`` for each ``#define`` whose body defines a function (the
    first it defines)."""
    found = []
    for line, directive in blanked(source)[1]:
        m = _DEFINE.match(directive)
        if m is None:
            continue
        try:
            defined = functions(m.group("body"))
        except UnbalancedBraces:  # a macro that opens or closes a block for its user
            continue
        if defined:
            found.append((line, m.group("name"), defined[0].name))
    return found


def violations(source: str, name: str) -> list[str]:
    """Every rule that ``source`` (the file ``name``) breaks, one message each: the file, the line,
    the function and the measure."""
    out = []
    lines = len(source.splitlines())
    if lines > FILE_MAX_LINES:
        out.append(f"{name}: {lines} lines, over {FILE_MAX_LINES}: split it by concern")
    try:
        defined = functions(source)
    except UnbalancedBraces as exc:
        return [*out, f"{name}: {exc}: the reader cannot measure its functions"]
    declared = len(re.findall(r"\bCUTOPK_KERNEL\s*\(", blanked(source)[0]))
    if declared != sum(f.kernel for f in defined):  # else the reader missed definitions
        out.append(
            f"{name}: {declared} CUTOPK_KERNEL declarations, {sum(f.kernel for f in defined)} kernels read"
        )
    for f in defined:
        if f.lines > FUNCTION_MAX_LINES:
            out.append(
                f"{name}:{f.line}: {f.name} is {f.lines} lines, over {FUNCTION_MAX_LINES}: cut it into steps"
            )
        if f.device and not f.entry and f.parameters > DEVICE_MAX_PARAMETERS:
            out.append(
                f"{name}:{f.line}: __device__ {f.name} takes {f.parameters} parameters, over "
                f"{DEVICE_MAX_PARAMETERS}: keep the state in a struct"
            )
    for line, macro, function in function_macros(source):
        out.append(
            f"{name}:{line}: #define {macro} defines a function ({function}): write the function itself"
        )
    return out


def _sources() -> list[pathlib.Path]:
    return sorted(
        p for folder in FOLDERS for p in (ROOT / folder).rglob("*") if p.suffix in SUFFIXES and p.is_file()
    )


def _name(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("path", _sources(), ids=_name)
def test_native_source_sizes(path):
    name = _name(path)
    found = violations(path.read_text(), name)
    if name in EXCEPTIONS:
        assert found, f"{name} keeps every rule now: take it off EXCEPTIONS"
    else:
        assert found == [], "\n".join(found)


def test_every_exception_is_a_source_and_says_why():
    names = {_name(p) for p in _sources()}
    assert {name for name, why in EXCEPTIONS.items() if name not in names or not why.strip()} == set()


# --- the reader itself ------------------------------------------------------------------------


def test_braces_in_comments_literals_and_directives_are_not_counted():
    source = (
        "// void a() {\n"
        "/* void b() {\n */\n"
        'const char* s = "{ void c() {";\n'
        "char o = '{', e = '\\'';\n"
        'const char* r = R"x( ) { )" )x";\n'
        "#define OPEN {\n"
        "#if 0 \\\n  {\n#endif\n"
        "int f(int x) {\n  return x;\n}\n"
    )
    assert functions(source) == [Function("f", 11, 3, 1, False, False, False)]


def test_functions_are_measured_from_brace_to_brace_and_blocks_inside_are_theirs():
    source = (
        "namespace a {\nstruct S {\n  int g() const {\n    return 1;\n  }\n};\n"
        "template <class T>\nT h(T x, std::pair<int, int> p, void (*cb)(int, int)) {\n"
        "  auto l = [&](int e) {\n    if (e) {\n    }\n  };\n  for (;;) {\n  }\n"
        "  struct { int v; } local = {1};\n  return x;\n}\n"
        "int t[] = {1, 2};\nenum class E : int { A, B };\n}  // namespace a\n"
    )
    assert [(f.name, f.line, f.lines, f.parameters) for f in functions(source)] == [
        ("g", 3, 3, 0),
        ("h", 8, 10, 3),
    ]


def test_device_functions_and_entry_points_are_told_apart():
    source = (
        "__device__ __forceinline__ int step(int a, int b) {\n  return a;\n}\n"
        "CUTOPK_KERNEL(64, a ? 4\n  : (b ? 2 : 3))\nkernel(int x) {\n}\n"
        "__global__ void __launch_bounds__(256) entry(int x, int y) {\n}\n"
        'extern "C" {\n__device__ void inside(void) {\n}\n}\n'
        'extern "C" __device__ void prefixed() {\n}\n'
    )
    found = [(f.name, f.parameters, f.device, f.entry, f.kernel) for f in functions(source)]
    assert found == [
        ("step", 2, True, False, False),
        ("kernel", 1, False, True, True),
        ("entry", 2, False, True, False),
        ("inside", 0, True, True, False),
        ("prefixed", 0, True, True, False),
    ]


def test_unbalanced_braces_are_reported_not_measured():
    source = "#if A\n"  # a head that differs between branches leaves its brace unmatched here
    with pytest.raises(UnbalancedBraces):
        functions("int f(int a) {\n  if (a) {\n}\n")
    assert violations(source + "int f() {\n", "x.c") == [
        "x.c: line 2: a '{' is never closed: the reader cannot measure its functions"
    ]


def test_a_macro_that_defines_a_function_is_found_and_one_that_does_not_is_not():
    source = (
        "#define DEFINE_STEP(NAME, T) \\\n  static inline void NAME(T* a) { \\\n    *a = 0;             \\\n  }\n"
        "#define TRAITS(T) template <> struct K<T> { static int f(T) { return 1; } };\n"
        "#define PHASE(i) do { stamp(i); } while (0)\n"
        "#define PARAMS const int* x, int n\n"
        "#define OPEN(x) if (x) {\n"
    )
    assert function_macros(source) == [(1, "DEFINE_STEP", "NAME"), (5, "TRAITS", "f")]


def test_each_violation_names_the_file_the_line_the_function_and_the_measure():
    long_body = "\n".join(["  x++;"] * FUNCTION_MAX_LINES)
    params = ", ".join(f"int a{i}" for i in range(DEVICE_MAX_PARAMETERS + 1))
    source = (
        f"void long_one(int x) {{\n{long_body}\n}}\n"
        f"__device__ void wide({params}) {{\n}}\n"
        f"CUTOPK_KERNEL(1, 1)\nkernel({params}) {{\n}}\n"
    )
    assert violations(source, "k.cu") == [
        f"k.cu:1: long_one is {FUNCTION_MAX_LINES + 2} lines, over {FUNCTION_MAX_LINES}: cut it into steps",
        f"k.cu:{FUNCTION_MAX_LINES + 3}: __device__ wide takes {DEVICE_MAX_PARAMETERS + 1} parameters, over "
        f"{DEVICE_MAX_PARAMETERS}: keep the state in a struct",
    ]
    assert violations("\n" * FILE_MAX_LINES + "int x;\n", "big.c") == [
        f"big.c: {FILE_MAX_LINES + 1} lines, over {FILE_MAX_LINES}: split it by concern"
    ]
