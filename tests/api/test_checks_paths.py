"""Argument checks (cutopk/_request/checks.py) on inputs the other tests of tests/api do not give:
NumPy booleans for ``sorted``, and an unhashable value checked against a table of choices (the
torch operator's ``sorted`` names)."""

from __future__ import annotations

import numpy as np
import pytest
from support.reference import check_top_k

import cutopk
from cutopk._request import checks


@pytest.mark.parametrize(("flag", "order"), [(np.True_, True), (np.False_, False)])
def test_a_numpy_bool_for_sorted_is_the_python_bool(flag, order):
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0])
    want = check_top_k(x, 4, sorted=order)  # the Python bool, against the reference
    got = cutopk.top_k(x, 4, sorted=flag)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.values, want.values)
    assert checks.check_order(flag) == ("value" if order else "none")


def test_an_unhashable_value_against_a_table_of_choices_lists_them():
    names = {"value": True, "index": "index", "none": False}
    with pytest.raises(
        ValueError, match=r"^sorted: expected one of 'value', 'index', 'none', got \['value'\]$"
    ):
        checks.check_choice("sorted", ["value"], names)
    checks.check_choice("sorted", "index", names)  # a listed name passes
