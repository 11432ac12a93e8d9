"""The von Mises distribution on the circle with concentration kappa (scipy.stats.vonmises,
jax.scipy.stats.vonmises): density exp(kappa cos x) / (2 pi I0(kappa)), periodic in x (every
real x is in the support, as SciPy's).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for kappa < 0 or NaN input (kappa = 0 is the uniform density 1 / (2 pi));
ShapeError (a ValueError) when shapes do not broadcast.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def logpdf(x, kappa):
    """kappa (cos x - 1) - log(2 pi i0e(kappa)): through the exponentially scaled Bessel
    function, so large kappa does not overflow I0."""
    x, kappa = c.promote("vonmises.logpdf", x, kappa)
    ok = (kappa >= 0) & ~jnp.isnan(x)
    k = c.safe(kappa >= 0, kappa, 1.0)
    v = k * (jnp.cos(x) - 1.0) - c.LOG_2PI - jnp.log(special.i0e(k))
    return c.nan_unless(ok, v)


def pdf(x, kappa):
    """The von Mises density exp(logpdf(x, kappa))."""
    return jnp.exp(logpdf(x, kappa))
