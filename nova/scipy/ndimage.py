"""nova.scipy.ndimage: map_coordinates (nearest and linear interpolation of an N-d array at
arbitrary coordinates), as jax.scipy.ndimage."""

from __future__ import annotations

import itertools

import nova.numpy as jnp
from nova.core import dtypes
from nova.numpy_impl.util import where_am_i

__all__ = ["map_coordinates"]


def _mirror(index, size: int):
    # reflection about the end samples (period 2 (size - 1), the edge not repeated): the
    # triangle wave |(i + s) mod 2s - s| with s = size - 1
    s = size - 1
    return jnp.abs((index + s) % (2 * s) - s) if s > 0 else jnp.zeros_like(index)


def _reflect(index, size: int):
    # reflection about the edges (period 2 size, the edge repeated): the mirror of 2i + 1 on a
    # grid of 2 size + 1 points, halved
    return (_mirror(2 * index + 1, 2 * size + 1) - 1) // 2


_MODES = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round_half_away(x):
    return jnp.sign(x) * jnp.floor(jnp.abs(x) + 0.5)


def map_coordinates(input, coordinates, order: int, mode: str = "constant", cval=0.0):
    """The values of `input` at the points `coordinates` by nearest-neighbour (order=0) or
    multilinear (order=1) interpolation (jax.scipy.ndimage.map_coordinates,
    scipy.ndimage.map_coordinates).

    input: an N-d array; coordinates: a sequence of N arrays of one shape (or broadcastable),
    the fractional index along each axis; result: their broadcast shape, input's dtype
    (integer inputs round half away from zero). Order 0 rounds each coordinate half away from
    zero. mode says how indices past the edges are read: "constant" (the sample is cval; a
    point half outside mixes cval and the edge, SciPy's "grid-constant"), "nearest" (the edge
    sample), "wrap" (periodically, SciPy's "grid-wrap"), "mirror" (reflected about the edge
    samples), "reflect" (reflected about the edges, the edge repeated). Differentiable in
    input, and for order=1 in the coordinates. Raises ValueError when len(coordinates) !=
    input.ndim, NotImplementedError for order > 1 or another mode, as JAX's.
    """
    x = jnp.asarray(input)
    coords = [jnp.asarray(c) for c in coordinates]
    if len(coords) != x.ndim:
        raise ValueError(f"map_coordinates: coordinates must be a sequence of input.ndim = "
                         f"{x.ndim} arrays, got {len(coords)}{where_am_i()}")
    if mode not in _MODES:
        raise NotImplementedError(f"map_coordinates: mode {mode!r} is not supported; the "
                                  f"modes are {sorted(_MODES)}{where_am_i()}")
    if order not in (0, 1):
        raise NotImplementedError(f"map_coordinates: order must be 0 or 1, got {order!r}"
                                  f"{where_am_i()}")
    if x.size == 0:
        raise ValueError(f"map_coordinates: input cannot be empty (shape {x.shape})"
                         f"{where_am_i()}")
    fix = _MODES[mode]
    work = x.dtype if dtypes.is_float(x.dtype) else dtypes.default_float
    per_axis = []  # for each axis: (index, weight, in range) per interpolation node
    for c, size in zip(coords, x.shape, strict=True):
        c = c.astype(work) if not dtypes.is_float(c.dtype) else c
        if order == 0:
            nodes = [(_round_half_away(c).astype(jnp.int32), None)]
        else:
            lower = jnp.floor(c)
            upper_w = c - lower
            i = lower.astype(jnp.int32)
            nodes = [(i, 1.0 - upper_w), (i + 1, upper_w)]
        per_axis.append([(fix(i, size), w, (i >= 0) & (i < size)) for i, w in nodes])
    fill = jnp.asarray(cval, dtype=work)
    xw = x.astype(work)
    total = None
    for corner in itertools.product(*per_axis):
        value = xw[tuple(i for i, _, _ in corner)]
        if mode == "constant":
            inside = corner[0][2]
            for _, _, ok in corner[1:]:
                inside = inside & ok
            value = jnp.where(inside, value, fill)
        for _, w, _ in corner:
            if w is not None:
                value = value * w
        total = value if total is None else total + value
    if not dtypes.is_float(x.dtype):
        total = _round_half_away(total)
    return total.astype(x.dtype)
