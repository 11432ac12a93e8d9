"""nova.scipy: SciPy functions over nova.numpy (imported lazily as `nova.scipy`)."""

from nova.scipy import special  # noqa: F401
