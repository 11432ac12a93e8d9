"""Student's t distribution with df degrees of freedom (scipy.stats.t, jax.scipy.stats.t).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for df <= 0, scale <= 0 or NaN input; ShapeError (a ValueError) when shapes do not
broadcast. df = inf gives the normal density, as SciPy.
"""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def _log_gamma_half_ratio(h):
    """log Gamma(h + 1/2) - log Gamma(h). Above 40 from Stirling's series (A&S 6.1.40, to the
    z^-5 term: truncation < 1e-15) as 1/2 log h + (h log1p(1 / (2h)) - 1/2) plus the
    difference of the series' tails, so the two ~h log h gammalns do not cancel (in float32
    they lose ~3e-4 at df = 1000); gammaln below."""
    big = h >= 40.0
    hb = c.safe(big, h, 40.0)

    def tail(z):
        w = 1.0 / (z * z)
        return (1.0 / z) * (1.0 / 12 - w * (1.0 / 360 - w / 1260))

    stirling = (0.5 * jnp.log(hb) + (hb * jnp.log1p(0.5 / hb) - 0.5) + tail(hb + 0.5) - tail(hb))
    hs = jnp.where(big, 1.0, h)
    return jnp.where(big, stirling, special.gammaln(hs + 0.5) - special.gammaln(hs))


def logpdf(x, df, loc=0, scale=1):
    """gammaln((df + 1) / 2) - gammaln(df / 2) - log(pi df) / 2 - (df + 1) / 2 log1p(z^2 / df)
    - log(scale) (the gammaln difference without cancellation for large df); the normal log
    density where df is inf."""
    z, scale, ok, (df,) = c.loc_scale("t.logpdf", x, loc, scale, df)
    ok = ok & (df > 0)
    finite = jnp.isfinite(df) & (df > 0)
    d = c.safe(finite, df, 1.0)
    v = (_log_gamma_half_ratio(0.5 * d) - 0.5 * (math.log(math.pi) + jnp.log(d))
         - 0.5 * (d + 1.0) * jnp.log1p(z * z / d))
    normal = -0.5 * z * z - 0.5 * c.LOG_2PI
    return c.nan_unless(ok, jnp.where(finite, v, normal) - jnp.log(scale))


def pdf(x, df, loc=0, scale=1):
    """The t density exp(logpdf(x, df, loc, scale))."""
    return jnp.exp(logpdf(x, df, loc, scale))
