"""`nova.numpy.ufunc`: NumPy's ufunc objects over Nova's binary functions (jnp.ufunc).

`nova.numpy.add` and the other binary elementwise functions are ufunc objects: calling one is
calling the function, and each has NumPy's methods `outer`, `reduce`, `accumulate`, `at` and
`reduceat`, and the attributes `nin`, `nout`, `identity`. Reductions of the associative
ufuncs use Nova's reductions and scans (add.reduce is sum, maximum.accumulate is cummax, ...);
the others fold sequentially along the axis (lax.scan), as NumPy defines them (subtract.reduce
is a0 - a1 - a2 ...). Arrays are immutable, so `at` returns the updated array (inplace=False,
as jnp's) and `out=` is refused.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.numpy_impl.util import asarray

__all__ = ["ufunc"]


class ufunc:  # noqa: N801 (NumPy's name)
    """A binary elementwise function with NumPy's ufunc methods (numpy.ufunc, jnp.ufunc).

    ufunc(func, name, identity=None, reducer=None, accumulator=None, at=None,
    associative=False): func(x, y) is the elementwise function; reducer(a, axis=...,
    keepdims=...) and accumulator(a, axis=...) the dedicated reduction and scan when there are
    (e.g. sum, cumsum), at the name of the `Array.at[...]` update (add, multiply, min, max);
    associative ufuncs reduce over several axes at once. Raises as documented per method.
    """

    nin, nout, nargs = 2, 1, 3

    def __init__(self, func: Callable, name: str, *, identity=None, reducer=None,
                 accumulator=None, at: str | None = None, associative: bool = False):
        self._func = func
        self.__name__ = name
        self.__doc__ = func.__doc__
        self.identity = identity
        self._reducer = reducer
        self._accumulator = accumulator
        self._at = at
        self._associative = associative

    def __repr__(self):
        return f"<nova.numpy.ufunc '{self.__name__}'>"

    def __call__(self, *args, **kwargs):
        return self._func(*args, **kwargs)

    # --- helpers -------------------------------------------------------------------------------
    def _no_out(self, method: str, out) -> None:
        if out is not None:
            raise ValueError(f"{self.__name__}.{method}: out= is not supported (Nova arrays "
                             "are immutable; use the returned array)")

    def _axis(self, method: str, a, axis) -> int:
        if not isinstance(axis, int | np.integer):
            raise TypeError(f"{self.__name__}.{method}: axis must be an int, got {axis!r}")
        if not -a.ndim <= axis < a.ndim:
            raise ShapeError(f"{self.__name__}.{method}: axis {axis} is out of bounds for an "
                             f"array of shape {a.shape}")
        return int(axis) % a.ndim

    def _fold(self, a, axis: int):
        """func folded left to right along `axis` (a0 op a1 op ...): the last carry of a scan."""
        from nova.control_flow import scan
        from nova.numpy_impl.shape import moveaxis

        xs = moveaxis(a, axis, 0)
        carry, _ = scan(lambda c, x: (self._func(c, x).astype(c.dtype), None), xs[0], xs[1:])
        return carry

    # --- methods -------------------------------------------------------------------------------
    def outer(self, a, b, **kwargs):
        """func(a[i, j, ...], b[k, l, ...]) for every pair: shape a.shape + b.shape."""
        a, b = asarray(a), asarray(b)
        return self._func(a.reshape(a.shape + (1,) * b.ndim), b, **kwargs)

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims: bool = False, initial=None,
               where=None):
        """a reduced along `axis` with func (numpy.ufunc.reduce): axis an int, a tuple (for
        associative ufuncs) or None (all axes). initial: a first operand of the fold (needed
        for an empty axis without identity); where: a boolean mask (masked entries count as
        identity or initial). dtype: the accumulation and result dtype. Raises ValueError for
        out=, an empty reduction without identity or initial, or a where= without one; TypeError
        for several axes of a non-associative ufunc."""
        self._no_out("reduce", out)
        a = asarray(a)
        if dtype is not None:
            a = a.astype(dtypes.canonicalize(dtype, arg_name=f"{self.__name__}.reduce dtype"))
        axes = tuple(range(a.ndim)) if axis is None else \
            (axis if isinstance(axis, tuple) else (axis,))
        axes = tuple(sorted({self._axis("reduce", a, ax) for ax in axes}))
        if len(axes) > 1 and not self._associative:
            raise TypeError(f"{self.__name__}.reduce over several axes: the ufunc is not "
                            "associative and commutative, so the order is undefined; reduce "
                            "one axis at a time")
        fill = initial if initial is not None else self.identity
        if where is not None:
            if fill is None:
                raise ValueError(f"{self.__name__}.reduce: where= needs an identity or an "
                                 "initial value for the masked entries")
            from nova.numpy_impl.ufuncs import where as select

            a = select(asarray(where), a, asarray(fill, dtype=a.dtype))
        if any(a.shape[ax] == 0 for ax in axes):
            if fill is None:
                raise ValueError(f"{self.__name__}.reduce of an empty axis needs an identity "
                                 "or an initial value")
            shape = tuple(1 if i in axes else d for i, d in enumerate(a.shape)) if keepdims \
                else tuple(d for i, d in enumerate(a.shape) if i not in axes)
            from nova.numpy_impl.creation import full

            return full(shape, fill, dtype=a.dtype)
        if not axes:
            res = a
        elif self._reducer is not None:
            res = self._reducer(a, axis=axes, keepdims=False)
        else:
            (ax,) = axes
            res = self._fold(a, ax)
        if initial is not None and (where is None or self.identity is None):
            res = self._func(asarray(initial, dtype=res.dtype), res).astype(res.dtype)
        if keepdims:
            from nova.numpy_impl.shape import expand_dims

            res = expand_dims(res, axes)
        return res

    def accumulate(self, a, axis: int = 0, dtype=None, out=None):
        """The running fold along `axis` (numpy.ufunc.accumulate): result[..., i, ...] is
        a[0] op ... op a[i]; same shape as a. Raises ValueError for out=, ShapeError for an
        axis out of bounds."""
        self._no_out("accumulate", out)
        a = asarray(a)
        if dtype is not None:
            a = a.astype(dtypes.canonicalize(dtype, arg_name=f"{self.__name__}.accumulate "
                                                             "dtype"))
        if a.ndim == 0:
            raise ValueError(f"{self.__name__}.accumulate: a 0-d array has no axis")
        axis = self._axis("accumulate", a, axis)
        if a.shape[axis] == 0:
            return a
        if self._accumulator is not None:
            return self._accumulator(a, axis=axis)
        if self._associative:
            from nova.ops.composite import associative_scan

            return associative_scan(lambda x, y: self._func(x, y).astype(a.dtype), a, axis=axis)
        from nova.control_flow import scan
        from nova.numpy_impl.shape import moveaxis

        xs = moveaxis(a, axis, 0)
        first = xs[0]

        def step(c, x):
            c = self._func(c, x).astype(a.dtype)
            return c, c

        _, rest = scan(step, first, xs[1:])
        from nova.numpy_impl.joining import concatenate

        return moveaxis(concatenate([first[None], rest]), 0, axis)

    def at(self, a, indices, b=None, *, inplace: bool = True):
        """a with func applied at `indices` (numpy.ufunc.at, unbuffered: repeated indices
        apply repeatedly): a[indices] = func(a[indices], b). Nova's arrays are immutable:
        pass inplace=False (as jnp.ufunc.at requires) and use the result. Supported for add,
        subtract, multiply, maximum, minimum. Raises ValueError for inplace=True or a missing
        b, NotImplementedError for other ufuncs."""
        if inplace:
            raise ValueError(f"{self.__name__}.at: Nova arrays are immutable; call it with "
                             "inplace=False and use the returned array")
        if b is None:
            raise ValueError(f"{self.__name__}.at: b is required for a binary ufunc")
        a = asarray(a)
        if self._at is None:
            raise NotImplementedError(
                f"{self.__name__}.at is not supported: only add, subtract, multiply, maximum "
                "and minimum have scatter updates")
        ref = a.at[indices]
        if self._at == "subtract":
            return ref.add(-asarray(b))
        return getattr(ref, self._at)(b)

    def reduceat(self, a, indices, axis: int = 0, dtype=None, out=None):
        """Reductions over the slices a[indices[i]:indices[i+1]] along `axis`
        (numpy.ufunc.reduceat): the last slice runs to the end; where indices[i] >=
        indices[i+1] the result is a[indices[i]]. indices: a 1-d integer array of positions
        in [0, len), in any order. Each slice is a masked reduction over the whole axis
        (len(indices) x len work and memory). Supported for the ufuncs with a reduction
        (add, multiply, maximum, minimum, logical and bitwise and/or/xor). Raises ValueError
        for out=, NotImplementedError for other ufuncs, TypeError for bad indices,
        ShapeError for a bad axis."""
        self._no_out("reduceat", out)
        if self._reducer is None:
            raise NotImplementedError(f"{self.__name__}.reduceat is not supported: it needs "
                                      "an associative ufunc with a reduction (add, multiply, "
                                      "maximum, minimum, logical_*, bitwise_*)")
        from nova.numpy_impl.ranges import arange
        from nova.numpy_impl.joining import concatenate
        from nova.numpy_impl.shape import moveaxis
        from nova.numpy_impl.ufuncs import where as select

        a = asarray(a)
        if dtype is not None:
            a = a.astype(dtypes.canonicalize(dtype, arg_name=f"{self.__name__}.reduceat "
                                                             "dtype"))
        axis = self._axis("reduceat", a, axis)
        idx = asarray(indices)
        if idx.ndim != 1 or not dtypes.is_int(idx.dtype):
            raise TypeError(f"{self.__name__}.reduceat: indices must be a 1-d integer array, "
                            f"got shape {idx.shape} dtype {idx.dtype}")
        xs = moveaxis(a, axis, 0)
        n = xs.shape[0]
        end = concatenate([idx[1:], asarray([n], dtype=idx.dtype)])
        j = arange(n)
        rows = (j[None, :] >= idx[:, None]) & (j[None, :] < end[:, None])  # (k, n)
        mask = rows.reshape(rows.shape + (1,) * (xs.ndim - 1))
        if self.identity is not None:
            fill = self.identity
        elif dtypes.is_float(a.dtype):
            fill = -np.inf if self.__name__ in ("maximum", "fmax") else np.inf
        else:
            info = dtypes.iinfo(a.dtype)
            fill = info.min if self.__name__ in ("maximum", "fmax") else info.max
        filled = select(mask, xs[None], asarray(fill, dtype=a.dtype))
        res = self._reducer(filled, axis=(1,), keepdims=False)
        single = (idx >= end).reshape(idx.shape + (1,) * (xs.ndim - 1))
        res = select(single, xs[idx.clip(0, n - 1)], res)
        return moveaxis(res, 0, axis)
