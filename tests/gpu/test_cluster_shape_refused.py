"""The cluster family's kernel is compiled for its cluster shape (``__cluster_dims__``), which CUDA
takes at every launch: the simulator refuses a launch that asks for another shape, as a GPU
does, before looking at the arguments."""

from __future__ import annotations

import pytest
from support.backends import sim_unavailable_reason

from cutopk.cuda import launcher
from cutopk.cuda.families import cluster as _cluster


def test_a_launch_with_another_cluster_shape_than_compiled_is_refused():
    if why := sim_unavailable_reason():
        pytest.skip(why)
    module = launcher._build_family("sim", "float", "cluster")  # built once per process
    dims = module.cluster_dims
    assert sorted(dims.values()) == [(b, 1, 1) for b in sorted(_cluster.SIZES)]  # an entry point each
    name = next(n for n, d in dims.items() if d == (8, 1, 1))
    with pytest.raises(
        ValueError, match=rf"^kernel '{name}' is compiled for clusters \(8, 1, 1\), launched with \(4,\)$"
    ):
        module.get_function(name)((8,), (1024,), (), cluster=(4,))
