"""Like with like: which cutopk call each peer's time is set against, and the summary lines.

A peer that sorts its K (torch.topk, FlashInfer ``sorted=True``, ``cub-sorted``) is set against
cutopk's sorted call, the one the benchmark always times; a peer whose K come unordered (CUB,
FlashInfer ``sorted=False``) against cutopk's ``sorted=False`` call, timed for it in the same case
(``cutopk_unsorted`` in the result, ``cutopk_unsorted_ms`` in the CSV). So no ratio sets a sorted
call against an unsorted one; each peer's ``against`` says which it was.
"""

from __future__ import annotations

import math

from . import baselines, check

AGAINST = {True: "cutopk sorted=True", False: "cutopk sorted=False"}


def stats(t: dict) -> dict:
    """A timer's statistics (seconds) as a result's cell (milliseconds)."""
    return {f"{k}_ms": v * 1e3 for k, v in t.items() if k != "repeat"} | {"repeat": t["repeat"]}


def speedup(t: dict, ours: dict | None, sorts: bool) -> dict:
    """The peer's time over the cutopk call it is set against, and which call that was."""
    if ours is None:
        return {"against": AGAINST[sorts], "note": f"{AGAINST[sorts]} was not timed: no ratio"}
    cell = {"speedup": t["median"] / ours["median"], "against": AGAINST[sorts]}
    return cell if sorts else cell | {"sorted": False}  # its time does not include ordering the K


def time_unsorted(x, x_host, axis: int, case, expected: dict, session, result: dict, routes) -> dict | None:
    """cutopk's ``sorted=False`` call on the case, checked (its values as a multiset) and timed,
    when one of ``routes`` (the case's peers) is unsorted; None otherwise or when it fails (said
    in ``cutopk_unsorted``)."""
    if not any(route.call is not None and not route.sorts for route in routes):
        return None
    route = baselines.cutopk_route(x, axis, case.k, case.mode, sort=False)
    assert route.call is not None
    try:
        with session.guard(f"{case.label()}: cutopk sorted=False"):
            problem = check.check(x_host, axis, expected["largest"], route.call(), sorts=False)
            if problem:
                result["cutopk_unsorted"] = {"note": f"mismatch: {problem}"}
                return None
            t = session.timer(route.call, capture=route.capture)
    except Exception as exc:  # noqa: BLE001 - reported; the sorted call's results stand
        result["cutopk_unsorted"] = {"note": f"{type(exc).__name__}: {exc}"[:200]}
        return None
    result["cutopk_unsorted"] = stats(t)
    return t


def summary(results: list[dict], peers: list[str]) -> list[str]:
    """Geometric-mean speedups per peer against its like (``against``: cutopk's sorted call for the
    peers that sort, its ``sorted=False`` call for those that do not), the sorted peers first, and
    counts of what was not timed."""
    lines = []
    for against in AGAINST.values():
        for peer in peers:
            cells = [r["peers"].get(peer, {}) for r in results]
            ratios = [c["speedup"] for c in cells if c.get("status") == "ok" and c.get("against") == against
                      and "speedup" in c]  # fmt: skip
            if ratios:
                geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
                lines.append(
                    f"{peer} against {against}: cutopk is {geo:.2f}x as fast in geometric mean over "
                    f"{len(ratios)} cases (min {min(ratios):.2f}x, max {max(ratios):.2f}x)"
                )
    for peer in peers:
        bad = sum(r["peers"].get(peer, {}).get("status") == "mismatch" for r in results)
        if bad:
            lines.append(f"{peer}: {bad} answers differ from cutopk's (see notes): no time reported for them")
    wrong = [r["label"] for r in results if str(r.get("self_check", "ok")).startswith("mismatch")]
    failed = [r["label"] for r in results if "median_ms" not in r.get("cutopk", {})]
    if wrong:
        lines.append(
            f"cutopk's CUDA answer differs from its NumPy backend's on {len(wrong)} cases: {wrong[:3]}"
        )
    if failed:
        lines.append(f"cutopk failed on {len(failed)} cases: {failed[:3]}")
    return lines
