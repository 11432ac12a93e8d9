"""Shared test configuration: hypothesis profile and float64-friendly numpy printing."""

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "nova", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("nova")
np.set_printoptions(precision=6, suppress=True)


@pytest.fixture(autouse=True)
def _restore_config():
    """Each test starts from the session's config flags, whatever an earlier test set."""
    import nova

    saved = dict(nova.config._values)
    yield
    nova.config._values.clear()
    nova.config._values.update(saved)
