"""dot_general: batched tensor contraction (lax's dimension numbers)."""

from __future__ import annotations

import string

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.core.ir import TensorType
from nova.core.primitive import Cost, FusionKind, Primitive, Template
from nova.ops import structural as st


def _free_dims(ndim, contract, batch):
    return [i for i in range(ndim) if i not in contract and i not in batch]


def _dot_rule(x, y, *, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    if x.dtype != y.dtype:
        raise TypeError(f"dot_general: operand dtypes differ: {x.dtype} and {y.dtype}")
    if dtypes.is_bool(x.dtype):
        raise TypeError("dot_general: bool operands are not supported")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ShapeError(f"dot_general: mismatched dimension numbers {dimension_numbers}")
    for a, b in list(zip(lc, rc, strict=True)) + list(zip(lb, rb, strict=True)):
        if not (0 <= a < x.ndim and 0 <= b < y.ndim):
            raise ShapeError(f"dot_general: dimension numbers {dimension_numbers} out of range "
                             f"for shapes {x.shape} and {y.shape}")
    for a, b in zip(lc, rc, strict=True):
        if x.shape[a] != y.shape[b]:
            raise ShapeError(
                f"contraction dimension mismatch: shapes {x.shape} and {y.shape} "
                f"(dimension {a} of size {x.shape[a]} vs dimension {b} of size {y.shape[b]})"
            )
    for a, b in zip(lb, rb, strict=True):
        if x.shape[a] != y.shape[b]:
            raise ShapeError(f"dot_general: batch dimensions differ: shapes {x.shape} and {y.shape}")
    shape = (
        tuple(x.shape[i] for i in lb)
        + tuple(x.shape[i] for i in _free_dims(x.ndim, lc, lb))
        + tuple(y.shape[i] for i in _free_dims(y.ndim, rc, rb))
    )
    return TensorType(shape, x.dtype)


def _einsum_spec(xn, yn, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    letters = iter(string.ascii_letters)
    xs = [next(letters) for _ in range(xn)]
    ys = [None] * yn
    for a, b in zip(lc, rc, strict=True):
        ys[b] = xs[a]
    for a, b in zip(lb, rb, strict=True):
        ys[b] = xs[a]
    ys = [c if c is not None else next(letters) for c in ys]
    out = [xs[i] for i in lb] + [xs[i] for i in _free_dims(xn, lc, lb)]
    out += [ys[i] for i in _free_dims(yn, rc, rb)]
    return f"{''.join(xs)},{''.join(ys)}->{''.join(out)}"


def _dot_impl(x, y, *, dimension_numbers):
    spec = _einsum_spec(x.ndim, y.ndim, dimension_numbers)
    dt = x.dtype
    if dt in (dtypes.bfloat16, dtypes.float16):
        return np.einsum(spec, x.astype(np.float32), y.astype(np.float32)).astype(dt)
    return np.einsum(spec, x, y, optimize=True).astype(dt)


def _positions(lst):
    return {d: k for k, d in enumerate(lst)}


def _dot_vjp(ct, x, y, *, out, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    nb = len(lb)
    x_free = _free_dims(x.ndim, lc, lb)
    y_free = _free_dims(y.ndim, rc, rb)
    ct_xfree = list(range(nb, nb + len(x_free)))
    ct_yfree = list(range(nb + len(x_free), nb + len(x_free) + len(y_free)))
    batch_ct = tuple(range(nb))
    gx = dot_general(ct, y, ((tuple(ct_yfree), tuple(y_free)), (batch_ct, tuple(rb))))
    x_order = list(lb) + x_free + [lc[list(rc).index(d)] for d in sorted(rc)]
    pos = _positions(x_order)
    gx = st.transpose(gx, [pos[i] for i in range(x.ndim)])
    gy = dot_general(ct, x, ((tuple(ct_xfree), tuple(x_free)), (batch_ct, tuple(lb))))
    y_order = list(rb) + y_free + [rc[list(lc).index(d)] for d in sorted(lc)]
    pos = _positions(y_order)
    gy = st.transpose(gy, [pos[i] for i in range(y.ndim)])
    return gx, gy


def _dot_jvp(t, x, y, *, out, dimension_numbers):
    from nova.ops.elementwise import add

    return add(
        dot_general(t[0], y, dimension_numbers), dot_general(x, t[1], dimension_numbers)
    )


def _dot_cost(in_types, out_types, *, dimension_numbers):
    (lc, _), _ = dimension_numbers
    x = in_types[0]
    k = int(np.prod([x.shape[i] for i in lc], dtype=np.int64))
    flops = 2 * out_types[0].size * k
    moved = sum(t.nbytes for t in in_types) + out_types[0].nbytes
    return Cost(flops, moved)


def _dims(dn):
    (lc, rc), (lb, rb) = dn
    return ((tuple(int(i) for i in lc), tuple(int(i) for i in rc)),
            (tuple(int(i) for i in lb), tuple(int(i) for i in rb)))


def _dot_batch(args, batched, *, dimension_numbers):
    """vmap of dot_general: both operands mapped -> the mapped axis a new leading batch
    dimension (the result's first axis); one mapped -> a free dimension of that operand, moved
    to the front of the result."""
    x, y = args
    (lc, rc), (lb, rb) = dimension_numbers
    up = lambda dims, k: tuple(d + k for d in dims)
    if batched[0] and batched[1]:
        return dot_general_p.bind(x, y, dimension_numbers=(
            (up(lc, 1), up(rc, 1)), ((0, *up(lb, 1)), (0, *up(rb, 1)))))
    if batched[0]:
        dn = ((up(lc, 1), rc), (up(lb, 1), rb))
        at = len(lb)  # the first of x's free dimensions
    else:
        dn = ((lc, up(rc, 1)), (lb, up(rb, 1)))
        at = len(lb) + len(_free_dims(x.ndim, lc, lb))  # the first of y's
    out = dot_general_p.bind(x, y, dimension_numbers=dn)
    perm = (at, *(i for i in range(out.ndim) if i != at))
    return st.transpose(out, perm)


dot_general_p = Primitive(
    "dot_general",
    shape_rule=_dot_rule,
    impl=_dot_impl,
    vjp=_dot_vjp,
    jvp=_dot_jvp,
    fusion=FusionKind.CONTRACTION,
    kernel=Template("contraction"),
    cost=_dot_cost,
    param_types={"dimension_numbers": _dims},
    batch=_dot_batch,
)


def dot_general(x, y, dimension_numbers):
    return dot_general_p.bind(x, y, dimension_numbers=_dims(dimension_numbers))
