"""The test suite leaves nothing behind in the user's temp and cache folders (issue 49): other
packages' caches go into the session's temp folder (tests/conftest.py), the dask workers'
scratch folder into the test's own (tests/frontends/test_dask.py)."""

from __future__ import annotations

import importlib.util
import os
import pathlib


def test_other_packages_cache_into_the_sessions_temp_folder(tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    for variable in ("XDG_CACHE_HOME", "TORCHINDUCTOR_CACHE_DIR", "MPLCONFIGDIR"):
        assert pathlib.Path(os.environ[variable]).is_relative_to(base), variable
    if importlib.util.find_spec("torch") is not None:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        assert pathlib.Path(cache_dir()).is_relative_to(base)  # not /tmp/torchinductor_<user>
