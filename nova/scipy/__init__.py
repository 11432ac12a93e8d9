"""nova.scipy: SciPy functions over nova.numpy (imported lazily as `nova.scipy`), as jax.scipy:
cluster (vq), integrate, interpolate, linalg, ndimage, signal, special."""

from nova.scipy import cluster, integrate, interpolate, linalg, ndimage, signal, special  # noqa: F401
