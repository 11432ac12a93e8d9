"""Polynomials (polyval, polyadd, polysub, polymul, polyder, polyint, polyfit, vander),
integration and differences of samples (trapezoid, gradient, interp, unwrap) and window
functions (bartlett, blackman, hamming, hanning) of nova.numpy, as NumPy's and jax.numpy's,
written over existing nova.numpy / nova.lax functions (jit, grad, vmap and every backend work
without new kernels).

Integer arguments that fix shapes (deg, m, M, N, edge_order) must be static Python integers;
integer and bool array inputs become float32 (jax.numpy's rule) except in polyadd, polysub and
vander, which keep the promoted dtype as numpy and jax.numpy do.
"""

from __future__ import annotations

import builtins
import functools

import numpy as np

# nova.numpy is only partly initialized while it imports this module; it is complete by the time
# any function here runs.
from nova import numpy_api as jnp
from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.core.trace import current_trace
from nova.numpy_impl.families_common import _concrete, _filled, _int
from nova.numpy_impl.util import (
    asarray,
    broadcast_shapes,
    broadcast_to,
    normalize_axis,
    where_am_i,
)
from nova.ops import lax

__all__ = [
    "bartlett",
    "blackman",
    "gradient",
    "hamming",
    "hanning",
    "interp",
    "poly",
    "polyadd",
    "polyder",
    "polydiv",
    "polyfit",
    "polyint",
    "polymul",
    "polysub",
    "polyval",
    "roots",
    "trapezoid",
    "unwrap",
    "vander",
]


# --- helpers --------------------------------------------------------------------------------


def _is_py_scalar(v) -> bool:
    return isinstance(v, bool | int | float) and not isinstance(v, np.generic)


def _arr(name, arg, v):
    """v as a nova Array; TypeError / ValueError naming `name` and `arg` for what cannot be one."""
    if v is None or isinstance(v, str):
        raise TypeError(f"{name}: {arg} must be an array, got {type(v).__name__}{where_am_i()}")
    try:
        return asarray(v)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{name}: {arg}: {e}") from None


def _promoted(name, named, inexact=True):
    """The values of `named` ({arg: value}) as Arrays of one dtype: the promotion of all of them
    (Python scalars weakly typed), a float dtype when `inexact` (integers and bool become the
    default float32)."""
    vals = {}
    for arg, v in named.items():
        vals[arg] = v if _is_py_scalar(v) else _arr(name, arg, v)
    dt = dtypes.result_type(*vals.values())
    if inexact and not dtypes.is_inexact(dt):  # (complex stays complex)
        dt = dtypes.default_float
    return [asarray(v, dt) for v in vals.values()]


def _slice(x, start, stop, axis):
    """x[start:stop] along `axis` (non-negative, clamped bounds), as lax.slice_in_dim."""
    n = x.shape[axis]
    start = builtins.min(builtins.max(start if start >= 0 else n + start, 0), n)
    stop = builtins.min(builtins.max(stop if stop >= 0 else n + stop, start), n)
    return lax.slice_in_dim(x, start, stop, axis=axis)


def _poly1d(name, arg, a):
    if a.ndim > 1:
        raise ValueError(f"{name}: {arg} must be a scalar or 1-d array of coefficients, got "
                         f"shape {a.shape}{where_am_i()}")
    return jnp.atleast_1d(a)


def _order(name, arg, v, what):
    k = _int(name, arg, v)
    if k < 0:
        raise ValueError(f"{name}: {arg} ({what}) must be non-negative, got {k}{where_am_i()}")
    return k


# --- polynomials ----------------------------------------------------------------------------


def polyval(p, x, *, unroll=16):
    """The polynomial with coefficients p (highest degree first) at x (numpy.polyval).

    p: shape (n, ...) -- coefficients along axis 0 (numpy iterates over p's first axis); x:
    any shape. Result: shape broadcast(p.shape[1:], x.shape), the promoted float dtype
    (integers become float32, as jax.numpy). Empty p gives zeros. Algorithm: Horner's scheme
    (numpy.polyval), unrolled at trace time (n is static); `unroll` is accepted for
    jax.numpy compatibility and ignored. Differentiable in p and x. Raises ValueError for a
    0-d p, ShapeError when p.shape[1:] and x.shape do not broadcast.
    """
    del unroll
    p, x = _promoted("polyval", {"p": p, "x": x})
    if p.ndim == 0:
        raise ValueError(f"polyval: p must be at least 1-d (coefficients along axis 0), got a "
                         f"0-d array{where_am_i()}")
    shape = broadcast_shapes(p.shape[1:], x.shape, name="polyval")
    if p.shape[0] == 0:
        return _filled(shape, 0, x.dtype)
    xb = broadcast_to(x, shape)
    y = broadcast_to(p[0], shape)
    for i in range(1, p.shape[0]):
        y = jnp.add(jnp.multiply(y, xb), p[i])
    return y


def _padded_pair(name, a1, a2, inexact):
    a1, a2 = _promoted(name, {"a1": a1, "a2": a2}, inexact=inexact)
    a1, a2 = _poly1d(name, "a1", a1), _poly1d(name, "a2", a2)
    n = builtins.max(a1.shape[0], a2.shape[0])

    def pad(a):
        k = n - a.shape[0]
        return a if k == 0 else jnp.concatenate([_filled((k,), 0, a.dtype), a])

    return pad(a1), pad(a2)


def polyadd(a1, a2):
    """The sum of two polynomials (numpy.polyadd): coefficients highest degree first.

    a1, a2: scalars or 1-d arrays; the shorter is padded with leading zeros. Result: shape
    (max(len(a1), len(a2)),), the promoted dtype (integers stay integers, as numpy and
    jax.numpy); leading zeros are not trimmed. Raises ValueError for an operand of more than
    one dimension.
    """
    a, b = _padded_pair("polyadd", a1, a2, inexact=False)
    return jnp.add(a, b)


def polysub(a1, a2):
    """The difference a1 - a2 of two polynomials (numpy.polysub); shapes, dtypes and errors as
    polyadd."""
    a, b = _padded_pair("polysub", a1, a2, inexact=False)
    return jnp.subtract(a, b)


def polymul(a1, a2, *, trim_leading_zeros=False):
    """The product of two polynomials (numpy.polymul): the full convolution of the coefficients.

    a1, a2: scalars or 1-d arrays, highest degree first. Result: shape
    (len(a1) + len(a2) - 1,), the promoted float dtype (integers become float32, as
    jax.numpy). An empty operand counts as the zero polynomial [0] (as jax.numpy; numpy raises).
    trim_leading_zeros (jax.numpy's keyword) drops the operands' leading zeros first, which
    needs concrete values. Differentiable in both operands. Raises ValueError for an operand of
    more than one dimension, TypeError for trim_leading_zeros under a trace.
    """
    a, b = _promoted("polymul", {"a1": a1, "a2": a2})
    a, b = _poly1d("polymul", "a1", a), _poly1d("polymul", "a2", b)
    if trim_leading_zeros:
        trimmed = []
        for arg, v in (("a1", a), ("a2", b)):
            c = _concrete(v)
            if c is None:
                raise TypeError(f"polymul: trim_leading_zeros=True needs a concrete {arg} (its "
                                f"length depends on the values), not a traced one{where_am_i()}")
            nz = np.flatnonzero(c)
            trimmed.append(v[int(nz[0]):] if nz.size else v[:0])
        a, b = trimmed
    if a.shape[0] == 0:
        a = _filled((1,), 0, a.dtype)
    if b.shape[0] == 0:
        b = _filled((1,), 0, b.dtype)
    return jnp.convolve(a, b, mode="full")


def polyder(p, m=1):
    """The m-th derivative of the polynomial p (numpy.polyder).

    p: scalar or 1-d coefficients, highest degree first; m: a non-negative Python int. Result:
    shape (max(len(p) - m, 0),), the float dtype of p (integers become float32, as jax.numpy).
    Algorithm: p[:-m] times the falling factorials k (k-1) ... (k-m+1) of the powers k.
    Differentiable in p. Raises TypeError for a non-integer m, ValueError for m < 0 or a p of
    more than one dimension.
    """
    m = _order("polyder", "m", m, "order of the derivative")
    (p,) = _promoted("polyder", {"p": p})
    p = _poly1d("polyder", "p", p)
    if m == 0:
        return p
    n = p.shape[0]
    if n <= m:
        return p[:0]
    k = np.arange(n - 1, m - 1, -1, dtype=np.float64)  # the powers of p[:-m]
    coeff = np.ones_like(k)
    for j in range(m):
        coeff *= k - j
    return jnp.multiply(p[: n - m], asarray(coeff.astype(p.dtype)))


def polyint(p, m=1, k=None):
    """The m-th antiderivative of the polynomial p (numpy.polyint).

    p: scalar or 1-d coefficients, highest degree first; m: a non-negative Python int; k: the
    integration constants, a scalar (used for every integration) or a 1-d array of at least m
    values (numpy's order: k[0] is the constant of the first integration, which ends as the
    coefficient of x**(m-1)); None means zeros. Result: shape (len(p) + m,), the promoted
    float dtype of p and k. Differentiable in p and k. Raises TypeError for a non-integer m,
    ValueError for m < 0, a p of more than one dimension, or k of the wrong length.
    """
    m = _order("polyint", "m", m, "order of the integral")
    p, kk = _promoted("polyint", {"p": p, "k": 0 if k is None else k})
    p = _poly1d("polyint", "p", p)
    if kk.ndim > 1:
        raise ValueError(f"polyint: k must be a scalar or a 1-d array, got shape {kk.shape}"
                         f"{where_am_i()}")
    kk = jnp.atleast_1d(kk)
    if kk.shape[0] == 1 and m > 1:
        kk = broadcast_to(kk, (m,))
    if kk.shape[0] < m:
        raise ValueError(f"polyint: k must be a scalar or a 1-d array of length 1 or >= m = {m}, "
                         f"got shape {kk.shape}{where_am_i()}")
    for j in range(m):
        n = p.shape[0]
        div = asarray(np.arange(n, 0, -1).astype(p.dtype))
        p = jnp.concatenate([jnp.divide(p, div), kk[j:j + 1]])
    return p


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of x (numpy.vander): column j is x**(N-1-j), or x**j when
    `increasing`.

    x: 1-d, length n; N: a non-negative Python int, default n. Result: shape (n, N), x's dtype
    (integers stay integers, bool becomes int32, as jax.numpy). Powers come from repeated
    multiplication (numpy.vander uses multiply.accumulate; here doubling blocks, so the last
    ulp may differ), so negative bases and 0**0 = 1 are exact and gradients have no 0 * inf.
    Raises ValueError for an x that is not 1-d or N < 0, TypeError for a non-integer N.
    """
    x = _arr("vander", "x", x)
    if x.ndim != 1:
        raise ValueError(f"vander: x must be a one-dimensional array, got shape {x.shape}"
                         f"{where_am_i()}")
    if x.dtype == dtypes.bool_:
        x = asarray(x, dtypes.default_int)
    n = x.shape[0]
    N = n if N is None else _order("vander", "N", N, "number of columns")
    if N == 0:
        return _filled((n, 0), 0, x.dtype)
    col = lax.reshape(x, (n, 1))
    block = _filled((n, 1), 1, x.dtype)  # x**0 .. x**(w-1)
    while block.shape[1] < N:
        w = block.shape[1]
        xw = jnp.multiply(block[:, w - 1:w], col)  # x**w
        block = jnp.concatenate([block, jnp.multiply(block[:, :builtins.min(w, N - w)], xw)],
                                axis=1)
    return block if increasing else lax.rev(block, (1,))


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial fit of degree deg to points (x, y) (numpy.polyfit).

    x: 1-d, length n >= 1; y: shape (n,) or (n, K) (K fits at once); deg: a non-negative Python
    int; w: optional 1-d weights of length n (applied to the residuals, as numpy). Result: the
    coefficients, highest degree first, shape (deg + 1,) or (deg + 1, K), the promoted float
    dtype (integers become float32).

    Algorithm: as numpy, the weighted Vandermonde matrix's columns are scaled to unit norm; the
    least-squares problem is then solved by modified Gram-Schmidt applied to the matrix
    augmented by y (Bjorck 1967, "Solving linear least squares problems by Gram-Schmidt
    orthogonalization": backward stable, unlike the normal equations) and back substitution,
    unrolled at trace time. A column whose orthogonal remainder has norm <= rcond (default
    n * eps of the dtype, numpy's default) is dropped and its coefficient is 0 (numpy's SVD
    gives the minimum-norm solution instead; the two differ only for rank-deficient fits, where
    numpy warns RankWarning). full=True and cov=True are not supported (they need singular
    values / a covariance numpy gets from SVD). Called eagerly, the solve runs as one nova.jit
    program (cached per degree, rcond and weighting) rather than op by op.

    Raises TypeError for a non-integer deg, an x that is not 1-d or is empty, a y that is not
    1-d or 2-d, weights that are not 1-d (numpy's exception types); ShapeError (a ValueError)
    when the lengths of x, y and w differ; ValueError for deg < 0; NotImplementedError for
    full or cov.
    """
    deg = _order("polyfit", "deg", deg, "degree of the fit")
    if full or cov:
        raise NotImplementedError(f"polyfit: full=True and cov=True are not supported (they "
                                  f"need an SVD, which Nova does not have){where_am_i()}")
    named = {"x": x, "y": y} if w is None else {"x": x, "y": y, "w": w}
    arrs = _promoted("polyfit", named)
    x, y = arrs[0], arrs[1]
    if x.ndim != 1:
        raise TypeError(f"polyfit: expected a 1-d vector for x, got shape {x.shape}"
                        f"{where_am_i()}")
    if x.shape[0] == 0:
        raise TypeError(f"polyfit: expected a non-empty vector for x{where_am_i()}")
    if y.ndim not in (1, 2):
        raise TypeError(f"polyfit: expected a 1-d or 2-d array for y, got shape {y.shape}"
                        f"{where_am_i()}")
    if y.shape[0] != x.shape[0]:
        raise ShapeError(f"polyfit: expected x and y to have the same length, got shapes "
                         f"{x.shape} and {y.shape}{where_am_i()}")
    n, order = x.shape[0], deg + 1
    wt = None
    if w is not None:
        wt = arrs[2]
        if wt.ndim != 1:
            raise TypeError(f"polyfit: expected a 1-d array for weights w, got shape "
                            f"{wt.shape}{where_am_i()}")
        if wt.shape[0] != n:
            raise ShapeError(f"polyfit: expected w and y to have the same length, got shapes "
                             f"{wt.shape} and {y.shape}{where_am_i()}")
    tol = float(n * np.finfo(x.dtype).eps) if rcond is None else float(rcond)
    if current_trace() is None:
        # Eagerly, one compiled program instead of ~10 kernels per degree (each op of the
        # unrolled Gram-Schmidt would compile its own kernel per shape).
        return _polyfit_jitted(order, tol, wt is not None)(x, y, wt)
    return _polyfit_core(x, y, wt, order=order, tol=tol)


@functools.lru_cache(maxsize=64)
def _polyfit_jitted(order, tol, weighted):
    from nova.jit import jit

    if weighted:
        return jit(lambda x, y, w: _polyfit_core(x, y, w, order=order, tol=tol))
    fit = jit(lambda x, y: _polyfit_core(x, y, None, order=order, tol=tol))
    return lambda x, y, w: fit(x, y)


def _polyfit_core(x, y, w, *, order, tol):
    """numpy.polyfit's weighted, column-scaled least squares by modified Gram-Schmidt on
    [lhs | rhs] and back substitution (checked arguments, static order)."""
    n = x.shape[0]
    lhs = vander(x, order)
    rhs = y if y.ndim == 2 else lax.reshape(y, (n, 1))
    if w is not None:
        wc = lax.reshape(w, (n, 1))
        lhs, rhs = jnp.multiply(lhs, wc), jnp.multiply(rhs, wc)
    dt = lhs.dtype
    scale = jnp.sqrt(jnp.sum(jnp.multiply(lhs, lhs), axis=0))
    scale = jnp.where(jnp.equal(scale, 0), _filled(scale.shape, 1, dt), scale)
    lhs = jnp.divide(lhs, scale)
    rest = jnp.concatenate([lhs, rhs], axis=1)  # the columns not yet orthogonalised
    diag, rows, zs = [], [], []
    for j in range(order):
        v = rest[:, 0]
        r = jnp.sqrt(jnp.sum(jnp.multiply(v, v)))
        ok = jnp.greater(r, tol)
        r = jnp.where(ok, r, _filled((), 1, dt))
        q = jnp.where(ok, jnp.divide(v, r), _filled((n,), 0, dt))
        rest = rest[:, 1:]
        proj = jnp.matmul(q, rest)  # R[j, j+1:], then z[j]
        rest = jnp.subtract(rest, jnp.multiply(lax.reshape(q, (n, 1)), proj))
        diag.append(r)
        rows.append(proj[:order - j - 1])
        zs.append(proj[order - j - 1:])
    coefs = [None] * order  # back substitution of R c = z
    for j in range(order - 1, -1, -1):
        acc = zs[j]
        if j < order - 1:
            acc = jnp.subtract(acc, jnp.matmul(rows[j], jnp.stack(coefs[j + 1:])))
        coefs[j] = jnp.divide(acc, diag[j])
    c = jnp.divide(jnp.stack(coefs), lax.reshape(scale, (order, 1)))
    return c if y.ndim == 2 else lax.reshape(c, (order,))


# --- integration and differences of samples -------------------------------------------------


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of y along `axis` by the composite trapezoidal rule (numpy.trapezoid).

    y: at least 1-d; x: sample points, 1-d of length y.shape[axis] or an array that
    broadcasts against y (its differences taken along `axis`); else the spacing dx (scalar or
    broadcastable). Result: y's shape without `axis` (or the broadcast shape), the promoted
    float dtype (integers become float32); a length-0 or length-1 axis gives 0. Computed as
    numpy: sum(d * (y[1:] + y[:-1]) / 2). Differentiable in y, x and dx. Raises ValueError for
    an axis out of range (a 0-d y), ShapeError for an x of the wrong length or shapes that do not
    broadcast.
    """
    named = {"y": y, "dx": dx} if x is None else {"y": y, "x": x}
    arrs = _promoted("trapezoid", named)
    yv = arrs[0]
    ax = normalize_axis(axis, yv.ndim, "trapezoid: axis")
    m = yv.shape[ax]
    if x is None:
        d = arrs[1]
    else:
        xv = arrs[1]
        if xv.ndim == 1:
            if xv.shape[0] != m:
                raise ShapeError(f"trapezoid: x of shape {xv.shape} must have the length of y's "
                                 f"axis {axis} (y of shape {yv.shape}){where_am_i()}")
            d = jnp.diff(xv)
            d = lax.reshape(d, (d.shape[0],) + (1,) * (yv.ndim - 1 - ax))
        else:
            xax = normalize_axis(axis, xv.ndim, "trapezoid: axis (of x)")
            d = jnp.diff(xv, axis=xax)
    hi, lo = _slice(yv, 1, m, ax), _slice(yv, 0, builtins.max(m - 1, 0), ax)
    shape = broadcast_shapes(d.shape, hi.shape, name="trapezoid (x or dx against y)")
    terms = jnp.divide(jnp.multiply(d, jnp.add(hi, lo)), 2.0)
    return jnp.sum(broadcast_to(terms, shape), axis=normalize_axis(axis, len(shape)))


def _spacings(name, f, axes, varargs):
    """Per axis: ('uniform', h) with h a 0-d Array, or ('coords', dx) with dx the 1-d Array of
    coordinate differences, as numpy.gradient reads *varargs."""
    n = len(varargs)
    if n == 0:
        specs = [1.0] * len(axes)
    elif n == 1 and np.ndim(varargs[0]) == 0:
        specs = list(varargs) * len(axes)
    elif n == len(axes):
        specs = list(varargs)
    else:
        raise TypeError(f"{name}: invalid number of spacing arguments: got {n}, expected 0, 1 "
                        f"(a scalar) or {len(axes)} (one per axis){where_am_i()}")
    out = []
    for i, (ax, s) in enumerate(zip(axes, specs, strict=True)):
        s = s if _is_py_scalar(s) else _arr(name, f"varargs[{i}]", s)
        if np.ndim(s) == 0:
            out.append(("uniform", s))
            continue
        if s.ndim != 1:
            raise ValueError(f"{name}: distances must be either scalars or 1-d, got varargs[{i}] "
                             f"of shape {s.shape}{where_am_i()}")
        if s.shape[0] != f.shape[ax]:
            raise ShapeError(f"{name}: when 1-d, distances must match the length of the "
                             f"corresponding dimension: varargs[{i}] has shape {s.shape}, f "
                             f"has shape {f.shape} (axis {ax}){where_am_i()}")
        if not dtypes.is_float(s.dtype):
            s = asarray(s, dtypes.default_float)
        dx = jnp.diff(s)
        c = _concrete(dx)
        if c is not None and c.size and np.all(c == c[0]):  # numpy's uniform-spacing shortcut
            out.append(("uniform", dx[0]))
        else:
            out.append(("coords", dx))
    return out


def _gradient_1d(g, kind, h, edge_order):
    """numpy.gradient of g along its last axis."""
    def at(a, b):
        return _slice(g, a, b, g.ndim - 1)

    m = g.shape[-1]
    if kind == "uniform":
        interior = jnp.divide(jnp.subtract(at(2, m), at(0, m - 2)), jnp.multiply(2.0, h))
        if edge_order == 1:
            first = jnp.divide(jnp.subtract(at(1, 2), at(0, 1)), h)
            last = jnp.divide(jnp.subtract(at(m - 1, m), at(m - 2, m - 1)), h)
        else:
            first = jnp.add(jnp.add(jnp.multiply(jnp.divide(-1.5, h), at(0, 1)),
                                    jnp.multiply(jnp.divide(2.0, h), at(1, 2))),
                            jnp.multiply(jnp.divide(-0.5, h), at(2, 3)))
            last = jnp.add(jnp.add(jnp.multiply(jnp.divide(0.5, h), at(m - 3, m - 2)),
                                   jnp.multiply(jnp.divide(-2.0, h), at(m - 2, m - 1))),
                           jnp.multiply(jnp.divide(1.5, h), at(m - 1, m)))
    else:
        mul, add, sub, div = jnp.multiply, jnp.add, jnp.subtract, jnp.divide

        def comb(a, b, c, i, j, k):
            return add(add(mul(a, at(*i)), mul(b, at(*j))), mul(c, at(*k)))

        dx1, dx2 = h[:-1], h[1:]
        s = add(dx1, dx2)
        a = div(-dx2, mul(dx1, s))
        b = div(sub(dx2, dx1), mul(dx1, dx2))
        c = div(dx1, mul(dx2, s))
        interior = comb(a, b, c, (0, m - 2), (1, m - 1), (2, m))
        if edge_order == 1:
            first = div(sub(at(1, 2), at(0, 1)), h[0:1])
            last = div(sub(at(m - 1, m), at(m - 2, m - 1)), h[-1:])
        else:
            d1, d2 = h[0:1], h[1:2]
            s = add(d1, d2)
            first = comb(div(-add(mul(2.0, d1), d2), mul(d1, s)), div(s, mul(d1, d2)),
                         div(-d1, mul(d2, s)), (0, 1), (1, 2), (2, 3))
            d1, d2 = h[-2:-1], h[-1:]
            s = add(d1, d2)
            last = comb(div(d2, mul(d1, s)), div(-s, mul(d1, d2)),
                        div(add(mul(2.0, d2), d1), mul(d2, s)), (m - 3, m - 2), (m - 2, m - 1),
                        (m - 1, m))
    return jnp.concatenate([first, interior, last], axis=-1)


def gradient(f, *varargs, axis=None, edge_order=1):
    """The gradient of samples f (numpy.gradient): second-order accurate central differences
    in the interior and first- or second-order (edge_order 1 or 2) one-sided differences at the
    boundaries (numpy.gradient; Fornberg 1988, "Generation of finite difference formulas on
    arbitrarily spaced grids"), for uniform or non-uniform spacing.

    f: an array; varargs: none (unit spacing), one scalar spacing for every axis, or one per
    axis, each a scalar spacing or a 1-d array of coordinates of the axis' length (numpy's
    rules; eagerly, evenly spaced coordinates take the uniform formulas as numpy does); axis:
    None (all), an int or a tuple. Result: one array of f's shape per axis -- the array itself
    for one axis, else a tuple (as numpy 2) -- of f's float dtype (integers become float32;
    numpy gives float64). Differentiable in f and in the spacings.

    Raises TypeError for a wrong number of spacings or a non-integer edge_order, ValueError for
    edge_order not 1 or 2, an axis out of range or repeated, a spacing array that is not 1-d or
    an axis shorter than edge_order + 1; ShapeError when coordinates do not match their axis.
    """
    name = "gradient"
    edge_order = _int(name, "edge_order", edge_order)
    if edge_order not in (1, 2):
        raise ValueError(f"{name}: edge_order must be 1 or 2, got {edge_order}{where_am_i()}")
    (fv,) = _promoted(name, {"f": f})
    if axis is None:
        axes = tuple(range(fv.ndim))
    elif isinstance(axis, tuple | list):  # numpy keeps the given order
        axes = tuple(normalize_axis(a, fv.ndim, f"{name}: axis") for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError(f"{name}: repeated axis in {axis}{where_am_i()}")
    else:
        axes = (normalize_axis(axis, fv.ndim, f"{name}: axis"),)
    specs = _spacings(name, fv, axes, varargs)
    outs = []
    for ax, (kind, h) in zip(axes, specs, strict=True):
        if fv.shape[ax] < edge_order + 1:
            raise ValueError(f"{name}: shape of array too small to calculate a numerical "
                             f"gradient, at least edge_order + 1 = {edge_order + 1} elements "
                             f"are required along axis {ax}, f has shape {fv.shape}"
                             f"{where_am_i()}")
        g = jnp.moveaxis(fv, ax, -1)
        if kind == "uniform":
            # The coefficients (-1.5 / h, ...) in the promoted dtype: with h a Python scalar or
            # a float32 (traced) scalar they would round to float32.
            hd = fv.dtype if _is_py_scalar(h) else dtypes.result_type(fv.dtype, h.dtype)
            h = asarray(h, hd if dtypes.is_float(hd) else fv.dtype)
        out = _gradient_1d(g, kind, h, edge_order)
        outs.append(jnp.moveaxis(out.astype(fv.dtype), -1, ax))
    return outs[0] if len(outs) == 1 else tuple(outs)


def interp(x, xp, fp, left=None, right=None, period=None):
    """The piecewise-linear interpolant through (xp, fp) at x (numpy.interp).

    x: any shape; xp: 1-d increasing sample points (not checked, as numpy), fp: 1-d values of
    the same length; left / right: the values for x < xp[0] / x > xp[-1] (default fp[0] /
    fp[-1]); period: for periodic x-coordinates (xp is reduced modulo period and sorted; left
    and right are ignored). Result: x's shape, the promoted float dtype of x, xp and fp
    (float32 for float32 inputs, as jax.numpy; numpy gives float64). Algorithm (jax.numpy's):
    i = clip(searchsorted(xp, x, 'right'), 1, len(xp) - 1), then
    fp[i-1] + (x - xp[i-1]) / (xp[i] - xp[i-1]) * (fp[i] - fp[i-1]); zero-width intervals take
    fp[i-1]. Differentiable in x, xp and fp.

    Complex fp (and left / right) interpolate their real and imaginary parts alike and give
    the complex dtype of that float dtype, as NumPy and jax.numpy.

    Raises ValueError for xp or fp not 1-d, an empty xp, or period == 0 (when concrete), or
    a complex x or xp; ShapeError when xp and fp differ in length.
    """
    name = "interp"
    fc = fp if _is_py_scalar(fp) else _arr(name, "fp", fp)
    if dtypes.is_complex(dtypes.result_type(fc)):
        return _interp_complex(x, xp, fc, left, right, period)
    xv, xpv, fpv = _promoted(name, {"x": x, "xp": xp, "fp": fp})
    if xpv.ndim != 1 or fpv.ndim != 1:
        raise ValueError(f"{name}: data points xp and fp must be 1-d, got shapes {xpv.shape} and "
                         f"{fpv.shape}{where_am_i()}")
    if xpv.shape[0] != fpv.shape[0]:
        raise ShapeError(f"{name}: fp and xp are not of the same length: shapes {fpv.shape} and "
                         f"{xpv.shape}{where_am_i()}")
    if xpv.shape[0] == 0:
        raise ValueError(f"{name}: array of sample points xp is empty{where_am_i()}")
    dt = xv.dtype
    if period is not None:
        pc = _concrete(period)
        if pc is not None and np.ndim(pc) != 0:
            raise ValueError(f"{name}: period must be a scalar, got shape {np.shape(pc)}"
                             f"{where_am_i()}")
        if pc is not None and pc == 0:
            raise ValueError(f"{name}: period must be a non-zero value{where_am_i()}")
        per = jnp.abs(asarray(period, dt))
        xv = jnp.remainder(xv, per)
        xpv = jnp.remainder(xpv, per)
        order = jnp.argsort(xpv)
        xpv, fpv = jnp.take(xpv, order), jnp.take(fpv, order)
        xpv = jnp.concatenate([jnp.subtract(xpv[-1:], per), xpv, jnp.add(xpv[:1], per)])
        fpv = jnp.concatenate([fpv[-1:], fpv, fpv[:1]])
    n = xpv.shape[0]
    if n == 1:
        f = broadcast_to(fpv[0], xv.shape)
    else:
        i = jnp.clip(jnp.searchsorted(xpv, xv, side="right"), 1, n - 1)
        x0, x1 = jnp.take(xpv, jnp.subtract(i, 1)), jnp.take(xpv, i)
        f0, f1 = jnp.take(fpv, jnp.subtract(i, 1)), jnp.take(fpv, i)
        dx = jnp.subtract(x1, x0)
        zero = jnp.less_equal(jnp.abs(dx), float(np.spacing(np.finfo(dt).eps)))
        safe = jnp.where(zero, _filled(dx.shape, 1, dt), dx)
        f = jnp.where(zero, f0, jnp.add(f0, jnp.multiply(
            jnp.divide(jnp.subtract(xv, x0), safe), jnp.subtract(f1, f0))))
    if period is None:
        lo = fpv[0] if left is None else asarray(left, dt)
        hi = fpv[-1] if right is None else asarray(right, dt)
        f = jnp.where(jnp.less(xv, xpv[0]), lo, f)
        f = jnp.where(jnp.greater(xv, xpv[-1]), hi, f)
    return f


def _interp_complex(x, xp, fp, left, right, period):
    for arg, v in (("x", x), ("xp", xp)):
        if not _is_py_scalar(v) and dtypes.is_complex(_arr("interp", arg, v).dtype) or \
                isinstance(v, complex):
            raise ValueError(f"interp: {arg} must be real (only fp, left and right may be "
                             f"complex), got dtype {dtypes.result_type(v)}{where_am_i()}")

    def part(v, take):
        return None if v is None else take(asarray(v))

    re = interp(x, xp, jnp.real(fp), part(left, jnp.real), part(right, jnp.real), period)
    im = interp(x, xp, jnp.imag(fp), part(left, jnp.imag), part(right, jnp.imag), period)
    return lax.complex(re, im)


def unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """p with jumps larger than discont along `axis` replaced by their period-complement
    (numpy.unwrap): adds multiples of `period` so that consecutive differences are at most
    max(discont, period / 2).

    p: at least 1-d; discont: default period / 2 (values below it act as period / 2); period:
    default 2 pi. Result: p's shape, the promoted float dtype (integers become float32, as
    jax.numpy; numpy keeps integers for an integer period). Algorithm (numpy.unwrap): the
    differences reduced into [-period/2, period/2) (+period/2 kept for positive jumps), the
    corrections zeroed where |diff| < discont and accumulated with cumsum. Raises ValueError for
    an axis out of range (a 0-d p).
    """
    name = "unwrap"
    named = {"p": p, "period": period}
    if discont is not None:
        named["discont"] = discont
    arrs = _promoted(name, named)
    pv, per = arrs[0], arrs[1]
    disc = jnp.divide(per, 2) if discont is None else arrs[2]
    ax = normalize_axis(axis, pv.ndim, f"{name}: axis")
    if pv.shape[ax] == 0:
        return pv
    dd = jnp.diff(pv, axis=ax)
    half = jnp.divide(per, 2)
    ddmod = jnp.subtract(jnp.remainder(jnp.add(dd, half), per), half)
    ddmod = jnp.where(jnp.logical_and(jnp.equal(ddmod, jnp.negative(half)), jnp.greater(dd, 0)),
                      half, ddmod)
    corr = jnp.where(jnp.less(jnp.abs(dd), disc), _filled(dd.shape, 0, dd.dtype),
                     jnp.subtract(ddmod, dd))
    tail = jnp.add(_slice(pv, 1, pv.shape[ax], ax), jnp.cumsum(corr, axis=ax))
    return jnp.concatenate([_slice(pv, 0, 1, ax), tail], axis=ax)


# --- windows --------------------------------------------------------------------------------


def _window(name, M):
    """(M, n) with n = [1-M, 3-M, ..., M-1] / (M-1) as float32 (numpy's symmetric grid), or
    (M, None) for M <= 1."""
    M = _int(name, "M", M)
    if M <= 1:
        return M, None
    n = jnp.divide(jnp.arange(1 - M, M, 2, dtype=dtypes.default_float), float(M - 1))
    return M, n


def _trivial(M):
    return _filled((builtins.max(M, 0),), 1, dtypes.default_float)


def bartlett(M):
    """The Bartlett (triangular) window of M points (numpy.bartlett): 1 - |n| / (M - 1)
    symmetric about the centre, 0 at both ends.

    M: a Python int. Result: shape (max(M, 0),), float32 (as jax.numpy); M <= 0 gives an empty
    array, M == 1 gives [1.]. Raises TypeError for a non-integer M.
    """
    M, n = _window("bartlett", M)
    if n is None:
        return _trivial(M)
    return jnp.subtract(1.0, jnp.abs(n))


def _cosine_window(name, M, coeffs):
    # sum_k coeffs[k] cos(k pi n / (M - 1)) on numpy's symmetric grid n = 1-M, 3-M, ..., M-1
    M, n = _window(name, M)
    if n is None:
        return _trivial(M)
    out = jnp.full(n.shape, coeffs[0], n.dtype)
    for k, c in enumerate(coeffs[1:], start=1):
        out = jnp.add(out, jnp.multiply(c, jnp.cos(jnp.multiply(k * np.pi, n))))
    return out


def blackman(M):
    """The Blackman window of M points (numpy.blackman):
    0.42 + 0.5 cos(pi n / (M-1)) + 0.08 cos(2 pi n / (M-1)) for n = 1-M, 3-M, ..., M-1
    (numpy's symmetric grid). Shapes, dtype and errors as bartlett; the ends are 0 up to
    float32 rounding."""
    return _cosine_window("blackman", M, (0.42, 0.5, 0.08))


def hamming(M):
    """The Hamming window of M points (numpy.hamming): 0.54 + 0.46 cos(pi n / (M-1)) for
    n = 1-M, 3-M, ..., M-1. Shapes, dtype and errors as bartlett."""
    return _cosine_window("hamming", M, (0.54, 0.46))


def hanning(M):
    """The Hann window of M points (numpy.hanning): 0.5 + 0.5 cos(pi n / (M-1)) for
    n = 1-M, 3-M, ..., M-1. Shapes, dtype and errors as bartlett."""
    return _cosine_window("hanning", M, (0.5, 0.5))


def poly(seq_of_zeros):
    """The coefficients (highest degree first) of the monic polynomial with the given real roots
    (numpy.poly): the product of (x - r) over the roots, one polymul per root. A square 2-d
    input stands for a matrix whose characteristic polynomial is wanted: its roots are the
    eigenvalues, which are real only for symmetric matrices, so it must be symmetric (its
    eigenvalues come from eigvalsh; a non-symmetric matrix would need complex roots, which
    Nova does not have). Integer roots give float32. Raises ValueError for other shapes.
    """
    a = _arr("poly", "seq_of_zeros", seq_of_zeros)
    if a.ndim == 2 and a.shape[0] == a.shape[1] and a.shape[0] > 0:
        from nova.numpy_impl.decompositions import eigvalsh

        a = eigvalsh(a)
    elif a.ndim > 1:
        raise ValueError(f"poly: seq_of_zeros must be 1-d or a square matrix, got shape "
                         f"{a.shape}{where_am_i()}")
    if not dtypes.is_inexact(a.dtype):
        a = a.astype(dtypes.default_float)
    a = jnp.atleast_1d(a)
    c = jnp.ones((1,), a.dtype)
    for k in range(a.shape[0]):
        c = polymul(c, jnp.stack([jnp.ones((), a.dtype), -a[k]]))
    return c


def polydiv(u, v, *, trim_leading_zeros=False):
    """(quotient, remainder) of polynomial division u / v (numpy.polydiv), highest degree first:
    u = q * v + r with deg r < deg v. Long division, one step per quotient coefficient (static
    lengths: q has len(u) - len(v) + 1 entries, r has len(u), leading entries zero, as
    jax.numpy's; trim_leading_zeros=True trims them for concrete input). v's leading
    coefficient must be nonzero (inf/NaN otherwise). Integer inputs become float32.
    Differentiable in u and v. Raises ValueError for inputs that are not 1-d.
    """
    a, b = _promoted("polydiv", {"u": u, "v": v})
    a, b = _poly1d("polydiv", "u", a), _poly1d("polydiv", "v", b)
    m, n = a.shape[0], b.shape[0]
    if n == 0:
        raise ValueError(f"polydiv: v must not be empty{where_am_i()}")
    if m < n:
        return jnp.zeros((1,), a.dtype), a
    lead = b[0]
    q = []
    r = a
    for k in range(m - n + 1):
        coef = r[k] / lead
        q.append(coef)
        pad = jnp.concatenate([jnp.zeros((k,), a.dtype), coef * b,
                               jnp.zeros((m - n - k,), a.dtype)])
        r = r - pad
        r = r.at[k].set(jnp.zeros((), a.dtype))  # exactly zero, as the step intends
    quotient = jnp.stack(q)
    if trim_leading_zeros:
        c = _concrete(r)
        if c is None:
            raise TypeError(f"polydiv: trim_leading_zeros=True needs concrete inputs{where_am_i()}")
        nz = np.flatnonzero(c)
        r = r[int(nz[0]):] if nz.size else r[-1:]
    return quotient, r


def _companion(q, n_lead):
    """The (m, m) companion matrix of q (m + 1 coefficients, highest degree first, q[0] != 0
    unless everything is undefined): first row -q[1:] / q[0], ones below the diagonal. With
    n_lead > 0 (a traced count) the last n_lead coefficients are padding: the subdiagonal one
    above them is zeroed, which decouples a trailing nilpotent block whose eigenvalues stay at
    the last n_lead positions of the Schur form."""
    m = q.shape[0] - 1
    i = jnp.arange(m, dtype=dtypes.int32)
    first = -q[1:] / q[0]
    sub = (i[:, None] == i[None, :] + 1) & (i[:, None] != m - n_lead)
    ones = jnp.ones((m, m), q.dtype)
    c = jnp.where(sub, ones, jnp.zeros_like(ones))
    return jnp.where(i[:, None] == 0, first[None, :], c)


def roots(p, *, strip_zeros=True):
    """The roots of the polynomial with coefficients p, highest degree first (numpy.roots,
    jax.numpy.roots): the eigenvalues of its companion matrix (nova.numpy.linalg.eigvals:
    Hessenberg QR, no balancing), always complex (complex64 for float32 and integer p,
    complex128 for float64), in the eigenvalue routine's order.

    p: 1-d real array of length n + 1. strip_zeros=True (the default, NumPy's behaviour)
    removes leading zeros and returns len(p) - 1 - (their number) roots; trailing zeros
    give exact zero roots at the end (as NumPy); it needs a concrete p (not under jit or
    vmap). strip_zeros=False works on traced p: it returns n roots, the last k of them NaN
    for k leading zeros (all NaN when p is all zero), as jax.numpy. Differentiable through
    eigvals (inf/NaN at repeated roots).

    Raises ValueError for a p that is not 1-d, TypeError for strip_zeros=True with a traced
    p, NotImplementedError for complex coefficients.
    """
    a = _arr("roots", "p", p)
    if dtypes.is_complex(a.dtype):
        raise NotImplementedError(f"roots: complex coefficients (dtype {a.dtype}) are not "
                                  f"supported yet (eig of complex matrices){where_am_i()}")
    if a.ndim != 1:
        raise ValueError(f"roots: p must be 1-d, got shape {a.shape}{where_am_i()}")
    if not dtypes.is_float(a.dtype):
        a = a.astype(dtypes.default_float)
    from nova.numpy_impl.eig_general import eigvals

    cdt = dtypes.complex_dtype(dtypes.float32 if a.dtype in (dtypes.float16, dtypes.bfloat16)
                               else a.dtype)
    if strip_zeros:
        c = _concrete(a)
        if c is None:
            raise TypeError(f"roots: strip_zeros=True needs a concrete p (its number of roots "
                            f"depends on its values); use strip_zeros=False under jit or "
                            f"vmap{where_am_i()}")
        nz = np.flatnonzero(c)
        if nz.size == 0:
            return jnp.zeros((0,), cdt)
        lead, trail = int(nz[0]), len(c) - 1 - int(nz[-1])
        q = a[lead:len(c) - trail]
        zeros = jnp.zeros((trail,), cdt)
        if q.shape[0] < 2:
            return zeros
        return jnp.concatenate([eigvals(_companion(q, 0)).astype(cdt), zeros])
    m = a.shape[0] - 1
    if m < 1:
        return jnp.zeros((0,), cdt)
    # k leading zeros: q = p shifted left by k and padded with zeros
    k = jnp.sum(jnp.cumprod((a == 0).astype(dtypes.int32)))
    idx = jnp.arange(m + 1, dtype=dtypes.int32) + k
    q = jnp.where(idx <= m, a[jnp.minimum(idx, m)], jnp.zeros_like(a))
    q0 = jnp.where(k > m, jnp.ones_like(a[0]), q[0])  # all zero: every root undefined
    q = jnp.concatenate([q0[None], q[1:]])
    w = eigvals(_companion(q, k)).astype(cdt)
    undefined = jnp.arange(m, dtype=dtypes.int32) >= m - k
    return jnp.where(undefined, jnp.full((m,), complex(np.nan, np.nan), cdt), w)
