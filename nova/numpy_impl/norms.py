"""Vector and matrix norms for `nova.numpy.linalg` (numpy.linalg.norm's and the array API's
vector_norm / matrix_norm), as reductions of nova.numpy functions: they run under jit, grad
and vmap on every backend. The matrix norms ord 2, -2 and "nuc" take the singular values of
nova/numpy_impl/decompositions.py."""

from __future__ import annotations

import builtins
import math

from nova.core import dtypes
from nova.numpy_impl.util import asarray, normalize_axis, where_am_i


def _jnp():
    import nova.numpy as jnp

    return jnp


def _float(x):
    """x as an inexact array (ints and bools promote to the default float, as NumPy's norm;
    complex stays complex: every norm is of |x|, real)."""
    return x if dtypes.is_inexact(x.dtype) else x.astype(dtypes.default_float)


def _vector(x, ord, axis, keepdims):
    jnp = _jnp()
    a = jnp.abs(x)
    if ord is None or ord == 2:
        return jnp.sqrt(jnp.sum(a * a, axis=axis, keepdims=keepdims))
    if ord == math.inf:
        return jnp.max(a, axis=axis, keepdims=keepdims)
    if ord == -math.inf:
        return jnp.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return jnp.sum((x != 0).astype(a.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return jnp.sum(a, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(  # noqa: TRY004 (NumPy's error)
            f"norm: ord={ord!r} is for matrices; a vector norm takes a number (inf, -inf, 0, "
            f"or p){where_am_i()}")
    p = float(ord)
    return jnp.sum(a ** p, axis=axis, keepdims=keepdims) ** (1.0 / p)


def _matrix(x, ord, axes, keepdims):
    jnp = _jnp()
    r, c = axes
    if ord in (None, "fro"):
        a = jnp.abs(x)
        out = jnp.sqrt(jnp.sum(a * a, axis=axes, keepdims=True))
    elif ord in (1, -1):
        s = jnp.sum(jnp.abs(x), axis=r, keepdims=True)  # column sums
        out = jnp.max(s, axis=c, keepdims=True) if ord == 1 else jnp.min(s, axis=c,
                                                                           keepdims=True)
    elif ord in (math.inf, -math.inf):
        s = jnp.sum(jnp.abs(x), axis=c, keepdims=True)  # row sums
        out = jnp.max(s, axis=r, keepdims=True) if ord > 0 else jnp.min(s, axis=r,
                                                                          keepdims=True)
    elif ord in (2, -2, "nuc"):
        from nova.numpy_impl.decompositions import svdvals

        # the singular values of each matrix over (r, c): those two axes moved last
        s = svdvals(jnp.moveaxis(x, (r, c), (-2, -1)))
        v = jnp.max(s, -1) if ord == 2 else jnp.min(s, -1) if ord == -2 else jnp.sum(s, -1)
        out = jnp.expand_dims(v, tuple(sorted((r, c))))
    else:
        raise ValueError(f"norm: invalid ord {ord!r} for a matrix norm (None, 'fro', 1, -1, "
                         f"inf, -inf){where_am_i()}")
    if keepdims:
        return out
    return jnp.squeeze(out, axis=(r, c))


def norm(x, ord=None, axis=None, keepdims=False):
    """The vector or matrix norm of x, as numpy.linalg.norm / jax.numpy.linalg.norm.

    axis None: a 1-d x takes the vector norm, a 2-d x the matrix norm, and any other x with
    ord None the 2-norm of all its elements. axis an int: vector norms along it; a pair: matrix
    norms over those two axes. Vector ord: None/2 (Euclidean), inf, -inf, 0 (count of
    nonzeros), 1, or any p (sum |x|^p)^(1/p). Matrix ord: None/'fro' (Frobenius), 1/-1 (max/min
    column sum), inf/-inf (max/min row sum), 2/-2 (largest/smallest singular value), 'nuc'
    (sum of the singular values; both from nova.numpy.linalg.svd's Jacobi). Integer inputs give
    the default float; complex64 / complex128 inputs give float32 / float64, every norm being
    one of |x| (as NumPy). Raises ValueError for an invalid ord or axes."""
    a = _float(asarray(x))
    if axis is None:
        if ord is None:
            nd = a.ndim
            out = _vector(a.reshape(-1), None, 0, False)
            return out.reshape((1,) * nd) if keepdims else out
        if a.ndim == 1:
            axis = 0
        elif a.ndim == 2:
            axis = (0, 1)
        else:
            raise ValueError(f"norm: ord={ord!r} with axis=None needs a 1-d or 2-d array, got "
                             f"shape {a.shape}{where_am_i()}")
    if isinstance(axis, int):
        return _vector(a, ord, normalize_axis(axis, a.ndim), keepdims)
    axes = tuple(normalize_axis(k, a.ndim) for k in axis)
    if len(axes) == 1:
        return _vector(a, ord, axes[0], keepdims)
    if len(axes) != 2 or axes[0] == axes[1]:
        raise ValueError(f"norm: axis must be an int or a pair of distinct axes, got {axis}"
                         f"{where_am_i()}")
    return _matrix(a, ord, axes, keepdims)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The vector norm of x along `axis` (an int, a tuple of axes taken together, or None for
    every element), as the array API's linalg.vector_norm (jax.numpy.linalg.vector_norm).
    ord as norm's vector ord. Raises ValueError for an invalid ord or axis."""
    a = _float(asarray(x))
    if axis is None:
        out = _vector(a.reshape(-1), ord, 0, False)
        return out.reshape((1,) * a.ndim) if keepdims else out
    if isinstance(axis, int):
        return _vector(a, ord, normalize_axis(axis, a.ndim), keepdims)
    axes = tuple(normalize_axis(k, a.ndim) for k in axis)
    return _vector(a, ord, axes, keepdims)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The matrix norm of each matrix in the last two axes of x (shape (..., M, N)), as the
    array API's linalg.matrix_norm. ord as norm's matrix ord. Raises ValueError for an x of
    fewer than 2 dimensions."""
    a = _float(asarray(x))
    if a.ndim < 2:
        raise ValueError(f"matrix_norm: x must have at least 2 dimensions, got shape {a.shape}"
                         f"{where_am_i()}")
    return _matrix(a, ord, (a.ndim - 2, a.ndim - 1), keepdims)


def vecdot(x1, x2, /, *, axis=-1):
    """sum(conj(x1) * x2) along `axis` after broadcasting (the array API's linalg.vecdot;
    numpy.vecdot also conjugates a complex x1). The result has the broadcast shape less
    `axis` and the promoted dtype. Raises ShapeError when the axis' sizes differ."""
    jnp = _jnp()
    a, b = asarray(x1), asarray(x2)
    nd = builtins.max(a.ndim, b.ndim)
    ax = normalize_axis(axis, nd)
    na = a.shape[ax - (nd - a.ndim)] if ax >= nd - a.ndim else 1
    nb = b.shape[ax - (nd - b.ndim)] if ax >= nd - b.ndim else 1
    if na != nb:
        from nova.core.errors import ShapeError

        raise ShapeError(f"vecdot: axis {axis} has size {na} in x1 (shape {a.shape}) and {nb} "
                         f"in x2 (shape {b.shape}){where_am_i()}")
    return jnp.sum(jnp.conj(a) * b, axis=ax - nd)


def matrix_transpose(x, /):
    """x with its last two axes swapped (the array API's linalg.matrix_transpose). Raises
    ValueError for fewer than 2 dimensions."""
    a = asarray(x)
    if a.ndim < 2:
        raise ValueError(f"matrix_transpose: x must have at least 2 dimensions, got shape "
                         f"{a.shape}{where_am_i()}")
    return _jnp().swapaxes(a, -1, -2)
