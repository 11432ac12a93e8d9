"""Complex arithmetic as float arithmetic on (real, imaginary) pairs of Vars, emitted into a
Rewriter: the formulas legalize_complex.py uses for each complex primitive.

A pair's imaginary part may be None (known zero: a real value converted to complex), which the
emitters keep as long as they can. Sources: complex division by Smith's method (R. L. Smith,
"Algorithm 116: Complex division", CACM 5(8), 1962); |z| scaled by max(|a|, |b|) (no overflow of
a^2 + b^2); the principal square root as in W. Kahan, "Branch cuts for complex elementary
functions" (1987); tan and tanh through the double-angle forms, finite where sin/cos overflow;
lexicographic comparisons (real part, then imaginary part) as NumPy's and JAX's.
"""

from __future__ import annotations

import math

import numpy as np

from nova.compiler.rewrite import Rewriter
from nova.core import dtypes

_PRIM_NAMES = {"bitwise_and": "and", "bitwise_or": "or"}


class _Emit:
    """Float arithmetic on new Vars, emitted with the rewritten equation's source and stage."""

    def __init__(self, rw: Rewriter):
        self.rw = rw
        self.source = None

    def op(self, name, *ins, **params):
        return self.rw.emit(name, list(ins), params, self.source)[0]

    def full(self, like, value, dtype=None):
        dtype = like.type.dtype if dtype is None else dtype
        c = self.rw.emit("constant", [], {"value": np.asarray(value, dtype)}, self.source)[0]
        shape = like.type.shape
        return c if shape == () else self.op("broadcast_in_dim", c, shape=shape,
                                             broadcast_dimensions=())

    def __getattr__(self, name):  # add, sub, mul, div, neg, exp, ... as emitters
        prim = _PRIM_NAMES.get(name, name)
        return lambda *ins, **params: self.op(prim, *ins, **params)

    # None stands for an imaginary part known to be zero.
    def add_opt(self, a, b):
        return b if a is None else a if b is None else self.add(a, b)

    def sub_opt(self, a, b):
        return (None if b is None else self.neg(b)) if a is None else \
            a if b is None else self.sub(a, b)

    def zero_if_none(self, im, like):
        return self.full(like, 0) if im is None else im

    def cmul(self, x, y):
        (a, b), (c, d) = x, y
        if b is None and d is None:
            return self.mul(a, c), None
        if b is None:
            return self.mul(a, c), self.mul(a, d)
        if d is None:
            return self.mul(a, c), self.mul(b, c)
        return self.sub(self.mul(a, c), self.mul(b, d)), self.add(self.mul(a, d), self.mul(b, c))

    def cdiv(self, x, y):
        (a, b), (c, d) = x, y
        if d is None:
            return self.div(a, c), None if b is None else self.div(b, c)
        b = self.zero_if_none(b, a)
        # Smith's method: divide through by the larger of |c|, |d| (no overflow of c^2 + d^2).
        big = self.ge(self.abs(c), self.abs(d))
        r1 = self.div(d, c)
        den1 = self.add(c, self.mul(d, r1))
        re1 = self.div(self.add(a, self.mul(b, r1)), den1)
        im1 = self.div(self.sub(b, self.mul(a, r1)), den1)
        r2 = self.div(c, d)
        den2 = self.add(self.mul(c, r2), d)
        re2 = self.div(self.add(self.mul(a, r2), b), den2)
        im2 = self.div(self.sub(self.mul(b, r2), a), den2)
        return self.select(big, re1, re2), self.select(big, im1, im2)

    def cabs(self, x):
        a, b = x
        if b is None:
            return self.abs(a)
        aa, bb = self.abs(a), self.abs(b)
        m, n = self.max(aa, bb), self.min(aa, bb)
        zero = self.full(m, 0)
        safe = self.select(self.eq(m, zero), self.full(m, 1), m)
        r = self.div(n, safe)
        h = self.mul(m, self.sqrt(self.add(self.full(r, 1), self.mul(r, r))))
        # |inf + i nan| is inf (C99 Annex G); m * sqrt(...) would give nan there.
        inf = self.bitwise_or(self.isinf(a), self.isinf(b))
        return self.select(inf, self.full(m, np.inf), h)

    def cexp(self, x):
        a, b = x
        ea = self.exp(a)
        if b is None:
            return ea, None
        return self.mul(ea, self.cos(b)), self.mul(ea, self.sin(b))

    def clog(self, x):
        a, b = x
        return self.log(self.cabs(x)), self.atan2(self.zero_if_none(b, a), a)

    def csqrt(self, x):
        a, b = x
        b = self.zero_if_none(b, a)
        zero, half = self.full(a, 0), self.full(a, 0.5)
        t = self.sqrt(self.mul(self.add(self.cabs((a, b)), self.abs(a)), half))
        safe_t = self.select(self.eq(t, zero), self.full(t, 1), t)
        q = self.div(b, self.mul(self.full(t, 2), safe_t))  # b / 2t
        pos = self.ge(a, zero)
        re = self.select(pos, t, self.abs(q))
        im = self.select(pos, q, self.select(self.signbit(b), self.neg(t), t))
        is0 = self.eq(t, zero)  # z == 0
        return self.select(is0, zero, re), self.select(is0, b, im)

    def signbit(self, x):
        """x's sign bit (true for -0.0 too: sqrt(-1 - 0j) is -1j, as in C99 and NumPy)."""
        ints = {4: np.dtype(np.int32), 8: np.dtype(np.int64)}[x.type.dtype.itemsize]
        bits = self.bitcast_convert_type(x, new_dtype=ints)
        return self.lt(bits, self.full(bits, 0))

    def ctanh_like(self, x, swap):
        """tanh(a + ib) = (sinh 2a + i sin 2b) / (cosh 2a + cos 2b); tan(z) = -i tanh(iz)."""
        a, b = x
        if swap:  # tan(a + ib) = -i tanh(-b + ia): re = im of tanh, im = -re of tanh
            a, b = self.neg(self.zero_if_none(b, a)), a
        b = self.zero_if_none(b, a)
        two = self.full(a, 2)
        a2, b2 = self.mul(two, a), self.mul(two, b)
        den = self.add(self.cosh(a2), self.cos(b2))
        re, im = self.div(self.sinh(a2), den), self.div(self.sin(b2), den)
        # Past |a| = 20 (float32) cosh 2a overflows: tanh is sign(a) + 0i there.
        far = self.gt(self.abs(a), self.full(a, 20 if a.type.dtype == dtypes.float32 else 300))
        re = self.select(far, self.sign(a), re)
        im = self.select(far, self.mul(self.full(a, 0), b), im)
        return (im, self.neg(re)) if swap else (re, im)


def _part_type(v):
    return dtypes.real_dtype(v.type.dtype)


def _unary_rules():
    ln2 = math.log(2.0)

    def scale(E, x, s):
        a, b = x
        k = E.full(a, s)
        return E.mul(a, k), None if b is None else E.mul(b, k)

    def sin(E, x):
        a, b = x
        if b is None:
            return E.sin(a), None
        return E.mul(E.sin(a), E.cosh(b)), E.mul(E.cos(a), E.sinh(b))

    def cos(E, x):
        a, b = x
        if b is None:
            return E.cos(a), None
        return E.mul(E.cos(a), E.cosh(b)), E.neg(E.mul(E.sin(a), E.sinh(b)))

    def sinh(E, x):
        a, b = x
        if b is None:
            return E.sinh(a), None
        return E.mul(E.sinh(a), E.cos(b)), E.mul(E.cosh(a), E.sin(b))

    def cosh(E, x):
        a, b = x
        if b is None:
            return E.cosh(a), None
        return E.mul(E.cosh(a), E.cos(b)), E.mul(E.sinh(a), E.sin(b))

    def expm1(E, x):
        a, b = x
        if b is None:
            return E.expm1(a), None
        # e^a cos b - 1 = expm1(a) cos b - 2 sin^2(b/2): accurate near 0.
        s = E.sin(E.mul(b, E.full(b, 0.5)))
        re = E.sub(E.mul(E.expm1(a), E.cos(b)), E.mul(E.full(s, 2), E.mul(s, s)))
        return re, E.mul(E.exp(a), E.sin(b))

    def log1p(E, x):
        a, b = x
        if b is None:
            b = E.full(a, 0)
        # log|1 + z| = log1p(2a + a^2 + b^2) / 2, arg(1 + z) = atan2(b, 1 + a).
        s = E.add(E.mul(a, E.add(E.full(a, 2), a)), E.mul(b, b))
        return E.mul(E.log1p(s), E.full(s, 0.5)), E.atan2(b, E.add(E.full(a, 1), a))

    def reciprocal(E, x):
        return E.cdiv((E.full(x[0], 1), None), x)

    return {
        "neg": lambda E, x: (E.neg(x[0]), None if x[1] is None else E.neg(x[1])),
        "exp": lambda E, x: E.cexp(x),
        "exp2": lambda E, x: E.cexp(scale(E, x, ln2)),
        "expm1": expm1,
        "log": lambda E, x: E.clog(x),
        "log2": lambda E, x: scale(E, E.clog(x), 1 / ln2),
        "log1p": log1p,
        "sqrt": lambda E, x: E.csqrt(x),
        "rsqrt": lambda E, x: reciprocal(E, E.csqrt(x)),
        "reciprocal": reciprocal,
        "sin": sin, "cos": cos, "sinh": sinh, "cosh": cosh,
        "tanh": lambda E, x: E.ctanh_like(x, False),
        "tan": lambda E, x: E.ctanh_like(x, True),
        "conj": lambda E, x: (x[0], None if x[1] is None else E.neg(x[1])),
    }


_UNARY = _unary_rules()


def _pow(E, z, w):
    # z ** w = exp(w log z); 0 ** w is 1 for w == 0 and 0 otherwise (NumPy's for Re w > 0).
    out = E.cexp(E.cmul(w, E.clog(z)))
    a, b = z
    zero = E.full(a, 0)
    z0 = E.eq(a, zero) if b is None else E.bitwise_and(E.eq(a, zero), E.eq(b, zero))
    c, d = w
    w0 = E.eq(c, zero) if d is None else E.bitwise_and(E.eq(c, zero), E.eq(d, zero))
    re = E.select(z0, E.select(w0, E.full(a, 1), zero), out[0])
    im = E.select(z0, zero, E.zero_if_none(out[1], a))
    return re, im


def _dot(E, x, y, params):
    (a, b), (c, d) = x, y
    dot = lambda p, q: E.op("dot_general", p, q, **params)
    if b is None and d is None:
        return dot(a, c), None
    if b is None:
        return dot(a, c), dot(a, d)
    if d is None:
        return dot(a, c), dot(b, c)
    return E.sub(dot(a, c), dot(b, d)), E.add(dot(a, d), dot(b, c))


def _lex(E, name, x, y):
    """The lexicographic comparison `name` (lt, le, gt, ge) of complex pairs x and y: by the
    real parts, ties broken by the imaginary parts (NumPy's and JAX's order)."""
    (a, b), (c, d) = x, y
    b, d = E.zero_if_none(b, a), E.zero_if_none(d, c)
    strict = "lt" if name in ("lt", "le") else "gt"
    return E.bitwise_or(E.op(strict, a, c), E.bitwise_and(E.eq(a, c), E.op(name, b, d)))


def _choose(E, name, x, y):
    """max / min of complex pairs, lexicographic; ties keep x."""
    pick = _lex(E, "ge" if name == "max" else "le", x, y)
    (a, b), (c, d) = x, y
    if b is None and d is None:
        return E.select(pick, a, c), None
    b, d = E.zero_if_none(b, a), E.zero_if_none(d, c)
    return E.select(pick, a, c), E.select(pick, b, d)


def _prod(E, x, axes, out_type, combine=None, pad=(1, 0)):
    """Complex product over `axes` as a tree of pairwise products (log2 n rounds); with
    `combine` (a function of two pairs) and its identity `pad`, that reduction instead."""
    combine = combine or E.cmul
    a, b = x
    nd = len(a.type.shape)
    keep = [i for i in range(nd) if i not in axes]
    perm = (*keep, *axes)
    lead = tuple(a.type.shape[i] for i in keep)
    n = int(np.prod([a.type.shape[i] for i in axes], dtype=np.int64))
    parts = []
    for p in (a, E.zero_if_none(b, a)):
        p = E.transpose(p, permutation=perm) if perm != tuple(range(nd)) else p
        parts.append(E.reshape(p, new_sizes=(*lead, n)))
    size = 1
    while size < max(n, 1):
        size *= 2
    if size != n:  # pad with ones (1 + 0i)
        cfg = tuple((0, 0, 0) for _ in lead) + ((0, size - n, 0),)
        parts = [E.pad(parts[0], E.full(_scalar(parts[0]), pad[0]), padding_config=cfg),
                 E.pad(parts[1], E.full(_scalar(parts[1]), pad[1]), padding_config=cfg)]
    re, im = parts
    while size > 1:
        half = size // 2

        def cut(v, lo, hi):
            return E.slice(v, start_indices=(0,) * len(lead) + (lo,),
                           limit_indices=(*lead, hi), strides=(1,) * (len(lead) + 1))

        re, im = combine((cut(re, 0, half), cut(im, 0, half)),
                         (cut(re, half, size), cut(im, half, size)))
        size = half
    shape = out_type.shape
    return E.reshape(re, new_sizes=shape), E.reshape(im, new_sizes=shape)


class _Scalar:
    """A stand-in with a 0-d type, for E.full of a scalar constant."""

    def __init__(self, dtype):
        from nova.core.ir import TensorType

        self.type = TensorType((), dtype)


def _scalar(v):
    return _Scalar(v.type.dtype)
