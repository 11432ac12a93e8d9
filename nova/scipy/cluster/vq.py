"""nova.scipy.cluster.vq: vq, assigning observations to their nearest code, as
jax.scipy.cluster.vq."""

from __future__ import annotations

import nova.numpy as jnp
from nova.numpy_impl.util import where_am_i

__all__ = ["vq"]


def vq(obs, code_book, check_finite: bool = True):
    """The nearest code of each observation (scipy.cluster.vq.vq / jax.scipy.cluster.vq.vq).

    obs: (M, N) observations (or (M,) for N = 1); code_book: (K, N) codes (or (K,)), of the
    same rank; ints become float32. Returns (code, dist): int32 (M,) indices of the nearest
    code by Euclidean distance (the first on ties) and float (M,) distances to it.
    check_finite is accepted for compatibility and not acted on (as JAX's: no check can raise
    on traced values). dist is differentiable in obs and code_book. Raises ValueError for
    inputs of different ranks, of rank other than 1 or 2, or with different feature counts.
    """
    o, c = jnp.asarray(obs), jnp.asarray(code_book)
    if o.ndim != c.ndim:
        raise ValueError(f"vq: obs and code_book must have the same rank, got shapes "
                         f"{o.shape} and {c.shape}{where_am_i()}")
    if o.ndim not in (1, 2):
        raise ValueError(f"vq: obs and code_book must be 1-d or 2-d, got shapes {o.shape} "
                         f"and {c.shape}{where_am_i()}")
    if o.ndim == 1:
        o, c = o[:, None], c[:, None]
    if o.shape[1] != c.shape[1]:
        raise ValueError(f"vq: obs has {o.shape[1]} features but code_book has {c.shape[1]} "
                         f"(shapes {o.shape} and {c.shape}){where_am_i()}")
    if c.shape[0] == 0:
        raise ValueError(f"vq: code_book cannot be empty (shape {c.shape}){where_am_i()}")
    dt = jnp.result_type(o, c)
    if not jnp.issubdtype(dt, jnp.floating):
        dt = jnp.float32
    o, c = o.astype(dt), c.astype(dt)
    sq = jnp.sum((o[:, None, :] - c[None, :, :]) ** 2, axis=-1)  # (M, K)
    code = jnp.argmin(sq, axis=1).astype(jnp.int32)
    best = jnp.take_along_axis(sq, code[:, None], axis=1)[:, 0]
    return code, jnp.sqrt(best)
