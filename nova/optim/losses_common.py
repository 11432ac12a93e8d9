"""Argument checks and masked reductions shared by nova.optim.losses' modules."""

from __future__ import annotations

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.nn import functional as F
from nova.nn.functional import check_index_range
from nova.numpy_impl.util import asarray, where_am_i


def _float_array(fn: str, name: str, x) -> Array:
    a = asarray(x)
    if not dtypes.is_float(a.dtype):
        raise TypeError(f"{fn}: {name} must be a floating-point array, got {a.dtype}"
                        f"{where_am_i()}")
    return a


def _int_array(fn: str, name: str, x) -> Array:
    a = asarray(x)
    if not dtypes.is_int(a.dtype):
        raise TypeError(f"{fn}: {name} must be an integer array, got {a.dtype}{where_am_i()}")
    return a


def _same_shape(fn: str, a_name: str, a: Array, b_name: str, b: Array) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{fn}: {a_name} has shape {tuple(a.shape)} but {b_name} has "
                         f"{tuple(b.shape)}; they must be equal{where_am_i()}")


def _mask(where) -> Array | None:
    return None if where is None else asarray(where).astype(jnp.bool_)


def _masked_sum(x, axis, where, keepdims: bool = False):
    """sum(x, axis) over the entries where `where` holds (all when where is None); a select, so
    NaN or inf in a left-out entry neither reaches the sum nor its gradient."""
    if where is not None:
        x = jnp.where(where, x, 0.0)
    return jnp.sum(x, axis=axis, keepdims=keepdims)


def _class_mask(fn: str, where, logits: Array, axis) -> Array | None:
    """`where` with logits' rank: a mask without the class axes gets them as size-1 axes."""
    where = _mask(where)
    if where is None or where.ndim == logits.ndim:
        return where
    if axis is None:
        raise ValueError(f"{fn}: where has shape {tuple(where.shape)} but logits "
                         f"{tuple(logits.shape)}; with axis=None it must have logits' rank"
                         f"{where_am_i()}")
    return jnp.expand_dims(where, axis)


def _log_softmax(x: Array, axis, where) -> Array:
    """log softmax over axis of the entries where `where` holds; -inf at the others."""
    if where is None:
        return F.log_softmax(x, axis=axis)
    masked = jnp.where(where, x, -jnp.inf)
    return jnp.where(where, F.log_softmax(masked, axis=axis), -jnp.inf)


def _softmax(x: Array, axis, where) -> Array:
    """softmax over axis of the entries where `where` holds; 0 at the others."""
    if where is None:
        return F.softmax(x, axis=axis)
    return jnp.where(where, F.softmax(jnp.where(where, x, -jnp.inf), axis=axis), 0.0)


def _label_mask(fn: str, scores: Array, labels, what: str = "scores") -> Array:
    """labels (...) integer -> boolean one-hot mask (..., C) against scores (..., C); `what`
    names scores in the error.

    Raises ValueError for a shape mismatch, or -- for concrete labels -- a label outside [0, C).
    """
    labels = _int_array(fn, "labels", labels)
    if scores.ndim == 0 or tuple(labels.shape) != tuple(scores.shape[:-1]):
        raise ValueError(f"{fn}: labels of shape {tuple(labels.shape)} do not match {what} of "
                         f"shape {tuple(scores.shape)} (expected {tuple(scores.shape[:-1])})"
                         f"{where_am_i()}")
    classes = scores.shape[-1]
    check_index_range(fn, "labels", labels, classes)
    return labels[..., None] == jnp.arange(classes, dtype=jnp.int32)


def _pick(scores: Array, onehot: Array) -> Array:
    """scores[..., label] through a select (a -inf score elsewhere does not become NaN)."""
    return jnp.sum(jnp.where(onehot, scores, 0.0), axis=-1)


def _errors(fn: str, predictions, targets) -> Array:
    predictions = _float_array(fn, "predictions", predictions)
    if targets is None:
        return predictions
    return predictions - asarray(targets)
