"""A typed MLIR text builder implementing the kernel-hook builder protocol (nova/core/primitive.py).

Primitive kernel hooks call methods such as `b.exp(x)`, `b.cmp("lt", x, y)`, `b.select(c, x, y)`;
this builder emits the matching `arith` / `math` / `vector` ops as MLIR text on scalars or on
vectors (`vector<16xf32>`), inserting broadcasts of scalar operands and the f32 round trip of
f16/bf16 arithmetic. It never imports MLIR: codegen produces text, and only the compile step parses
it (MLIR_NOTES.md §6: text generation + parse is the fastest way to build IR from Python).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nova.core import dtypes

_ELEM = {
    dtypes.bool_: "i1", dtypes.uint8: "i8", dtypes.uint16: "i16", dtypes.uint32: "i32",
    dtypes.int8: "i8", dtypes.int16: "i16", dtypes.int32: "i32",
    # bf16 values are carried as their i16 bit patterns: x86 LLVM legalizes bf16 loads/stores
    # through f32 and then calls compiler-rt's __truncsfbf2, which GCC 12's libgcc lacks. All
    # bf16 arithmetic goes through f32 (_wide/_narrow) anyway.
    dtypes.int64: "i64", dtypes.float16: "f16", dtypes.bfloat16: "i16", dtypes.float32: "f32",
    dtypes.float64: "f64",
}
_UNSIGNED = {dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.bool_}


def elem_type(dtype) -> str:
    """The MLIR element type of a dtype (signless integers; "index" for index arithmetic)."""
    if dtype == "index":
        return "index"
    return _ELEM[np.dtype(dtype)]


@dataclass(frozen=True)
class Value:
    """An SSA value: its name, dtype (np.dtype or "index") and vector width (0 for scalars)."""

    name: str
    dtype: object
    width: int = 0

    @property
    def elem(self) -> str:
        return elem_type(self.dtype)

    @property
    def type(self) -> str:
        return f"vector<{self.width}x{self.elem}>" if self.width else self.elem

    @property
    def is_float(self) -> bool:
        return self.dtype != "index" and dtypes.is_float(self.dtype)

    @property
    def unsigned(self) -> bool:
        return self.dtype == "index" or np.dtype(self.dtype) in _UNSIGNED


def float_literal(v: float, elem: str) -> str:
    if math.isnan(v):
        return {"f16": "0x7E00", "bf16": "0x7FC0", "f32": "0x7FC00000", "f64": "0x7FF8000000000000"}[elem]
    if math.isinf(v):
        pos = {"f16": "0x7C00", "bf16": "0x7F80", "f32": "0x7F800000", "f64": "0x7FF0000000000000"}
        neg = {"f16": "0xFC00", "bf16": "0xFF80", "f32": "0xFF800000", "f64": "0xFFF0000000000000"}
        return (pos if v > 0 else neg)[elem]
    r = repr(float(v))
    mant, e, exp = r.partition("e")
    if "." not in mant:  # MLIR float literals need a decimal point: 1e+30 -> 1.0e+30
        r = mant + ".0" + e + exp
    return r


class Builder:
    """Emits lines of MLIR into `self.lines`; every method returns a Value."""

    def __init__(self, prefix: str = "v"):
        self.lines: list[str] = []
        self.prefix = prefix
        self.count = 0
        self.indent = 2
        # The element dtype `const(v, None)` takes: set by the codegen to the equation's dtype.
        self.default_dtype = dtypes.float32
        self._consts: dict = {}

    # --- plumbing ---------------------------------------------------------------------------
    def fresh(self) -> str:
        self.count += 1
        return f"%{self.prefix}{self.count}"

    def emit(self, text: str) -> None:
        self.lines.append(" " * self.indent + text)

    def op(self, text: str, dtype, width: int) -> Value:
        name = self.fresh()
        self.emit(f"{name} = {text}")
        return Value(name, dtype, width)

    def const(self, v, dtype=None, width: int = 0) -> Value:
        dtype = self.default_dtype if dtype is None else dtype
        if dtype != "index":
            dtype = np.dtype(dtype)
        key = (repr(v), str(dtype), width, self.indent)
        hit = self._consts.get(key)
        if hit is not None:
            return hit
        el = elem_type(dtype)
        if dtype == dtypes.bfloat16:
            lit = str(int(np.array(v, dtypes.bfloat16).view(np.int16)))
        elif dtype != "index" and dtypes.is_float(dtype):
            lit = float_literal(float(v), el)
        elif el == "i1":
            lit = "true" if bool(v) else "false"
        else:
            lit = str(int(v))
        if width:
            val = self.op(f"arith.constant dense<{lit}> : vector<{width}x{el}>", dtype, width)
        elif el == "i1":
            val = self.op(f"arith.constant {lit}", dtype, 0)  # i1 literals carry no type suffix
        else:
            val = self.op(f"arith.constant {lit} : {el}", dtype, 0)
        self._consts[key] = val
        return val

    def forget_constants(self) -> None:
        """Constants defined inside a region must not be reused after it closes."""
        self._consts.clear()

    def splat(self, x: Value, width: int) -> Value:
        if x.width == width:
            return x
        if x.width:
            raise ValueError(f"cannot broadcast {x.type} to width {width}")
        return self.op(f"vector.broadcast {x.name} : {x.elem} to vector<{width}x{x.elem}>",
                       x.dtype, width)

    def _coerce(self, *xs: Value) -> list[Value]:
        w = max(x.width for x in xs)
        return [self.splat(x, w) if w else x for x in xs]

    def _wide(self, x: Value) -> Value:
        """f16/bf16 compute in f32 (each op rounds back, as NumPy/ml_dtypes do)."""
        w = x.width

        def vt(e):
            return f"vector<{w}x{e}>" if w else e

        if x.dtype == dtypes.bfloat16:  # bits << 16 reinterpreted as f32 (exact)
            c16 = self.const(16, dtypes.uint32, w)
            ext = self.op(f"arith.extui {x.name} : {vt('i16')} to {vt('i32')}", dtypes.uint32, w)
            sh = self.op(f"arith.shli {ext.name}, {c16.name} : {vt('i32')}", dtypes.uint32, w)
            return self.op(f"arith.bitcast {sh.name} : {vt('i32')} to {vt('f32')}", dtypes.float32, w)
        if x.elem == "f16":
            return self.op(f"arith.extf {x.name} : {x.type} to {vt('f32')}", dtypes.float32, w)
        return x

    def _narrow(self, x: Value, dtype) -> Value:
        if np.dtype(dtype) == dtypes.bfloat16 and x.elem == "f32":
            return self._to_bf16(x)
        if elem_type(dtype) == "f16" and x.elem == "f32":
            t = f"vector<{x.width}xf16>" if x.width else "f16"
            return self.op(f"arith.truncf {x.name} : {x.type} to {t}", np.dtype(dtype), x.width)
        return x

    def _to_bf16(self, x: Value) -> Value:
        """f32 -> bf16 rounding to nearest even, in integer ops: LLVM would call the compiler-rt
        builtin __truncsfbf2, which the system's libgcc (GCC 12) does not provide."""
        w = x.width

        def vt(e):
            return f"vector<{w}x{e}>" if w else e

        def raw(text, dtype=dtypes.uint32):
            return self.op(text, dtype, w)  # intermediate integer values (names only)

        i32, i16 = vt("i32"), vt("i16")
        c16 = self.const(16, dtypes.uint32, w)
        one = self.const(1, dtypes.uint32, w)
        b7fff = self.const(0x7FFF, dtypes.uint32, w)
        bits = raw(f"arith.bitcast {x.name} : {vt('f32')} to {i32}")
        top = raw(f"arith.shrui {bits.name}, {c16.name} : {i32}")
        low = raw(f"arith.andi {top.name}, {one.name} : {i32}")
        bias = raw(f"arith.addi {low.name}, {b7fff.name} : {i32}")
        rounded = raw(f"arith.addi {bits.name}, {bias.name} : {i32}")
        hi = raw(f"arith.shrui {rounded.name}, {c16.name} : {i32}")
        h16 = raw(f"arith.trunci {hi.name} : {i32} to {i16}")
        nan = raw(f"arith.cmpf uno, {x.name}, {x.name} : {x.type}", dtypes.bool_)
        qnan_lit = "dense<32704>" if w else "32704"  # 0x7FC0, bf16's quiet NaN
        qnan = raw(f"arith.constant {qnan_lit} : {i16}")
        cond_t = vt("i1")
        sel = raw(f"arith.select {nan.name}, {qnan.name}, {h16.name} : {cond_t}, {i16}")
        return Value(sel.name, dtypes.bfloat16, w)  # bf16 is carried as its i16 bits

    def _float_op(self, opname: str, *xs: Value, fastmath: str = "") -> Value:
        xs = self._coerce(*xs)
        dt = xs[0].dtype
        ws = [self._wide(x) for x in xs]
        flags = f" fastmath<{fastmath}>" if fastmath else ""
        r = self.op(f"{opname} {', '.join(w.name for w in ws)}{flags} : {ws[0].type}", ws[0].dtype,
                    ws[0].width)
        return self._narrow(r, dt)

    def _int_op(self, opname: str, *xs: Value) -> Value:
        xs = self._coerce(*xs)
        return self.op(f"{opname} {', '.join(x.name for x in xs)} : {xs[0].type}", xs[0].dtype,
                       xs[0].width)

    # --- arithmetic -------------------------------------------------------------------------
    def add(self, a, b):
        return self._float_op("arith.addf", a, b) if a.is_float else self._int_op("arith.addi", a, b)

    def sub(self, a, b):
        return self._float_op("arith.subf", a, b) if a.is_float else self._int_op("arith.subi", a, b)

    def mul(self, a, b):
        return self._float_op("arith.mulf", a, b) if a.is_float else self._int_op("arith.muli", a, b)

    def div(self, a, b):
        if a.is_float:
            if a.width and not b.width and a.dtype == dtypes.float32 and b.dtype == a.dtype:
                return self._div_by_scalar(a, b)
            return self._float_op("arith.divf", a, b)
        if a.dtype == "index":
            return self._int_op("arith.divui", a, b)
        # Integer division by zero is undefined in LLVM (a SIGFPE on x86), and so is
        # INT_MIN / -1 for signed types: Nova defines x / 0 as 0 and x / -1 as -x (wrapping, so
        # INT_MIN / -1 is INT_MIN), as its reference does.
        a, b = self._coerce(a, b)
        zero, one = self.const(0, a.dtype, a.width), self.const(1, a.dtype, a.width)
        is0 = self.cmp("eq", b, zero)
        if a.unsigned:
            q = self._int_op("arith.divui", a, self.select(is0, one, b))
            return self.select(is0, zero, q)
        m1 = self.cmp("eq", b, self.const(-1, a.dtype, a.width))
        q = self._int_op("arith.divsi", a, self.select(self.or_(is0, m1), one, b))
        return self.select(is0, zero, self.select(m1, self.sub(zero, a), q))

    # |b| in [2^-126, 2^126]: 1/b is a normal float32, and x * (1/b) is within 1 ulp of x / b.
    _RECIPROCAL_RANGE = (2.0 ** -126, 2.0 ** 126)

    def _div_by_scalar(self, a: Value, b: Value) -> Value:
        """A float32 vector over a per-row scalar: one reciprocal per row, then multiplies
        (within 1 ulp of the division; a vector divide costs ~5x a multiply). A divisor whose
        reciprocal would leave the normal range (subnormal: 1/b overflows to inf; beyond 2^126:
        1/b is subnormal and loses bits) takes the division in an `scf.if` branch, decided once
        per row (found by review: 1e-39 / 1e-39 gave inf)."""
        t = a.type
        r = self._float_op("arith.divf", self.const(1.0, b.dtype), b)
        ab = self._float_op("math.absf", b)
        lo, hi = self._RECIPROCAL_RANGE
        ok = self.and_(self.cmp("ge", ab, self.const(lo, b.dtype)),
                       self.cmp("le", ab, self.const(hi, b.dtype)))
        y = self.fresh()
        self.emit(f"{y} = scf.if {ok.name} -> ({t}) {{")
        self.indent += 2
        fast = self._float_op("arith.mulf", a, r)
        self.emit(f"scf.yield {fast.name} : {t}")
        self.indent -= 2
        self.forget_constants()  # each branch defines its own
        self.emit("} else {")
        self.indent += 2
        slow = self._float_op("arith.divf", a, b)
        self.emit(f"scf.yield {slow.name} : {t}")
        self.indent -= 2
        self.forget_constants()
        self.emit("}")
        return Value(y, a.dtype, a.width)

    def rem(self, a, b):
        if a.is_float:
            return self._float_op("arith.remf", a, b)
        if a.dtype == "index":
            return self._int_op("arith.remui", a, b)
        a, b = self._coerce(a, b)
        zero, one = self.const(0, a.dtype, a.width), self.const(1, a.dtype, a.width)
        is0 = self.cmp("eq", b, zero)
        if a.unsigned:
            r = self._int_op("arith.remui", a, self.select(is0, one, b))
            return self.select(is0, zero, r)
        # x % -1 is 0 (INT_MIN % -1 traps in hardware: see div)
        m1 = self.cmp("eq", b, self.const(-1, a.dtype, a.width))
        r = self._int_op("arith.remsi", a, self.select(self.or_(is0, m1), one, b))
        return self.select(self.or_(is0, m1), zero, r)

    def neg(self, a):
        if a.is_float:
            return self._float_op("arith.negf", a)
        return self.sub(self.const(0, a.dtype, a.width), a)

    # NaN-propagating like numpy.maximum / numpy.minimum, which do not order -0.0 and +0.0
    # either: `nsz` lets LLVM drop IEEE maximum's signed-zero fix-up (on x86 two blends of five
    # instructions; vmaxps + the NaN blend remain).
    def max(self, a, b):
        if a.is_float:
            return self._float_op("arith.maximumf", a, b, fastmath="nsz")
        return self._int_op("arith.maxui" if a.unsigned else "arith.maxsi", a, b)

    def min(self, a, b):
        if a.is_float:
            return self._float_op("arith.minimumf", a, b, fastmath="nsz")
        return self._int_op("arith.minui" if a.unsigned else "arith.minsi", a, b)

    def clamp_fast(self, x: Value, lo: float, hi: float) -> Value:
        """min(max(x, lo), hi) as bare vminps/vmaxps: the result is poison for a NaN x, so the
        caller must select its NaN case from x itself (as _exp_f32 and _tanh_f32 do)."""
        t = x.type
        lo_v, hi_v = self.const(lo, x.dtype, x.width), self.const(hi, x.dtype, x.width)
        xc = self.op(f"arith.minimumf {x.name}, {hi_v.name} fastmath<nnan,nsz> : {t}", x.dtype,
                     x.width)
        return self.op(f"arith.maximumf {xc.name}, {lo_v.name} fastmath<nnan,nsz> : {t}", x.dtype,
                       x.width)

    def clamp_keep_nan(self, x: Value, lo: float, hi: float) -> Value:
        """min(max(x, lo), hi) that returns a NaN x (and -0) unchanged, written as
        `x > hi ? hi : x` then `y < lo ? lo : y`: x86 lowers each to one vminps / vmaxps with x as
        the operand returned on an unordered compare, so no NaN select is needed afterwards."""
        t = x.type
        lo_v, hi_v = self.const(lo, x.dtype, x.width), self.const(hi, x.dtype, x.width)
        bt = f"vector<{x.width}xi1>" if x.width else "i1"
        above = self.op(f"arith.cmpf ogt, {x.name}, {hi_v.name} : {t}", dtypes.bool_, x.width)
        y = self.op(f"arith.select {above.name}, {hi_v.name}, {x.name} : {bt}, {t}", x.dtype,
                    x.width)
        below = self.op(f"arith.cmpf olt, {y.name}, {lo_v.name} : {t}", dtypes.bool_, x.width)
        return self.op(f"arith.select {below.name}, {lo_v.name}, {y.name} : {bt}, {t}", x.dtype,
                       x.width)

    def abs(self, a):
        if a.is_float:
            return self._float_op("math.absf", a)
        if a.unsigned:
            return a
        return self._int_op("math.absi", a)

    def sign(self, a):
        zero, one = self.const(0, a.dtype, a.width), self.const(1, a.dtype, a.width)
        if a.unsigned:
            return self.select(self.cmp("ne", a, zero), one, zero)
        pos = self.select(self.cmp("gt", a, zero), one, zero)
        s = self.select(self.cmp("lt", a, zero), self.neg(one), pos)
        if a.is_float:  # sign(nan) is nan
            return self.select(self.isnan(a), a, s)
        return s

    def _math(name):  # noqa: N805 - a small factory evaluated in the class body
        def f(self, a):
            return self._float_op(f"math.{name}", a)

        f.__name__ = name
        return f

    _libm_exp = _math("exp")
    exp2 = _math("exp2")
    log = _math("log")
    log2 = _math("log2")
    _libm_tanh = _math("tanh")
    sinh = _math("sinh")
    cosh = _math("cosh")
    sin = _math("sin")
    cos = _math("cos")
    tan = _math("tan")
    atan = _math("atan")
    sqrt = _math("sqrt")
    rsqrt = _math("rsqrt")
    floor = _math("floor")
    ceil = _math("ceil")
    round = _math("roundeven")  # half to even, as numpy.round
    erf = _math("erf")
    del _math

    # --- vectorizable f32 exp and tanh ------------------------------------------------------
    # LLVM turns math.exp on vectors into one scalar expf call per lane; these polynomial forms
    # (exp: Cephes' expf range reduction, S. L. Moshier, "Methods and Programs for Mathematical
    # Functions", 1989, with a minimax polynomial; Eigen's rational tanh) stay in vector
    # registers. Accuracy: exp ~1 ulp, tanh < 4 ulp.

    def _f32(self, v: float, w: int) -> Value:
        return self.const(v, dtypes.float32, w)

    def _fma(self, a, b, c):
        return self.op(f"math.fma {a.name}, {b.name}, {c.name} : {a.type}", a.dtype, a.width)

    # Whether vector exps take the branchy fast path (`_exp_f32`): the CPU's emitters turn it
    # on; the GPU's keep the branch-free form (a branch per vector of a thread's lanes, and
    # the SIMT simulator has no vector reductions).
    exp_fast_path = False

    # |x| up to which _exp_f32's vector fast path applies: n = round(x / ln 2) stays within
    # [-126, 126], so 2^n is one normal float built by a single shift.
    EXP_FAST_LIMIT = 87.0

    def _exp_f32(self, x: Value) -> Value:
        """e^x for float32 (Cody-Waite reduction, a degree-6 polynomial: `_exp_poly`), within
        1.05 ulp over the whole range, subnormal results included.

        Vectors take a fast path when no lane's |x| exceeds EXP_FAST_LIMIT (the common case:
        softmax's x - max, attention scores): n comes from an FMA with 1.5 * 2^23 + 127, whose
        bits shifted left by 23 are 2^n itself, and one multiply scales the polynomial (14
        vector operations against `_exp_f32_full`'s 21). A vector with a lane over the limit
        (an infinity included) takes `_exp_f32_full` in an `scf.if` branch; a NaN lane compares
        false, stays on the fast path and comes out NaN (every step carries it). Both paths give the same
        bits for a lane in range (2^n is exact either way), so a result does not depend on its
        neighbours. Scalars (remainder loops) and builders without `exp_fast_path` (the GPU's)
        always run `_exp_f32_full`."""
        w = x.width
        if not w or not self.exp_fast_path:
            return self._exp_f32_full(x)
        t = x.type
        it = f"vector<{w}xi32>"
        f = lambda v: self._f32(v, w)  # noqa: E731
        ax = self._float_op("math.absf", x)
        big = self.op(f"arith.cmpf ogt, {ax.name}, {f(self.EXP_FAST_LIMIT).name} : {t}",
                      dtypes.bool_, w)
        anybig = self.op(f"vector.reduction <or>, {big.name} : vector<{w}xi1> into i1",
                         dtypes.bool_, 0)
        y = self.fresh()
        self.emit(f"{y} = scf.if {anybig.name} -> ({t}) {{")
        self.indent += 2
        slow = self._exp_f32_full(x)
        self.emit(f"scf.yield {slow.name} : {t}")
        self.indent -= 2
        self.forget_constants()  # each branch defines its own
        self.emit("} else {")
        self.indent += 2
        magic = f(12582912.0 + 127.0)  # 1.5 * 2^23 + the exponent bias
        shifted = self._fma(x, f(1.44269504088896341), magic)
        n = self.op(f"arith.subf {shifted.name}, {magic.name} : {t}", x.dtype, w)
        p = self._exp_poly(x, n)
        # The sum's low mantissa bits hold n + 127 (1.5 * 2^23 has ulp 1 and zeros there):
        # shifted left by 23 they are the exponent field of 2^n, the rest shifted out.
        bits = self.op(f"arith.bitcast {shifted.name} : {t} to {it}", dtypes.int32, w)
        bits = self.op(f"arith.shli {bits.name}, {self.const(23, dtypes.int32, w).name} : {it}",
                       dtypes.int32, w)
        scale = self.op(f"arith.bitcast {bits.name} : {it} to {t}", x.dtype, w)
        fast = self.op(f"arith.mulf {p.name}, {scale.name} : {t}", x.dtype, w)
        self.emit(f"scf.yield {fast.name} : {t}")
        self.indent -= 2
        self.emit("}")
        self.forget_constants()  # the branches' constants do not dominate what follows
        return Value(y, x.dtype, w)

    # e^r on [-ln 2 / 2, ln 2 / 2] by a degree-6 polynomial with c0 = c1 = 1 (so e^0 is 1),
    # fitted for minimax relative error (iteratively reweighted least squares on Chebyshev
    # nodes; fit error 2e-9) and rounded to float32. Evaluated by Horner's rule in six FMAs,
    # e^x is within 1.05 ulp of the exact value over [-87, 87] (1.044 at -48.8652, 12 of 8 M
    # random points above 1 ulp, mean 0.26: a review's 50-digit check), against 1.008 / 0.27
    # for Cephes' form 1 + r + r^2 p(r), which takes eight operations (bench/NOTES.md round 8).
    EXP_POLY = (1.0, 1.0, 0.4999999403953552, 0.16666431725025177, 0.04166800156235695,
                0.00837415549904108, 0.0013843653723597527)

    def _exp_poly(self, x: Value, n: Value) -> Value:
        """e^r for r = x - n ln 2 (Cody-Waite: ln 2 in two parts, Cephes' constants)."""
        w = x.width
        f = lambda v: self._f32(v, w)  # noqa: E731
        r = self._fma(n, f(-0.693359375), x)
        r = self._fma(n, f(2.12194440e-4), r)
        p = f(self.EXP_POLY[-1])
        for c in reversed(self.EXP_POLY[:-1]):
            p = self._fma(p, r, f(c))
        return p

    def _exp_f32_full(self, x: Value) -> Value:
        """_exp_f32 for every x, without a branch.

        x is clamped to [-104, 89] with `clamp_keep_nan`: below, the result rounds to 0 (e^-104
        is under half the least subnormal) and above ln(FLT_MAX) = 88.72 the scaling by 2^n
        overflows to inf, so the bounds need no select of their own; a NaN passes the clamps
        and every step after them (n, the polynomial, the scaling), so it needs none either.
        n = round(x / ln 2) comes from one FMA with 1.5 * 2^23 (its ulp is 1: the sum rounds to
        an integer, ties to even), and the integer n from the sum's bits, so no fptosi sees a
        NaN (whose result LLVM treats as poison)."""
        w = x.width
        f = lambda v: self._f32(v, w)  # noqa: E731
        t = x.type
        it = f"vector<{w}xi32>" if w else "i32"
        xc = self.clamp_keep_nan(x, -104.0, 89.0)
        magic = f(12582912.0)  # 1.5 * 2^23
        shifted = self._fma(xc, f(1.44269504088896341), magic)
        n = self.op(f"arith.subf {shifted.name}, {magic.name} : {t}", x.dtype, w)
        y = self._exp_poly(xc, n)
        # The integer n: the sum's bits less those of 1.5 * 2^23 (both in [2^23, 2^24)).
        bits = self.op(f"arith.bitcast {shifted.name} : {t} to {it}", dtypes.int32, w)
        ni = self.op(f"arith.subi {bits.name}, {self.const(0x4B400000, dtypes.int32, w).name} "
                     f": {it}", dtypes.int32, w)
        # y * 2^n in two steps, so results in the subnormal range stay exact to rounding.
        one = self.const(1, dtypes.int32, w)
        # n = n1 + n2 with n1 = n >> 1 (a shift: x86 has no vector integer division)
        n1 = self.op(f"arith.shrsi {ni.name}, {one.name} : {it}", dtypes.int32, w)
        n2 = self.op(f"arith.subi {ni.name}, {n1.name} : {it}", dtypes.int32, w)
        for part in (n1, n2):
            biased = self.op(f"arith.addi {part.name}, {self.const(127, dtypes.int32, w).name} : {it}", dtypes.int32, w)
            bits = self.op(f"arith.shli {biased.name}, {self.const(23, dtypes.int32, w).name} : {it}", dtypes.int32, w)
            scale = self.op(f"arith.bitcast {bits.name} : {it} to {t}", x.dtype, w)
            y = self.op(f"arith.mulf {y.name}, {scale.name} : {t}", x.dtype, w)
        return y

    def _tanh_f32(self, x: Value) -> Value:
        """tanh as a rational function (one division, no exp). Coefficients: Eigen's
        ptanh_float (the minimax fit XLA also uses). The argument is clamped to [-9, 9]: there
        the rational evaluates to exactly +-1 (true tanh(9) is 3e-8 below 1, half an ulp), and
        between its fitted range (+-7.9) and 9 it stays within 2e-7 of +-1, so clamping the
        result to [-1, 1] replaces the |x| > 7.9 compare, copysign and select. Both clamps pass
        a NaN and -0 through (`clamp_keep_nan`), and x * (p / q) keeps them (p / q is finite and
        positive near 0), so no final select is needed. Within 4 ulp of NumPy over the whole
        range."""
        w = x.width
        f = lambda v: self._f32(v, w)  # noqa: E731
        t = x.type
        xc = self.clamp_keep_nan(x, -9.0, 9.0)
        x2 = self.op(f"arith.mulf {xc.name}, {xc.name} : {t}", x.dtype, w)
        p = f(-2.76076847742355e-16)
        for c in (2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
                  1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03):
            p = self._fma(x2, p, f(c))
        q = f(1.19825839466702e-06)
        for c in (1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03):
            q = self._fma(x2, q, f(c))
        # x * (p / q) rather than (x * p) / q: a subnormal x times p ~ 0.005 would lose bits.
        r = self.op(f"arith.divf {p.name}, {q.name} : {t}", x.dtype, w)
        y = self.op(f"arith.mulf {xc.name}, {r.name} : {t}", x.dtype, w)
        return self.clamp_keep_nan(y, -1.0, 1.0)

    def exp(self, a):
        if a.dtype == dtypes.float64:
            return self._libm_exp(a)
        return self._narrow(self._exp_f32(self._wide(a)), a.dtype)

    def tanh(self, a):
        if a.dtype == dtypes.float64:
            return self._libm_tanh(a)
        return self._narrow(self._tanh_f32(self._wide(a)), a.dtype)

    def log1p(self, a):
        """log(1 + x), accurate for small x: MLIR expands math.log1p to log(1 + x), which loses
        every bit below ~1e-7 (log1p(1e-8) was 0, log1p(1e-3) off by 5e-5; found by review).
        u = 1 + x, then log(u) * x / (u - 1) (D. Goldberg, "What every computer scientist
        should know about floating-point arithmetic", 1991, Theorem 4): x itself where u
        rounds to 1 (signed zeros kept), inf for x = inf; -1 gives -inf and x < -1 or NaN give
        NaN through the log. Computed in float32 for narrower floats."""
        x = self._wide(a)
        one = self.const(1, x.dtype, x.width)
        u = self.add(x, one)
        d = self.sub(u, one)
        r = self.mul(self.log(u), self.div(x, d))
        r = self.select(self.cmp("eq", d, self.const(0, x.dtype, x.width)), x, r)
        r = self.select(self.cmp("eq", u, self.const(float("inf"), x.dtype, x.width)), u, r)
        return self._narrow(r, a.dtype)

    def expm1(self, a):
        """exp(x) - 1, accurate for small x: MLIR's convert-math-to-llvm lowers math.expm1 to
        exp(x) - 1, which loses every bit below ~1e-16 (expm1(1e-300) was 0, expm1(1e-10) off
        by 8e-8; found by nova.scipy.special.boxcox's test). u = exp(x), then
        (u - 1) * x / log(u) (W. Kahan's method, as in Goldberg 1991 / Higham, "Accuracy and
        Stability of Numerical Algorithms", 1.14.1): x itself where u rounds to 1 (signed zeros
        kept), u - 1 where u - 1 is -1 (large negative x) or u is inf. Computed in float32 for
        narrower floats."""
        x = self._wide(a)
        one = self.const(1, x.dtype, x.width)
        u = self.exp(x)
        d = self.sub(u, one)
        r = self.mul(d, self.div(x, self.log(u)))
        r = self.select(self.cmp("eq", u, one), x, r)
        minus_one = self.const(-1, x.dtype, x.width)
        inf = self.const(float("inf"), x.dtype, x.width)
        r = self.select(self.or_(self.cmp("eq", d, minus_one), self.cmp("eq", u, inf)),
                        d, r)
        return self._narrow(r, a.dtype)

    def atan2(self, a, b):
        return self._float_op("math.atan2", a, b)

    def pow(self, a, b):
        return self._float_op("math.powf", a, b)

    def logistic(self, a):
        """1 / (1 + exp(-x)) as r = 1 / (1 + e), e = exp(-|x|): r for x >= 0, e * r below, so
        the small values of the left tail keep their precision (0.5 * (tanh(x / 2) + 1) rounds
        to 0 below about -18 in float32 and -9 in float16). Computed in float32 for narrower
        floats; NaN stays NaN (exp and the division carry it)."""
        x = self._wide(a)
        one = self.const(1, x.dtype, x.width)
        e = self.exp(self.neg(self.abs(x)))
        r = self.div(one, self.add(one, e))
        y = self.select(self.cmp("ge", x, self.const(0, x.dtype, x.width)), r, self.mul(e, r))
        return self._narrow(y, a.dtype)

    # --- comparisons, logic, select, casts -------------------------------------------------
    _FPRED = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
    _SPRED = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
    _UPRED = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}

    def cmp(self, pred: str, a, b):
        a, b = self._coerce(a, b)
        if a.is_float:
            wa, wb = self._wide(a), self._wide(b)
            return self.op(f"arith.cmpf {self._FPRED[pred]}, {wa.name}, {wb.name} : {wa.type}",
                           dtypes.bool_, a.width)
        table = self._UPRED if a.unsigned else self._SPRED
        return self.op(f"arith.cmpi {table[pred]}, {a.name}, {b.name} : {a.type}", dtypes.bool_,
                       a.width)

    def isnan(self, a):
        w = self._wide(a)
        return self.op(f"arith.cmpf uno, {w.name}, {w.name} : {w.type}", dtypes.bool_, a.width)

    def isinf(self, a):
        w = self._wide(a)
        inf = self.const(float("inf"), w.dtype, w.width)
        absx = self.op(f"math.absf {w.name} : {w.type}", w.dtype, w.width)
        return self.op(f"arith.cmpf oeq, {absx.name}, {inf.name} : {w.type}", dtypes.bool_, a.width)

    def select(self, c, a, b):
        a, b = self._coerce(a, b)
        if c.width != a.width:
            if c.width == 0:
                # A scalar condition selects whole vectors.
                return self.op(f"arith.select {c.name}, {a.name}, {b.name} : {a.type}", a.dtype,
                               a.width)
            a, b = self.splat(a, c.width), self.splat(b, c.width)
        cond_t = f"vector<{c.width}xi1>" if c.width else "i1"
        return self.op(f"arith.select {c.name}, {a.name}, {b.name} : {cond_t}, {a.type}",
                       a.dtype, a.width)

    def and_(self, a, b):
        return self._int_op("arith.andi", a, b)

    def or_(self, a, b):
        return self._int_op("arith.ori", a, b)

    def xor(self, a, b):
        return self._int_op("arith.xori", a, b)

    def _shift(self, opname, a, b, fill):
        """Shift with amounts outside [0, bits) defined (LLVM leaves them poison)."""
        a, b = self._coerce(a, b)
        bits = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}[a.elem]
        out_of_range = self.or_(self.cmp("lt", b, self.const(0, b.dtype, b.width)) if not b.unsigned
                                else self.const(False, dtypes.bool_, b.width),
                                self.cmp("ge", b, self.const(bits, b.dtype, b.width)))
        raw = self._int_op(opname, a, self.select(out_of_range, self.const(0, b.dtype, b.width), b))
        return self.select(out_of_range, fill, raw)

    def shl(self, a, b):
        return self._shift("arith.shli", a, b, self.const(0, a.dtype, a.width))

    def shr(self, a, b, arithmetic=True):
        zero = self.const(0, a.dtype, a.width)
        if arithmetic and not a.unsigned:
            fill = self.select(self.cmp("lt", a, zero), self.const(-1, a.dtype, a.width), zero)
            return self._shift("arith.shrsi", a, b, fill)
        return self._shift("arith.shrui", a, b, zero)

    def not_(self, a):
        ones = self.const(True if a.elem == "i1" else -1, a.dtype, a.width)
        return self._int_op("arith.xori", a, ones)

    def bitcast(self, x, dtype):
        """Reinterpret x's bits as dtype of the same width (bf16 is carried as i16 already)."""
        dtype = np.dtype(dtype)
        dst = elem_type(dtype)
        if dst == x.elem:
            return Value(x.name, dtype, x.width)
        t = f"vector<{x.width}x{dst}>" if x.width else dst
        return self.op(f"arith.bitcast {x.name} : {x.type} to {t}", dtype, x.width)

    def cast(self, x, dtype):
        dtype = np.dtype(dtype)
        if x.dtype == dtype:
            return x
        if x.dtype == dtypes.bfloat16:
            return self.cast(self._wide(x), dtype)
        if dtype == dtypes.bfloat16:
            if dtypes.is_float(x.dtype) and x.elem == "f32":
                return self._to_bf16(x)
            return self._to_bf16(self.cast(x, dtypes.float32))
        src, dst = x.elem, elem_type(dtype)
        w = x.width
        t = f"vector<{w}x{dst}>" if w else dst
        if dtype == dtypes.bool_:
            return self.cmp("ne", x, self.const(0, x.dtype, w))
        if x.is_float and dtypes.is_float(dtype):
            bits = {"f16": 16, "f32": 32, "f64": 64}
            opname = "arith.extf" if bits[dst] > bits[src] else "arith.truncf"
            return self.op(f"{opname} {x.name} : {x.type} to {t}", dtype, w)
        if x.is_float:
            # float -> int: truncate toward zero, saturating at the type's range, NaN -> 0 (as
            # JAX and the reference; a plain fptosi/fptoui of an out-of-range value is poison:
            # x86 gave the saturated value, the GPU simulator a wrapped one; found by review).
            wide = self._wide(x)
            info = np.iinfo(np.dtype(dtype))
            fw = wide.dtype
            big = self.cmp("ge", wide, self.const(float(info.max) + 1.0, fw, w))  # 2^n: exact
            small = (self.cmp("le", wide, self.const(-1.0, fw, w)) if info.min == 0 else
                     self.cmp("lt", wide, self.const(float(info.min), fw, w)))  # -2^(n-1)
            bad = self.or_(self.or_(big, small), self.isnan(x))
            safe = self.select(bad, self.const(0.0, fw, w), wide)
            tgt = "arith.fptoui" if dtype in _UNSIGNED else "arith.fptosi"
            iv = self.op(f"{tgt} {safe.name} : {safe.type} to {t}", dtype, w)
            iv = self.select(big, self.const(int(info.max), dtype, w), iv)
            return self.select(small, self.const(int(info.min), dtype, w), iv)
        if dtypes.is_float(dtype):  # int -> float
            opname = "arith.uitofp" if x.unsigned else "arith.sitofp"
            if dst == "f16":
                f = self.op(f"{opname} {x.name} : {x.type} to {f'vector<{w}xf32>' if w else 'f32'}",
                            dtypes.float32, w)
                return self._narrow(f, dtype)
            return self.op(f"{opname} {x.name} : {x.type} to {t}", dtype, w)
        bits = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
        if bits[dst] == bits[src]:
            return Value(x.name, dtype, w)
        if bits[dst] > bits[src]:
            opname = "arith.extui" if x.unsigned else "arith.extsi"
        else:
            opname = "arith.trunci"
        return self.op(f"{opname} {x.name} : {x.type} to {t}", dtype, w)
