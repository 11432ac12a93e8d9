"""The lax-level API: thin functions that bind primitives (used by nova.numpy and by VJP rules)."""

from nova.ops.contraction import dot_general  # noqa: F401
from nova.ops.elementwise import *  # noqa: F401,F403
from nova.ops.elementwise import abs, max, min, pow, round  # noqa: F401,A004
from nova.ops.indexing import clamp_indices, gather, in_bounds, scatter, scatter_add  # noqa: F401
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
from nova.ops.sort import sort, sort_key_val  # noqa: F401
from nova.ops.slicing import concatenate, pad, rev, slice  # noqa: F401,A004
from nova.ops.structural import (  # noqa: F401
    broadcast_in_dim,
    constant,
    copy,
    full,
    iota,
    reshape,
    transpose,
)
