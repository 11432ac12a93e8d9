"""Private helpers shared by the nova.scipy.special modules (promotion, safe inputs, loops)."""

from __future__ import annotations

import nova.numpy as jnp
from nova.numpy_impl.util import promote


def _float(*args):
    return promote("special", *args, to_inexact=True)


def _lax():
    from nova import lax

    return lax


def _safe(cond, x, fill):
    """x where cond, else `fill`: the input of a branch that select() later discards, kept in
    that branch's domain so its value and derivative stay finite."""
    return jnp.where(cond, x, jnp.full_like(x, fill))


def _fori(n, body, init):
    return _lax().fori_loop(0, n, body, init)


def _tiny(x):
    return float(jnp.finfo(x.dtype).tiny) * 1e3


def _is_int(x):
    return x == jnp.floor(x)


def _cdiv(ar, ai, br, bi):
    """(ar + i ai) / (br + i bi) on pairs of reals (Nova has no complex dtype), with b scaled by
    max(|br|, |bi|) first so that |b|^2 cannot overflow."""
    s = jnp.maximum(jnp.abs(br), jnp.abs(bi))
    cr, ci = br / s, bi / s
    den = br * cr + bi * ci
    return (ar * cr + ai * ci) / den, (ai * cr - ar * ci) / den


_EULER = 0.5772156649015329
