"""What the dispatcher reads of a real device. The H100 scoreboard of 2026-11-26 ran the split
family (the sm_75/sm_80 fallback) on every long row: the facts read a compute capability from
CuPy's attribute dictionary, which has none, so every GPU looked cluster-less."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import cuda_is_standin

import cutopk
from cutopk._core import call as _call
from cutopk.cuda import device as _device

pytestmark = pytest.mark.skipif(not cuda_is_standin(), reason="reads the CuPy stand-in's two devices")


@pytest.fixture
def cupy():
    import cupy

    _device.device_facts.cache_clear()
    _call.CACHE.clear()
    yield cupy
    _device.device_facts.cache_clear()
    _call.CACHE.clear()


def test_the_attributes_hold_no_compute_capability_as_in_cupy(cupy):
    attrs = cupy.cuda.Device(0).attributes
    assert "MultiProcessorCount" in attrs
    assert not any("ComputeCapability" in name for name in attrs)


@pytest.mark.parametrize(("device", "clusters"), [(0, True), (1, False)], ids=["sm_90", "sm_80"])
def test_clusters_follow_the_compute_capability(cupy, device, clusters):
    assert cupy.cuda.Device(device).compute_capability == ("90" if clusters else "80")
    assert _device.device_facts("cuda", device).clusters is clusters


@pytest.mark.parametrize(("device", "family"), [(0, "cluster"), (1, "split")], ids=["sm_90", "sm_80"])
def test_a_long_llm_row_takes_the_devices_one_launch_family(cupy, device, family):
    with cupy.cuda.Device(device):
        x = cupy.asarray(np.zeros((8, 128256), np.float32))
        assert cutopk.plan(x, 50).algorithm == family
