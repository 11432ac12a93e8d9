"""The lax-level API: thin functions that bind primitives (used by nova.numpy and by VJP rules)."""

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
from nova.ops.contraction import dot_general  # noqa: F401
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
from nova.ops.elementwise import abs, max, min, pow, round  # noqa: F401
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


_CONTROL_FLOW = ("cond", "fori_loop", "map", "scan", "switch", "while_loop")


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
    raise AttributeError(f"module 'nova.lax' has no attribute {name!r}")
