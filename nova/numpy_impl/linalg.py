"""Contractions of nova.numpy: matmul and dot (einsum, tensordot and friends build on dot_general)."""

from __future__ import annotations

from nova.core.errors import ShapeError
from nova.ops import lax
from nova.numpy_impl.util import broadcast_shapes, broadcast_to, where_am_i


def matmul(x1, x2, /):
    """Matrix product with NumPy's matmul rules (numpy.matmul, the @ operator).

    1-D operands are promoted to a matrix and the added dimension removed afterwards; leading
    (batch) dimensions broadcast. Shapes (..., n, k) @ (..., k, m) -> (..., n, m).
    Raises ShapeError naming both shapes when the inner dimensions differ, ValueError for 0-d.
    """
    a, b = _promote_dtypes(x1, x2)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: operands must be at least 1-D, got shapes {a.shape} and {b.shape}{where_am_i()}")
    a2 = lax.reshape(a, (1,) + a.shape) if a.ndim == 1 else a
    b2 = lax.reshape(b, b.shape + (1,)) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ShapeError(
            f"matmul: inner dimensions differ: shapes {a.shape} and {b.shape} "
            f"({a2.shape[-1]} != {b2.shape[-2]}){where_am_i()}"
        )
    batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2], name="matmul")
    if a2.ndim == 2 and b2.ndim == 2:
        out = lax.dot_general(a2, b2, (((1,), (0,)), ((), ())))
    elif b2.ndim == 2 and not batch == () and a2.shape[:-2] == batch:
        # (..., n, k) @ (k, m): contract without broadcasting the weight (a common MLP case).
        out = lax.dot_general(a2, b2, (((a2.ndim - 1,), (0,)), ((), ())))
    else:
        a3 = broadcast_to(a2, batch + a2.shape[-2:])
        b3 = broadcast_to(b2, batch + b2.shape[-2:])
        nb = len(batch)
        bd = tuple(range(nb))
        out = lax.dot_general(a3, b3, (((nb + 1,), (nb,)), (bd, bd)))
    if a.ndim == 1:
        out = lax.reshape(out, out.shape[:-2] + out.shape[-1:])
    if b.ndim == 1:
        out = lax.reshape(out, out.shape[:-1])
    return out


def _promote_dtypes(x1, x2):
    from nova.core import dtypes
    from nova.numpy_impl.util import asarray

    dt = dtypes.result_type(x1, x2)
    return asarray(x1, dt), asarray(x2, dt)


def dot(a, b, /):
    """numpy.dot: matmul for 1-D/2-D operands; sum over the last axis of a and the
    second-to-last of b for N-D; multiplication when either is 0-d."""
    x, y = _promote_dtypes(a, b)
    if x.ndim == 0 or y.ndim == 0:
        from nova.numpy_impl.ufuncs import multiply

        return multiply(x, y)
    if x.ndim <= 2 and y.ndim <= 2:
        return matmul(x, y)
    ca = x.ndim - 1
    cb = y.ndim - 2 if y.ndim >= 2 else 0
    if x.shape[ca] != y.shape[cb]:
        raise ShapeError(f"dot: shapes {x.shape} and {y.shape} not aligned{where_am_i()}")
    return lax.dot_general(x, y, (((ca,), (cb,)), ((), ())))
