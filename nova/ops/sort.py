"""sort: a stable sort of several same-shaped operands along one dimension, keyed by the first few.

`sort_p(k_1, ..., k_K, v_1, ..., v_M; dimension, num_keys=K)` orders every operand by the
lexicographic order of the keys (NumPy's order: NaN after +inf, -0.0 equal to 0.0, ties keep their
input order), as lax.sort does. Sorting (x, iota) gives both `sort` and `argsort`.

Derivatives: every output is a permutation of its operand, the same permutation for all. The VJP
recovers that permutation by sorting (keys, iota) again, then scatters each cotangent back with one
more sort keyed by the permutation (sorting by a permutation applies its inverse), so no gather or
scatter primitive is needed and the backward stays O(n log n).
"""

from __future__ import annotations

import math

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.core.ir import TensorType
from nova.core.primitive import Cost, FusionKind, Primitive, Template, broadcast_batched
from nova.ops import elementwise as ew
from nova.ops import structural as st


def _sort_rule(*operands, dimension, num_keys):
    if not operands:
        raise TypeError("sort needs at least one operand")
    shape = operands[0].shape
    for t in operands[1:]:
        if t.shape != shape:
            shapes = ", ".join(str(o.shape) for o in operands)
            raise ShapeError(f"sort: operands must have one shape, got {shapes}")
    if not 0 <= dimension < len(shape):
        raise ValueError(f"sort: dimension {dimension} is out of bounds for shape {shape}")
    if not 1 <= num_keys <= len(operands):
        raise ValueError(f"sort: num_keys={num_keys} must be in [1, {len(operands)}]")
    return tuple(operands)


def _key(x):
    # NumPy cannot order bfloat16/float16 reliably; float32 holds them exactly.
    if dtypes.is_float(x.dtype) and x.dtype.itemsize < 4:
        return x.astype(np.float32)
    return x


def _sort_impl(*operands, dimension, num_keys):
    keys = [_key(k) for k in operands[:num_keys]]
    if num_keys == 1:
        perm = np.argsort(keys[0], axis=dimension, kind="stable")
    else:
        # lexsort sorts by its last key first and is stable.
        perm = np.lexsort(keys[::-1], axis=dimension)
    return tuple(np.take_along_axis(x, perm, axis=dimension) for x in operands)


def _iota_like(x, dimension):
    return st.iota(dtypes.int32, x.shape, dimension)


def _permutation(keys, dimension):
    """The indices that sort `keys` (recomputed exactly as the forward did, since it is stable)."""
    outs = sort_p.bind(*keys, _iota_like(keys[0], dimension), dimension=dimension,
                       num_keys=len(keys))
    return outs[-1]


def _sort_vjp(cts, *operands, out, dimension, num_keys):
    diff = [i for i, x in enumerate(operands) if dtypes.is_float(x.dtype)]
    if not diff:
        return (None,) * len(operands)
    perm = _permutation(operands[:num_keys], dimension)
    # out[j] = x[perm[j]], so x's cotangent at perm[j] is ct[j]: sorting ct by perm puts it there.
    back = sort_p.bind(perm, *[cts[i] for i in diff], dimension=dimension, num_keys=1)
    grads = [None] * len(operands)
    for i, g in zip(diff, back[1:], strict=True):
        grads[i] = g
    return tuple(grads)


def _sort_jvp(tangents, *operands, out, dimension, num_keys):
    diff = [i for i, x in enumerate(operands) if dtypes.is_float(x.dtype)]
    moved = sort_p.bind(*operands[:num_keys], *[tangents[i] for i in diff],
                        dimension=dimension, num_keys=num_keys)
    res = [ew.zeros_like(o) for o in out]
    for i, t in zip(diff, moved[num_keys:], strict=True):
        res[i] = t
    return tuple(res)


def _sort_cost(in_types, out_types, *, dimension, num_keys):
    x = in_types[0]
    n = x.shape[dimension]
    compares = x.size * max(1, math.ceil(math.log2(max(n, 2)))) * num_keys
    moved = sum(t.nbytes for t in in_types) + sum(t.nbytes for t in out_types)
    return Cost(compares, moved)


sort_p = Primitive(
    "sort",
    shape_rule=_sort_rule,
    impl=_sort_impl,
    vjp=_sort_vjp,
    jvp=_sort_jvp,
    fusion=FusionKind.OPAQUE,
    kernel=Template("sort"),
    cost=_sort_cost,
    multiple_results=True,
    param_types={"dimension": int, "num_keys": int},
    batch=lambda args, batched, *, dimension, num_keys: sort_p.bind(
        *broadcast_batched(args, batched), dimension=dimension + 1, num_keys=num_keys),
)


def sort(operands, dimension=-1, num_keys=1):
    """Stable sort along `dimension`, as lax.sort.

    `operands`: one array (returns the sorted array) or a sequence of same-shaped arrays (returns a
    tuple, all permuted by the lexicographic order of the first `num_keys`).
    """
    single = not isinstance(operands, tuple | list)
    ops = [operands] if single else list(operands)
    ndim = ops[0].ndim
    if not -ndim <= dimension < ndim:
        raise ValueError(f"sort: dimension {dimension} is out of bounds for shape {ops[0].shape}")
    outs = sort_p.bind(*ops, dimension=dimension % ndim, num_keys=num_keys)
    return outs[0] if single else tuple(outs)


def sort_key_val(keys, values, dimension=-1):
    """(keys, values) both reordered by a stable sort of `keys` along `dimension`."""
    return sort([keys, values], dimension, num_keys=1)
