"""Shared test configuration: hypothesis profile, a private kernel cache, config restore."""

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# Tests compile into their own kernel cache (not the user's ~/.cache/nova), so every run also
# exercises cold compiles. NOVA_TEST_CACHE_DIR reuses a cache between runs when wanted.
os.environ["NOVA_CACHE_DIR"] = os.environ.get("NOVA_TEST_CACHE_DIR") or tempfile.mkdtemp(
    prefix="nova-test-cache-")

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
