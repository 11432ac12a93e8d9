"""The beta distribution with shapes a, b on [loc, loc + scale] (scipy.stats.beta,
jax.scipy.stats.beta): density y^(a-1) (1-y)^(b-1) / B(a, b) / scale for
y = (x - loc) / scale in [0, 1].

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for a <= 0, b <= 0, scale <= 0 or NaN input; ShapeError (a ValueError) when shapes
do not broadcast. The CDF is the regularized incomplete beta function I_y(a, b) and the SF
I_{1-y}(b, a) (no 1 - I in the right tail).
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def _prepare(name, x, a, b, loc, scale):
    y, scale, ok, (a, b) = c.loc_scale(name, x, loc, scale, a, b)
    good = (a > 0) & (b > 0)
    return y, c.safe(good, a, 1.0), c.safe(good, b, 1.0), scale, ok & good


def logpdf(x, a, b, loc=0, scale=1):
    """(a - 1) log(y) + (b - 1) log1p(-y) - betaln(a, b) - log(scale) on [0, 1] (inf at an end
    where the exponent is negative), -inf outside."""
    y, a, b, scale, ok = _prepare("beta.logpdf", x, a, b, loc, scale)
    inside = (y >= 0) & (y <= 1)
    ys = c.safe(inside, y, 0.5)
    v = (special.xlogy(a - 1.0, ys) + special.xlog1py(b - 1.0, -ys) - special.betaln(a, b)
         - jnp.log(scale))
    return c.nan_unless(ok, jnp.where(inside, v, -jnp.inf))


def pdf(x, a, b, loc=0, scale=1):
    """The beta density exp(logpdf(x, a, b, loc, scale))."""
    return jnp.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0, scale=1):
    """I_y(a, b) = betainc(a, b, y), y clipped to [0, 1]."""
    y, a, b, _, ok = _prepare("beta.cdf", x, a, b, loc, scale)
    return c.nan_unless(ok, special.betainc(a, b, jnp.clip(y, 0.0, 1.0)))


def logcdf(x, a, b, loc=0, scale=1):
    """log I_y(a, b), as log1p(-I_{1-y}(b, a)) where the CDF is above 1/2."""
    return c.log_of_complements(cdf(x, a, b, loc, scale), sf(x, a, b, loc, scale))


def sf(x, a, b, loc=0, scale=1):
    """I_{1-y}(b, a) = betainc(b, a, 1 - y), y clipped to [0, 1]."""
    y, a, b, _, ok = _prepare("beta.sf", x, a, b, loc, scale)
    return c.nan_unless(ok, special.betainc(b, a, 1.0 - jnp.clip(y, 0.0, 1.0)))


def logsf(x, a, b, loc=0, scale=1):
    """log I_{1-y}(b, a), as log1p(-I_y(a, b)) where the SF is above 1/2."""
    return c.log_of_complements(sf(x, a, b, loc, scale), cdf(x, a, b, loc, scale))
