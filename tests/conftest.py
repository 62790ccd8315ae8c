"""Shared pytest configuration: the hypothesis profiles (a bounded one for CI)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "long", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("CUTOPK_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
