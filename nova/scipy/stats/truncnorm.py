"""The normal distribution N(loc, scale^2) truncated to [loc + a scale, loc + b scale]
(scipy.stats.truncnorm, jax.scipy.stats.truncnorm; a and b are in standard units, as SciPy's).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN unless a < b and scale > 0, NaN for NaN input; ShapeError (a ValueError) when shapes
do not broadcast. Everything is computed in log space from the normal mass between two points,
taken on the side of 0 where it does not cancel (as SciPy's _log_gauss_mass), so truncations far
in a tail (a = 30, b = 31) keep full accuracy.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def _log_gauss_mass(lo, hi):
    """log(ndtr(hi) - ndtr(lo)) for lo <= hi: in the left half as log ndtr(hi) + log(1 -
    ndtr(lo) / ndtr(hi)), in the right half the mirror image in the survival functions, and
    log1p(-ndtr(lo) - ndtr(-hi)) when the interval holds 0."""
    left = hi <= 0
    right = lo > 0
    mid = ~left & ~right
    lo_l, hi_l = c.safe(left, lo, -1.0), c.safe(left, hi, 0.0)
    ln_hi = special.log_ndtr(hi_l)
    v_left = ln_hi + c.log1mexp(special.log_ndtr(lo_l) - ln_hi)
    lo_r, hi_r = c.safe(right, lo, 0.5), c.safe(right, hi, 1.0)
    ln_lo = special.log_ndtr(-lo_r)
    v_right = ln_lo + c.log1mexp(special.log_ndtr(-hi_r) - ln_lo)
    lo_m, hi_m = c.safe(mid, lo, -1.0), c.safe(mid, hi, 1.0)
    v_mid = jnp.log1p(-special.ndtr(lo_m) - special.ndtr(-hi_m))
    return jnp.where(left, v_left, jnp.where(right, v_right, v_mid))


def _prepare(name, x, a, b, loc, scale):
    z, scale, ok, (a, b) = c.loc_scale(name, x, loc, scale, a, b)
    good = a < b
    a, b = c.safe(good, a, -1.0), c.safe(good, b, 1.0)
    return z, a, b, scale, ok & good


def logpdf(x, a, b, loc=0, scale=1):
    """-z^2 / 2 - log(2 pi) / 2 - log(ndtr(b) - ndtr(a)) - log(scale) for a <= z <= b, -inf
    outside."""
    z, a, b, scale, ok = _prepare("truncnorm.logpdf", x, a, b, loc, scale)
    inside = (z >= a) & (z <= b)
    zs = c.safe(inside, z, 0.0)
    v = -0.5 * zs * zs - 0.5 * c.LOG_2PI - _log_gauss_mass(a, b) - jnp.log(scale)
    return c.nan_unless(ok, jnp.where(inside, v, -jnp.inf))


def pdf(x, a, b, loc=0, scale=1):
    """The truncated normal density exp(logpdf(x, a, b, loc, scale))."""
    return jnp.exp(logpdf(x, a, b, loc, scale))


def _log_cdf_sf(name, x, a, b, loc, scale):
    # log mass of [a, z] and of [z, b] over that of [a, b]; where one is near 0 (its mass near
    # 1) it is recomputed as log1mexp of the other, which has no cancellation there
    z, a, b, _, ok = _prepare(name, x, a, b, loc, scale)
    zc = jnp.clip(z, a, b)
    log_total = _log_gauss_mass(a, b)
    log_cdf = _log_gauss_mass(a, zc) - log_total
    log_sf = _log_gauss_mass(zc, b) - log_total
    log_cdf, log_sf = (jnp.where(log_cdf > -0.1, c.log1mexp(jnp.minimum(log_sf, 0.0)), log_cdf),
                       jnp.where(log_sf > -0.1, c.log1mexp(jnp.minimum(log_cdf, 0.0)), log_sf))
    return c.nan_unless(ok, log_cdf), c.nan_unless(ok, log_sf)


def logcdf(x, a, b, loc=0, scale=1):
    """log CDF: -inf below a, 0 above b."""
    return _log_cdf_sf("truncnorm.logcdf", x, a, b, loc, scale)[0]


def cdf(x, a, b, loc=0, scale=1):
    """The CDF exp(logcdf(x, a, b, loc, scale))."""
    return jnp.exp(_log_cdf_sf("truncnorm.cdf", x, a, b, loc, scale)[0])


def logsf(x, a, b, loc=0, scale=1):
    """log survival function: 0 below a, -inf above b."""
    return _log_cdf_sf("truncnorm.logsf", x, a, b, loc, scale)[1]


def sf(x, a, b, loc=0, scale=1):
    """The survival function exp(logsf(x, a, b, loc, scale))."""
    return jnp.exp(_log_cdf_sf("truncnorm.sf", x, a, b, loc, scale)[1])
