"""The demo's command line (``python -m cutopk [options]``, and ``benchmarks/run.py`` with the
benchmark's kit): every option checked before anything is measured, then :func:`loop.run`."""

from __future__ import annotations

import argparse
import pathlib
import sys
import textwrap

import numpy as np

from . import baselines, env, grid, loop, timing

REGIME_NAMES = loop.REGIME_NAMES


def _positive(kind):
    """An argparse type: a number of ``kind`` greater than zero."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun} greater than 0, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected {noun} greater than 0, got {text}")
        return value

    noun = {int: "an integer", float: "a number"}[kind]
    parse.__name__ = f"positive {kind.__name__}"
    return parse


def _folder(text: str) -> pathlib.Path:
    """An argparse type: a folder path, not empty (``pathlib.Path("")`` is the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a folder, got an empty path {text!r}")
    return pathlib.Path(text)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's, without breaking lines inside hyphenated words (paths such as ./cutopk-results/)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def parser(prog: str = "python -m cutopk", kit: loop.Kit = loop.DEMO) -> argparse.ArgumentParser:
    peers = ", ".join(dict.fromkeys((*kit.peer_names(True), *kit.peer_names(False))))
    p = argparse.ArgumentParser(
        prog=prog,
        description=f"cutopk side by side with {peers}, every answer checked "
        "(python -m cutopk tune: this GPU's dispatch table)",
        formatter_class=_HelpFormatter,
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="the quick grid (default): a tour of every regime")
    size.add_argument("--full", action="store_true", help="the full grid (many minutes on a GPU)")
    p.add_argument("--regime", action="append", help="only these regimes (repeat or comma-separate): "
                   f"{', '.join(REGIME_NAMES)}")  # fmt: skip
    files = p.add_mutually_exclusive_group()
    files.add_argument("--out", type=_folder, help="write <grid>.json / .csv into this folder")
    files.add_argument("--save", action="store_const", const=True, help="write into benchmarks/results/<date>-<device>/ "
                       "in a source checkout, else into ./cutopk-results/<date>-<device>/ (the default for a GPU "
                       "run from a source checkout)")  # fmt: skip
    files.add_argument("--no-save", dest="save", action="store_const", const=False, help="do not write files")
    if kit.plots:
        p.add_argument("--plots", action="store_true", help="also write PNG plots (needs matplotlib), into the "
                       "folder of the other files: not with --no-save")  # fmt: skip
    p.add_argument(
        "--repeat", type=_positive(int), help="most timed repetitions per measurement (GPU 20, CPU 7)"
    )
    p.add_argument("--max-elements", type=_positive(int), help="leave out cases with more elements than this")
    p.add_argument("--time-limit", type=_positive(float), help="start no new case after this many seconds")
    p.add_argument("--peers", help="only these peers, comma-separated (e.g. torch,cupy); one that cannot run "
                   "here is an error")  # fmt: skip
    p.add_argument("--timing", choices=timing.TIMINGS, default="eager", help="eager calls (default), or "
                   "replays of a captured CUDA graph: graph (10 calls a replay), graph-flush (one, L2 flushed)")  # fmt: skip
    p.add_argument(
        "--list", action="store_true", help="print the grid's cases (as --max-elements leaves them) and exit"
    )
    return p


def cases_for(full: bool, regimes: list[str], gpu: bool, max_elements: int | None) -> tuple[list, list]:
    """The grid's cases for this run, split into those measured and those left out by
    ``max_elements`` (on the CPU the full grid leaves out more than 2**24 elements by default)."""
    cases = grid.in_regimes(grid.full_grid() if full else grid.quick_grid(gpu), regimes)
    if max_elements is None and full and not gpu:
        max_elements = loop.CPU_FULL_MAX_ELEMENTS
    if max_elements is None:
        return cases, []
    return [c for c in cases if c.elements <= max_elements], [c for c in cases if c.elements > max_elements]


def main(argv: list[str] | None = None, prog: str = "python -m cutopk", kit: loop.Kit = loop.DEMO,
         **defaults) -> int:  # fmt: skip
    """The command line; ``defaults`` preset options (``benchmarks/run.py``: full grid, saved, and
    its own ``kit``).

    Every option is checked before anything is measured: a mistake is argparse's usage error
    (exit status 2), never a traceback after minutes of benchmarking."""
    p = parser(prog, kit)
    p.set_defaults(**defaults)
    args = p.parse_args(argv)
    gpu = env.gpu_unavailable() is None
    # --peers first, with or without --list: a peer that is unknown or cannot run here is an error.
    peers = tuple(name for name in (args.peers or "").split(",") if name)
    known = {*kit.peer_names(True), *kit.peer_names(False)}
    if set(peers) - known:
        p.error(f"--peers: unknown {sorted(set(peers) - known)}; expected some of {sorted(known)}")
    for name in peers:
        if why := kit.unavailable(name, gpu):
            p.error(f"--peers: {name} cannot run here: {why}")
    full = args.full and not args.quick  # --quick wins over a preset --full
    save = False if args.out is not None else args.save  # --out wins over a preset --save
    regimes = [r for item in args.regime or [] for r in item.split(",") if r]
    names = loop.REGIME_NAMES
    if unknown := [r for r in regimes if r not in names]:
        p.error(f"--regime: unknown {', '.join(unknown)}; expected some of {', '.join(names)}")
    if args.regime is not None and not regimes:  # --regime '' would otherwise mean every regime
        p.error(f"--regime: expected some of {', '.join(names)}, got {','.join(args.regime)!r}")
    if args.timing != "eager" and not gpu:
        p.error(f"--timing {args.timing}: graph replay needs a GPU ({env.gpu_unavailable()})")
    plots = getattr(args, "plots", False)
    if plots and args.out is None and save is False:
        p.error("--plots: no plot can be written with --no-save; give --out DIR or --save instead")
    if plots and (why := baselines.missing("matplotlib")):
        p.error(f"--plots: {why}; install it with pip install matplotlib (or the bench extra, cutopk[bench])")
    np.seterr(all="ignore")  # -inf - inf and NaN comparisons in the peers' routes are expected
    if args.list:
        cases, left_out = cases_for(full, regimes, gpu, args.max_elements)
        for c in cases:
            print(c.label())
        limit = args.max_elements or loop.CPU_FULL_MAX_ELEMENTS  # left_out is empty without either
        more = f" ({len(left_out)} more left out by --max-elements {limit})" if left_out else ""
        print(f"{len(cases)} cases{more}")
        return 0
    if args.out is not None and (why := env.unwritable(args.out)):
        p.error(f"--out: {why}")
    if save and (why := env.unwritable(env.results_base())):
        p.error(f"--save: {why}")
    results = loop.run(
        full, regimes, args.out, save, plots, args.repeat, args.max_elements, args.time_limit, peers,
        timing_mode=args.timing, kit=kit,
    )  # fmt: skip
    if not results:  # each case's reason is among the notes above
        print("no case was measured (see the notes above): nothing to compare", file=sys.stderr)
        return 1
    return 0
