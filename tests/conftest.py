"""Shared test configuration: hypothesis profile, a private kernel cache, config restore."""

import importlib.util
import os
import tempfile

import pytest

_NEEDED = ("numpy", "ml_dtypes", "hypothesis", "jax", "optax", "xdist", "mlir")
_missing = [m for m in _NEEDED if importlib.util.find_spec(m) is None]
if _missing:
    # A pytest outside the project's environment: say how to run the suite instead of failing
    # every module on import.
    raise pytest.UsageError(
        f"the test environment lacks {', '.join(_missing)}. Run `make test` (it creates .venv "
        "and installs everything); `make test TESTS=tests/test_ir.py` runs a subset."
    )

import numpy as np  # noqa: E402
from hypothesis import HealthCheck, settings

# Tests compile into their own kernel cache (not the user's ~/.cache/nova), so every run also
# exercises cold compiles. NOVA_TEST_CACHE_DIR reuses a cache between runs when wanted.
os.environ["NOVA_CACHE_DIR"] = os.environ.get("NOVA_TEST_CACHE_DIR") or tempfile.mkdtemp(
    prefix="nova-test-cache-")
# Verify the Program after every pass (outside the tests only after the last one).
os.environ["NOVA_VERIFY_PASSES"] = "1"

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
