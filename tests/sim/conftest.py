import pytest

from cutopk import sim

if not sim.is_available():
    pytest.skip(f"CPU simulator unavailable: {sim.unavailable_reason()}", allow_module_level=True)
