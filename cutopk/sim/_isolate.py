"""Running one launch in a forked child process (``RawModule(..., isolate=True)``).

In-process launches already survive ordinary crashes (a signal handler jumps back into the
runtime), but a kernel that corrupts the heap, overflows into the runtime's own memory, or trips
AddressSanitizer can still end the process. Isolated launches cost a fork (a few ms) and give:

- the caller survives anything, and the exception carries the child's stderr (e.g. ASan's report);
- an optional wall-clock limit (``timeout_s``) enforced by killing the child.

Array arguments live in shared mappings (see ``_staging``) so the child's writes reach the parent;
the child reports its result code, message and fault frames through one more shared page.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import select
import signal
import struct
import sys
import tempfile
import time
from collections.abc import Callable

_RESULT_BYTES = 16384
_HEADER = struct.Struct("<iii")  # rc, message length, frame count
_MAX_FRAMES = 16


class Outcome:
    """What an isolated launch ended with: a result code from the runtime, or a dead child."""

    def __init__(self, rc: int, message: str, frames: list[int], died: str | None, stderr: str):
        self.rc, self.message, self.frames, self.died, self.stderr = rc, message, frames, died, stderr


def run(launch: Callable[[], tuple[int, str, list[int]]], timeout_s: float | None) -> Outcome:
    """Call ``launch`` in a forked child; it returns (rc, message, frames) as the runtime gave them."""
    result = mmap.mmap(-1, _RESULT_BYTES)
    with tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: run, report through the shared page, and leave at once
            code = 3
            try:
                os.dup2(err.fileno(), 2)
                rc, message, frames = launch()
                data = message.encode(errors="replace")[: _RESULT_BYTES - 1024]
                frames = frames[:_MAX_FRAMES]
                result[: _HEADER.size] = _HEADER.pack(rc, len(data), len(frames))
                offset = _HEADER.size
                result[offset : offset + 8 * len(frames)] = struct.pack(f"<{len(frames)}Q", *frames)
                offset += 8 * _MAX_FRAMES
                result[offset : offset + len(data)] = data
                code = 0
            except BaseException as exc:  # noqa: BLE001 - anything at all must end in os._exit
                os.write(2, f"isolated launch failed in the child: {exc!r}\n".encode())
            finally:
                os._exit(code)
        died = _wait(pid, timeout_s)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if died is None:
        rc, length, nframes = _HEADER.unpack_from(result, 0)
        frames = list(struct.unpack_from(f"<{nframes}Q", result, _HEADER.size))
        start = _HEADER.size + 8 * _MAX_FRAMES
        message = bytes(result[start : start + length]).decode(errors="replace")
        if stderr:
            sys.stderr.write(stderr)  # the kernel's own diagnostics, passed on as they came
        return Outcome(rc, message, frames, None, stderr)
    return Outcome(-1, "", [], died, stderr)


def _wait(pid: int, timeout_s: float | None) -> str | None:
    """Wait for the child; None if it exited normally, else how it died (killed if it overran)."""
    status = _reap(pid, timeout_s)
    if status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return f"still running after timeout_s={timeout_s:g} s, killed -- hang"
    if os.WIFSIGNALED(status):
        return f"the child process died of {signal.Signals(os.WTERMSIG(status)).name}"
    if os.WEXITSTATUS(status) != 0:
        return f"the child process exited with status {os.WEXITSTATUS(status)}"
    return None


def _reap(pid: int, timeout_s: float | None) -> int | None:
    """The child's wait status, or None if it is still running after ``timeout_s``."""
    if timeout_s is None:
        return os.waitpid(pid, 0)[1]
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd (old kernel or Python): poll
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return status
            time.sleep(0.002)
        return None
    try:
        readable, _, _ = select.select([fd], [], [], timeout_s)
    finally:
        os.close(fd)
    return os.waitpid(pid, 0)[1] if readable else None


def frames_buffer(lib: ctypes.CDLL) -> list[int]:
    """The fault frames the runtime recorded (offsets into the module)."""
    out = (ctypes.c_ulonglong * _MAX_FRAMES)()
    n = lib.cutopk_sim_fault_frames(out, _MAX_FRAMES)
    return [int(out[i]) for i in range(n)]
