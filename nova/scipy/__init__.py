"""nova.scipy: SciPy functions over nova.numpy (imported lazily as `nova.scipy`), as jax.scipy:
cluster (vq), integrate, interpolate, linalg, ndimage, signal, special, stats."""

from nova.scipy import (  # noqa: F401
    cluster,
    integrate,
    interpolate,
    linalg,
    ndimage,
    signal,
    special,
    stats,
)
