"""Sorting functions of nova.numpy: sort, argsort (stable, NumPy's order: NaN last; complex
values by real part, then imaginary part)."""

from __future__ import annotations

from nova.core import dtypes
from nova.ops import lax
from nova.numpy_impl.util import asarray, normalize_axis, where_am_i

__all__ = ["sort", "argsort"]

# Every kind gives the same stable sort; NumPy's names are accepted so NumPy code runs unchanged.
_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")


def _check(name, kind, order, stable):
    if kind not in _KINDS:
        raise ValueError(
            f"{name}: kind must be one of {_KINDS[1:]} or None, got {kind!r}{where_am_i()}"
        )
    if order is not None:
        raise ValueError(f"{name}: order= applies to structured arrays, which nova does not have"
                         f"{where_am_i()}")
    if stable not in (None, True, False):
        raise ValueError(f"{name}: stable must be a bool or None, got {stable!r}{where_am_i()}")


def _operand(a, axis, flat_0d):
    x = asarray(a)
    if axis is None or (flat_0d and x.ndim == 0):
        return lax.reshape(x, (x.size,)), 0
    return x, normalize_axis(axis, x.ndim)


def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """A sorted copy of `a` along `axis` (numpy.sort); axis None sorts the flattened array.

    The sort is stable whatever `kind` says; NaN sorts after +inf and -0.0 equals 0.0, as in
    NumPy. Complex values sort lexicographically, by the real part and then the imaginary
    part (a two-key sort), each part with NaN last. That is jax.numpy's order; NumPy's differs
    only for a value whose imaginary part alone is NaN, which NumPy places after every value
    free of NaN and jax.numpy (and Nova) after the values of the same real part. The result
    has a's shape and dtype (1-d when axis is None). The gradient moves each
    cotangent back to the element's original place. Raises ValueError for an axis out of range
    (a 0-d input needs axis=None), an unknown kind, or `order`.
    """
    _check("sort", kind, order, stable)
    x, ax = _operand(a, axis, flat_0d=False)
    if dtypes.is_complex(x.dtype):
        re, im = lax.sort([lax.real(x), lax.imag(x)], ax, num_keys=2)
        return lax.complex(re, im)
    return lax.sort(x, ax)


def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """The int32 indices that sort `a` along `axis` (numpy.argsort); axis None flattens.

    Stable whatever `kind` says (equal elements keep their order), NaN last; complex values in
    sort's lexicographic order (real part, then imaginary part). The result has a's
    shape (1-d when axis is None or a is 0-d, as NumPy). Not differentiable. Raises ValueError
    for an axis out of range, an unknown kind, or `order`.
    """
    _check("argsort", kind, order, stable)
    x, ax = _operand(a, axis, flat_0d=True)
    idx = lax.iota(dtypes.default_int, x.shape, ax)
    if dtypes.is_complex(x.dtype):
        return lax.sort([lax.real(x), lax.imag(x), idx], ax, num_keys=2)[2]
    return lax.sort([x, idx], ax, num_keys=1)[1]
