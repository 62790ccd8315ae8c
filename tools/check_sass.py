"""The SASS check: reads the machine code of compiled kernels (cuobjdump, no GPU needed) and
fails when a streaming kernel cannot run at the memory-bandwidth limit:

* a kernel that streams contiguous rows has no 128-bit global load (``LDG.E.128``);
* any kernel has a compare-and-swap loop in shared memory (``ATOMS.CAS``, ``ATOMS.CAST.SPIN``:
  what a 64-bit shared-memory atomicAdd compiles to), the sign of a histogram with the wrong
  counter width;
* a streaming kernel issues its global loads one at a time: nowhere in its code do
  ``min_loads`` global loads go out before the first instruction that uses one of them;
* the streaming filter of the multi-block select's pass 1 (kernels/multiblock.cu,
  ``filter_slice``: keys of more than one digit) holds a shared-memory atomic (``ATOMS``) or a
  warp match (``MATCH``), or is not there to check (see :func:`streaming_loop`);
* an on-chip select (resident, split, cluster, block_row: kernels/onchip_select.cuh) scans its held keys
  one key per thread and step with a warp vote or match per key: an innermost loop that reads
  shared memory but not global memory, holds a ``VOTE`` or ``MATCH``, and has no 16-byte shared
  load (``LDS.128``). That was the refine, count and place loops' shape before issue 39: a
  dependent load-vote-match-atomic chain per key, latency-bound with one block per row;
* block_row's count of its held row (float32, float16, bfloat16), or cluster's of its held slice
  (float16, bfloat16; ``held_counting_loop``: the same step, block_steps.cuh ``count_chunks``) on
  sm_90 costs more instructions per key than FlashInfer's FilteredTopK coarse histogram, whose
  counts benchmarks/results/2026-12-02-sass/flashinfer_counting.txt records;
* block_row (kernels/block_row.cu) on sm_80 and later has no asynchronous copy (``LDGSTS``,
  cp.async): its row is to be copied into shared memory with every load in flight at entry;
* the streaming select's filter (kernels/streaming.cu, the ring of asynchronous copies) holds a
  per-key atomic or warp match: a loop that issues the ring's copies (``LDGSTS``, and holds no
  other such loop) holds an ``ATOMS``, ``ATOM``, ``ATOMG``, ``RED`` or ``MATCH``; and on sm_80 and
  later no loop issues ``LDGSTS`` (the ring is gone);
* any kernel holds a warp match (``MATCH``): every histogram counts with a plain shared
  ``atomicAdd(&h[d], 1u)`` (``ATOMS.POPC.INC`` on sm_90, which adds up the lanes that hit one
  address), as the anchors do; the match that aggregated a warp's equal digits first cost about
  200 cycles per warp op by a fit to the H100's per-block times (issue 51). A build with
  ``-DCUTOPK_COUNT_WITH_MATCH=1`` (kernels/radix_digit.cuh, for an A/B on a GPU) fails here.

    python tools/check_sass.py OBJECT_OR_CUBIN [--min-loads 4]
    python tools/check_sass.py OBJECT_OR_CUBIN --counting [--kernel REGEX]

``--counting`` checks nothing: it prints, for every innermost loop that holds a shared-memory
atomic (a histogram's counting loop), its instructions per atomic (per key counted: one atomic
per key), with the warp votes and matches, loads and stores among them (:func:`counting_loops`).
The count is static: every instruction of the loop's body once, the paths a given row skips (a
strided row's loads, a partial run) included; each SASS instruction is issued once per warp.

``tools/check_kernels.py`` runs it on every kernel it compiles (the rules per kernel family are
``STREAMING`` and ``SAMPLED`` below). cuobjdump and nvdisasm come with a CUDA toolkit or from
the ``nvidia-cuda-cuobjdump`` and ``nvidia-cuda-nvdisasm`` wheels (the ``lint`` extra).
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import glob
import importlib.util
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import tempfile

# Kernels that stream rows through kernels/row_loads.cuh (contiguous path: 16-byte loads), by
# their extern "C" entry points' names (<kernel>_<dtype>, cutopk/cuda/kernel_source.py).
STREAMING = re.compile(
    r"^(radix_topk|warp_radix_topk|digit_pass|resident_topk|split_topk|block_row_topk)_[a-z]"
)
# Kernels that read spread positions (no vector loads) but must keep several loads in flight.
SAMPLED = re.compile(r"^sample_threshold_[a-z]")
# Kernels whose pass 1 streams through a filter with no per-element histogram: the multi-block
# select's digit_pass for every dtype but the 8-bit ones (one digit: no filter).
FILTERED = re.compile(r"^digit_pass_(?!u?int8(?:_|$))[a-z]")
# What the filter's loop must not hold: a shared-memory atomic or a warp match per element is
# what made pass 1 bound by instruction issue (issue 39).
HISTOGRAM_OP = re.compile(r"^(ATOMS|MATCH)\b")
# Kernels that hold a row (or slice) as keys in shared memory and scan it (onchip_select.cuh).
ON_CHIP = re.compile(r"^(resident_topk|split_topk|cluster_topk|block_row_topk)_[a-z]")
# Kernels that copy a row into shared memory asynchronously at entry (kernels/async_copy.cuh:
# cp.async, LDGSTS in SASS) on sm_80 and later, so that every load of the row is in flight at once.
ASYNC_COPY = re.compile(r"^block_row_topk_[a-z]")
# The same from sm_90 (kernels/cluster.cu: its builds before sm_90 trap, thread-block clusters
# being sm_90's), every slice copied at entry.
ASYNC_COPY_SM90 = re.compile(r"^cluster_topk_[a-z]")
ASYNC_COPY_OP = re.compile(r"^LDGSTS\b")
WARP_VOTE = re.compile(r"^(VOTE|MATCH)\b")
# Kernels that filter a row through a ring of asynchronous copies (kernels/streaming.cu), and what
# their filter's loop must not hold: any atomic or warp match (issue 52: none per input key).
RINGED = re.compile(r"^streaming_topk_[a-z]")
PER_KEY_OP = re.compile(r"^(ATOMS|ATOMG|ATOM|RED|MATCH)\b")
# Kernels that may not hold a warp match: every kernel (each selects, or orders, merges or moves
# what was selected; none needs a match since the histograms count with plain atomics).
SELECTION = re.compile(r"")
WARP_MATCH = re.compile(r"^MATCH\b")
SHARED_ATOMIC = re.compile(r"^ATOMS\b")
SHARED_LOAD = re.compile(r"^LDS\b")
WIDE_SHARED_LOAD = re.compile(r"^LDS(\.U)?\.128\b")  # sm_75 spells it LDS.U.128
CAS_LOOP = re.compile(r"\bATOMS\.(CAS|CAST)\b|\bCAST\.SPIN\b")
WIDE_LOAD = re.compile(r"\bLDG\.E\.128\b")
GLOBAL_LOAD = re.compile(r"^LDG\.")
REG = re.compile(r"\bR(\d+)\b")
WIDTH = re.compile(r"\.(64|128)\b")
FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
ARCH = re.compile(r"(?:arch\s*=|code for)\s*(sm_\d+)")
INSTRUCTION = re.compile(r"/\*(?P<addr>[0-9a-f]{4,})\*/\s+(?P<pred>@!?U?P\w+\s+)?(?P<text>[A-Z][^;]*);")
TARGET = re.compile(r"\b0x([0-9a-f]+)\b")
# Instructions whose first operand is read, not written.
NO_DEST = re.compile(
    r"^(ST|STG|STS|STL|RED|ATOM|ATOMS|ATOMG|BRA|BAR|EXIT|RET|CALL|SYNCS|WARPSYNC|BSYNC|BSSY)\b"
)


# block_row's count of its held row, and cluster's of its held slice (the same step,
# held_counting_loop), cost at most FlashInfer's FilteredTopK coarse histogram per key, on sm_90,
# for the dtypes FlashInfer serves: its counts are recorded (CI cannot build FlashInfer), one line
# per dtype as `check_sass.py --counting` printed it. cluster's float32 is not held to it: NVRTC
# 12.9 and 13.0 form its counters' addresses from a uniform base with one more add per key
# (benchmarks/results/2026-12-02-sass/README.md).
HELD_COUNT = re.compile(
    r"^(?:block_row_topk_(float32|float16|bfloat16)|cluster_topk_(float16|bfloat16)_blocks\d+)$"
)
ROOT = pathlib.Path(__file__).resolve().parents[1]
FLASHINFER_COUNTING = ROOT / "benchmarks" / "results" / "2026-12-02-sass" / "flashinfer_counting.txt"
PER_KEY = re.compile(r": ([0-9.]+) per key ")


def flashinfer_counting(path: pathlib.Path = FLASHINFER_COUNTING) -> dict[str, float]:
    """{dtype: FlashInfer's instructions per key} from the record (empty where it is missing)."""
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            dtype, printed = line.split("\t")
            out[dtype] = float(PER_KEY.search(printed)[1])
    return out


def tool_dirs() -> list[str]:
    """Where cuobjdump and nvdisasm may be: PATH, the CUDA toolkit beside nvcc, the NVIDIA wheels."""
    dirs = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        dirs.append(str(pathlib.Path(nvcc).resolve().parent))
    spec = importlib.util.find_spec("nvidia")
    for root in spec.submodule_search_locations if spec and spec.submodule_search_locations else []:
        dirs += sorted(glob.glob(os.path.join(root, "*", "bin")))
    return dirs


def find_cuobjdump() -> tuple[str | None, dict]:
    """cuobjdump's path (or None) and an environment whose PATH also finds nvdisasm."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([env.get("PATH", ""), *tool_dirs()])
    tool = shutil.which("cuobjdump", path=env["PATH"])
    if tool and not shutil.which("nvdisasm", path=env["PATH"]):
        return None, env
    return tool, env


Code = list[tuple[int, bool, str]]  # (address, predicated, instruction text without predicate)


def disassemble(path: str) -> dict[tuple[str, str], Code]:
    """{(arch, mangled name): instructions} for every kernel in a cubin or object file."""
    tool, env = find_cuobjdump()
    if not tool:
        raise FileNotFoundError(
            "cuobjdump and nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"
        )
    out = subprocess.run([tool, "-sass", path], capture_output=True, text=True, env=env, check=True).stdout
    return parse(out)


def text_sections(cubin: bytes) -> list[tuple[str, bytes]]:
    """(function name, machine code) of each ``.text.<name>`` section of a cubin (a 64-bit
    little-endian ELF file): what cuobjdump lists as one ``Function``."""
    if cubin[:6] != b"\x7fELF\x02\x01":
        raise ValueError("not a 64-bit little-endian ELF file (a cubin)")
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    entsize, count, names_at = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * entsize) for i in range(count)]
    names = headers[names_at][4]  # the section-name table's offset
    out = []
    for name_off, kind, _flags, _addr, offset, size in headers:
        name = cubin[names + name_off : cubin.index(b"\0", names + name_off)].decode()
        if name.startswith(".text.") and kind != 8:  # 8: SHT_NOBITS
            out.append((name[len(".text.") :], cubin[offset : offset + size]))
    return out


# The instructions whose hex operand is a code address (raw mode prints it from the blob's start).
CODE_ADDRESS = re.compile(r"^(BRA|BRX|JMP|CALL|RET|BSSY|SSY|PBK|PCNT|BREAK|CONT|WARPSYNC\.COLLECTIVE)\b")


def disassemble_cubins(arch: str, cubins: list[bytes]) -> dict[tuple[str, str], Code]:
    """``disassemble``'s answer for many cubins of one architecture (``"sm_90"``) from one
    nvdisasm call: their functions' machine code laid end to end and read as a raw instruction
    binary, then cut back into functions, with addresses (and branch and call targets) counted
    from each function's start as cuobjdump counts them. nvdisasm spends about 0.7 s starting
    (measured 2026-11-27: a 3.4 KB cubin 0.69 s of CPU, a 120 KB one 0.95 s), which one call per
    cubin paid each time: six cubins of 14 kernels took 5.2 s through cuobjdump, 0.94 s here."""
    _, env = find_cuobjdump()
    tool = shutil.which("nvdisasm", path=env["PATH"])
    if not tool:
        raise FileNotFoundError("nvdisasm not found (pip install nvidia-cuda-nvdisasm)")
    starts, names, blob = [], [], bytearray()
    for cubin in cubins:
        for name, code in text_sections(cubin):
            starts.append(len(blob))
            names.append(name)
            blob += code
    if not blob:
        return {}
    codes: list[Code] = [[] for _ in names]
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "functions.bin"
        path.write_bytes(blob)
        out = subprocess.run(
            [tool, "-b", arch.replace("sm_", "SM"), str(path)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
    for line in out.splitlines():
        if not (m := INSTRUCTION.search(line)):
            continue
        addr = int(m["addr"], 16)
        i = bisect.bisect_right(starts, addr) - 1
        base, text = starts[i], " ".join(m["text"].split())
        if CODE_ADDRESS.match(text):
            text = TARGET.sub(lambda t, base=base: f"0x{int(t[1], 16) - base:x}", text)
        codes[i].append((addr - base, bool(m["pred"]), text))
    # As disassemble()'s answers merged in order: a later cubin's function of the same name wins.
    return {(arch, name): code for name, code in zip(names, codes, strict=True)}


def parse(text: str) -> dict[tuple[str, str], Code]:
    functions: dict[tuple[str, str], Code] = {}
    arch, current = "?", None
    for line in text.splitlines():
        if m := ARCH.search(line):
            arch = m[1]
        if m := FUNCTION.match(line):
            current = functions.setdefault((arch, m[1]), [])
        elif current is not None and (m := INSTRUCTION.search(line)):
            current.append((int(m["addr"], 16), bool(m["pred"]), " ".join(m["text"].split())))
    return functions


def _registers(operand: str) -> set[int]:
    regs = set()
    for m in REG.finditer(operand):
        regs.add(int(m[1]))
    return regs


def loads_in_flight(instructions: Code) -> int:
    """The most global loads issued before the first use of any of them, in address order. A
    use, a block barrier, an exit or a backward (loop) branch ends a stretch; forward branches
    (a load skipped by its bounds check) and reconvergence points (BSSY/BSYNC) do not."""
    best, pending, count = 0, set(), 0
    for addr, _predicated, text in instructions:
        opcode, _, rest = text.partition(" ")
        operands = [o.strip() for o in rest.split(",")] if rest else []
        reads = operands if NO_DEST.match(opcode) else operands[1:]
        used = set().union(*(_registers(o) for o in reads)) if reads else set()
        jump = opcode.startswith("BRA")
        target = TARGET.search(rest) if jump else None
        backward = jump and (target is None or int(target[1], 16) <= addr)
        ends = opcode.startswith(("BAR", "EXIT", "RET", "CALL"))
        if pending & used or ends or backward:
            pending, count = set(), 0
        if GLOBAL_LOAD.match(opcode) and operands:
            first = _registers(operands[0])
            width = WIDTH.search(opcode)
            words = {"64": 2, "128": 4}.get(width[1], 1) if width else 1
            pending |= {r + w for r in first for w in range(words)}
            count += 1
            best = max(best, count)
    return best


def callees(instructions: Code) -> list[Code]:
    """The code of each function a kernel calls (the targets of its ``CALL.REL``): ptxas lays a
    kernel's ``__noinline__`` callees out after the kernel's own code, one after the other, so each
    runs from its target address to the next target (the last to the end of the listing)."""
    targets = sorted(
        {
            int(m[1], 16)
            for _, _, text in instructions
            if text.startswith("CALL.REL") and (m := TARGET.search(text.partition(" ")[2]))
        }
    )
    ends = [*targets[1:], None] if targets else []
    return [
        [ins for ins in instructions if start <= ins[0] and (end is None or ins[0] < end)]
        for start, end in zip(targets, ends, strict=True)
    ]


def innermost_loops(instructions: Code) -> list[Code]:
    """The bodies of the loops that hold no other loop: from the target of a backward branch to
    the branch, where no other backward branch lies in between."""
    backs = []
    for addr, _predicated, text in instructions:
        if text.startswith("BRA") and (m := TARGET.search(text.partition(" ")[2])) and int(m[1], 16) <= addr:
            backs.append((int(m[1], 16), addr))
    return [
        [ins for ins in instructions if start <= ins[0] <= end]
        for start, end in backs
        if not any((s, e) != (start, end) and start <= s and e <= end for s, e in backs)
    ]


def key_at_a_time_scans(instructions: Code) -> list[Code]:
    """Innermost loops that scan shared memory (no global load) with a warp vote or match, one
    scalar shared load at a time: no ``LDS.128``."""
    out = []
    for loop in innermost_loops(instructions):
        ops = [t.split()[0] for _, _, t in loop]
        if (
            any(SHARED_LOAD.match(o) for o in ops)
            and any(WARP_VOTE.match(o) for o in ops)
            and not any(GLOBAL_LOAD.match(o) for o in ops)
            and not any(WIDE_SHARED_LOAD.match(o) for o in ops)
        ):
            out.append(loop)
    return out


@dataclasses.dataclass
class CountingLoop:
    """An innermost loop that holds shared-memory atomics, by the classes of its instructions."""

    start: int  # its first instruction's address
    instructions: int
    atomics: int  # ATOMS: one per key counted
    votes: int  # VOTE and MATCH
    matches: int
    loads: int  # global (LDG) and shared (LDS) loads
    stores: int  # shared (STS) and global (STG) stores
    control: int  # BRA, BSSY, BSYNC, WARPSYNC

    @property
    def per_key(self) -> float:
        return self.instructions / self.atomics

    def __str__(self):
        return (
            f"loop at {self.start:#x}: {self.instructions} instructions, {self.atomics} shared atomics: "
            f"{self.per_key:.1f} per key (of which per key: {self.votes / self.atomics:.2f} votes/matches, "
            f"{self.matches / self.atomics:.2f} matches, {self.loads / self.atomics:.2f} loads, "
            f"{self.stores / self.atomics:.2f} stores, {self.control / self.atomics:.2f} branches and syncs)"
        )


def counting_loops(instructions: Code) -> list[CountingLoop]:
    """The innermost loops that hold shared-memory atomics (``ATOMS``, not a compare-and-swap), in
    address order: a histogram's counting loops, whose instructions per atomic are the
    instructions a warp issues per key counted (counted statically: the whole body once)."""
    out = []
    for loop in innermost_loops(instructions):
        ops = [t.split()[0] for _, _, t in loop]
        atomics = sum(bool(SHARED_ATOMIC.match(o)) and not CAS_LOOP.search(o) for o in ops)
        if atomics:
            out.append(
                CountingLoop(
                    start=loop[0][0],
                    instructions=len(loop),
                    atomics=atomics,
                    votes=sum(bool(WARP_VOTE.match(o)) for o in ops),
                    matches=sum(bool(WARP_MATCH.match(o)) for o in ops),
                    loads=sum(o.startswith(("LDG", "LDS")) for o in ops),
                    stores=sum(o.startswith(("STS", "STG")) for o in ops),
                    control=sum(o.startswith(("BRA", "BSSY", "BSYNC", "WARPSYNC")) for o in ops),
                )
            )
    return sorted(out, key=lambda c: c.start)


def held_counting_loop(instructions: Code) -> CountingLoop | None:
    """The count of a row held in shared memory (block_row's first digit, kernels/block_row.cu
    ``count_chunks``): the first counting loop, in address order, that reads shared memory 16 bytes
    at a time (``LDS.128``) and global memory not at all. None where no loop is such. The streaming
    loader's count (global loads) comes before it, the refine passes' counts after it."""
    for loop in sorted(innermost_loops(instructions), key=lambda body: body[0][0]):
        ops = [t.split()[0] for _, _, t in loop]
        if any(WIDE_SHARED_LOAD.match(o) for o in ops) and not any(GLOBAL_LOAD.match(o) for o in ops):
            counted = counting_loops(loop)  # the loop itself, where it holds shared atomics
            if counted:
                return counted[0]
    return None


def streaming_loop(instructions: Code) -> Code | None:
    """The code of the one callee of a kernel that issues 128-bit global loads: the marker by which
    the SASS shows the streaming filter (kernels/multiblock.cu keeps ``filter_slice`` out of line
    with ``__noinline__``, and the one other callee, ``flush_stage``, loads scalars). None when
    no callee, or more than one, loads 128 bits: the filter was inlined, or the marker is gone."""
    loops = [c for c in callees(instructions) if any(WIDE_LOAD.search(t) for _, _, t in c)]
    return loops[0] if len(loops) == 1 else None


@dataclasses.dataclass
class Finding:
    arch: str
    name: str
    problem: str

    def __str__(self):
        return f"{self.name} ({self.arch}): {self.problem}"


def check(
    functions: dict[tuple[str, str], list[str]],
    streaming=STREAMING,
    sampled=SAMPLED,
    min_loads: int = 4,
    filtered=FILTERED,
    on_chip=ON_CHIP,
    selection=SELECTION,
    async_copy=ASYNC_COPY,
    ringed=RINGED,
    async_copy_sm90=ASYNC_COPY_SM90,
    counting_reference: dict[str, float] | None = None,
) -> list[Finding]:
    found = []
    budget = flashinfer_counting() if counting_reference is None else counting_reference
    for (arch, name), code in sorted(functions.items()):
        if selection.search(name):
            matches = [(a, t) for a, _, t in code if WARP_MATCH.match(t)]
            if matches:
                found.append(
                    Finding(
                        arch,
                        name,
                        f"{len(matches)} warp match(es) ({matches[0][1]} at {matches[0][0]:#x}): count with a "
                        "plain shared atomicAdd (built with CUTOPK_COUNT_WITH_MATCH?)",
                    )
                )
        cas = [t for _, _, t in code if CAS_LOOP.search(t)]
        if cas:
            found.append(Finding(arch, name, f"compare-and-swap loop in shared memory ({cas[0]})"))
        if streaming.search(name) and not any(WIDE_LOAD.search(t) for _, _, t in code):
            found.append(Finding(arch, name, "no 128-bit global load (LDG.E.128) for contiguous rows"))
        if streaming.search(name) or sampled.search(name):
            flight = loads_in_flight(code)
            if flight < min_loads:
                found.append(
                    Finding(
                        arch, name, f"at most {flight} global loads in flight before a use (want {min_loads})"
                    )
                )
        if filtered.search(name):
            found += _filter_findings(arch, name, code, min_loads)
        if (
            (async_copy.search(name) and _arch_number(arch) >= 80)
            or (async_copy_sm90.search(name) and _arch_number(arch) >= 90)
        ) and not any(ASYNC_COPY_OP.match(t) for _, _, t in code):
            found.append(
                Finding(arch, name, "no asynchronous copy (LDGSTS, cp.async) of the row into shared memory")
            )
        if ringed.search(name):
            found += _ring_findings(arch, name, code)
        if (m := HELD_COUNT.match(name)) and arch == "sm_90" and (m[1] or m[2]) in budget:
            dtype = m[1] or m[2]
            loop = held_counting_loop(code)
            if loop is None or round(loop.per_key, 1) > budget[dtype]:
                found.append(
                    Finding(
                        arch,
                        name,
                        f"its count of the held row costs more per key than FlashInfer's {budget[dtype]} "
                        f"({loop or 'no such loop'}; {FLASHINFER_COUNTING.relative_to(ROOT)})",
                    )
                )
        if on_chip.search(name):
            for loop in key_at_a_time_scans(code):
                found.append(
                    Finding(
                        arch,
                        name,
                        f"a scan of the held keys at {loop[0][0]:#x} reads one key per thread and step "
                        "with a warp vote or match per key (want 16-byte LDS.128 vectors)",
                    )
                )
    return found


def _arch_number(arch: str) -> int:
    """80 for "sm_80" (0 where the name says no number)."""
    digits = re.sub(r"\D", "", arch)
    return int(digits) if digits else 0


def loops(instructions: Code) -> list[tuple[int, int]]:
    """Every loop, nested or not, as (first, last) addresses: the target of a backward branch and
    the branch (a cold block that branches back into a loop counts too: it only widens the set)."""
    out = []
    for addr, _predicated, text in instructions:
        if text.startswith("BRA") and (m := TARGET.search(text.partition(" ")[2])) and int(m[1], 16) <= addr:
            out.append((int(m[1], 16), addr))
    return out


def ring_loops(instructions: Code) -> list[Code]:
    """The loops that issue asynchronous copies (``LDGSTS``) and hold no other loop that does: a
    ring's tile loop. Minimal among such loops, so that an outer loop (or a cold block branching
    back) around the ring and the code after it is not taken for the ring itself."""
    copies = [a for a, _, t in instructions if ASYNC_COPY_OP.match(t)]
    spans = [(s, e) for s, e in loops(instructions) if any(s <= a <= e for a in copies)]
    minimal = [
        (s, e) for s, e in spans if not any((s2, e2) != (s, e) and s <= s2 and e2 <= e for s2, e2 in spans)
    ]
    return [[ins for ins in instructions if s <= ins[0] <= e] for s, e in minimal]


def _ring_findings(arch: str, name: str, code: Code) -> list[Finding]:
    out = []
    rings = ring_loops(code)
    for loop in rings:
        bad = [t.split()[0] for _, _, t in loop if PER_KEY_OP.match(t)]
        if bad:
            out.append(
                Finding(
                    arch, name, f"an atomic or warp match in the ring's loop ({bad[0]} at {loop[0][0]:#x})"
                )
            )
    if _arch_number(arch) >= 80 and not rings:
        out.append(Finding(arch, name, "no loop issues asynchronous copies (LDGSTS): the ring is gone"))
    return out


def _filter_findings(arch: str, name: str, code: Code, min_loads: int) -> list[Finding]:
    loop = streaming_loop(code)
    if loop is None:
        return [
            Finding(arch, name, "no out-of-line streaming filter (one callee with 128-bit loads) to check")
        ]
    out = []
    ops = [t for _, _, t in loop if HISTOGRAM_OP.match(t)]
    if ops:
        out.append(
            Finding(arch, name, f"shared-memory atomic or warp match in the streaming filter ({ops[0]})")
        )
    flight = loads_in_flight(loop)
    if flight < min_loads:
        out.append(
            Finding(
                arch,
                name,
                f"the streaming filter has at most {flight} global loads in flight (want {min_loads})",
            )
        )
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("object")
    parser.add_argument("--min-loads", type=int, default=4)
    parser.add_argument(
        "--counting",
        action="store_true",
        help="print the counting loops' instructions per key; check nothing",
    )
    parser.add_argument(
        "--kernel", default="", help="with --counting: the kernels whose name matches this regex"
    )
    args = parser.parse_args(argv)
    functions = disassemble(args.object)
    if args.counting:
        for (arch, name), code in sorted(functions.items()):
            if re.search(args.kernel, name):
                for loop in counting_loops(code):
                    print(f"{name} ({arch}): {loop}")
        return 0
    findings = check(functions, min_loads=args.min_loads)
    for f in findings:
        print(f"FAILED: {f}", file=sys.stderr)
    print(f"SASS check: {len(functions)} kernel builds, {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
