"""Irregular batches: top_k with lengths, segmented_top_k and merge_top_k against the peer routes.

    python benchmarks/irregular.py [--backend numpy|cuda] [--repeat 9] [--seed 0] [--save DIR]
        [--indexer 64x32768:2048,8x8192:256] [--segments 10000] [--merge 8x16x32000:50]

Three regimes. Every route runs once on the same input and its answer is checked against an
exact reference made once per case (a stable argsort of each row's valid elements, NumPy, on the
host); a wrong answer stops the run with ``Mismatch``. Then the routes take turns within each
repetition, so that the machine's drift hits them alike; medians (min, max) of ``--repeat``.

- **indexer** (sparse-attention indexer, causal): ``rows`` queries x ``N`` keys float32 (standard
  normal), K largest, ``lengths[r] = (r + 1) * N // rows``: row r takes its first ``lengths[r]``
  keys. ``lengths``: ``cutopk.top_k(x, K, lengths=L)`` (exact; rows shorter than K end in padding,
  index -1, value 0). ``mask+torch``: ``torch.topk(torch.where(col < L[:, None], x, -inf), K)``,
  the mask built inside the timed call as a user would; ``mask+top_k``: ``cutopk.top_k`` on the
  same -inf masked copy (NumPy/CuPy ``where``); ``mask`` and ``mask (torch)``: the masks alone.
  The masked routes are peer routes, not equivalents: on rows shorter than K they return -inf
  fillers with arbitrary indices (cutopk's are the lowest positions past the length), so they are
  checked on the rows with ``lengths[r] >= K`` only; torch breaks ties arbitrarily, so its indices
  are compared with the reference's as sets (the same set, up to the choice among values tied at
  the K-th place; every index inside the row's length, none twice, each pointing at its value).
  ``cutopk.top_k`` on the masked copy is compared exactly. What ``lengths`` costs depends on the
  backend, and the plan's ``rows:`` line (printed, and in the saved file) says which route ran:
  on the NumPy backend it is a masked copy of the rows cut to the longest length rounded up to a
  power of two, then one ``top_k`` on the copy (cutopk/_core/lengths.py), so there it times a copy
  like the peers' plus the selection, but its fill is the least preferred value of the request
  (NaN for the largest with ``nan="last"``, where the peers' -inf would lose to a real NaN),
  which the NumPy selection handles more slowly than -inf; on the CUDA backend the kernels of the families that read
  row extents read the lengths themselves (no copy), on rows planned as long as the longest
  length rounded up to a power of two; other families take the masked copy.
- **CSR kNN**: S segments of lognormal lengths (median ~100, a long tail, at most 20000),
  float32 distances in [0, 1), K=10 smallest. ``segmented``: ``segmented_top_k`` (exact; on CUDA
  one launch sequence over every segment, the offsets passed as a NumPy array since they are read
  on the host); ``pad+top_k``: the segments scattered into an (S, longest) matrix filled with
  +inf (segment ids by ``np.repeat``, or by ``searchsorted`` of the offsets on CuPy, inside the
  timed call), then ``cutopk.top_k`` (mode smallest); ``pad+torch``: the same padded matrix and
  ``torch.topk(largest=False)``; ``pad``: the padding alone. Checked like the indexer's peers on
  the segments of at least K elements.
- **sharded merge**: 8 shards of 16 x 32000 float32 (a vocabulary split over 8 devices), K=50.
  ``merge``: ``merge_top_k`` of the shards' top-K results (the merge alone, as on the device
  that gathers them); ``shards+merge``: the 8 shard ``top_k`` calls and the merge;
  ``concat+top_k``: concatenation of the shards and one ``top_k``; ``top_k(whole)``: ``top_k`` on
  an already whole array. All exact, all compared exactly.

``--backend numpy`` (default): NumPy arrays, cutopk's NumPy backend and torch on the CPU, both
on one thread (``cutopk.set_num_threads(1)``, ``torch.set_num_threads(1)``), timed by the wall
clock (``time.perf_counter``).

``--backend cuda``: CuPy arrays and torch CUDA tensors (zero-copy views of them), timed one call
at a time by ``cutopk._demo.timing.GpuTimer`` (CUDA events; the L2 cache flushed and a 1 ms spin
kernel queued before each call, so the events time the device; host work beyond the spin is
counted). For cutopk's routes the table also gives the bytes the route must at least read and
write over its time, as a fraction of the device-to-device copy bandwidth measured at the start.
With CuPy lengths, ``top_k(lengths=)`` reads back one boolean (its range check): its time includes
that synchronisation and the host's launches after it. The CUB peer ``mask+cub``
(``cub::DeviceBatchedTopK`` for rows up to its limit, else ``DeviceTopK`` per row; through
``cutopk_bench.cub``, unordered output, checked like torch's) runs on the indexer's masked rows
when the shim is built (``python benchmarks/cub/build.py``); CUB's per-segment-size
``DeviceBatchedTopK`` (segments of their own lengths) is not wrapped by the shim, so the kNN
regime has no CUB route. Nothing of the CUDA path imports unless ``--backend cuda`` is asked.

``--save DIR`` writes ``DIR/<date>-<cpu|device>-irregular.md``: the tables with the machine, the
load average (CPU), the versions, the date, the commit and the command.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import pathlib
import re
import shlex
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout, no install

import cutopk
from cutopk._demo import env


class Mismatch(AssertionError):
    """A route's answer differs from the reference."""


@dataclasses.dataclass
class Route:
    """One timed call: ``fn`` returns ``(values, indices)`` (or an array for a part of a route);
    ``check`` raises Mismatch on a wrong answer (None: nothing to check, e.g. a mask alone);
    ``bytes`` is what the route must at least read and write (for the bandwidth column)."""

    name: str
    what: str
    fn: Callable
    check: Callable | None = None
    bytes: int | None = None


@dataclasses.dataclass
class Backend:
    name: str
    xp: object
    once: Callable  # runs fn once, returns its time in seconds
    host: Callable  # an array of this backend (or a torch tensor) as a NumPy array
    torch: object = None  # the torch module, or None
    to_torch: Callable | None = None
    bandwidth: float | None = None  # device-to-device copy bytes per second
    cub: object = None  # the loaded CUB shim, or None
    cub_why: str | None = None
    facts: dict = dataclasses.field(default_factory=dict)


# --- backends ---------------------------------------------------------------------------------


def _torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    return torch


def numpy_backend() -> Backend:
    cutopk.set_num_threads(1)
    torch = _torch_or_none()
    if torch is not None:
        torch.set_num_threads(1)

    def once(fn):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    def host(a):
        return a.numpy() if torch is not None and isinstance(a, torch.Tensor) else np.asarray(a)

    return Backend("numpy", np, once, host, torch, torch.from_numpy if torch is not None else None)


def cuda_backend() -> Backend:
    import cupy
    from cutopk_bench import cub

    from cutopk._demo import timing

    timer = timing.GpuTimer(repeat=1, warmup=0, min_repeat=1)  # one call per sample: routes take turns
    torch = _torch_or_none()
    if torch is not None and not torch.cuda.is_available():
        torch = None

    def host(a):
        if torch is not None and isinstance(a, torch.Tensor):
            return a.cpu().numpy()
        return cupy.asnumpy(a)

    lib, why = cub.available(cub.arch_of(cupy.cuda.Device().compute_capability))
    return Backend(
        "cuda",
        cupy,
        lambda fn: timer(fn)["median"],
        host,
        torch,
        torch.from_dlpack if torch is not None else None,
        bandwidth=timer.copy_bandwidth(),
        cub=lib,
        cub_why=why,
        facts=env.device_record(),
    )


# --- reference and checks ---------------------------------------------------------------------


def reference(rows, k: int, largest: bool):
    """Exact top-K of each 1-D array in ``rows``: values and indices (int64) of shape
    (len(rows), k), in order, ties to the lower index, a row shorter than K ending in padding
    (index -1, value 0). A stable argsort per row, independent of cutopk."""
    vals = np.zeros((len(rows), k), dtype=np.float32)
    idx = np.full((len(rows), k), -1, dtype=np.int64)
    for r, row in enumerate(rows):
        order = np.argsort(-row if largest else row, kind="stable")[:k]
        vals[r, : order.size] = row[order]
        idx[r, : order.size] = order
    return vals, idx


def _bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def exact(be: Backend, ref, where: np.ndarray | None = None):
    """A check: values (bit for bit) and indices equal to the reference's, on the rows ``where``
    (all rows when None)."""
    ref_v, ref_i = ref

    def check(name, got):
        v, i = be.host(got[0]), be.host(got[1])
        sel = slice(None) if where is None else where
        if v.shape != ref_v.shape or i.shape != ref_i.shape:
            raise Mismatch(f"{name}: shapes {v.shape}, {i.shape}, expected {ref_v.shape}")
        same = (_bits(v) == _bits(ref_v)) & (i == ref_i)
        if not same[sel].all():
            rows = np.flatnonzero(~same.all(axis=1) & (True if where is None else where))
            raise Mismatch(f"{name}: differs from the reference in rows {rows[:5].tolist()}")

    return check


def same_set(be: Backend, rows, lengths: np.ndarray, ref, where: np.ndarray, ordered: bool):
    """A check for the routes that break ties arbitrarily (torch, CUB): on the rows ``where``,
    every index inside the row's length and none twice, each value the one at its index, the
    values the reference's as a multiset (in order when ``ordered``). So the index sets are the
    reference's, up to the choice among values tied at the K-th place."""
    ref_v = ref[0][where]
    picked = np.flatnonzero(where)

    def check(name, got):
        v, i = be.host(got[0])[where], be.host(got[1])[where]
        inside = (i >= 0) & (i < lengths[where][:, None])
        if not inside.all():
            raise Mismatch(
                f"{name}: an index outside its row's length (row {picked[np.argmin(inside.all(1))]})"
            )
        if (np.diff(np.sort(i, axis=1), axis=1) == 0).any():
            raise Mismatch(f"{name}: an index appears twice in a row")
        at = np.stack([rows[r][i[j]] for j, r in enumerate(picked)]) if len(picked) else v
        if not np.array_equal(_bits(at), _bits(v)):
            raise Mismatch(f"{name}: a value is not the input's value at its index")
        if ordered and not np.array_equal(_bits(v), _bits(ref_v)):
            raise Mismatch(f"{name}: values differ from the reference's (in order)")
        if not np.array_equal(_bits(np.sort(v, axis=1)), _bits(np.sort(ref_v, axis=1))):
            raise Mismatch(f"{name}: the selected values differ from the reference's")

    return check


# --- timing and reporting ---------------------------------------------------------------------


def measure(be: Backend, routes: list[Route], repeat: int) -> list[dict]:
    """Check every route once (also its warm-up), one more warm-up call, then ``repeat`` turns."""
    for r in routes:
        out = r.fn()
        if r.check is not None:
            r.check(r.name, out)
        r.fn()
    times = {r.name: [] for r in routes}
    for _ in range(repeat):
        for r in routes:
            times[r.name].append(be.once(r.fn))
    base = statistics.median(times[routes[0].name])
    rows = []
    for r in routes:
        t = times[r.name]
        med = statistics.median(t)
        row = {
            "route": r.name,
            "what": r.what,
            "median": med,
            "min": min(t),
            "max": max(t),
            "ratio": med / base,
        }
        row["checked"] = "-" if r.check is None else "yes"
        if be.bandwidth and r.bytes:
            row["bw"] = r.bytes / med / be.bandwidth
        rows.append(row)
    return rows


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f}" if s < 0.01 else f"{s * 1e3:.2f}" if s < 1 else f"{s * 1e3:.0f}"


def table(rows: list[dict], markdown: bool) -> list[str]:
    base = rows[0]["route"]
    bw = any("bw" in r for r in rows)
    if markdown:
        head = ["route", "what is timed", "median ms", "min", "max", f"/ {base}", "checked"]
        head += ["% copy bandwidth"] if bw else []
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in rows:
            cells = [f"`{r['route']}`", r["what"], _ms(r["median"]), _ms(r["min"]), _ms(r["max"])]
            cells += [f"{r['ratio']:.2f}x", r["checked"]]
            cells += [f"{100 * r['bw']:.0f}%" if "bw" in r else ""] if bw else []
            out.append("| " + " | ".join(cells) + " |")
        return out
    out = []
    for r in rows:
        line = f"  {r['route']:14s} {_ms(r['median']):>9s} ms  (min {_ms(r['min'])}, max {_ms(r['max'])})"
        line += f"  {r['ratio']:6.2f}x {base}"
        line += f"  {100 * r['bw']:4.0f}% of copy bandwidth" if "bw" in r else ""
        out.append(line)
    return out


@dataclasses.dataclass
class Section:
    title: str
    rows: list[dict]
    notes: list[str]


def show(section: Section) -> Section:
    print(section.title)
    for note in section.notes:
        print(f"  {note}")
    print("\n".join(table(section.rows, markdown=False)), flush=True)
    return section


# --- regimes ----------------------------------------------------------------------------------


def _plan_line(x, k: int, lengths) -> str:
    p = str(cutopk.plan(x, k, lengths=lengths))
    first = p.splitlines()[0].replace("cutopk plan: ", "")
    rows = next((ln.strip() for ln in p.splitlines() if ln.strip().startswith("rows:")), "rows: (none)")
    return f"plan of `lengths`: {first}; {rows}"


def indexer(be: Backend, rng, rows: int, n: int, k: int, repeat: int) -> Section:
    xp, torch = be.xp, be.torch
    x_host = rng.standard_normal((rows, n), dtype=np.float32)
    lengths = (np.arange(rows, dtype=np.int64) + 1) * n // rows
    host_rows = [x_host[r, : lengths[r]] for r in range(rows)]
    ref = reference(host_rows, k, largest=True)
    full = lengths >= k
    x, lens = xp.asarray(x_host), xp.asarray(lengths)
    neg_inf = xp.full((), -np.inf, dtype=np.float32)

    def mask():
        return xp.where(xp.arange(n) < lens[:, None], x, neg_inf)

    assert mask().dtype == np.float32
    out_bytes = rows * k * (4 + 8)
    routes = [
        Route(
            "lengths",
            "`cutopk.top_k(x, K, lengths=L)`",
            lambda: cutopk.top_k(x, k, lengths=lens),
            exact(be, ref),
            int(lengths.sum()) * 4 + rows * 8 + out_bytes,
        ),
        Route(
            "mask+top_k",
            "`cutopk.top_k` of the -inf masked copy (mask included)",
            lambda: cutopk.top_k(mask(), k),
            exact(be, ref, full),
            3 * rows * n * 4 + rows * 8 + out_bytes,
        ),
        Route("mask", f"the mask alone (`{xp.__name__}.where`)", mask),
    ]
    if torch is not None:
        xt, lt = be.to_torch(x), be.to_torch(lens)

        def tmask():
            return torch.where(torch.arange(n, device=xt.device) < lt[:, None], xt, float("-inf"))

        routes.insert(
            1,
            Route(
                "mask+torch",
                "`torch.topk` of the -inf masked rows (mask included)",
                lambda: torch.topk(tmask(), k),
                same_set(be, host_rows, lengths, ref, full, True),
            ),
        )
        routes.append(Route("mask (torch)", "the mask alone (`torch.where`)", tmask))
    notes = [_plan_line(x, k, lens)]
    if be.name == "cuda":
        if be.cub is not None:
            from cutopk_bench import cub

            probe = cub.route(mask(), 1, k, "largest", "float32", be.cub)
            if probe.call is None:
                notes.append(f"mask+cub: skipped ({probe.reason})")
            else:
                routes.insert(
                    2,
                    Route(
                        "mask+cub",
                        f"CUB on the -inf masked rows ({probe.detail}; unordered; mask included)",
                        lambda: cub.route(mask(), 1, k, "largest", "float32", be.cub).call(),
                        same_set(be, host_rows, lengths, ref, full, False),
                    ),
                )
        else:
            notes.append(f"mask+cub: skipped ({be.cub_why})")
    if torch is None:
        notes.append("torch: not installed (or without CUDA), its routes skipped")
    short = int((~full).sum())
    notes.append(
        f"{short} of {rows} rows are shorter than K: the masked routes are checked on the other {rows - short}"
    )
    title = (
        f"indexer: {rows} x {n} float32, causal lengths (r + 1) * {n} // {rows} "
        f"(from {lengths[0]} to {lengths[-1]}), K={k} largest"
    )
    return show(Section(title, measure(be, routes, repeat), notes))


def csr_knn(be: Backend, rng, segments: int, repeat: int) -> Section:
    xp, torch = be.xp, be.torch
    k = 10
    lengths = np.minimum(rng.lognormal(np.log(100), 1.0, segments).astype(np.int64), 20000)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    data_host = rng.random(int(offsets[-1]), dtype=np.float32)
    longest, total = int(lengths.max()), data_host.size
    host_rows = [data_host[offsets[s] : offsets[s + 1]] for s in range(segments)]
    ref = reference(host_rows, k, largest=False)
    full = lengths >= k
    data, off = xp.asarray(data_host), xp.asarray(offsets)

    def pad():
        padded = xp.full((segments, longest), np.inf, dtype=np.float32)
        if xp is np:
            seg = np.repeat(np.arange(segments), lengths)
        else:  # CuPy's repeat takes no array of counts
            seg = xp.searchsorted(off[1:], xp.arange(total), side="right")
        padded[seg, xp.arange(total) - off[seg]] = data
        return padded

    out_bytes = segments * k * (4 + 8)
    routes = [
        Route(
            "segmented",
            "`cutopk.segmented_top_k(data, offsets, K, mode='smallest')`",
            lambda: cutopk.segmented_top_k(data, offsets, k, mode="smallest"),
            exact(be, ref),
            total * 4 + (segments + 1) * 8 + out_bytes,
        ),
        Route(
            "pad+top_k",
            "the +inf padded matrix, then `cutopk.top_k(mode='smallest')`",
            lambda: cutopk.top_k(pad(), k, mode="smallest"),
            exact(be, ref, full),
            total * 4 + 2 * segments * longest * 4 + out_bytes,
        ),
        Route("pad", f"the padding alone (`{xp.__name__}` full + scatter)", pad),
    ]
    if torch is not None:
        routes.insert(
            2,
            Route(
                "pad+torch",
                "the padded matrix, then `torch.topk(largest=False)`",
                lambda: torch.topk(be.to_torch(pad()), k, dim=1, largest=False),
                same_set(be, host_rows, lengths, ref, full, True),
            ),
        )
    title = (
        f"CSR kNN: {segments} segments, lognormal lengths (median {int(np.median(lengths))}, max {longest}, "
        f"total {total}), float32, K={k} smallest"
    )
    notes = [f"{int((~full).sum())} segments are shorter than K: the padded routes are checked on the others"]
    return show(Section(title, measure(be, routes, repeat), notes))


def sharded_merge(be: Backend, rng, shards: int, rows: int, width: int, k: int, repeat: int) -> Section:
    xp = be.xp
    logits_host = [rng.standard_normal((rows, width), dtype=np.float32) for _ in range(shards)]
    whole_host = np.concatenate(logits_host, axis=1)
    ref = reference(list(whole_host), k, largest=True)
    logits = [xp.asarray(a) for a in logits_host]
    whole = xp.asarray(whole_host)

    def shard_tops():
        return [
            (top.values, top.indices + s * width)
            for s, top in enumerate(cutopk.top_k(x, k, sorted=False) for x in logits)
        ]

    parts = shard_tops()
    out_bytes = rows * k * 12
    check = exact(be, ref)
    routes = [
        Route(
            "merge",
            f"`merge_top_k` of the {shards} shards' top-K (the merge alone)",
            lambda: cutopk.merge_top_k(parts, k),
            check,
            shards * out_bytes + out_bytes,
        ),
        Route(
            "shards+merge",
            f"{shards} shard `top_k` calls + `merge_top_k`",
            lambda: cutopk.merge_top_k(shard_tops(), k),
            check,
            whole_host.nbytes + 2 * shards * out_bytes + out_bytes,
        ),
        Route(
            "concat+top_k",
            "concatenation of the shards + one `top_k`",
            lambda: cutopk.top_k(xp.concatenate(logits, axis=1), k),
            check,
            3 * whole_host.nbytes + out_bytes,
        ),
        Route(
            "top_k(whole)",
            f"`top_k` on an already whole {rows} x {shards * width} array",
            lambda: cutopk.top_k(whole, k),
            check,
            whole_host.nbytes + out_bytes,
        ),
    ]
    title = f"sharded merge: {shards} shards of {rows} x {width} float32, K={k}"
    return show(Section(title, measure(be, routes, repeat), []))


# --- the run ----------------------------------------------------------------------------------


def _case(text: str, parts: int) -> tuple[int, ...]:
    m = re.fullmatch(r"(\d+(?:x\d+)*):(\d+)", text.strip())
    if not m or m.group(1).count("x") != parts - 2:
        raise ValueError(text)
    return tuple(int(v) for v in (*m.group(1).split("x"), m.group(2)))


def machine(be: Backend, load: tuple[float, float, float]) -> list[str]:
    meta = env.metadata(gpu=False)
    lines = [
        f"- date: {meta['date']}; commit {meta['git_commit'] or 'unknown'}"
        + (" (with uncommitted changes)" if meta["git_dirty"] else ""),
        f"- command: `{' '.join(shlex.quote(a) for a in ['python', *sys.argv])}`",
        f"- machine: {meta['cpu']}, {meta['cpu_count']} CPUs; load average before the run "
        + ", ".join(f"{v:.2f}" for v in load)
        + ", after "
        + ", ".join(f"{v:.2f}" for v in os.getloadavg()),
        f"- versions: cutopk {meta['cutopk']}, Python {meta['python']}, NumPy {meta['numpy']}, "
        f"torch {meta['torch'] or 'not installed'}" + (f", CuPy {meta['cupy']}" if be.name == "cuda" else ""),
    ]
    if be.name == "cuda":
        f = be.facts
        lines.append(
            f"- GPU: {f['device']} (compute capability {f['compute_capability']}, {f['sm_count']} SMs, "
            f"L2 {f['l2_bytes']} bytes), driver {f['driver']}, CUDA runtime {f['cuda_runtime']}; "
            f"copy bandwidth {be.bandwidth / 1e9:.0f} GB/s (read + write)"
        )
        lines.append(f"- CUB: {f'{be.cub.version} ({be.cub.path.name})' if be.cub else be.cub_why}")
        lines.append(
            "- timed by CUDA events, one call per sample (L2 flushed, 1 ms spin kernel queued first); "
            "routes take turns in each repetition"
        )
    else:
        lines.append(
            "- backend numpy: cutopk's NumPy backend and torch on the CPU, both on one thread; wall clock "
            "(`time.perf_counter`), routes taking turns in each repetition. "
            "**CPU figures only: nothing here ran on a GPU.**"
        )
    return lines


def write(path: pathlib.Path, be: Backend, sections: list[Section], repeat: int, load) -> None:
    lines = ["# Irregular batches (benchmarks/irregular.py)", "", *machine(be, load), ""]
    lines.append(
        f"Medians (min, max) of {repeat} repetitions in ms; `/ base` is the route's median over the first "
        "route's; `checked`: the answer was compared with an exact reference before timing (`-`: a part of a "
        "route, nothing to check)."
    )
    for s in sections:
        lines += ["", f"## {s.title}", "", *table(s.rows, markdown=True)]
        lines += [""] + [f"- {note}" for note in s.notes] if s.notes else []
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("numpy", "cuda"), default="numpy")
    p.add_argument("--repeat", type=int, default=9, help="turns of every route (median reported; default 9)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--indexer", default="64x32768:2048,8x8192:256", help="ROWSxN:K cases, comma-separated")
    p.add_argument("--segments", type=int, default=10000, help="CSR kNN: the number of segments")
    p.add_argument("--merge", default="8x16x32000:50", help="sharded merge: SHARDSxROWSxWIDTH:K")
    p.add_argument("--save", metavar="DIR", help="also write the tables as markdown into DIR")
    args = p.parse_args(argv)
    try:
        cases = [_case(c, 3) for c in args.indexer.split(",")]
        merge = _case(args.merge, 4)
    except ValueError as exc:
        p.error(f"--indexer ROWSxN:K[,...] / --merge SHARDSxROWSxWIDTH:K: cannot read {exc}")
    if args.repeat < 1 or args.segments < 1 or any(v < 1 for v in (*merge, *sum(cases, ()))):
        p.error("--repeat, --segments and every size must be at least 1")
    if any(k > n for _, n, k in cases) or merge[3] > merge[2]:
        p.error("K must not exceed N (indexer) or the shard width (merge)")
    if args.save and (why := env.unwritable(pathlib.Path(args.save))):
        p.error(f"--save: {why}")
    if args.backend == "cuda" and (why := env.gpu_unavailable()):
        p.error(f"--backend cuda: {why}")
    load = os.getloadavg()
    be = cuda_backend() if args.backend == "cuda" else numpy_backend()
    print(
        f"backend {be.name}, median of {args.repeat}" + (" (one thread, CPU)" if be.name == "numpy" else "")
    )
    rng = np.random.default_rng(args.seed)
    sections = [indexer(be, rng, rows, n, k, args.repeat) for rows, n, k in cases]
    sections.append(csr_knn(be, rng, args.segments, args.repeat))
    sections.append(sharded_merge(be, rng, *merge, args.repeat))
    if args.save:
        date = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
        device = (
            "cpu" if be.name == "numpy" else re.sub(r"[^a-z0-9]+", "-", be.facts["device"].lower()).strip("-")
        )
        path = pathlib.Path(args.save) / f"{date}-{device}-irregular.md"
        write(path, be, sections, args.repeat, load)
        print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
