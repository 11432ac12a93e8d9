"""Contractions of nova.numpy on top of dot_general: vdot, inner, outer, tensordot, einsum.

Every contraction of two operands is one `dot_general` (plus reshapes/transposes, which fuse into
it); einsum contracts many operands pairwise in a greedy order, takes diagonals of labels repeated
within one operand by masking, and sums labels that no one else needs before contracting.
"""

from __future__ import annotations

import itertools
import math
import operator
import string

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.numpy_impl.util import asarray, normalize_axis, where_am_i
from nova.ops import lax

__all__ = ["einsum", "inner", "outer", "tensordot", "vdot"]


def _promote(*xs):
    dt = dtypes.result_type(*xs)
    return [asarray(x, dt) for x in xs]


def _dot(x, y, dimension_numbers):
    """dot_general; bool operands contract as integers, then `!= 0` (NumPy's logical sum)."""
    if dtypes.is_bool(x.dtype):
        xi, yi = (lax.convert_element_type(v, dtypes.int32) for v in (x, y))
        out = lax.dot_general(xi, yi, dimension_numbers)
        return lax.ne(out, lax.zeros_like(out))
    return lax.dot_general(x, y, dimension_numbers)


def _flat(x):
    return lax.reshape(x, (x.size,))


def vdot(a, b, /):
    """Dot product of a and b flattened, conj(a) . b (numpy.vdot: a complex `a` is
    conjugated first; b never is).

    Both must have the same size; returns a 0-d array of the promoted dtype. Raises ShapeError.
    """
    x, y = _promote(a, b)
    if x.size != y.size:
        raise ShapeError(
            f"vdot: operands of shapes {x.shape} and {y.shape} have different sizes "
            f"({x.size} != {y.size}){where_am_i()}"
        )
    if dtypes.is_complex(x.dtype):
        from nova.ops import complex as cx

        x = cx.conj(x)
    return _dot(_flat(x), _flat(y), (((0,), (0,)), ((), ())))


def inner(a, b, /):
    """Sum over the last axes of a and b: shape a.shape[:-1] + b.shape[:-1] (numpy.inner).

    A 0-d operand multiplies. Raises ShapeError naming both shapes when the last axes differ.
    """
    x, y = _promote(a, b)
    if x.ndim == 0 or y.ndim == 0:
        from nova.numpy_impl.ufuncs import multiply

        return multiply(x, y)
    if x.shape[-1] != y.shape[-1]:
        raise ShapeError(
            f"inner: last dimensions differ: shapes {x.shape} and {y.shape} "
            f"({x.shape[-1]} != {y.shape[-1]}){where_am_i()}"
        )
    return _dot(x, y, (((x.ndim - 1,), (y.ndim - 1,)), ((), ())))


def outer(a, b, /):
    """Outer product of a and b flattened: shape (a.size, b.size) (numpy.outer)."""
    x, y = _promote(a, b)
    return _dot(_flat(x), _flat(y), (((), ()), ((), ())))


def _axes_list(name, axes, ndim):
    seq = [axes] if isinstance(axes, int) or hasattr(axes, "__index__") else list(axes)
    out = [normalize_axis(a, ndim, name) for a in seq]
    if len(set(out)) != len(out):
        raise ValueError(f"tensordot: repeated axis in {name} {axes}{where_am_i()}")
    return out


def tensordot(a, b, axes=2):
    """Sums products over the given axes of a and b (numpy.tensordot).

    axes: an int N (a's last N axes with b's first N) or a pair (axes of a, axes of b) of ints or
    equal-length sequences. Result: a's other axes, then b's, in order. Raises ShapeError naming
    the shapes when paired axes differ in size, ValueError for bad axes.
    """
    x, y = _promote(a, b)
    if isinstance(axes, int) or hasattr(axes, "__index__"):
        n = operator.index(axes)
        if not 0 <= n <= min(x.ndim, y.ndim):
            raise ValueError(
                f"tensordot: axes={n} needs 0 <= axes <= min(ndim) for shapes {x.shape} and "
                f"{y.shape}{where_am_i()}"
            )
        ax, by = list(range(x.ndim - n, x.ndim)), list(range(n))
    else:
        try:
            a_axes, b_axes = axes
        except (TypeError, ValueError):
            raise ValueError(
                f"tensordot: axes must be an int or a pair of axis sequences, got {axes!r}"
                f"{where_am_i()}"
            ) from None
        ax, by = _axes_list("axes of a", a_axes, x.ndim), _axes_list("axes of b", b_axes, y.ndim)
        if len(ax) != len(by):
            raise ValueError(
                f"tensordot: {len(ax)} axes of a but {len(by)} axes of b in {axes}{where_am_i()}"
            )
    for i, j in zip(ax, by, strict=True):
        if x.shape[i] != y.shape[j]:
            raise ShapeError(
                f"tensordot: shape mismatch: dimension {i} of {x.shape} has size {x.shape[i]}, "
                f"dimension {j} of {y.shape} has size {y.shape[j]}{where_am_i()}"
            )
    return _dot(x, y, ((tuple(ax), tuple(by)), ((), ())))


# --- einsum -------------------------------------------------------------------------------------

# Labels of the dimensions under '...', counted from the right so that they broadcast: never letters.
_ELLIPSIS_LABEL = 0x2460


def _ell(j):
    return chr(_ELLIPSIS_LABEL + j)


def _is_ell(label):
    return ord(label) >= _ELLIPSIS_LABEL


def _check_term(term, what):
    rest = term.replace("...", "", 1)
    bad = [c for c in rest if c not in string.ascii_letters]
    if bad:
        raise ValueError(
            f"einsum: invalid subscript {bad[0]!r} in {what} {term!r} (letters and one '...' only)"
            f"{where_am_i()}"
        )


def _expand(term, shape, k):
    """The labels of operand k's dimensions: the term's letters, '...' as ellipsis labels."""
    if "..." in term:
        left, right = term.split("...")
        n = len(shape) - len(left) - len(right)
        if n < 0:
            raise ShapeError(
                f"einsum: operand {k} of shape {shape} has fewer dimensions than subscripts "
                f"{term!r} name{where_am_i()}"
            )
        return list(left) + [_ell(n - 1 - p) for p in range(n)] + list(right)
    if len(term) != len(shape):
        raise ShapeError(
            f"einsum: operand {k} has shape {shape} ({len(shape)} dimensions) but subscripts "
            f"{term!r} name {len(term)}{where_am_i()}"
        )
    return list(term)


def _parse(subscripts, shapes):
    """(input labels per operand, output labels) with '...' expanded."""
    spec = subscripts.replace(" ", "")
    if spec.count("->") > 1:
        raise ValueError(f"einsum: more than one '->' in {subscripts!r}{where_am_i()}")
    ins, arrow, out = spec.partition("->")
    terms = ins.split(",")
    if len(terms) != len(shapes):
        raise ValueError(
            f"einsum: {subscripts!r} names {len(terms)} operands, got {len(shapes)}{where_am_i()}"
        )
    for t in terms:
        _check_term(t, "input")
    labels = [_expand(t, s, k) for k, (t, s) in enumerate(zip(terms, shapes, strict=True))]
    n_ell = max((sum(_is_ell(c) for c in ls) for ls in labels), default=0)
    ell = [_ell(j) for j in reversed(range(n_ell))]
    if not arrow:
        counts = {c: sum(ls.count(c) for ls in labels) for ls in labels for c in ls}
        return labels, ell + sorted(c for c, n in counts.items() if n == 1 and not _is_ell(c))
    _check_term(out, "output")
    if "..." in out:
        left, right = out.split("...")
        out_labels = list(left) + ell + list(right)
    elif n_ell:
        raise ValueError(
            f"einsum: the operands have dimensions under '...' but the output {out!r} has no "
            f"'...' to place them{where_am_i()}"
        )
    else:
        out_labels = list(out)
    known = {c for ls in labels for c in ls}
    for c in out_labels:
        if out_labels.count(c) > 1:
            raise ValueError(f"einsum: output subscript {c!r} repeated in {out!r}{where_am_i()}")
        if c not in known:
            raise ValueError(
                f"einsum: output subscript {c!r} does not occur in the inputs of {subscripts!r}"
                f"{where_am_i()}"
            )
    return labels, out_labels


def _label_sizes(labels, shapes, subscripts):
    """Each label's size; size-1 dimensions broadcast as in numpy.einsum."""
    size: dict = {}
    for ls, shape in zip(labels, shapes, strict=True):
        for c, d in zip(ls, shape, strict=True):
            s = size.setdefault(c, d)
            if d != 1 and s not in (1, d):
                name = "'...'" if _is_ell(c) else repr(c)
                raise ShapeError(
                    f"einsum: subscript {name} has sizes {s} and {d} in {subscripts!r} for operand "
                    f"shapes {', '.join(str(tuple(t)) for t in shapes)}{where_am_i()}"
                )
            size[c] = d if s == 1 else s
    return size


def _take_diagonals(x, ls):
    """Collapses labels repeated within one operand to their diagonal (mask, then sum)."""
    ls = list(ls)
    while True:
        rep = next((c for c in ls if ls.count(c) > 1), None)
        if rep is None:
            return x, ls
        p = ls.index(rep)
        q = ls.index(rep, p + 1)
        if x.shape[p] != x.shape[q]:
            raise ShapeError(
                f"einsum: subscript {rep!r} repeated in one operand names dimensions of different "
                f"sizes {x.shape[p]} and {x.shape[q]} (shape {x.shape}){where_am_i()}"
            )
        on_diag = lax.eq(lax.iota(dtypes.int32, x.shape, p), lax.iota(dtypes.int32, x.shape, q))
        x = lax.reduce_sum(lax.select(on_diag, x, lax.zeros_like(x)), (q,))
        del ls[q]


def _sum_out(x, ls, keep):
    axes = tuple(i for i, c in enumerate(ls) if c not in keep)
    return lax.reduce_sum(x, axes), [c for c in ls if c in keep]


def _contract_pair(a, la, b, lb, keep):
    """One dot_general: shared labels still needed are batch dims, the others contract."""
    shared = [c for c in la if c in lb]
    batch = [c for c in shared if c in keep]
    contract = [c for c in shared if c not in keep]
    dn = (
        (tuple(la.index(c) for c in contract), tuple(lb.index(c) for c in contract)),
        (tuple(la.index(c) for c in batch), tuple(lb.index(c) for c in batch)),
    )
    out = _dot(a, b, dn)
    return out, batch + [c for c in la if c not in shared] + [c for c in lb if c not in shared]


def _pick_pair(ops, out_labels, size):
    """The pair whose contraction shrinks memory most (opt_einsum's greedy rule), leftmost first."""
    best = None
    for i, j in itertools.combinations(range(len(ops)), 2):
        others = {c for k, (_, ls) in enumerate(ops) if k not in (i, j) for c in ls}
        keep = others | set(out_labels)
        la, lb = ops[i][1], ops[j][1]
        result = [c for c in dict.fromkeys(la + lb) if c in keep or not (c in la and c in lb)]
        cost = (
            math.prod(size[c] for c in result)
            - math.prod(size[c] for c in la)
            - math.prod(size[c] for c in lb)
        )
        if best is None or cost < best[0]:
            best = (cost, i, j)
    return best[1], best[2]


def _interleaved(args):
    """numpy's einsum(op0, sublist0, op1, sublist1, ..., [sublist_out]) as a subscripts string."""

    def term(sub):
        out = []
        for s in sub:
            if s is Ellipsis:
                out.append("...")
            else:
                i = operator.index(s)
                if not 0 <= i < 52:
                    raise ValueError(
                        f"einsum: sublist labels must be in [0, 52), got {i}{where_am_i()}"
                    )
                out.append(string.ascii_letters[i])
        return "".join(out)

    n = len(args) // 2
    spec = ",".join(term(s) for s in args[1 : 2 * n : 2])
    if len(args) % 2:
        spec += "->" + term(args[-1])
    return spec, list(args[0 : 2 * n : 2])


def einsum(subscripts, /, *operands, optimize=True):
    """Einstein summation (numpy.einsum): 'ij,jk->ik', implicit output ('ij,jk' sums the labels
    that occur twice and orders the rest alphabetically), '...' broadcasting, labels repeated in
    one operand (diagonal: 'ii->i', trace: 'ii'), any number of operands.

    Also numpy's interleaved form einsum(op0, [0, 1], op1, [1, 2], [0, 2]). Operands are promoted
    to one dtype (bool contracts as logical or-of-ands). Contraction order is greedy (`optimize` is
    accepted for compatibility); each pairwise step is one dot_general. Raises ShapeError naming
    the subscript and shapes when sizes disagree, ValueError for malformed subscripts.
    """
    del optimize  # always greedy
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved((subscripts,) + operands)
    if not operands:
        raise ValueError(f"einsum: no operands given for {subscripts!r}{where_am_i()}")
    xs = _promote(*operands)
    as_bool = dtypes.is_bool(xs[0].dtype)
    if as_bool:
        xs = [lax.convert_element_type(x, dtypes.int32) for x in xs]
    labels, out_labels = _parse(subscripts, [x.shape for x in xs])
    size = _label_sizes(labels, [x.shape for x in xs], subscripts)
    ops = []
    for k, (x, ls) in enumerate(zip(xs, labels, strict=True)):
        x, ls = _take_diagonals(x, ls)
        target = tuple(size[c] for c in ls)
        if x.shape != target:
            x = lax.broadcast_in_dim(x, target, tuple(range(x.ndim)))
        others = {c for j, other in enumerate(labels) if j != k for c in other}
        ops.append(_sum_out(x, ls, others | set(out_labels)))
    while len(ops) > 1:
        i, j = _pick_pair(ops, out_labels, size)
        (a, la), (b, lb) = ops[i], ops[j]
        rest = [op for k, op in enumerate(ops) if k not in (i, j)]
        keep = {c for _, ls in rest for c in ls} | set(out_labels)
        a, la = _sum_out(a, la, keep | set(lb))
        b, lb = _sum_out(b, lb, keep | set(la))
        ops = rest + [_contract_pair(a, la, b, lb, keep)]
    x, ls = _sum_out(*ops[0], set(out_labels))
    x = lax.transpose(x, [ls.index(c) for c in out_labels])
    return lax.ne(x, lax.zeros_like(x)) if as_bool else x
