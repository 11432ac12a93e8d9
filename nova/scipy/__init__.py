"""nova.scipy: SciPy functions over nova.numpy (imported lazily as `nova.scipy`)."""

from nova.scipy import linalg, special  # noqa: F401
