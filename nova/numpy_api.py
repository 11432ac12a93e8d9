"""nova.numpy: NumPy's API over Nova's primitives (importable as `nova.numpy`).

Functions check their arguments and promote dtypes (JAX's lattice, Python scalars weakly typed)
before binding any primitive, as jax.numpy does over lax. Importing this module also attaches the
operators and methods of nova.Array.
"""

from __future__ import annotations

import builtins as _builtins

import numpy as _np

from nova.core import dtypes as _dtypes
from nova.core.array import Array
from nova.numpy_impl.creation import *  # noqa: F401,F403
from nova.numpy_impl.linalg import *  # noqa: F401,F403
from nova.numpy_impl.reductions import *  # noqa: F401,F403
from nova.numpy_impl.reductions import all, any, max, min, sum  # noqa: F401,A004
from nova.numpy_impl.shape import *  # noqa: F401,F403
from nova.numpy_impl.ufuncs import *  # noqa: F401,F403
from nova.numpy_impl.ufuncs import abs, round  # noqa: F401,A004
from nova.numpy_impl.util import asarray  # noqa: F401

# The optional families (filled in by their own modules when present).
for _mod in ("indexing", "joining", "sorting", "scans", "contractions", "ranges", "misc",
             "mathfuncs", "elementary", "statistics", "searching", "vectorize", "signal",
             "polynomials", "sets", "arrayapi", "complexfuncs"):
    try:
        _m = __import__(f"nova.numpy_impl.{_mod}", fromlist=["*"])
    except ModuleNotFoundError as _e:
        if _e.name != f"nova.numpy_impl.{_mod}":
            raise
        continue
    for _name in getattr(_m, "__all__", [n for n in dir(_m) if not n.startswith("_")]):
        globals()[_name] = getattr(_m, _name)



class _ScalarType(type):
    """The type of `nova.numpy.float32` and the other scalar types, as jax.numpy's: calling one
    converts (`jnp.float32(0.5)` is a 0-d float32 Array, `jnp.int32(x)` casts an array or a
    tracer), and each stands for its dtype wherever a dtype is taken (`np.dtype(jnp.float32)`,
    `x.astype(jnp.int32)`, `x.dtype == jnp.float32`; it hashes as its np.dtype, so it finds
    dict entries keyed by dtypes). Raises what `asarray` raises for values it cannot convert
    (OverflowError for a Python int out of range)."""

    def __call__(cls, x=0):
        return asarray(x, dtype=cls.dtype)

    def __eq__(cls, other):
        if cls is other:
            return True
        if other is None or isinstance(other, str) and not other:
            return False  # (np.dtype(None) is float64, np.dtype("") float64 too)
        try:
            return cls.dtype == _np.dtype(other)
        except TypeError:
            return False

    def __ne__(cls, other):
        return not _ScalarType.__eq__(cls, other)

    def __hash__(cls):
        return hash(cls.dtype)

    def __repr__(cls):
        return f"nova.numpy.{cls.__name__}"


def _scalar_type(name: str, dtype) -> _ScalarType:
    return _ScalarType(name, (), {"dtype": dtype, "__module__": __name__,
                                  "__doc__": f"The {dtype} scalar type: `{name}(x)` is x as "
                                             f"a 0-d (or same-shaped) {dtype} Array."})


bool_ = _scalar_type("bool_", _dtypes.bool_)
uint8 = _scalar_type("uint8", _dtypes.uint8)
uint16 = _scalar_type("uint16", _dtypes.uint16)
uint32 = _scalar_type("uint32", _dtypes.uint32)
int8 = _scalar_type("int8", _dtypes.int8)
int16 = _scalar_type("int16", _dtypes.int16)
int32 = _scalar_type("int32", _dtypes.int32)
int64 = _scalar_type("int64", _dtypes.int64)
float16 = _scalar_type("float16", _dtypes.float16)
bfloat16 = _scalar_type("bfloat16", _dtypes.bfloat16)
float32 = _scalar_type("float32", _dtypes.float32)
float64 = _scalar_type("float64", _dtypes.float64)
complex64 = _scalar_type("complex64", _dtypes.complex64)
complex128 = _scalar_type("complex128", _dtypes.complex128)
complex_ = _scalar_type("complex_", _dtypes.default_complex)
csingle = _scalar_type("csingle", _dtypes.complex64)
cdouble = _scalar_type("cdouble", _dtypes.complex128)
# NumPy's aliases: `bool` as the array API's; int_ / float_ are the default int and float (as
# jax.numpy's without x64: int32, float32); double and single name the C widths; uint is uint32
# (Nova has no uint64).
bool = bool_  # noqa: A001 - NumPy's and the array API's name
int_ = _scalar_type("int_", _dtypes.default_int)
float_ = _scalar_type("float_", _dtypes.default_float)
uint = _scalar_type("uint", _dtypes.uint32)
double = _scalar_type("double", _dtypes.float64)
single = _scalar_type("single", _dtypes.float32)
half = _scalar_type("half", _dtypes.float16)
# NumPy's abstract scalar types (for issubdtype)
generic = _np.generic
character = _np.character
flexible = _np.flexible
complexfloating = _np.complexfloating
object_ = _np.object_
euler_gamma = _np.euler_gamma

def _linalg_namespace():
    """`nova.numpy.linalg`: numpy.linalg's functions -- norms and the array API's helpers
    (nova/numpy_impl/norms.py), the decompositions cholesky, qr, eigh, svd and what is built on
    them (solve, inv, det, slogdet, pinv, lstsq, matrix_rank, cond, ...;
    nova/numpy_impl/decompositions.py: Jacobi, Householder and LU loops of Nova's own kernels),
    with matmul, outer, tensordot, trace, diagonal, cross from nova.numpy. eig and eigvals
    raise NotImplementedError (complex results)."""
    import types

    from nova.numpy_impl import decompositions, norms

    ns = types.ModuleType("nova.numpy.linalg", _linalg_namespace.__doc__)
    for name in ("norm", "vector_norm", "matrix_norm", "vecdot", "matrix_transpose"):
        setattr(ns, name, getattr(norms, name))
    for name in decompositions.LINALG:
        setattr(ns, name, getattr(decompositions, name))
    for name in ("matmul", "outer", "tensordot", "trace", "diagonal", "cross"):
        if name in globals():
            setattr(ns, name, globals()[name])
    return ns


def _fft_namespace():
    """`nova.numpy.fft`: numpy.fft's transforms (fft, ifft, fft2, ifft2, fftn, ifftn, rfft,
    irfft, rfft2, irfft2, rfftn, irfftn, hfft, ihfft), fftfreq, rfftfreq, fftshift and ifftshift
    (nova/numpy_impl/fft.py: DFT matmuls, four-step Cooley-Tukey and Bluestein in Nova's ops)."""
    import sys
    import types

    from nova.numpy_impl import fft as _fft

    ns = types.ModuleType("nova.numpy.fft", _fft_namespace.__doc__)
    for name in _fft.__all__:
        setattr(ns, name, getattr(_fft, name))
    sys.modules.setdefault("nova.numpy.fft", ns)  # `import nova.numpy.fft` works too
    return ns


pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
newaxis = None
ndarray = Array
dtype = _np.dtype


def result_type(*args):
    """The promoted dtype of arrays, dtypes and Python scalars (JAX's lattice)."""
    return _dtypes.result_type(*args)


def promote_types(a, b):
    """The dtype both dtypes promote to (jax.numpy.promote_types: JAX's lattice, both strongly
    typed): int8 and uint8 give int16, int32 and float16 give float16, float16 and bfloat16
    float32. Raises TypeError for a dtype Nova does not support."""
    return _dtypes.result_type(_dtypes.canonicalize(a, arg_name="a"),
                               _dtypes.canonicalize(b, arg_name="b"))


def can_cast(from_, to, casting="safe"):
    """Whether a cast from dtype (or an array's dtype) `from_` to `to` is allowed under the
    rule `casting` ("no", "equiv", "safe", "same_kind", "unsafe"), as numpy.can_cast (and
    jax.numpy's, bfloat16 included). Raises TypeError for an unknown dtype, ValueError for an
    unknown rule."""
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ValueError(f"can_cast: casting must be 'no', 'equiv', 'safe', 'same_kind' or "
                         f"'unsafe', got {casting!r}")
    src = getattr(from_, "dtype", None)
    src = _dtypes.canonicalize(from_ if src is None else src, arg_name="from_")
    return _builtins.bool(_np.can_cast(src, _dtypes.canonicalize(to, arg_name="to"), casting))


_ISDTYPE_KINDS = {
    "bool": lambda d: d == _dtypes.bool_,
    "signed integer": lambda d: _dtypes.is_int(d) and not _dtypes.is_unsigned(d),
    "unsigned integer": _dtypes.is_unsigned,
    "integral": _dtypes.is_int,
    "real floating": _dtypes.is_float,
    "complex floating": _dtypes.is_complex,
    "numeric": lambda d: _dtypes.is_int(d) or _dtypes.is_inexact(d),
}


def isdtype(dtype, kind):
    """Whether `dtype` is of `kind` (the Array API's isdtype, as jax.numpy.isdtype): kind is a
    dtype, one of "bool", "signed integer", "unsigned integer", "integral", "real floating",
    "complex floating", "numeric", or a tuple of those (any matches). bfloat16 is a real
    floating type. Raises TypeError for an unknown kind or dtype."""
    d = _dtypes.canonicalize(dtype)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _ISDTYPE_KINDS:
                raise TypeError(f"isdtype: unknown kind {k!r}; expected a dtype or one of "
                                f"{', '.join(map(repr, _ISDTYPE_KINDS))}")
            if _ISDTYPE_KINDS[k](d):
                return True
        elif d == _dtypes.canonicalize(k, arg_name="kind"):
            return True
    return False


def shape(a):
    return asarray(a).shape


def ndim(a):
    return asarray(a).ndim


def size(a, axis=None):
    x = asarray(a)
    return x.size if axis is None else x.shape[axis]


def finfo(d):
    return _dtypes.finfo(d)


def iinfo(d):
    return _dtypes.iinfo(d)


def issubdtype(arg1, arg2):
    """numpy.issubdtype, with bfloat16 a floating type (as jax.numpy's): NumPy does not know
    ml_dtypes' bfloat16 as one."""
    try:
        d1 = _np.dtype(arg1)
    except TypeError:
        return _np.issubdtype(arg1, arg2)
    if d1 == _dtypes.bfloat16:
        try:
            if _np.dtype(arg2) == _dtypes.bfloat16:
                return True
        except TypeError:
            pass
        return isinstance(arg2, type) and issubclass(_np.floating, arg2)
    return _np.issubdtype(d1, arg2)


floating = _np.floating
integer = _np.integer
number = _np.number
inexact = _np.inexact
signedinteger = _np.signedinteger
unsignedinteger = _np.unsignedinteger


# --- nova.Array operators and methods ------------------------------------------------------------


def _g(name):
    """Looks the function up at call time, so families added later are found."""
    return lambda *a, **k: globals()[name](*a, **k)


def _swap(name):
    return lambda self, other: globals()[name](other, self)


def _attach_methods():
    ops = {
        "__add__": "add", "__sub__": "subtract", "__mul__": "multiply",
        "__truediv__": "true_divide", "__floordiv__": "floor_divide", "__mod__": "mod",
        "__pow__": "power", "__matmul__": "matmul", "__and__": "bitwise_and",
        "__or__": "bitwise_or", "__xor__": "bitwise_xor", "__lshift__": "left_shift",
        "__rshift__": "right_shift", "__lt__": "less",
        "__le__": "less_equal", "__gt__": "greater", "__ge__": "greater_equal",
        "__eq__": "equal", "__ne__": "not_equal",
    }
    for dunder, fname in ops.items():
        setattr(Array, dunder, _g(fname))
    for dunder in ("__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__",
                   "__pow__", "__matmul__", "__and__", "__or__", "__xor__", "__lshift__",
                   "__rshift__"):
        setattr(Array, "__r" + dunder[2:], _swap(ops[dunder]))
    Array.__neg__ = _g("negative")
    Array.__pos__ = _g("positive")
    Array.__abs__ = _g("absolute")
    Array.__invert__ = _g("invert")
    Array.__getitem__ = lambda self, idx: globals()["getitem"](self, idx)
    Array.__setitem__ = _setitem_error
    Array.__hash__ = None
    methods = ["sum", "mean", "var", "std", "max", "min", "prod", "argmax", "argmin", "cumsum",
               "any", "all", "reshape", "transpose", "swapaxes", "squeeze", "ravel", "flatten",
               "clip", "round", "dot", "sort", "argsort", "take", "repeat", "astype"]
    for m in methods:
        setattr(Array, m, _method(m))
    Array.reshape = lambda self, *shape, order="C": globals()["reshape"](
        self, shape[0] if len(shape) == 1 else shape, order)
    Array.transpose = lambda self, *axes: globals()["transpose"](
        self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None))
    Array.flatten = lambda self: globals()["ravel"](self)
    Array.T = property(lambda self: globals()["transpose"](self))
    Array.mT = property(lambda self: globals()["swapaxes"](self, -1, -2))
    Array.at = property(lambda self: globals()["_IndexUpdateHelper"](self))
    Array.conj = lambda self: globals()["conj"](self)
    Array.conjugate = Array.conj
    Array.real = property(lambda self: globals()["real"](self))
    Array.imag = property(lambda self: globals()["imag"](self))


def _method(name):
    def method(self, *a, out=None, **k):
        # NumPy's functions (np.sum(x)) call these methods with out=None.
        if out is not None:
            raise NotImplementedError(f"{name}: the out= argument is not supported (arrays are immutable)")
        return globals()[name](self, *a, **k)

    method.__name__ = name
    return method


def _setitem_error(self, idx, value):
    raise TypeError(
        "nova.Array is immutable; instead of x[idx] = y use x = x.at[idx].set(y) "
        "(see nova.numpy's .at property)"
    )


_attach_methods()

linalg = _linalg_namespace()
fft = _fft_namespace()


def _make_ufuncs():
    """The binary elementwise functions as ufunc objects (numpy_impl/ufunc_objects.py), with
    their identities, reductions and scans. Array's operators keep calling the functions.

    Each reduction / scan takes dtype= as jnp.ufunc's do: sum, prod, cumsum and cumprod apply
    their own rule; maximum, minimum, fmax, fmin and the bitwise ones compute in `dtype` (a
    cast first: they keep a's dtype); the logical ones reduce a's truth values and give them
    in `dtype` (bool by default)."""
    from nova.numpy_impl.ufunc_objects import cast_identity
    from nova.numpy_impl.ufunc_objects import ufunc as _uf
    from nova.ops import lax as _lax

    g = globals()

    def cast_first(red):
        def f(a, axis, dtype=None, keepdims=False):
            return red(a if dtype is None else a.astype(dtype), axis=axis, keepdims=keepdims)

        return f

    def cast_result(red):
        def f(a, axis, dtype=None, keepdims=False):
            r = red(a, axis=axis, keepdims=keepdims)
            return r if dtype is None else r.astype(dtype)

        return f

    def scan_cast_first(cum):
        def f(a, axis, dtype=None):
            return cum(a if dtype is None else a.astype(dtype), axis)

        return f

    def tree(op, ident):  # an associative reduction with an identity: lax.reduce's tree
        def red(a, axis, keepdims=False):
            return _lax.reduce(a, cast_identity(ident, a.dtype), g[op], tuple(axis))

        return cast_first(red)

    def xor_reduce(a, axis, keepdims=False):
        return g["sum"](a != 0, axis=axis, keepdims=keepdims) % 2 == 1

    idem = dict(idempotent=True)
    specs = {
        "add": dict(identity=0, reducer=g["sum"], accumulator=g["cumsum"], at="add"),
        "multiply": dict(identity=1, reducer=g["prod"], accumulator=g["cumprod"],
                         at="multiply"),
        "maximum": dict(reducer=cast_first(g["max"]), accumulator=scan_cast_first(_lax.cummax),
                        at="max", **idem),
        "minimum": dict(reducer=cast_first(g["min"]), accumulator=scan_cast_first(_lax.cummin),
                        at="min", **idem),
        "fmax": dict(reducer=cast_first(g["nanmax"]), **idem),
        "fmin": dict(reducer=cast_first(g["nanmin"]), **idem),
        "logical_and": dict(identity=True, reducer=cast_result(g["all"])),
        "logical_or": dict(identity=False, reducer=cast_result(g["any"])),
        "logical_xor": dict(identity=False, reducer=cast_result(xor_reduce)),
        "bitwise_and": dict(identity=-1, reducer=tree("bitwise_and", -1)),
        "bitwise_or": dict(identity=0, reducer=tree("bitwise_or", 0)),
        "bitwise_xor": dict(identity=0, reducer=tree("bitwise_xor", 0)),
        "subtract": dict(at="subtract"),
        "logaddexp": dict(identity=-_np.inf),  # NumPy's and jnp's identities
        "logaddexp2": dict(identity=-_np.inf),
    }
    plain = ("divide", "true_divide", "floor_divide", "power", "float_power", "remainder",
             "mod", "fmod", "arctan2", "hypot", "copysign",
             "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
             "heaviside", "ldexp", "gcd", "lcm", "left_shift", "right_shift")
    for name in list(specs) + list(plain):
        fn = g.get(name)
        if fn is None or isinstance(fn, _uf):
            continue
        spec = specs.get(name, {})
        g[name] = _uf(fn, name, associative=spec.get("reducer") is not None, **spec)
    g["ufunc"] = _uf
    from nova.numpy_impl.frompyfunc import frompyfunc

    g["frompyfunc"] = frompyfunc


_make_ufuncs()
