"""The package's dispatch tables (``cutopk/cuda/tables/sm<cc>.json``) from committed results.

    python benchmarks/make_dispatch_table.py                   # the committed GPU results below
    python benchmarks/make_dispatch_table.py RESULTS.csv ...   # these files (forced-family CSVs)
    python benchmarks/make_dispatch_table.py --check           # exit 1 if a committed table is out of date

Each CSV's header names its compute capability; the files of one capability make one table. A
shape gets an entry where at least two families were timed on it and today's hand rule's choice
is one of them (``cutopk/_demo/tabulate.py``); each entry cites its files and cases, and what
the files could not decide is written under ``lacks``. Results from two cards of one capability
(an H100 and an H200) are compared by cutopk's time over torch.topk's in the same run. The format
of the input is in benchmarks/README.md ("Forced-family results").
"""

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's cutopk

from cutopk._demo import tabulate  # noqa: E402
from cutopk.cuda import dispatch_table  # noqa: E402

# The committed GPU runs: sm_90 both. Neither forced a family (each case ran auto's choice), so
# a comparison exists only where the two runs' dispatchers chose differently on one shape.
COMMITTED = (
    "benchmarks/results/2026-11-26-nvidia-h100-80gb-hbm3/scoreboard.csv",
    "benchmarks/results/2026-11-25-nvidia-h200/full-llm.csv",
    "benchmarks/results/2026-11-25-nvidia-h200/full-moe-indexer.csv",
    "benchmarks/results/2026-11-25-nvidia-h200/full-knn.csv",
    "benchmarks/results/2026-11-25-nvidia-h200/full-huge-layout.csv",
)
OUT = ROOT / "cutopk" / "cuda" / "tables"


def tables(files: list[pathlib.Path], timing: str = "eager") -> dict[str, dict]:
    """The JSON object of each compute capability's table, by capability."""
    by_cc: dict[str, tuple[list, list, int]] = {}
    for path in files:
        label = str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)
        facts, found = tabulate.read_csv(path, label, timing)
        cc = facts.get("compute_capability")
        if cc is None:
            raise SystemExit(f"{path}: no '# compute_capability:' line in its header")
        measured, sources, sm = by_cc.setdefault(cc, ([], [], int(facts.get("sm_count", 132))))
        measured += found
        sources.append(
            f"{label} ({facts.get('device', '?')}, {facts.get('git_commit', '?')[:7]}, {len(found)} rows)"
        )
    out = {}
    for cc, (measured, sources, sm) in sorted(by_cc.items()):
        table, lacks = tabulate.build(measured, tabulate.device_for(cc, sm), f"sm{cc}")
        out[cc] = dispatch_table.to_json(
            table,
            note=(
                "Made by benchmarks/make_dispatch_table.py: a shape's entry names the fastest family "
                "timed on it, where today's hand rule's choice was among those timed; it covers its own "
                "n and K over the octave of its rows (cutopk/cuda/dispatch_table.py)."
            ),
            unit="cutopk median / torch.topk median in the same run (ms where torch did not run)",
            timing=timing,
            sources=sources,
            lacks=lacks,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "files", nargs="*", type=pathlib.Path, help="results CSVs (default: the committed GPU runs)"
    )
    p.add_argument("--out", type=pathlib.Path, default=OUT, help="folder of the sm<cc>.json files")
    p.add_argument("--timing", choices=("eager", "graph"), default="eager", help="which timing's rows to use")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table would change")
    args = p.parse_args(argv)
    files = args.files or [ROOT / f for f in COMMITTED]
    stale = []
    for cc, obj in tables(files, args.timing).items():
        path = args.out / f"sm{cc}.json"
        text = json.dumps(obj, indent=1) + "\n"
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
            continue
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}: {len(obj['entries'])} entries, {len(obj['lacks'])} shapes undecided")
    if stale:
        print("out of date (run python benchmarks/make_dispatch_table.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
