"""The stated subsets that runs ask for (tests/support/selection.py): what CI's AddressSanitizer
run of the simulator keeps of the kernel tests, and that it keeps every extent; the shards
(CUTOPK_TEST_SHARD=K/N) that split a run between CI's cores."""

from __future__ import annotations

import itertools
import os
import pathlib
import subprocess
import sys

import gpu.test_kernels as kernels
import pytest
from support.inputs import DISTRIBUTIONS, DTYPES
from support.selection import ASAN_DTYPES, TWIN_DTYPES, asan_keeps, shard, shard_keeps, standin_twin_keeps

from cutopk.cuda.dispatch import ALGORITHMS


def test_one_element_type_per_key_width():
    import numpy as np

    assert sorted(np.dtype(d).itemsize for d in ASAN_DTYPES) == [1, 2, 4, 8]
    assert set(ASAN_DTYPES) <= set(DTYPES)


def test_the_asan_subset_keeps_tests_by_their_parameters():
    assert asan_keeps({}) and asan_keeps({"backend": "sim", "family": "radix"})
    assert [d for d in DTYPES if asan_keeps({"dtype": d})] == [d for d in DTYPES if d in ASAN_DTYPES]
    pairs = [
        (d, a)
        for d, a in itertools.product(DISTRIBUTIONS, ALGORITHMS)
        if asan_keeps({"dist": d, "algorithm": a})
    ]
    assert len(pairs) in range(
        len(DISTRIBUTIONS) * len(ALGORITHMS) // 3, len(DISTRIBUTIONS) * len(ALGORITHMS) // 3 + 2
    )
    # every algorithm meets at least three distributions, every distribution at least three algorithms
    assert all(sum(a == alg for _, a in pairs) >= 3 for alg in ALGORITHMS)
    assert all(sum(d == dist for d, _ in pairs) >= 3 for dist in DISTRIBUTIONS)


def test_the_asan_matrix_takes_every_extent_of_the_full_matrix_once(monkeypatch):
    monkeypatch.setattr(kernels, "ASAN_SUBSET", False)
    monkeypatch.setattr(kernels, "FULL", True)
    full = {
        (n, k, a) for backend, _, n, k, a in (p.values for p in kernels.matrix_cases()) if backend == "sim"
    }
    asan = [p.values for p in kernels.asan_matrix_cases()]
    assert sorted((n, k, a) for _, _, n, k, a in asan) == sorted(full)
    assert {backend for backend, *_ in asan} == {"sim"} and {d for _, d, *_ in asan} == set(ASAN_DTYPES)
    monkeypatch.setattr(kernels, "ASAN_SUBSET", True)
    assert [p.values for p in kernels.matrix_cases()] == asan


def test_a_shard_is_k_of_n_and_a_bad_one_is_named():
    assert shard(None) is None and shard("") is None
    assert shard("1/2") == (1, 2) and shard("3/3") == (3, 3)
    for bad in ("0/2", "3/2", "1", "1/", "a/2", "-1/2", "1/2/3"):
        with pytest.raises(ValueError, match=r"CUTOPK_TEST_SHARD must be K/N with 1 <= K <= N"):
            shard(bad)


def test_the_shards_split_the_tests_between_them_each_once():
    # Round robin over the collected order: N shards together keep every position exactly once.
    for n in (1, 2, 3, 8):
        taken = [[j for j in range(20) if shard_keeps(j, (k, n))] for k in range(1, n + 1)]
        assert sorted(itertools.chain(*taken)) == list(range(20))
        assert all(len(t) in (20 // n, 20 // n + 1) for t in taken)
    assert all(shard_keeps(j, None) for j in range(5))


def _collected(which: str) -> list[str]:
    env = {**os.environ, "CUTOPK_TEST_SHARD": which}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", __file__],
        capture_output=True,
        text=True,
        env=env,
        cwd=pathlib.Path(__file__).resolve().parents[2],
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [ln.rpartition("::")[2] for ln in proc.stdout.splitlines() if "::" in ln]


def test_conftest_runs_the_asked_shard():
    first, second = _collected("1/2"), _collected("2/2")
    mine = sorted(name for name in globals() if name.startswith("test_"))
    assert first and second and sorted(first + second) == mine


def test_conftest_refuses_a_bad_shard_as_a_usage_error(request, monkeypatch):
    hook = next(
        p.pytest_collection_modifyitems
        for p in request.config.pluginmanager.get_plugins()
        if getattr(p, "__file__", "").endswith(os.path.join("tests", "conftest.py"))
    )
    monkeypatch.setenv("CUTOPK_TEST_SHARD", "2/1")
    with pytest.raises(pytest.UsageError, match=r"CUTOPK_TEST_SHARD must be K/N .* got '2/1'"):
        hook(request.config, [])


def test_the_standin_keeps_a_cuda_twin_per_key_width_and_a_third_of_the_distributions():
    assert standin_twin_keeps({}) and standin_twin_keeps({"backend": "sim", "dtype": "int16"})
    kept = [d for d in DTYPES if standin_twin_keeps({"backend": "cuda", "dtype": d})]
    assert kept == [d for d in DTYPES if d in TWIN_DTYPES] and "bfloat16" in kept
    import numpy as np

    assert sorted({np.dtype(d).itemsize for d in ASAN_DTYPES}) == [1, 2, 4, 8]
    dists = [d for d in DISTRIBUTIONS if standin_twin_keeps({"backend": "cuda", "dist": d})]
    assert len(dists) == (len(DISTRIBUTIONS) + 2) // 3
    for algorithm in ALGORITHMS:  # every algorithm still meets three or four distributions
        met = [
            d
            for d in DISTRIBUTIONS
            if standin_twin_keeps({"backend": "cuda", "dist": d, "algorithm": algorithm})
        ]
        assert 3 <= len(met) <= 4
    assert standin_twin_keeps({"backend": "cuda", "dist": "a list of the test's own"})


def test_the_standin_keeps_each_familys_twin_at_one_key_width_and_each_width_for_some_family():
    def kept(family, dtype):
        return standin_twin_keeps({"backend": "cuda", "family": family, "dtype": dtype})

    for family in ALGORITHMS:
        assert sum(kept(family, d) for d in ASAN_DTYPES) == 1
        assert kept(family, "bfloat16") and not kept(family, "int16")
    for dtype in ASAN_DTYPES:
        assert 2 <= sum(kept(family, dtype) for family in ALGORITHMS) <= 4
    assert standin_twin_keeps({"backend": "sim", "family": "cluster", "dtype": "int8"})
    assert standin_twin_keeps({"backend": "cuda", "family": "a family of the test's own", "dtype": "int8"})
