"""The lax-level API: thin functions that bind primitives (used by nova.numpy and by VJP rules)."""

import enum

import numpy as np

from nova.core import dtypes
from nova.ops.composite import (  # noqa: F401
    acos,
    acosh,
    asin,
    asinh,
    associative_scan,
    atanh,
    batch_matmul,
    bessel_i0e,
    bessel_i1e,
    betainc,
    broadcast,
    broadcast_shapes,
    cbrt,
    collapse,
    cumlogsumexp,
    digamma,
    dot,
    erf_inv,
    erfc,
    igamma,
    igamma_grad_a,
    igammac,
    is_finite,
    lgamma,
    polygamma,
    population_count,
    random_gamma_grad,
    reduce,
    reduce_and,
    reduce_or,
    reduce_xor,
    select_n,
    split,
    square,
    zeta,
)
from nova.ops.contraction import dot_general as _dot_general
from nova.ops.convolution import (  # noqa: F401
    conv,
    conv_general_dilated,
    padtype_to_pads,
    reduce_window,
)
from nova.ops.dynamic import (  # noqa: F401
    clamp,
    dynamic_index_in_dim,
    dynamic_slice,
    dynamic_slice_in_dim,
    dynamic_update_index_in_dim,
    dynamic_update_slice,
    dynamic_update_slice_in_dim,
    expand_dims,
    index_in_dim,
    integer_pow,
    slice_in_dim,
    squeeze,
    top_k,
)
from nova.ops.elementwise import *
from nova.ops.elementwise import abs, max, min, pow  # noqa: F401
from nova.ops.elementwise import round as _round_half_even
from nova.ops.complex import complex, conj, imag, real  # noqa: F401,A004
from nova.ops.elementwise import stop_gradient_p as _stop_gradient_p
from nova.ops.indexing import clamp_indices, gather, in_bounds  # noqa: F401
from nova.ops.lax_extras import (  # noqa: F401
    ConvDimensionNumbers,
    GatherScatterMode,
    ScatterDimensionNumbers,
    approx_max_k,
    approx_min_k,
    broadcast_like,
    broadcast_to_rank,
    clz,
    composite,
    conv_dimension_numbers,
    conv_general_dilated_local,
    conv_general_dilated_patches,
    conv_general_permutations,
    conv_general_shape_tuple,
    conv_shape_tuple,
    conv_transpose,
    conv_transpose_shape_tuple,
    conv_with_general_padding,
    custom_linear_solve,
    custom_root,
    empty,
    index_take,
    mulhi,
    nextafter,
    platform_dependent,
    ragged_dot,
    reduce_precision,
    reduce_window_shape_tuple,
    scatter,
    scatter_add,
    scatter_apply,
    scatter_max,
    scatter_min,
    scatter_mul,
    scatter_sub,
    stack,
    tile,
    unstack,
)
from nova.ops.random_bits import threefry2x32  # noqa: F401
from nova.ops.reduction import (  # noqa: F401
    argmax,
    argmin,
    reduce_max,
    reduce_min,
    reduce_prod,
    reduce_sum,
)
from nova.ops.scan import cummax, cummin, cumprod, cumsum  # noqa: F401
from nova.ops.slicing import concatenate, pad, rev, slice  # noqa: F401
from nova.ops.sort import sort, sort_key_val  # noqa: F401
from nova.ops.structural import (  # noqa: F401
    broadcast_in_dim,
    broadcasted_iota,
    constant,
    copy,
    full,
    iota,
    optimization_barrier,
    reshape,
    transpose,
)


def stop_gradient(x):
    """The identity whose derivative is zero (jax.lax.stop_gradient), on any pytree of arrays.

    Reverse mode passes no cotangent through it and forward mode no tangent, so
    `nova.grad(lambda x: x * stop_gradient(x))(3.)` is 3. Integer and bool leaves are returned as
    they are (they carry no derivative). Compiled code is the identity (no copy).
    """
    from nova.core.pytree import tree_map
    from nova.numpy_impl.util import asarray as _asarray

    def one(leaf):
        a = _asarray(leaf)
        if a.dtype.kind not in "fc" and a.dtype.name not in ("bfloat16", "float16"):
            return a
        return _stop_gradient_p.bind(a)

    return tree_map(one, x)


class RoundingMethod(enum.IntEnum):
    """How `round` breaks ties, as jax.lax.RoundingMethod: AWAY_FROM_ZERO (C's round, JAX's
    default) or TO_NEAREST_EVEN (IEEE 754's roundTiesToEven, NumPy's np.round)."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):  # noqa: A001 - lax's name
    """Round a floating array to integral values, elementwise, as jax.lax.round.

    x: a float Array of any shape; the result has its shape and dtype (gradient zero).
    rounding_method: a RoundingMethod (or its int value): AWAY_FROM_ZERO (default, 2.5 -> 3.0,
    -2.5 -> -3.0) or TO_NEAREST_EVEN (2.5 -> 2.0, as nova.numpy.round).
    Raises TypeError for an integer or bool x, ValueError for an unknown rounding_method.
    """
    try:
        method = RoundingMethod(int(rounding_method))
    except (TypeError, ValueError):
        raise ValueError(f"lax.round: rounding_method must be a RoundingMethod, got "
                         f"{rounding_method!r}") from None
    if method is RoundingMethod.TO_NEAREST_EVEN:
        return _round_half_even(x)
    from nova.numpy_impl.util import asarray as _asarray

    x = _asarray(x)
    if x.dtype.kind != "f" and x.dtype.name not in ("bfloat16", "float16"):
        raise TypeError(f"lax.round needs a floating-point operand, got {x.dtype} of shape "
                        f"{tuple(x.shape)}")
    a = abs(x)
    f = floor(a)  # a - f is exact, so a tie is seen exactly (a + 0.5 would round first)
    r = select(ge(sub(a, f), full_like(f, 0.5)), add(f, full_like(f, 1.0)), f)
    zero = full_like(x, 0.0)
    return select(eq(x, zero), x, select(lt(x, zero), neg(r), r))  # x == 0 keeps its sign


class Precision(enum.Enum):
    """A contraction's precision, as jax.lax.Precision (also given as the strings 'default' /
    'bfloat16', 'high' / 'tensorfloat32', 'highest' / 'float32'). Nova's CPU kernels always
    compute float32 contractions in float32 (JAX's CPU backend likewise ignores it); on CUDA the
    matmul precision is chosen per program (`nova.config` "matmul_precision")."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        names = {"default": cls.DEFAULT, "bfloat16": cls.DEFAULT, "fastest": cls.DEFAULT,
                 "high": cls.HIGH, "tensorfloat32": cls.HIGH, "highest": cls.HIGHEST,
                 "float32": cls.HIGHEST}
        return names.get(value.lower()) if isinstance(value, str) else None


def _check_precision(fn: str, precision) -> None:
    items = precision if isinstance(precision, tuple | list) else (precision,)
    if isinstance(precision, tuple | list) and len(items) != 2:
        raise ValueError(f"{fn}: precision must be one value or a pair, got {precision!r}")
    for p in items:
        if p is None or isinstance(p, Precision):
            continue
        try:
            Precision(p)
        except ValueError:
            raise ValueError(f"{fn}: unknown precision {p!r} (expected a lax.Precision or one "
                             "of 'default', 'high', 'highest')") from None


def _accumulating(fn: str, lhs, rhs, preferred_element_type):
    """The operands converted to preferred_element_type when it is wider (the contraction then
    accumulates in it, as XLA does), and the dtype the result must have (or None)."""
    from nova.numpy_impl.util import asarray as _asarray

    x, y = _asarray(lhs), _asarray(rhs)
    if preferred_element_type is None:
        return x, y, None
    want = dtypes.canonicalize(preferred_element_type, arg_name=f"{fn}: preferred_element_type")
    for name, a in (("lhs", x), ("rhs", y)):
        if dtypes.is_float(a.dtype) and not dtypes.is_float(want):
            raise TypeError(f"{fn}: preferred_element_type {want} is not a floating type, but "
                            f"{name} has dtype {a.dtype}")
    if all(np.dtype(a.dtype).itemsize <= want.itemsize for a in (x, y)):
        x, y = convert_element_type(x, want), convert_element_type(y, want)
    return x, y, want


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None,
                out_sharding=None):
    """The general contraction, as jax.lax.dot_general.

    dimension_numbers: ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), tuples of
    axes. Result shape: batch axes, then lhs' free axes, then rhs' free axes. dtype: the
    operands' (promoted), or preferred_element_type, in which the products are accumulated
    when it is at least as wide (int8 x int8 -> int32 is exact). precision: a Precision, a
    string or a pair (validated; see Precision). out_sharding is accepted and ignored (one
    device). Raises ShapeError for mismatched contracting or batch sizes, ValueError for an
    unknown precision, TypeError for an integer preferred_element_type of float operands.
    """
    _check_precision("dot_general", precision)
    x, y, want = _accumulating("dot_general", lhs, rhs, preferred_element_type)
    out = _dot_general(x, y, dimension_numbers)
    return out if want is None or out.dtype == want else convert_element_type(out, want)


_UINT_OF_WIDTH = {1: "uint8", 2: "uint16", 4: "uint32", 8: "int64"}  # int64: no uint64


def bitcast_convert_type(operand, new_dtype):
    """Reinterpret operand's bits as new_dtype, as jax.lax.bitcast_convert_type (little-endian).

    operand: an Array of any shape and any non-bool dtype; new_dtype: a non-bool dtype.
    Same width: the result has operand's shape. Narrowing (e.g. float32 -> uint8): the result
    gains a trailing axis of size itemsize(operand) / itemsize(new_dtype), least significant
    part first. Widening (uint8 -> float32): operand's last axis must have that ratio as its size
    and is consumed. The result has no gradient (zero tangents). Raises TypeError for bool
    dtypes, ValueError when a widening operand's last axis has the wrong size.
    """
    from nova.core import dtypes as _dtypes
    from nova.numpy_impl.util import asarray as _asarray

    x = _asarray(operand)
    new = _dtypes.canonicalize(new_dtype, arg_name="new_dtype")
    src = np.dtype(x.dtype)
    if src == new:
        return x
    if _dtypes.bool_ in (src, new):
        raise TypeError(f"bitcast_convert_type does not reinterpret bool, got {src} to {new}")
    a, b = src.itemsize, new.itemsize
    if a == b:
        return bitcast_convert_type_p.bind(x, new_dtype=new)
    if a > b:  # split each element into a // b parts along a new last axis
        u = bitcast_convert_type_p.bind(x, new_dtype=_UINT_OF_WIDTH[a])
        parts = []
        for i in range(a // b):
            bits = shift_right_logical(u, full_like(u, 8 * b * i)) if i else u
            part = convert_element_type(bits, _UINT_OF_WIDTH[b])  # keeps the low bits
            part = bitcast_convert_type_p.bind(part, new_dtype=new)
            parts.append(reshape(part, (*x.shape, 1)))
        return concatenate(parts, x.ndim)
    k = b // a
    if x.ndim == 0 or x.shape[-1] != k:
        raise ValueError(f"bitcast_convert_type from {src} to {new} needs a last axis of size "
                         f"{k}, got an operand of shape {tuple(x.shape)}")
    wide = _UINT_OF_WIDTH[b]
    acc = None
    for i in range(k):
        piece = reshape(slice_in_dim(x, i, i + 1, axis=x.ndim - 1), x.shape[:-1])
        piece = convert_element_type(  # zero-extends: the source is unsigned
            bitcast_convert_type_p.bind(piece, new_dtype=_UINT_OF_WIDTH[a]), wide)
        piece = shift_left(piece, full_like(piece, 8 * a * i)) if i else piece
        acc = piece if acc is None else bitwise_or(acc, piece)
    return bitcast_convert_type_p.bind(acc, new_dtype=new)


_CONTROL_FLOW = ("cond", "fori_loop", "map", "scan", "switch", "while_loop")
_COLLECTIVES = ("all_gather", "all_to_all", "axis_index", "axis_size", "pmax", "pmean", "pmin",
                "ppermute", "pshuffle", "psum", "psum_scatter")


def __getattr__(name):
    # Structured control flow lives in nova/control_flow.py, a layer above ops/ (its rules use
    # the transforms); `nova.lax.scan` and the others are looked up there. `nova.lax.linalg`
    # (nova/ops/linalg.py) is imported on first use.
    if name == "linalg":
        import nova.ops.linalg as _linalg

        return _linalg
    if name in _CONTROL_FLOW:
        import nova.control_flow as _cf

        return getattr(_cf, name)
    if name in _COLLECTIVES:  # nova/collectives.py, with vmap's named axes
        import nova.collectives as _coll

        return getattr(_coll, name)
    if name.endswith("_p"):  # the primitive objects, by their names (`nova.lax.exp_p`)
        import nova.collectives  # noqa: F401 - registers its primitives
        from nova.core.primitive import all_primitives

        prim = all_primitives().get(name[:-2])
        if prim is not None:
            return prim
    raise AttributeError(f"module 'nova.lax' has no attribute {name!r}")
