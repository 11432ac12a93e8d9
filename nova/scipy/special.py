"""nova.scipy.special: special functions built from nova.numpy (their gradients come from it)."""

from __future__ import annotations

import nova.numpy as jnp
from nova.numpy_impl.util import normalize_axes, promote

__all__ = ["logsumexp"]


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a))) over `axis`, computed stably (scipy.special.logsumexp).

    a: array (int and bool become float32); axis None, int or tuple (negative counts from the
    end); b: weights broadcastable with a (where b == 0 the term is left out even if a is inf);
    keepdims keeps the reduced axes as size 1. Returns the result with a's shape less `axis`, or
    `(log|s|, sign(s))` when return_sign=True (sign 0 for an empty or all -inf sum); without it a
    negative weighted sum gives NaN, as SciPy.

    Stability: exp runs on a shifted by (about) the maximum, so nothing overflows; a row of all
    -inf gives -inf, a +inf entry gives +inf. The shift is floor(max), which is exact enough for
    stability and not differentiable, so the gradient is exactly softmax(a) * b (no cotangent
    reaches the argmax) and stays finite for rows that hold -inf entries besides finite ones.
    Raises ValueError for an axis out of range, ShapeError when a and b do not broadcast.
    """
    if b is None:
        (x,) = promote("logsumexp", a, to_inexact=True)
    else:
        x, w = promote("logsumexp", a, b, to_inexact=True)
        # SciPy's rule: a zero weight removes its term, whatever a holds there.
        x = jnp.where(w != 0, x, -jnp.inf)
    axes = normalize_axes(axis, x.ndim)
    m = jnp.max(x, axis=axes, keepdims=True, initial=-jnp.inf)
    shift = jnp.floor(m)  # floor is not differentiable: no cotangent flows into the max
    shift = jnp.where(jnp.isfinite(shift), shift, jnp.zeros_like(shift))
    e = jnp.exp(x - shift)
    if b is not None:
        e = w * e
    s = jnp.sum(e, axis=axes, keepdims=True)
    if return_sign:
        sign = jnp.sign(s)
        s = jnp.abs(s)
    out = jnp.log(s) + shift
    if not keepdims:
        out = jnp.squeeze(out, axis=axes) if axes else out
        if return_sign:
            sign = jnp.squeeze(sign, axis=axes) if axes else sign
    return (out, sign) if return_sign else out
