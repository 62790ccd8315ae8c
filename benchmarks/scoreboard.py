"""The scoreboard: what a lent GPU session measures first (``tools/gpu_session.sh scoreboard``).

    python benchmarks/scoreboard.py --root $OUT/results --time-limit 300  # GPU: scoreboard.csv/.json
    python benchmarks/scoreboard.py --root $OUT/results --where           # the folder it writes to
    python benchmarks/scoreboard.py --profile                             # the ncu target (see below)
    python benchmarks/scoreboard.py --dry-run --time-limit 300            # CPU: check everything above

The cases (``benchmarks/cutopk_bench/scoreboard.py``): every llm and indexer case of the grid, every case of
the reference GPU run below 0.95x torch.topk, and the moe/knn/huge shapes on either side of a
dispatcher threshold, measured against torch.topk, CUB DeviceTopK (``cub``, ``cub-sorted``) and
FlashInfer's top_k (``flashinfer``, ``flashinfer-unsorted``), no case started that would end after
``--time-limit`` by the cost estimated from the reference run's logs. Results go to
``<root>/<date>-<device>/scoreboard.csv`` and ``.json`` in the benchmark's columns.

``--profile`` runs each of ``PROFILE_CASES`` once with cutopk between cudaProfilerStart and
cudaProfilerStop, after a warm-up call (so NVRTC's compile and CuPy's allocations stay outside):
``ncu --profile-from-start off`` then profiles cutopk's kernels only.

``--dry-run`` needs no GPU: it lists every case with its reason, estimate and whether it fits, what
FlashInfer would run or refuse for each on sm_90, whether the CUB and FlashInfer libraries are
built for sm_90, and runs the same loop's code on three scaled-down cases (on a GPU where there is one).
"""

import argparse
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # this checkout's cutopk

import numpy as np
from cutopk_bench import cub, shims
from cutopk_bench import flashinfer as fi
from cutopk_bench import scoreboard as sb

from cutopk._demo import cli, env, grid, timing

ARCH = "sm_90"  # the lent machines' GPUs (H100, H200)


def _folder(text: str) -> pathlib.Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder, got an empty path")
    return pathlib.Path(text)


def _reference(text: str) -> pathlib.Path:
    path = pathlib.Path(text)
    if not any(path.glob("*.csv")):
        raise argparse.ArgumentTypeError(f"{text}: no benchmark CSV files there")
    return path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchmarks/scoreboard.py", description=__doc__.split("\n")[0])
    p.add_argument("--root", type=_folder, default=env.results_base(), help="results go to ROOT/<date>-<device>/ "
                   "(default benchmarks/results)")  # fmt: skip
    p.add_argument("--out", type=_folder, help="this folder instead of ROOT/<date>-<device>/ (tools/gpu_session.sh "
                   "passes the one --where printed, so that the steps share it)")  # fmt: skip
    p.add_argument("--time-limit", type=cli._positive(float), default=300.0,
                   help="start no case that would end after this many seconds (default 300)")  # fmt: skip
    p.add_argument("--repeat", type=cli._positive(int), help="most timed repetitions per measurement (20)")
    p.add_argument("--timing", choices=timing.TIMINGS, default="eager", help="eager calls (default) or graph "
                   "replays (benchmarks/README.md, Method); not eager: scoreboard-<timing>.csv/.json")  # fmt: skip
    p.add_argument("--reference", type=_reference, default=sb.REFERENCE, help="the committed GPU run the cases "
                   f"and the cost estimates come from (default {sb.REFERENCE.relative_to(env.REPO)})")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="check everything on the CPU, measure nothing "
                   "(with --profile: list the profiled cases)")  # fmt: skip
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--profile", action="store_true", help="run the profiled cases once each (ncu's target)"
    )
    mode.add_argument("--where", action="store_true", help="print the results folder and exit")
    return p


def results_dir(root: pathlib.Path) -> pathlib.Path:
    meta = env.metadata(env.gpu_unavailable() is None)
    return root / env.default_out_dir(meta).name


def list_plan(reference: pathlib.Path, limit: float) -> int:
    """Print the cases, their reasons, estimates, FlashInfer's route; return how many fit."""
    rows, model = sb.plan(reference, limit)
    print(f"cost model ({model.source}): {model.start:.1f} s to start, {model.per_case:.2f} s per case "
          f"+ {model.per_gelement:.1f} s per 1e9 elements, {sb.NVRTC_S:g} s for NVRTC's cold compiles, cases x {model.scale:g} "
          "(the CUB and FlashInfer peers)")  # fmt: skip
    for i, (case, why, est, fits) in enumerate(rows, 1):
        backend = fi.refusal(case.mode, case.dtype, case.layout, case.n, case.k)
        if backend is None:
            backend = "unsorted: " + fi.unsorted_backend(case.rows, case.n, case.k, case.dtype, major=9)
        print(f"{i:>4} {case.label():<48} {est:6.1f} s  {'' if fits else 'NOT STARTED (budget) '}"
              f"{why.split(':')[0]:<9} flashinfer: {backend}")  # fmt: skip
    fit = [r for r in rows if r[3]]
    total = model.start + sb.NVRTC_S + sum(r[2] for r in fit)
    print(f"{len(rows)} cases chosen, {len(fit)} fit in --time-limit {limit:g} s (estimated {total:.0f} s); "
          f"peers {', '.join(sb.PEERS)}")  # fmt: skip
    return len(fit)


def libraries() -> list[str]:
    """Whether the shims the peers need are built for the lent GPUs."""
    lines = []
    for name, path in (("CUB", cub.library_path(ARCH)), ("FlashInfer", fi.library_path(ARCH))):
        state = (
            f"built ({path.stat().st_size / 2**20:.1f} MiB)"
            if path.is_file()
            else "MISSING: its peers will be skipped"
        )
        lines.append(
            f"{name} shim for {ARCH}: {path.relative_to(env.REPO) if path.is_relative_to(env.REPO) else path}: {state}"
        )
    return lines


def mini_run(limit: float) -> None:
    """The loop's scoreboard path (cases, stem, cost, budget) on three scaled-down cases."""
    cases = [
        grid.Case("llm", 2, 4096, 50),
        grid.Case("indexer", 2, 8192, 512),
        grid.Case("knn", 4, 2048, 10, "smallest"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp)
        results = shims.run(out=out, repeat=3, time_limit=limit, peers=sb.PEERS, cases=cases, stem=sb.STEM,
                             cost=lambda c: 0.01, extra={"scoreboard": "dry run"})  # fmt: skip
        written = sorted(p.name for p in out.iterdir())
        if len(results) != len(cases) or f"{sb.STEM}.csv" not in written:
            raise SystemExit(
                f"dry run: the mini run measured {len(results)} of {len(cases)} cases, wrote {written}"
            )
        print(f"dry run: the loop measured {len(results)} scaled-down cases and wrote {', '.join(written)}")


def profile() -> None:
    """Each profiled case once between cudaProfilerStart and Stop, after a warm-up call."""
    import cupy

    import cutopk
    from cutopk._demo import inputs

    runtime = cupy.cuda.runtime
    start = getattr(runtime, "profilerStart", None) or cupy.cuda.profiler.start
    stop = getattr(runtime, "profilerStop", None) or cupy.cuda.profiler.stop
    for case in sb.PROFILE_CASES:
        x = cupy.asarray(inputs.values(case))
        cutopk.top_k(x, case.k, mode=case.mode)  # compile and allocate outside the profiled window
        cupy.cuda.Device().synchronize()
        start()
        cutopk.top_k(x, case.k, mode=case.mode)
        cupy.cuda.Device().synchronize()
        stop()
        plan = cutopk.plan(x, case.k, mode=case.mode)
        name = plan["algorithm"] if isinstance(plan, dict) else getattr(plan, "algorithm", "?")
        print(f"profiled {case.label()}: {name}")


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    np.seterr(all="ignore")
    if args.where:
        print(results_dir(args.root))
        return 0
    if args.profile and args.dry_run:
        print("would profile: " + "; ".join(c.label() for c in sb.PROFILE_CASES))
        return 0
    if args.dry_run:
        t0 = time.monotonic()
        if not list_plan(args.reference, args.time_limit):
            print("dry run: no case fits in the time limit", file=sys.stderr)
            return 1
        print("\n".join(libraries()))
        target = args.out or args.root
        if why := env.unwritable(target):
            print(f"dry run: {target}: {why}", file=sys.stderr)
            return 1
        where = args.out or results_dir(args.root)
        print(f"results would go to {where} (here: {env.gpu_unavailable() or 'a GPU'})")
        mini_run(args.time_limit)
        print(f"dry run done in {time.monotonic() - t0:.1f} s")
        return 0
    if why := env.gpu_unavailable():
        print(
            f"no GPU ({why}): the scoreboard measures on a GPU only; --dry-run checks it here",
            file=sys.stderr,
        )
        return 1
    if args.profile:
        profile()
        return 0
    rows, model = sb.plan(args.reference, args.time_limit)
    list_plan(args.reference, args.time_limit)
    out = args.out or results_dir(args.root)
    if why := env.unwritable(out):
        print(f"--out: {why}", file=sys.stderr)
        return 1
    cases = [case for case, *_ in rows]
    extra = {
        "scoreboard": {
            "reference": str(args.reference),
            "cost_model": vars(model) if hasattr(model, "__dict__") else str(model),
            "selected_for": {case.label(): why for case, why, *_ in rows},
        }
    }
    stem = sb.STEM if args.timing == "eager" else f"{sb.STEM}-{args.timing}"
    shims.run(out=out, repeat=args.repeat, time_limit=args.time_limit, peers=sb.PEERS, cases=cases, stem=stem,
               cost=model, extra=extra, timing_mode=args.timing)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
