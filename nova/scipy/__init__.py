"""nova.scipy: SciPy functions over nova.numpy (imported lazily as `nova.scipy`), as jax.scipy:
cluster (vq), fft, integrate, interpolate, linalg, ndimage, signal, special, stats."""

from nova.scipy import (  # noqa: F401
    cluster,
    fft,
    integrate,
    interpolate,
    linalg,
    ndimage,
    signal,
    special,
    stats,
)
