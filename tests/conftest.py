"""Shared test configuration: hypothesis profile and float64-friendly numpy printing."""

import numpy as np
from hypothesis import HealthCheck, settings

settings.register_profile(
    "nova", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("nova")
np.set_printoptions(precision=6, suppress=True)
