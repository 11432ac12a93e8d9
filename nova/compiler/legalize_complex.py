"""legalize_complex: every complex value becomes a pair of float values (real, imaginary part).

Kernels compute in floats only, so this pass runs first: each equation on complex values is
replaced by its float arithmetic (a complex product is four real products and two sums, a
complex matmul four real matmuls, exp(a + ib) = e^a (cos b + i sin b), ...), and a value whose
imaginary part is known to be zero (a real array converted to complex) carries no imaginary
part at all, so `real_matrix @ complex_matrix` costs two real matmuls, not four. Complex
buffers cross the boundary through two host copies (nova/ops/complex.py: planar parts):
`complex_as_pairs` where a complex input (or the result of a primitive without a split rule,
e.g. a scan or a callback) is read, `pairs_as_complex` where a complex value is a Program
output or such a primitive's operand. Programs without complex values are returned as they are.
The formulas and their sources are in complex_math.py (Smith's division, scaled |z|, Kahan's
square root, double-angle tan/tanh).
Comparisons, max/min and their reductions order complex values lexicographically (real part,
then imaginary part), as NumPy and JAX do. Raises NotImplementedError naming the primitive and
the user's source line for a primitive that has no complex form here (sort, argmax, argmin,
cumprod, cummax, cummin: nova.numpy builds sort and cumprod of complex from other primitives).
"""

from __future__ import annotations

import numpy as np

from nova.compiler.complex_math import _UNARY, _choose, _dot, _Emit, _lex, _pow, _prod
from nova.compiler.rewrite import Rewriter
from nova.core import dtypes
from nova.core.ir import Program

# Primitives applied to the real and the imaginary part alike (linear in the complex operand,
# structural in the others: indices, predicates).
COMPONENTWISE = frozenset({
    "reshape", "transpose", "broadcast_in_dim", "slice", "rev", "concatenate", "pad", "gather",
    "scatter_add", "scatter", "reduce_sum", "cumsum", "copy", "select", "stop_gradient",
})
# Opaque primitives that keep complex operands (host references, control flow whose regions
# are legalized when they are compiled, barriers): their complex values cross as buffers.
_NO_SPLIT_OK = frozenset({"scan", "while", "cond", "pure_callback", "io_callback",
                          "optimization_barrier", "checkpoint_name", "complex_as_pairs",
                          "pairs_as_complex", "psum", "pmax", "pmin", "all_gather",
                          "psum_scatter", "ppermute", "all_to_all"})


def has_complex(program: Program) -> bool:
    """Whether any input, output or equation value of `program` is complex."""
    if any(dtypes.is_complex(v.type.dtype) for v in program.inputs):
        return True
    return any(dtypes.is_complex(v.type.dtype) for e in program.eqns
               for v in (*e.inputs, *e.outputs))


def legalize_complex(program: Program) -> Program:
    """`program` with every complex value split into float parts (module docstring)."""
    if not has_complex(program):
        return program
    rw = Rewriter(program)
    E = _Emit(rw)
    pairs: dict[int, tuple] = {}  # id(old complex Var) -> (re, im or None), new Vars
    whole: dict[int, object] = {}  # id(old complex Var) -> new complex Var

    def pair(v):
        got = pairs.get(id(v))
        if got is None:
            c = rw.get(v)
            shape = c.type.shape
            p = E.complex_as_pairs(c)
            nd = len(shape)

            def part(k):
                s = E.slice(p, start_indices=(k,) + (0,) * nd, limit_indices=(k + 1, *shape),
                            strides=(1,) * (nd + 1))
                return E.reshape(s, new_sizes=shape)

            got = pairs[id(v)] = (part(0), part(1))
        return got

    def complex_var(v):
        got = whole.get(id(v))
        if got is None:
            if id(v) not in pairs:
                return rw.get(v)  # an input or the result of a kept equation
            re, im = pairs[id(v)]
            im = E.zero_if_none(im, re)
            shape = re.type.shape
            row = lambda x: E.reshape(x, new_sizes=(1, *shape))
            got = E.pairs_as_complex(E.concatenate(row(re), row(im), dimension=0))
            whole[id(v)] = got
        return got

    for e in program.eqns:
        touches = any(dtypes.is_complex(v.type.dtype) for v in (*e.inputs, *e.outputs))
        if not touches:
            rw.keep(e)
            continue
        E.source, rw.stage = e.source, e.stage
        name = e.prim.name
        outs = _rule(E, e, name, pair)
        if outs is None:
            if name not in _NO_SPLIT_OK and e.prim.fusion.name != "OPAQUE" or \
                    name in ("sort", "argmax", "argmin", "cumprod", "cummax", "cummin"):
                where = f" (at {e.source})" if e.source else ""
                raise NotImplementedError(f"{name} of complex values is not supported{where}")
            for v in e.inputs:
                if dtypes.is_complex(v.type.dtype):
                    rw.replace(v, complex_var(v))
            rw.keep(e)
            continue
        for o, new in zip(e.outputs, outs, strict=True):
            if dtypes.is_complex(o.type.dtype):
                pairs[id(o)] = new
            else:
                rw.replace(o, new)
    for v in program.outputs:
        if dtypes.is_complex(v.type.dtype):
            rw.replace(v, complex_var(v))
    return rw.finish()


_SPLIT = COMPONENTWISE | set(_UNARY) | {
    "constant", "add", "sub", "mul", "div", "pow", "abs", "sign", "eq", "ne", "isnan", "isinf",
    "real", "imag", "complex", "convert_element_type", "dot_general", "reduce_prod", "lt", "le",
    "gt", "ge", "max", "min", "reduce_max", "reduce_min"}


def _rule(E, e, name, pair):
    """The new outputs of complex equation e (pairs for complex outputs, Vars for the others),
    or None when e has no split rule (it keeps its complex operands)."""
    def arg(v):
        return pair(v) if dtypes.is_complex(v.type.dtype) else E.rw.get(v)

    if name == "constant":
        value = np.asarray(e.params["value"])
        part = dtypes.real_dtype(value.dtype)
        re = E.rw.constant(np.array(value.real, part), e.source)
        im = None if not np.any(value.imag) else \
            E.rw.constant(np.array(value.imag, part), e.source)
        return [(re, im)]
    if name not in _SPLIT:
        return None
    args = [arg(v) for v in e.inputs]
    if name in COMPONENTWISE:
        cplx = [dtypes.is_complex(v.type.dtype) for v in e.inputs]
        zero_im = all(a[1] is None for a, c in zip(args, cplx, strict=True) if c)
        re_in = [a[0] if c else a for a, c in zip(args, cplx, strict=True)]
        re = E.op(name, *re_in, **e.params)
        if zero_im:
            return [(re, None)]
        im_in = [E.zero_if_none(a[1], a[0]) if c else a for a, c in zip(args, cplx, strict=True)]
        return [(re, E.op(name, *im_in, **e.params))]
    if name in _UNARY:
        return [_UNARY[name](E, args[0])]
    if name == "add":
        (a, b), (c, d) = args
        return [(E.add(a, c), E.add_opt(b, d))]
    if name == "sub":
        (a, b), (c, d) = args
        return [(E.sub(a, c), E.sub_opt(b, d))]
    if name == "mul":
        return [E.cmul(*args)]
    if name == "div":
        return [E.cdiv(*args)]
    if name == "pow":
        return [_pow(E, *args)]
    if name == "abs":
        return [E.cabs(args[0])]
    if name == "sign":
        x = args[0]
        r = E.cabs(x)
        zero = E.full(r, 0)
        safe = E.select(E.eq(r, zero), E.full(r, 1), r)
        return [(E.div(x[0], safe), None if x[1] is None else E.div(x[1], safe))]
    if name in ("eq", "ne"):
        (a, b), (c, d) = args
        b, d = E.zero_if_none(b, a), E.zero_if_none(d, c)
        if name == "eq":
            return [E.bitwise_and(E.eq(a, c), E.eq(b, d))]
        return [E.bitwise_or(E.ne(a, c), E.ne(b, d))]
    if name in ("isnan", "isinf"):
        a, b = args[0]
        r = E.op(name, a)
        return [r if b is None else E.bitwise_or(r, E.op(name, b))]
    if name == "real":
        return [args[0][0]]
    if name == "imag":
        a, b = args[0]
        return [E.zero_if_none(b, a)]
    if name == "complex":
        return [(args[0], args[1])]
    if name == "convert_element_type":
        new = np.dtype(e.params["new_dtype"])
        src = e.inputs[0].type.dtype
        if dtypes.is_complex(src):
            a, b = args[0]
            if dtypes.is_complex(new):
                part = dtypes.real_dtype(new)
                cv = lambda x: E.convert_element_type(x, new_dtype=part)
                return [(cv(a), None if b is None else cv(b))]
            if new == dtypes.bool_:
                z = E.full(a, 0)
                nz = E.ne(a, z)
                return [nz if b is None else E.bitwise_or(nz, E.ne(b, z))]
            return [a if new == a.type.dtype else E.convert_element_type(a, new_dtype=new)]
        x = args[0]
        part = dtypes.real_dtype(new)
        return [(x if x.type.dtype == part else E.convert_element_type(x, new_dtype=part), None)]
    if name == "dot_general":
        return [_dot(E, args[0], args[1], e.params)]
    if name == "reduce_prod":
        return [_prod(E, args[0], tuple(e.params["axes"]), e.outputs[0].type)]
    if name in ("lt", "le", "gt", "ge"):
        return [_lex(E, name, *args)]
    if name in ("max", "min"):
        return [_choose(E, name, *args)]
    if name in ("reduce_max", "reduce_min"):
        kind = name[len("reduce_"):]
        inf = -np.inf if kind == "max" else np.inf
        return [_prod(E, args[0], tuple(e.params["axes"]), e.outputs[0].type,
                      lambda p, q: _choose(E, kind, p, q), (inf, inf))]
    return None
