"""nova.scipy.interpolate: RegularGridInterpolator (linear and nearest interpolation on a
rectilinear grid), as jax.scipy.interpolate; a pytree, so it passes through nova.jit."""

from __future__ import annotations

import itertools

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.pytree import register_pytree_node
from nova.core.trace import Tracer
from nova.numpy_impl.util import where_am_i

__all__ = ["RegularGridInterpolator"]

_METHODS = ("linear", "nearest")


def _check_method(method):
    if method not in _METHODS:
        raise ValueError(f"RegularGridInterpolator: method must be 'linear' or 'nearest', got "
                         f"{method!r}{where_am_i()}")


class RegularGridInterpolator:
    """Interpolation on a rectilinear grid in N dimensions (scipy.interpolate /
    jax.scipy.interpolate.RegularGridInterpolator).

    points: a sequence of N strictly increasing 1-d arrays, the grid along each axis (at
    least 2 points each); values: an array of shape (len(points[0]), ..., len(points[N-1]),
    *trailing) (ints become float32). method "linear" (multilinear) or "nearest" (ties go to
    the lower grid point, as SciPy). bounds_error must be False (as JAX's: a traced check
    cannot raise); fill_value: the value at points outside the grid (NaN by default; None
    extrapolates from the edge cells). Calling it with xi of shape (..., N) (or a tuple of N
    broadcastable coordinate arrays) returns shape (..., *trailing); `method` there overrides
    the constructor's. Differentiable in values and xi (linear). Raises ValueError for an
    unknown method, more point arrays than values has axes, a grid that is not 1-d, has
    fewer than 2 points, does not match values' shape or (when concrete) is not strictly
    increasing, xi whose last axis is not N, or a complex fill_value; NotImplementedError for
    bounds_error=True.
    """

    def __init__(self, points, values, method="linear", bounds_error=False,
                 fill_value=np.nan):
        _check_method(method)
        if bounds_error:
            raise NotImplementedError("RegularGridInterpolator: bounds_error=True is not "
                                      "supported (as JAX's: a check on traced values cannot "
                                      f"raise){where_am_i()}")
        values = jnp.asarray(values)
        if not dtypes.is_float(values.dtype):
            values = values.astype(dtypes.default_float)
        if len(points) > values.ndim:
            raise ValueError(f"RegularGridInterpolator: there are {len(points)} point arrays, "
                             f"but values has {values.ndim} dimensions{where_am_i()}")
        grid = tuple(jnp.asarray(p) for p in points)
        for k, g in enumerate(grid):
            if g.ndim != 1 or g.shape[0] < 2:
                raise ValueError(f"RegularGridInterpolator: points[{k}] must be 1-d with at "
                                 f"least 2 points, got shape {g.shape}{where_am_i()}")
            if g.shape[0] != values.shape[k]:
                raise ValueError(f"RegularGridInterpolator: points[{k}] has {g.shape[0]} "
                                 f"points but values has {values.shape[k]} along axis {k}"
                                 f"{where_am_i()}")
            if not isinstance(g, Tracer) and not np.all(np.diff(np.asarray(g)) > 0):
                raise ValueError(f"RegularGridInterpolator: points[{k}] must be strictly "
                                 f"increasing{where_am_i()}")
        if fill_value is not None:
            fill_value = jnp.asarray(fill_value)
            if np.dtype(fill_value.dtype).kind == "c":
                raise ValueError(f"RegularGridInterpolator: fill_value must be None or real, "
                                 f"got dtype {fill_value.dtype}{where_am_i()}")
            fill_value = fill_value.astype(values.dtype)
        self.method, self.bounds_error = method, False
        self.grid, self.values, self.fill_value = grid, values, fill_value

    def _points(self, xi):
        """xi as an (M, N) array of query points and the batch shape to restore."""
        n = len(self.grid)
        if isinstance(xi, tuple) and len(xi) == 1:
            xi = xi[0]
        if isinstance(xi, tuple):
            if len(xi) != n:
                raise ValueError(f"RegularGridInterpolator: xi has {len(xi)} coordinate "
                                 f"arrays, but the grid has dimension {n}{where_am_i()}")
            xi = jnp.stack(jnp.broadcast_arrays(*xi), axis=-1)
        xi = jnp.asarray(xi)
        if xi.ndim == 1:
            xi = xi.reshape(-1, n)
        if xi.shape[-1] != n:
            raise ValueError(f"RegularGridInterpolator: the sample points xi have dimension "
                             f"{xi.shape[-1]} (shape {xi.shape}), but the grid has dimension "
                             f"{n}{where_am_i()}")
        if not dtypes.is_float(xi.dtype):
            xi = xi.astype(self.values.dtype)
        return xi.reshape(-1, n), xi.shape[:-1]

    def __call__(self, xi, method=None):
        method = self.method if method is None else method
        _check_method(method)
        pts, batch = self._points(xi)
        lows, fracs = [], []
        outside = jnp.zeros(pts.shape[:1], dtype=jnp.bool_)
        for k, g in enumerate(self.grid):
            x = pts[:, k]
            # the cell [g[i], g[i+1]] holding x, edge cells for points outside
            i = jnp.clip(jnp.searchsorted(g, x) - 1, 0, g.shape[0] - 2)
            lo = g[i]
            lows.append(i)
            fracs.append((x - lo) / (g[i + 1] - lo))
            outside = outside | (x < g[0]) | (x > g[-1])
        trailing = (slice(None),) + (None,) * (self.values.ndim - len(self.grid))
        if method == "nearest":
            idx = tuple(jnp.where(t <= 0.5, i, i + 1) for i, t in zip(lows, fracs, strict=True))
            out = self.values[idx]
        else:
            out = None
            for upper in itertools.product((False, True), repeat=len(self.grid)):
                idx = tuple(i + 1 if u else i for i, u in zip(lows, upper, strict=True))
                w = None
                for t, u in zip(fracs, upper, strict=True):
                    f = t if u else 1.0 - t
                    w = f if w is None else w * f
                term = self.values[idx] * w[trailing]
                out = term if out is None else out + term
        if self.fill_value is not None:
            out = jnp.where(outside[trailing], self.fill_value, out)
        return out.reshape(batch + self.values.shape[len(self.grid):])


def _unflatten(aux, children):
    obj = object.__new__(RegularGridInterpolator)
    obj.method, obj.bounds_error = aux
    obj.grid, obj.values, obj.fill_value = children
    return obj


register_pytree_node(
    RegularGridInterpolator,
    lambda obj: ((obj.grid, obj.values, obj.fill_value), (obj.method, obj.bounds_error)),
    _unflatten,
)
