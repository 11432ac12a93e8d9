"""The argument handling every nova.scipy.stats distribution shares: promotion to one float dtype
with broadcasting, the loc/scale standardisation, parameter validity masks (NaN where SciPy gives
NaN), the support masks of discrete distributions, and log1mexp."""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.core import dtypes
from nova.numpy_impl.util import promote as _promote

LOG_2PI = math.log(2.0 * math.pi)


def promote(name: str, *args):
    """args as Arrays of one float dtype (ints and bools become float32, Python scalars are weakly
    typed, float64 stays float64) broadcast to one shape; ShapeError naming `name` and the
    shapes when they do not broadcast."""
    return _promote(name, *args, to_inexact=True)


def float_dtype(*args):
    """The float dtype args promote to (float32 when that is an int or bool type)."""
    dtype = jnp.result_type(*args)
    return dtype if jnp.issubdtype(dtype, jnp.floating) else dtypes.default_float


def safe(cond, x, fill: float):
    """x where cond, `fill` elsewhere: the input of a branch that a later `where` discards, kept
    in that branch's domain so its value and gradient stay finite (no NaN leaks into the
    gradient through the unused side of the select)."""
    return jnp.where(cond, x, fill)


def nan_unless(ok, value):
    """value where ok, NaN elsewhere (SciPy's answer for invalid parameters or NaN input)."""
    return jnp.where(ok, value, jnp.nan)


def loc_scale(name: str, x, loc, scale, *params):
    """Standardises x for a location-scale family: returns (z, scale, ok, params) with every
    argument promoted and broadcast, z = (x - loc) / scale, ok = (scale > 0) & (z is not NaN),
    and scale replaced by 1 where it is not positive (so log(scale) stays finite)."""
    x, loc, scale, *params = promote(name, x, loc, scale, *params)
    positive = scale > 0
    scale = safe(positive, scale, 1.0)
    z = (x - loc) / scale
    return z, scale, positive & ~jnp.isnan(z), params


def unit_interval(q):
    """True where 0 <= q <= 1 (False for NaN): the valid arguments of a ppf or isf."""
    return (q >= 0) & (q <= 1)


def lattice(name: str, k, loc, *params):
    """Promotes and broadcasts a discrete distribution's arguments: returns (k - loc, ok, params)
    with ok = (k - loc is not NaN)."""
    k, loc, *params = promote(name, k, loc, *params)
    k = k - loc
    return k, ~jnp.isnan(k), params


def is_integral(v):
    """True where v is a whole number (False for NaN and +-inf)."""
    return jnp.isfinite(v) & (v == jnp.floor(v))


def off_support(k, low, high=None):
    """True where the point k (not NaN) of a discrete distribution is not a whole number in
    [low, high] (high=None: no upper end), so its pmf is 0."""
    off = ~is_integral(k) | (k < low)
    if high is not None:
        off = off | (k > high)
    return off & ~jnp.isnan(k)


def log1mexp(d):
    """log(1 - exp(d)) for d <= 0, accurate over the whole range: log(-expm1(d)) above -log 2,
    log1p(-exp(d)) below (M. Maechler, "Accurately computing log(1 - exp(-|a|))", 2012).
    -inf at d = 0, 0 at d = -inf, NaN for d > 0."""
    near = d > -math.log(2.0)
    dn = safe(near, d, -1.0)
    df = jnp.where(near, -1.0, d)
    return jnp.where(near, jnp.log(-jnp.expm1(dn)), jnp.log1p(-jnp.exp(df)))


def log1mexp_of_exp(u):
    """log(1 - exp(-exp(u))), the Gumbel log tails: log1mexp(-exp(u)), and where t = exp(u) is
    below 1e-5 the series u - t/2 + t^2/24 of log((1 - exp(-t)) / t) + log(t), which stays
    finite (about u) after exp(u) underflows."""
    t = jnp.exp(u)
    small = t < 1e-5
    ts = safe(small, t, 0.0)
    return jnp.where(small, u - 0.5 * ts + ts * ts / 24.0, log1mexp(-jnp.where(small, 1.0, t)))


def log_of_complements(p, q):
    """log(p) given p and its complement q = 1 - p, each computed directly: log1p(-q) where
    p > 1/2 (log(p) would round to 0 there while q still holds the digits), log(p) below."""
    upper = p > 0.5
    return jnp.where(upper, jnp.log1p(-safe(upper, q, 0.0)), jnp.log(jnp.where(upper, 1.0, p)))


def log_comb(n, k):
    """log(n! / (k! (n - k)!)) for 0 <= k <= n, through gammaln."""
    from nova.scipy.special import gammaln

    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)
