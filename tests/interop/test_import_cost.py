"""``import cutopk`` stays cheap (issue 41): it imports no torch, works where torch cannot be
imported at all, and registers the torch operators only on the first call with a tensor.

Each check runs in a fresh interpreter (this one has imported torch long ago)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A meta-path finder that makes every torch import fail, as on a machine without torch.
BLOCK_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked for the test)", name=name)
        return None
sys.meta_path.insert(0, _NoTorch())
"""


def _python(code: str, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *flags, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_import_cutopk_works_without_torch_and_imports_none_of_it():
    code = BLOCK_TORCH + (
        "import numpy as np, cutopk\n"
        "r = cutopk.top_k(np.array([[3.0, 1.0, 4.0, 1.0, 5.0]]), 2)\n"
        "assert r.indices.tolist() == [[4, 2]], r\n"
        "s = cutopk.segmented_top_k(np.array([5.0, 1.0, 7.0]), np.array([0, 1, 3]), 1)\n"
        "m = cutopk.merge_top_k([r, (np.array([[9.0]]), np.array([[7]]))], 2)\n"
        "assert m.indices.tolist() == [[7, 4]], m\n"
        "loaded = [name for name in sys.modules if name.split('.')[0] == 'torch' or 'torch_op' in name]\n"
        "assert not loaded, loaded\n"
        "print('ok')\n"
    )
    done = _python(code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_importtime_shows_no_torch_module():
    done = _python("import cutopk", "-X", "importtime")
    assert done.returncode == 0, done.stderr
    names = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line]
    assert "cutopk" in names  # the report is there to read
    assert not [n for n in names if n.split(".")[0] == "torch"]


def _has_torch() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except ImportError:  # a finder that refuses it
        return False


@pytest.mark.skipif(not _has_torch(), reason="needs torch (CI's torch venv runs it)")
def test_the_operators_are_registered_on_the_first_tensor_call_only():
    code = (
        "import sys, numpy as np, torch, cutopk\n"
        "assert not hasattr(torch.ops.cutopk, 'top_k')\n"
        "cutopk.top_k(np.arange(5.0), 2)\n"
        "assert not hasattr(torch.ops.cutopk, 'top_k') and 'cutopk._core.torch_op' not in sys.modules\n"
        "cutopk.top_k(torch.arange(5.0), 2)\n"
        "assert hasattr(torch.ops.cutopk, 'top_k') and not hasattr(torch.ops.cutopk, 'merge_top_k')\n"
        "cutopk.segmented_top_k(torch.arange(5.0), [0, 5], 2)\n"
        "assert hasattr(torch.ops.cutopk, 'segmented_top_k') and hasattr(torch.ops.cutopk, 'merge_top_k')\n"
        "print('ok')\n"
    )
    done = _python(code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_import_cutopk_leaves_ml_dtypes_until_a_bfloat16_array_comes():
    """``import cutopk`` imported ml_dtypes (0.6-1.3 s, most of the import) for bfloat16's table
    entry; the entry now joins when a bfloat16 dtype is first looked up."""
    pytest.importorskip("ml_dtypes")
    code = (
        "import sys, numpy as np, cutopk\n"
        "assert 'ml_dtypes' not in sys.modules\n"
        "r = cutopk.top_k(np.array([[3.0, 1.0, 4.0, 1.0, 5.0]], np.float32), 2)\n"
        "p = cutopk.plan(np.zeros((4, 20000), np.float16), 3)\n"
        "assert 'ml_dtypes' not in sys.modules, 'a float32 call imported ml_dtypes'\n"
        "import ml_dtypes\n"
        "x = np.array([[3.0, 1.0, 4.0, 1.0, 5.0]]).astype(ml_dtypes.bfloat16)\n"
        "for a in (x, (np.arange(20000.0) % 251).astype(ml_dtypes.bfloat16)[None]):  # small, long\n"
        "    r, want = cutopk.top_k(a, 2), cutopk.top_k(a.astype(np.float32), 2)\n"
        "    assert r.values.dtype == x.dtype and np.array_equal(r.indices, want.indices), r\n"
        "assert 'bfloat16' in [i.name for i in cutopk._request.dtypes.SUPPORTED.values()]\n"
        "print('ok')\n"
    )
    done = _python(code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_torch_dtype_or_the_table_listed_brings_bfloat16_in():
    pytest.importorskip("ml_dtypes")
    code = (
        "import sys, cutopk\n"
        "from cutopk._request import dtypes\n"
        "names = [i.name for i in dtypes.SUPPORTED.values()]\n"
        "assert names[-1] == 'bfloat16' and 'ml_dtypes' in sys.modules, names\n"
        "assert len(dtypes.SUPPORTED) == len(names) == len(list(dtypes.SUPPORTED))\n"
        "print('ok')\n"
    )
    done = _python(code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
