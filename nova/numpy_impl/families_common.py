"""Helpers shared by the nova.numpy function families mathfuncs, statistics, searching and
vectorize."""

from __future__ import annotations

import operator

import numpy as np

# nova.numpy is only partly initialized while it imports this module; it is complete by the time
# any function here runs.
from nova.core import dtypes
from nova.core.errors import ConcretizationTypeError
from nova.numpy_impl.util import (
    asarray,
    broadcast_to,
    where_am_i,
)

# --- helpers --------------------------------------------------------------------------------


def _concrete(x):
    """x's NumPy value, or None when x is traced (inside jit, or mapped by vmap)."""
    try:
        return np.asarray(x)
    except ConcretizationTypeError:
        return None


def _filled(shape, v, dtype):
    # A host scalar broadcast: eagerly a NumPy fill (lax.full compiles a kernel per shape),
    # under a trace one broadcast_in_dim.
    return broadcast_to(asarray(np.asarray(v, dtype)), tuple(shape))


def _full(x, v):
    return _filled(x.shape, v, x.dtype)


def _zeros(x):
    return _filled(x.shape, 0, x.dtype)


def _int(name, arg, v):
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{name}: {arg} must be an integer, got {type(v).__name__}"
                        f"{where_am_i()}") from None


def _float_dtype(*xs):
    # The inexact dtype of a computation: a float or complex result type stays, others float32.
    d = dtypes.result_type(*xs)
    return d if dtypes.is_inexact(d) else dtypes.default_float
