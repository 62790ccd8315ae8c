"""The GPU session script (tools/gpu_session.sh) run as its tests run it: a phase's dry run."""

from __future__ import annotations

import os
import subprocess
import sys


def dry_run(phase: str, out, **env: str) -> subprocess.CompletedProcess:
    """``tools/gpu_session.sh PHASE`` with ``DRY_RUN=1``, its files under ``out`` and ``env``
    added. This interpreter's folder goes first on PATH: the script calls ``python3``, which must
    be the interpreter running the tests (its venv holds the test extra) even where that venv is
    not activated."""
    path = os.pathsep.join((os.path.dirname(sys.executable), os.environ.get("PATH", "")))
    env_vars = os.environ | {"PATH": path, "OUT": str(out), "DRY_RUN": "1", **env}
    return subprocess.run(
        ["bash", "tools/gpu_session.sh", phase], capture_output=True, text=True, env=env_vars, check=False
    )
