"""The chi-squared distribution with df degrees of freedom (scipy.stats.chi2,
jax.scipy.stats.chi2): the gamma distribution with shape df / 2 and scale 2 scale, so every
function here is nova.scipy.stats.gamma's.

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for df <= 0, scale <= 0 or NaN input; ShapeError (a ValueError) when shapes do not
broadcast.
"""

from __future__ import annotations

from nova.scipy.stats import _common as c
from nova.scipy.stats import gamma


def _as_gamma(name, x, df, loc, scale):
    x, df, loc, scale = c.promote(name, x, df, loc, scale)
    return x, 0.5 * df, loc, 2.0 * scale


def logpdf(x, df, loc=0, scale=1):
    """gamma.logpdf(x, df / 2, loc, 2 scale)."""
    return gamma.logpdf(*_as_gamma("chi2.logpdf", x, df, loc, scale))


def pdf(x, df, loc=0, scale=1):
    """gamma.pdf(x, df / 2, loc, 2 scale)."""
    return gamma.pdf(*_as_gamma("chi2.pdf", x, df, loc, scale))


def cdf(x, df, loc=0, scale=1):
    """gamma.cdf(x, df / 2, loc, 2 scale) = gammainc(df / 2, y / 2)."""
    return gamma.cdf(*_as_gamma("chi2.cdf", x, df, loc, scale))


def logcdf(x, df, loc=0, scale=1):
    """gamma.logcdf(x, df / 2, loc, 2 scale)."""
    return gamma.logcdf(*_as_gamma("chi2.logcdf", x, df, loc, scale))


def sf(x, df, loc=0, scale=1):
    """gamma.sf(x, df / 2, loc, 2 scale) = gammaincc(df / 2, y / 2)."""
    return gamma.sf(*_as_gamma("chi2.sf", x, df, loc, scale))


def logsf(x, df, loc=0, scale=1):
    """gamma.logsf(x, df / 2, loc, 2 scale)."""
    return gamma.logsf(*_as_gamma("chi2.logsf", x, df, loc, scale))
