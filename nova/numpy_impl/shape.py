"""Shape functions of nova.numpy: reshape, transpose, expand_dims, squeeze, broadcasting."""

from __future__ import annotations

import operator

import numpy as np

from nova.core.errors import ShapeError
from nova.ops import lax
from nova.numpy_impl import util
from nova.numpy_impl.util import asarray, normalize_axes, normalize_axis, where_am_i


def reshape(a, shape, order="C"):
    """Returns a with a new shape (one dimension may be -1). Only order='C' is supported.

    Raises ShapeError naming both shapes when the sizes differ.
    """
    if order != "C":
        raise NotImplementedError(f"reshape: only order='C' is supported, got {order!r}")
    x = asarray(a)
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    shape = tuple(operator.index(d) for d in shape)
    if shape.count(-1) > 1:
        raise ValueError(f"reshape: can only specify one unknown dimension, got {shape}{where_am_i()}")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or x.size % known:
            raise ShapeError(f"cannot reshape array of shape {x.shape} (size {x.size}) into {shape}{where_am_i()}")
        shape = tuple(x.size // known if d == -1 else d for d in shape)
    if int(np.prod(shape, dtype=np.int64)) != x.size or any(d < 0 for d in shape):
        raise ShapeError(f"cannot reshape array of shape {x.shape} (size {x.size}) into {shape}{where_am_i()}")
    return lax.reshape(x, shape)


def ravel(a, order="C"):
    return reshape(a, (-1,), order)


def transpose(a, axes=None):
    """Permutes the axes (reverses them when axes is None)."""
    x = asarray(a)
    if axes is None:
        perm = tuple(reversed(range(x.ndim)))
    else:
        perm = tuple(normalize_axis(ax, x.ndim, "axes") for ax in axes)
        if sorted(perm) != list(range(x.ndim)):
            raise ValueError(f"transpose: axes {tuple(axes)} don't match array of shape {x.shape}{where_am_i()}")
    return lax.transpose(x, perm)


def swapaxes(a, axis1, axis2):
    x = asarray(a)
    i, j = normalize_axis(axis1, x.ndim, "axis1"), normalize_axis(axis2, x.ndim, "axis2")
    perm = list(range(x.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(x, perm)


def moveaxis(a, source, destination):
    """Moves axes `source` to positions `destination` (ints or equal-length sequences)."""
    x = asarray(a)
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} differ in length")
    src = [normalize_axis(s, x.ndim, "source") for s in src]
    dst = [normalize_axis(d, x.ndim, "destination") for d in dst]
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return lax.transpose(x, order)


def expand_dims(a, axis):
    """Inserts size-1 axes at the positions `axis` (int or tuple) of the result."""
    x = asarray(a)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out_ndim = x.ndim + len(axes)
    axes = normalize_axes(axes, out_ndim)
    shape, it = [], iter(x.shape)
    for i in range(out_ndim):
        shape.append(1 if i in axes else next(it))
    return lax.reshape(x, tuple(shape))


def squeeze(a, axis=None):
    """Removes size-1 axes (all of them, or those in `axis`; ValueError if one is not size 1)."""
    x = asarray(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = normalize_axes(axis, x.ndim)
        for i in axes:
            if x.shape[i] != 1:
                raise ValueError(
                    f"squeeze: cannot select axis {i} of size {x.shape[i]} (shape {x.shape}){where_am_i()}"
                )
    return lax.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def broadcast_to(array, shape):
    """Broadcasts to `shape` with NumPy's rules; ShapeError naming both shapes otherwise."""
    if isinstance(shape, int):
        shape = (shape,)
    return util.broadcast_to(asarray(array), tuple(shape))


def broadcast_arrays(*args):
    arrs = [asarray(a) for a in args]
    shape = util.broadcast_shapes(*(a.shape for a in arrs), name="broadcast_arrays")
    return [util.broadcast_to(a, shape) for a in arrs]


def broadcast_shapes(*shapes):
    return util.broadcast_shapes(*(tuple(s) for s in shapes), name="broadcast_shapes")


def atleast_1d(x):
    a = asarray(x)
    return reshape(a, (1,)) if a.ndim == 0 else a


def atleast_2d(x):
    a = asarray(x)
    return reshape(a, (1,) * (2 - a.ndim) + a.shape) if a.ndim < 2 else a
