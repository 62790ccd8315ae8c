"""A watchdog for benchmark steps that never return.

A GPU kernel that never ends (a peer's cross-block barrier that waits for blocks which are not
resident, say) cannot be interrupted from Python: the process waits in the driver until something
kills it. On a lent GPU that cost a whole lease on 2026-11-26: the scoreboard's first call ran
into its command's limit and the machine stopped answering, so nothing came back; the second run
stopped 60 s into huge 1 x 16777216 k=65536 (an earlier H200 run had timed cutopk on it in 7 ms).

:func:`watch` names the step in progress; a daemon thread ends the process, saying which case and
which route did not answer, once a step has run for longer than its limit. The loop writes its
files after every case, so what was measured before is kept, and the shell script that started the
run goes on to its next step.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from cutopk import _environ

EXIT_CODE = 3  # apart from timeout(1)'s 124 and a Python error's 1
DEFAULT_LIMIT_S = 60.0
LIMIT_ENV = "CUTOPK_BENCH_STEP_LIMIT"


def limit_from_env() -> float:
    """Seconds a step of a GPU run may take: ``$CUTOPK_BENCH_STEP_LIMIT`` (0 turns the watchdog
    off), else 60. CPU runs have none: their steps can always be interrupted."""
    return _environ.number(LIMIT_ENV, DEFAULT_LIMIT_S, 0.0, "seconds, a number >= 0 (0: no watchdog)")


class Watchdog:
    """Ends the process when one step runs longer than ``limit_s`` seconds (0: never)."""

    def __init__(self, limit_s: float, exit=os._exit, out=sys.stdout, poll_s: float = 1.0):
        self.limit_s = limit_s
        self._exit = exit  # os._exit: a thread stuck in the driver must not delay the exit
        self._out = out
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._step: tuple[str, float] | None = None
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def watch(self, what: str):
        """Time ``what`` (e.g. "llm 1x32000 k=1: flashinfer") while the block runs."""
        if not self.limit_s:
            yield
            return
        self._start_thread()
        with self._lock:
            outer, self._step = self._step, (what, time.monotonic())
        try:
            yield
        finally:
            with self._lock:
                self._step = outer

    def check(self, now: float | None = None) -> str | None:
        """The message for a step past its limit, or None."""
        with self._lock:
            step = self._step
        if step is None:
            return None
        what, since = step
        took = (time.monotonic() if now is None else now) - since
        if took <= self.limit_s:
            return None
        return (
            f"\nno answer in {took:.0f} s from {what} (limit {self.limit_s:g} s, ${LIMIT_ENV}): "
            "the run stops here, the cases measured before it are in the files written"
        )

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="cutopk-bench-watchdog", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            time.sleep(self._poll_s)
            message = self.check()
            if message:
                print(message, file=self._out, flush=True)
                self._exit(EXIT_CODE)
                return
