"""The stated subsets that runs ask for (tests/support/selection.py): what CI's AddressSanitizer
run of the simulator keeps of the kernel tests, and that it keeps every extent."""

from __future__ import annotations

import itertools

import gpu.test_kernels as kernels
from support.inputs import DISTRIBUTIONS, DTYPES
from support.selection import ASAN_DTYPES, asan_keeps

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
