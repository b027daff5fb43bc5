"""Shared fixtures for the whole test suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parent.parent

# CI gets more examples than an inner development loop, both deterministic (derandomize) so a CI failure
# reproduces locally with the same profile.
settings.register_profile(
    "ci", max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture
def repo_root() -> Path:
    return REPO
