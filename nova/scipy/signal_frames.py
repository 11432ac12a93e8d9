"""Segmenting a signal into overlapping frames, overlap-adding frames back, and extending a
signal at its ends: the movement steps behind nova.scipy.signal's stft / istft / welch, as
strided slices and interior pads (or one gather / scatter-add when a frame spans many hops)."""

from __future__ import annotations

import math

import numpy as np

import nova.numpy as jnp
from nova.numpy_impl.util import where_am_i
from nova.ops import lax

_MAX_PIECES = 8  # more pieces per frame than this: one gather / scatter-add instead


def _geometry(nperseg: int, nstep: int):
    """(g, r, s): frames of nperseg = r g samples start every nstep = s g samples, g their gcd,
    so frame i is the run of pieces i s .. i s + r - 1 of the signal cut into pieces of g."""
    g = math.gcd(nperseg, nstep)
    return g, nperseg // g, nstep // g


def frames(x, nperseg: int, nstep: int):
    """The frames x[..., i nstep : i nstep + nperseg] of x (..., L) for i = 0..nseg-1, nseg =
    (L - nperseg) // nstep + 1 (L >= nperseg): shape (..., nseg, nperseg)."""
    lead, length = x.shape[:-1], x.shape[-1]
    nseg = (length - nperseg) // nstep + 1
    g, r, s = _geometry(nperseg, nstep)
    if r > _MAX_PIECES:
        idx = np.arange(nseg)[:, None] * nstep + np.arange(nperseg)[None, :]
        return jnp.take(x, idx, axis=-1)
    pieces = (nseg - 1) * s + r
    chunks = jnp.reshape(x[..., : pieces * g], (*lead, pieces, g))
    nd = chunks.ndim
    parts = []
    for c in range(r):  # piece c of every frame: every s-th piece from c on
        start = [0] * nd
        start[-2] = c
        limit = list(chunks.shape)
        limit[-2] = c + (nseg - 1) * s + 1
        strides = [1] * nd
        strides[-2] = s
        parts.append(lax.slice(chunks, start, limit, strides))
    stacked = jnp.stack(parts, axis=-2)  # (..., nseg, r, g)
    return jnp.reshape(stacked, (*lead, nseg, nperseg))


def overlap_add(segs, nstep: int):
    """The sum of the frames segs[..., i, :] placed at offsets i nstep: shape (..., (nseg - 1)
    nstep + nperseg). The adjoint of `frames`."""
    lead, (nseg, nperseg) = segs.shape[:-2], segs.shape[-2:]
    length = (nseg - 1) * nstep + nperseg
    g, r, s = _geometry(nperseg, nstep)
    if r > _MAX_PIECES:
        idx = np.arange(nseg)[:, None] * nstep + np.arange(nperseg)[None, :]
        return jnp.zeros((*lead, length), segs.dtype).at[..., idx].add(segs)
    chunks = jnp.reshape(segs, (*lead, nseg, r, g))
    pieces = (nseg - 1) * s + r
    zero = jnp.zeros((), segs.dtype)
    out = None
    for c in range(r):  # piece c of frame i lands on piece i s + c
        part = chunks[..., c, :]  # (..., nseg, g)
        cfg = [(0, 0, 0)] * part.ndim
        cfg[-2] = (c, pieces - c - (nseg - 1) * s - 1, s - 1)
        placed = lax.pad(part, zero, cfg)
        out = placed if out is None else out + placed
    return jnp.reshape(out, (*lead, length))


def overlap_add_host(segs: np.ndarray, nstep: int) -> np.ndarray:
    """overlap_add of a host (nseg, nperseg) array, in numpy (for constant window norms)."""
    nseg, nperseg = segs.shape
    out = np.zeros((nseg - 1) * nstep + nperseg, segs.dtype)
    for i in range(nseg):
        out[i * nstep: i * nstep + nperseg] += segs[i]
    return out


BOUNDARIES = ("even", "odd", "constant", "zeros", None)


def extend(x, n: int, boundary, name: str):
    """x (..., L) extended by n samples at both ends of its last axis: "even" (mirrored about
    the end samples, which are not repeated), "odd" (point-mirrored about them), "constant"
    (the end samples repeated), "zeros"; None leaves x as it is (scipy.signal's even_ext,
    odd_ext, const_ext, zero_ext). Raises ValueError for an unknown boundary, or n >= L for the
    mirrored ones."""
    if boundary not in BOUNDARIES:
        raise ValueError(f"{name}: boundary must be one of 'even', 'odd', 'constant', 'zeros' "
                         f"or None, got {boundary!r}{where_am_i()}")
    if boundary is None or n < 1:
        return x
    length = x.shape[-1]
    if boundary == "zeros":
        return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(n, n)])
    first, last = x[..., :1], x[..., length - 1:]
    if boundary == "constant":
        shape = (*x.shape[:-1], n)
        return jnp.concatenate([jnp.broadcast_to(first, shape), x,
                                jnp.broadcast_to(last, shape)], axis=-1)
    if n >= length:
        raise ValueError(f"{name}: the {boundary!r} extension by {n} samples needs a signal "
                         f"longer than {n}, got length {length}{where_am_i()}")
    left = jnp.flip(x[..., 1: n + 1], axis=-1)
    right = jnp.flip(x[..., length - n - 1: length - 1], axis=-1)
    if boundary == "odd":
        left, right = 2 * first - left, 2 * last - right
    return jnp.concatenate([left, x, right], axis=-1)
