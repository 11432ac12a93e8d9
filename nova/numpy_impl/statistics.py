"""Statistics of nova.numpy, as NumPy's and jax.numpy's: average, quantile / percentile /
median (and their nan forms), the nan-ignoring reductions, cov and corrcoef, written over
existing nova.numpy / nova.lax functions (sort plus take_along_axis for the order statistics,
so gradients flow).
"""

from __future__ import annotations

import math

import numpy as np

# nova.numpy is only partly initialized while it imports this module; it is complete by the time
# any function here runs.
from nova import numpy_api as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.numpy_impl.families_common import _concrete, _filled, _float_dtype, _full, _zeros
from nova.numpy_impl.util import (
    asarray,
    broadcast_to,
    normalize_axes,
    normalize_axis,
    where_am_i,
)
from nova.ops import lax

__all__ = [
    "average",
    "corrcoef",
    "cov",
    "median",
    "nanargmax",
    "nanargmin",
    "nancumprod",
    "nancumsum",
    "nanmax",
    "nanmean",
    "nanmedian",
    "nanmin",
    "nanpercentile",
    "nanprod",
    "nanquantile",
    "nanstd",
    "nansum",
    "nanvar",
    "percentile",
    "quantile",
]


# --- statistics -----------------------------------------------------------------------------


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """The weighted mean along `axis` (numpy.average).

    weights: None (the plain mean), an array of a's shape, or a 1-d array of a.shape[axis]
    values (then `axis` must be an int). The dtype is float (a and weights promoted, integers
    to float32). returned=True also gives the sum of the weights, broadcast to the result's
    shape. Raises TypeError when weights' shape differs from a's without an int axis or is not
    1-d, ValueError when its length does not match a.shape[axis]. A zero weight sum gives NaN
    or inf (NumPy raises ZeroDivisionError; values are not known under jit).
    """
    x = asarray(a)
    if weights is None:
        avg = jnp.mean(x, axis=axis, keepdims=keepdims)
        if not returned:
            return avg
        axes = normalize_axes(axis, x.ndim)
        count = math.prod(x.shape[i] for i in axes)
        return avg, _filled(avg.shape, count, avg.dtype)
    w = asarray(weights)
    dt = _float_dtype(x, w)
    if w.shape != x.shape:
        if axis is None or isinstance(axis, tuple | list):
            raise TypeError(f"average: an int axis must be given when the shapes of a {x.shape} "
                            f"and weights {w.shape} differ{where_am_i()}")
        if w.ndim != 1:
            raise TypeError(f"average: 1-d weights expected when the shapes of a {x.shape} and "
                            f"weights {w.shape} differ{where_am_i()}")
        ax = normalize_axis(axis, x.ndim)
        if w.shape[0] != x.shape[ax]:
            raise ValueError(f"average: length of weights {w.shape[0]} is not compatible with "
                             f"a.shape[{axis}] = {x.shape[ax]}{where_am_i()}")
        w = lax.broadcast_in_dim(w, x.shape, (ax,))
    x, w = lax.convert_element_type(x, dt), lax.convert_element_type(w, dt)
    wsum = jnp.sum(w, axis=axis, keepdims=keepdims)
    avg = lax.div(jnp.sum(lax.mul(x, w), axis=axis, keepdims=keepdims), wsum)
    return (avg, wsum) if returned else avg


_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _to_last(x, axis):
    """x with `axis` (None: all) moved last and merged: (kept shape..., n), the axes."""
    axes = normalize_axes(axis, x.ndim)
    kept = [i for i in range(x.ndim) if i not in axes]
    n = math.prod(x.shape[i] for i in axes)
    y = lax.transpose(x, kept + list(axes)) if kept + list(axes) != list(range(x.ndim)) else x
    return lax.reshape(y, tuple(x.shape[i] for i in kept) + (n,)), axes


def _quantile(name, a, q, axis, method, keepdims, ignore_nan, scale=1.0):
    if method not in _METHODS + ("_median",):
        raise ValueError(f"{name}: method must be one of {_METHODS}, got {method!r}"
                         f"{where_am_i()}")
    x = asarray(a)
    if dtypes.is_complex(x.dtype):
        raise ValueError(f"{name}: a must be real (complex numbers have no order statistics), "
                         f"got shape {x.shape} dtype {x.dtype}{where_am_i()}")
    qv = q if isinstance(q, int | float) and not isinstance(q, bool) else asarray(q)
    dt = _float_dtype(x, qv)
    qa = asarray(qv, dt)
    if qa.ndim > 1:
        raise ValueError(f"{name}: q must be a scalar or 1-d, got shape {qa.shape}{where_am_i()}")
    qc = _concrete(qa)
    if qc is not None and not np.all((qc >= 0) & (qc <= scale)):
        raise ValueError(f"{name}: q must be in the range [0, {scale:g}], got {qc}{where_am_i()}")
    if scale != 1.0:
        qa = lax.div(qa, _full(qa, scale))
    y, axes = _to_last(lax.convert_element_type(x, dt), axis)
    kshape, n = y.shape[:-1], y.shape[-1]
    shape = kshape + qa.shape  # the q axis (if any) goes last until the end
    k = len(kshape)
    if n == 0:
        out = _filled(shape, np.nan, dt)
    else:
        s = jnp.sort(y, axis=-1)
        if ignore_nan:
            cnt = jnp.sum(lax.bitwise_not(lax.isnan(y)), axis=-1, dtype=dt)
            cnt = lax.broadcast_in_dim(cnt, shape, tuple(range(k)))
        else:
            cnt = _filled(shape, n, dt)
        if not ignore_nan and not isinstance(q, Array):
            # Static positions in float64, as NumPy computes them (q * (n - 1) in float32 is
            # an ulp off).
            qh = np.asarray(q, np.float64) / scale * (n - 1)
            pos = asarray(np.broadcast_to(qh, shape).astype(np.float64))
        else:
            qb = lax.broadcast_in_dim(qa, shape, tuple(range(k, len(shape))))
            pos = lax.mul(qb, lax.sub(cnt, _full(cnt, 1)))
        out = _interpolate(s, pos, cnt, method, shape)
        if ignore_nan:
            empty = lax.eq(cnt, _zeros(cnt))
        else:
            empty = lax.broadcast_in_dim(lax.isnan(s[..., -1]), shape, tuple(range(k)))
        out = lax.select(empty, _full(out, np.nan), out)
    if qa.ndim:
        out = jnp.moveaxis(out, -1, 0)
    if keepdims:
        out = lax.reshape(out, qa.shape + tuple(1 if i in axes else d
                                                for i, d in enumerate(x.shape)))
    return out


def _interpolate(s, pos, cnt, method, shape):
    """The values at virtual positions `pos` of the sorted last axis of s (NumPy's rules)."""
    lo = lax.floor(pos)
    if method == "lower":
        v = lo
    elif method == "higher":
        v = lax.ceil(pos)
    elif method == "nearest":
        v = jnp.round(pos)  # half to even, as numpy's around
    elif method == "midpoint":
        v = lax.mul(lax.add(lo, lax.ceil(pos)), _full(pos, 0.5))
    else:
        v = pos
    last = lax.convert_element_type(lax.max(lax.sub(cnt, _full(cnt, 1)), _zeros(cnt)),
                                    pos.dtype)

    def take(i):
        i = lax.convert_element_type(lax.clamp(_zeros(i), i, last), dtypes.int32)
        if len(shape) == s.ndim - 1:  # scalar q: one position per slice
            return jnp.take_along_axis(s, lax.reshape(i, shape + (1,)), axis=-1)[..., 0]
        return jnp.take_along_axis(s, lax.reshape(i, shape), axis=-1)

    if method in ("lower", "higher", "nearest"):
        return take(v)
    lo = lax.floor(v)
    if method == "_median":  # numpy.median: the mean of the two middle values
        a, b = take(lo), take(lax.ceil(v))
        return lax.mul(lax.add(a, b), _full(a, 0.5))
    a, b = take(lo), take(lax.add(lo, _full(lo, 1)))
    t = lax.convert_element_type(lax.sub(v, lo), s.dtype)
    d = lax.sub(b, a)
    low = lax.add(a, lax.mul(d, t))
    high = lax.sub(b, lax.mul(d, lax.sub(_full(t, 1), t)))
    return lax.select(lax.ge(t, _full(t, 0.5)), high, low)


_QUANTILE_DOC = """

    a: any shape and dtype (integers are computed in float32); q: a scalar or 1-d array of
    probabilities (may be traced). axis None (all), int or tuple; keepdims. The result has shape
    q.shape + a's shape without `axis` and a float dtype. method: "linear" (default), "lower",
    "higher", "nearest", "midpoint", with NumPy's definitions (all of them give a float result,
    as jax.numpy; NumPy keeps integers for the discrete ones). Differentiable in a and q
    (through the sort). An empty reduction gives NaN (as jax.numpy). Raises ValueError for an
    unknown method, q of more than 1 dimension or (when concrete) outside its range, an axis out
    of range, or a complex a (as jax.numpy)."""


def quantile(a, q, axis=None, method="linear", keepdims=False):
    return _quantile("quantile", a, q, axis, method, keepdims, ignore_nan=False)


def percentile(a, q, axis=None, method="linear", keepdims=False):
    return _quantile("percentile", a, q, axis, method, keepdims, ignore_nan=False, scale=100.0)


def nanquantile(a, q, axis=None, method="linear", keepdims=False):
    return _quantile("nanquantile", a, q, axis, method, keepdims, ignore_nan=True)


def nanpercentile(a, q, axis=None, method="linear", keepdims=False):
    return _quantile("nanpercentile", a, q, axis, method, keepdims, ignore_nan=True, scale=100.0)


quantile.__doc__ = "The q-th quantiles along `axis` (numpy.quantile); NaN propagates." + \
    _QUANTILE_DOC
percentile.__doc__ = "The q-th percentiles, q in [0, 100] (numpy.percentile)." + _QUANTILE_DOC
nanquantile.__doc__ = "quantile ignoring NaNs; all-NaN slices give NaN (numpy.nanquantile)." + \
    _QUANTILE_DOC
nanpercentile.__doc__ = "percentile ignoring NaNs (numpy.nanpercentile)." + _QUANTILE_DOC


def median(a, axis=None, keepdims=False):
    """The median along `axis` (numpy.median): the middle value, or the mean of the two middle
    ones. NaN propagates; an empty reduction gives NaN. Shapes, dtypes and errors as quantile
    with a scalar q."""
    return _quantile("median", a, 0.5, axis, "_median", keepdims, ignore_nan=False)


def nanmedian(a, axis=None, keepdims=False):
    """median ignoring NaNs; all-NaN slices give NaN (numpy.nanmedian)."""
    return _quantile("nanmedian", a, 0.5, axis, "_median", keepdims, ignore_nan=True)


def _nan_filled(x, v):
    # (a complex element with a NaN in either part counts as NaN, as NumPy's isnan)
    if not dtypes.is_inexact(x.dtype):
        return x
    return lax.select(lax.isnan(x), _full(x, v), x)


def nansum(a, axis=None, dtype=None, keepdims=False):
    """sum treating NaN as 0 (numpy.nansum); shapes, dtypes and errors as nova.numpy.sum."""
    return jnp.sum(_nan_filled(asarray(a), 0), axis=axis, dtype=dtype, keepdims=keepdims)


def nanprod(a, axis=None, dtype=None, keepdims=False):
    """prod treating NaN as 1 (numpy.nanprod); shapes, dtypes and errors as nova.numpy.prod."""
    return jnp.prod(_nan_filled(asarray(a), 1), axis=axis, dtype=dtype, keepdims=keepdims)


def _nan_extremum(name, fill):
    def f(a, axis=None, keepdims=False, initial=None):
        x = asarray(a)
        red = jnp.max if name == "nanmax" else jnp.min
        if not dtypes.is_float(x.dtype):
            return red(x, axis=axis, keepdims=keepdims, initial=initial)
        y = red(_nan_filled(x, fill), axis=axis, keepdims=keepdims, initial=initial)
        if initial is not None:
            return y
        all_nan = jnp.all(lax.isnan(x), axis=axis, keepdims=keepdims)
        return lax.select(all_nan, _full(y, np.nan), y)

    f.__name__ = name
    f.__doc__ = (f"{name[3:]} ignoring NaNs (numpy.{name}); an all-NaN slice gives NaN (or "
                 f"`initial`). Shapes, dtypes and errors as nova.numpy.{name[3:]} (ValueError "
                 "for an empty reduction without `initial`).")
    return f


nanmax = _nan_extremum("nanmax", -np.inf)
nanmin = _nan_extremum("nanmin", np.inf)


def _nan_arg_extremum(name, fill):
    def f(a, axis=None, out=None, keepdims=None):
        x = asarray(a)
        red = jnp.argmax if name == "nanargmax" else jnp.argmin
        keep = bool(keepdims)
        if not dtypes.is_float(x.dtype):
            return red(x, axis=axis, out=out, keepdims=keep)
        y = red(_nan_filled(x, fill), axis=axis, out=out, keepdims=keep)
        all_nan = jnp.all(lax.isnan(x), axis=axis, keepdims=keep)
        return lax.select(jnp.reshape(all_nan, y.shape), _full(y, -1), y)

    what = "maxima" if name == "nanargmax" else "minima"
    f.__name__ = name
    f.__doc__ = (f"Indices of the {what} along `axis` ignoring NaNs (numpy.{name}, jax.numpy's "
                 "rule for an all-NaN slice: index -1, where NumPy raises -- values are not "
                 "known under jit). int32 with the input's shape less `axis` (kept as 1 with "
                 "keepdims). Ties give the first index. Raises ValueError for an empty axis or "
                 "an axis out of range, TypeError for `out`.")
    return f


nanargmax = _nan_arg_extremum("nanargmax", -np.inf)
nanargmin = _nan_arg_extremum("nanargmin", np.inf)


def nancumsum(a, axis=None, dtype=None, out=None):
    """cumsum treating NaN as 0 (numpy.nancumsum): a leading run of NaN gives zeros. Shapes,
    dtypes and errors as nova.numpy.cumsum."""
    return jnp.cumsum(_nan_filled(asarray(a), 0), axis=axis, dtype=dtype, out=out)


def nancumprod(a, axis=None, dtype=None, out=None):
    """cumprod treating NaN as 1 (numpy.nancumprod). Shapes, dtypes and errors as
    nova.numpy.cumprod."""
    return jnp.cumprod(_nan_filled(asarray(a), 1), axis=axis, dtype=dtype, out=out)


def _nan_moments(a, axis, dtype):
    x = asarray(a)
    dt = dtypes.canonicalize(dtype, arg_name="dtype") if dtype is not None else _float_dtype(x)
    if dtypes.is_bool(dt):
        raise TypeError(f"nanmean/nanvar: dtype bool is not supported; got input dtype {x.dtype}"
                        f"{where_am_i()}")
    ok = lax.bitwise_not(lax.isnan(x)) if dtypes.is_inexact(x.dtype) else \
        _filled(x.shape, True, dtypes.bool_)
    # NaNs are found before the cast (to an integer dtype they would become numbers).
    x = lax.convert_element_type(_nan_filled(x, 0), dt)
    cnt = jnp.sum(ok, axis=axis, dtype=dt, keepdims=True)
    s = jnp.sum(x, axis=axis, dtype=dt, keepdims=True)
    return x, ok, cnt, lax.div(s, cnt)


def nanmean(a, axis=None, dtype=None, keepdims=False):
    """The mean of the non-NaN elements along `axis` (numpy.nanmean, jnp.nanmean).

    Float result (bool and integers give float32, as mean: for them this is mean); `dtype`
    sets it (an integer dtype divides truncating, as jnp). All-NaN or empty slices give NaN.
    Raises TypeError for dtype bool, ValueError for an axis out of range or repeated.
    """
    x = asarray(a)
    if not dtypes.is_inexact(x.dtype):
        return jnp.mean(x, axis=axis, dtype=dtype, keepdims=keepdims)
    _, _, _, m = _nan_moments(x, axis, dtype)
    return m if keepdims else jnp.squeeze(m, axis=normalize_axes(axis, x.ndim))


def nanvar(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """The variance of the non-NaN elements along `axis` (numpy.nanvar), divided by
    count - ddof; NaN where that is not positive. Shapes, dtypes and errors as nanmean; an
    integer `dtype` sums in that dtype and, as jnp, divides in float32 and truncates (0 where
    count - ddof is not positive)."""
    x, ok, cnt, m = _nan_moments(a, axis, dtype)
    d = lax.select(ok, lax.sub(x, broadcast_to(m, x.shape)), _zeros(x))
    if dtypes.is_complex(x.dtype):  # the mean of |d|^2: real, as jnp.nanvar
        return _nan_var_complex(d, cnt, ddof, axis, keepdims, x.ndim, dtype)
    s = jnp.sum(lax.mul(d, d), axis=axis, dtype=x.dtype, keepdims=True)
    dof = lax.sub(cnt, _full(cnt, ddof))
    pos = lax.gt(dof, _zeros(dof))
    if not dtypes.is_float(x.dtype):
        f = dtypes.result_type(x.dtype, 1.0)
        q = lax.div(lax.convert_element_type(s, f), lax.convert_element_type(dof, f))
        v = lax.convert_element_type(lax.select(pos, q, _filled(q.shape, 0, f)), x.dtype)
    else:
        v = lax.select(pos, lax.div(s, lax.select(pos, dof, _full(dof, 1))), _full(s, np.nan))
    return v if keepdims else jnp.squeeze(v, axis=normalize_axes(axis, x.ndim))


def _nan_var_complex(d, cnt, ddof, axis, keepdims, ndim, dtype):
    re, im = lax.real(d), lax.imag(d)
    s = jnp.sum(lax.add(lax.mul(re, re), lax.mul(im, im)), axis=axis, keepdims=True)
    dof = lax.sub(lax.real(cnt), _filled(cnt.shape, ddof, s.dtype))
    pos = lax.gt(dof, _zeros(dof))
    v = lax.select(pos, lax.div(s, lax.select(pos, dof, _full(dof, 1))), _full(s, np.nan))
    if dtype is not None:
        v = lax.convert_element_type(v, d.dtype)
    return v if keepdims else jnp.squeeze(v, axis=normalize_axes(axis, ndim))


def nanstd(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """sqrt(nanvar(...)) (numpy.nanstd); shapes, dtypes and errors as nanvar."""
    return lax.sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims))


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """The covariance matrix of the variables in m (and y) (numpy.cov).

    m: 1-d or 2-d, one variable per row (per column with rowvar=False); y likewise, appended as
    more variables. Result: (V, V) for V variables, 0-d for one; float (integers give float32).
    ddof (default 1, 0 with bias=True); fweights (int repeat counts) and aweights (float
    weights) are 1-d of the number of observations. A non-positive normalization gives
    inf/NaN. Raises ValueError for inputs of more than 2 dimensions, a non-integer ddof,
    weights of the wrong shape, or (when concrete) negative or non-integer fweights.
    """
    if ddof is not None and ddof != int(ddof):
        raise ValueError(f"cov: ddof must be an integer, got {ddof!r}{where_am_i()}")
    x = asarray(m)
    if x.ndim > 2:
        raise ValueError(f"cov: m has more than 2 dimensions, shape {x.shape}{where_am_i()}")
    parts = [x] if y is None else [x, asarray(y)]
    dt = dtypes.canonicalize(dtype) if dtype is not None else _float_dtype(*parts)
    rows = []
    for name, v in zip(("m", "y"), parts, strict=False):
        if v.ndim > 2:
            raise ValueError(f"cov: {name} has more than 2 dimensions, shape {v.shape}"
                             f"{where_am_i()}")
        v = jnp.atleast_2d(lax.convert_element_type(v, dt))
        if not rowvar and v.shape[0] != 1:
            v = v.T
        rows.append(v)
    if rows[0].shape[0] == 0:
        return _filled((0, 0), 0, dt)
    x = jnp.concatenate(rows, axis=0) if len(rows) > 1 else rows[0]
    ddof = (0 if bias else 1) if ddof is None else int(ddof)
    nobs = x.shape[1]
    w = None
    for name, wv in (("fweights", fweights), ("aweights", aweights)):
        if wv is None:
            continue
        wv = asarray(wv)
        if wv.shape != (nobs,):
            raise ValueError(f"cov: {name} must be 1-d with {nobs} observations, got shape "
                             f"{wv.shape}{where_am_i()}")
        c = _concrete(wv)
        if c is not None and (np.any(c < 0) or name == "fweights" and np.any(c != np.round(c))):
            raise ValueError(f"cov: {name} must be non-negative"
                             f"{' integers' if name == 'fweights' else ''}{where_am_i()}")
        wv = lax.convert_element_type(wv, dt)
        w = wv if w is None else lax.mul(w, wv)
    avg, wsum = average(x, axis=1, weights=w, returned=True)
    if w is None:
        fact = _filled((), nobs - ddof, dt)
    elif ddof == 0:
        fact = wsum[0]
    elif aweights is None:
        fact = lax.sub(wsum[0], _filled((), ddof, dt))
    else:
        aw = lax.convert_element_type(asarray(aweights), dt)
        fact = lax.sub(wsum[0], lax.div(lax.mul(_filled((), ddof, dt),
                                                jnp.sum(lax.mul(w, aw))), wsum[0]))
    if dtypes.is_complex(fact.dtype):  # a real count (the weights are real)
        fact = lax.real(fact)
    fact = lax.convert_element_type(lax.max(fact, _zeros(fact)), dt)
    xc = lax.sub(x, lax.broadcast_in_dim(avg, x.shape, (0,)))
    xw = xc if w is None else lax.mul(xc, lax.broadcast_in_dim(w, x.shape, (1,)))
    # (X - mean)(X - mean)^H: the second factor conjugated for complex variables, as NumPy's
    c = lax.div(jnp.matmul(xc, jnp.conj(xw).T), broadcast_to(fact, (x.shape[0], x.shape[0])))
    return jnp.squeeze(c)


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """Pearson correlation coefficients of the variables in x (and y) (numpy.corrcoef).

    cov's shapes and dtypes; values clipped to [-1, 1] (for complex variables the real and
    imaginary parts each, as NumPy); a constant variable gives NaN. Raises what cov raises.
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return lax.div(c, c)
    sd = lax.sqrt(jnp.real(jnp.diagonal(c)))  # the variances are real
    if dtypes.is_complex(c.dtype):
        sd = lax.convert_element_type(sd, c.dtype)
    c = lax.div(c, lax.broadcast_in_dim(sd, c.shape, (0,)))
    c = lax.div(c, lax.broadcast_in_dim(sd, c.shape, (1,)))
    if dtypes.is_complex(c.dtype):
        return lax.complex(jnp.clip(jnp.real(c), -1, 1), jnp.clip(jnp.imag(c), -1, 1))
    return jnp.clip(c, -1, 1)
