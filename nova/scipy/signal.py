"""nova.scipy.signal: N-d convolution and correlation, their 2-d forms with boundary conditions,
and detrend, as jax.scipy.signal / scipy.signal, over lax.conv_general_dilated (so gradients
flow to both operands)."""

from __future__ import annotations

import itertools

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.numpy_impl.util import normalize_axis, promote, where_am_i

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "detrend"]

_MODES = ("full", "same", "valid")


def _operands(name, in1, in2, mode, ndim=None):
    """in1, in2 as arrays of one float dtype (ints and bools become float32, as JAX's), checked
    for rank and mode."""
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}"
                         f"{where_am_i()}")
    a, v = (jnp.asarray(t) for t in (in1, in2))
    if a.ndim != v.ndim:
        raise ValueError(f"{name}: in1 and in2 must have the same number of dimensions, got "
                         f"shapes {a.shape} and {v.shape}{where_am_i()}")
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name}: in1 and in2 must be {ndim}-d, got shapes {a.shape} and "
                         f"{v.shape}{where_am_i()}")
    if a.size == 0 or v.size == 0:
        raise ValueError(f"{name}: in1 and in2 cannot be empty (shapes {a.shape}, {v.shape})"
                         f"{where_am_i()}")
    dt = dtypes.result_type(a, v)
    if not dtypes.is_float(dt):
        dt = dtypes.default_float
    return a.astype(dt), v.astype(dt)


def _valid_order(name, a, v):
    """(a, v) with a the larger in every axis, as 'valid' mode needs (convolution commutes);
    ValueError when neither is."""
    if all(n >= m for n, m in zip(a.shape, v.shape, strict=True)):
        return a, v
    if all(m >= n for n, m in zip(a.shape, v.shape, strict=True)):
        return v, a
    raise ValueError(f"{name}: in 'valid' mode one input must be at least as large as the "
                     f"other in every dimension, got shapes {a.shape} and {v.shape}"
                     f"{where_am_i()}")


def _conv(a, v, pads):
    """sum_j a[i + j - pad_lo] v_flipped[j]: the true convolution of a and v over every axis,
    with a zero-padded by `pads`, as one lax.conv_general_dilated."""
    from nova import lax

    kernel = lax.rev(v, tuple(range(v.ndim)))
    lhs = lax.reshape(a, (1, 1) + a.shape)
    rhs = lax.reshape(kernel, (1, 1) + kernel.shape)
    out = lax.conv_general_dilated(lhs, rhs, (1,) * a.ndim, list(pads))
    return lax.reshape(out, out.shape[2:])


def _convolve(name, a, v, mode):
    if a.ndim == 0:
        return a * v
    if mode == "valid":
        a, v = _valid_order(name, a, v)
        return _conv(a, v, [(0, 0)] * a.ndim)
    if mode == "full":
        return _conv(a, v, [(m - 1, m - 1) for m in v.shape])
    # same: the center of the full result with in1's shape (offset (m - 1) // 2, as SciPy)
    return _conv(a, v, [(m // 2, m - 1 - m // 2) for m in v.shape])


def convolve(in1, in2, mode: str = "full", method: str = "auto", precision=None):
    """The N-d convolution of in1 and in2 (scipy.signal.convolve / jax.scipy.signal.convolve):
    out[k] = sum_j in1[j] in2[k - j] over every axis.

    in1, in2: arrays of the same rank (ints and bools become float32, as JAX's). mode "full"
    (shape n + m - 1 per axis), "same" (in1's shape, centered on the full result as SciPy) or
    "valid" (n - m + 1 where one input is at least as large as the other in every axis).
    method "auto", "direct" or "fft": all compute the direct sum (Nova has no FFT; the result
    is the same up to rounding); precision is accepted for compatibility. Differentiable in
    both inputs. Raises ValueError for an unknown mode or method, inputs of different ranks,
    empty inputs, or a 'valid' pair where neither input dominates.
    """
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"convolve: method must be 'auto', 'direct' or 'fft', got {method!r}"
                         f"{where_am_i()}")
    a, v = _operands("convolve", in1, in2, mode)
    return _convolve("convolve", a, v, mode)


def correlate(in1, in2, mode: str = "full", method: str = "auto", precision=None):
    """The N-d cross-correlation of in1 and in2 (scipy.signal.correlate /
    jax.scipy.signal.correlate, real inputs): out[k] = sum_j in1[j + k] in2[j], computed as
    convolve(in1, in2 reversed along every axis, mode). Arguments, result shapes and errors
    as convolve (in 'valid' mode with in2 the larger, SciPy's result: the correlation of in2
    with in1, reversed)."""
    from nova import lax

    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"correlate: method must be 'auto', 'direct' or 'fft', got "
                         f"{method!r}{where_am_i()}")
    a, v = _operands("correlate", in1, in2, mode)
    return _convolve("correlate", a, lax.rev(v, tuple(range(v.ndim))), mode)


# SciPy's boundary names and the numpy.pad mode that extends in1 the same way
_BOUNDARIES = {"fill": "constant", "wrap": "wrap", "circular": "wrap", "symm": "symmetric",
               "symmetric": "symmetric"}


def _convolve2d(name, a, v, mode, boundary, fillvalue, flipped=False):
    if boundary not in _BOUNDARIES:
        raise ValueError(f"{name}: boundary must be 'fill', 'wrap' or 'symm', got "
                         f"{boundary!r}{where_am_i()}")
    if mode == "valid":  # no point of the result reads past in1's edge
        a, v = _valid_order(name, a, v)
        return _conv(a, v, [(0, 0), (0, 0)])
    if mode == "full":
        pads = [(m - 1, m - 1) for m in v.shape]
    elif flipped:  # correlate2d's 'same' centers on the correlation: offset m // 2, as SciPy
        pads = [(m - 1 - m // 2, m // 2) for m in v.shape]
    else:
        pads = [(m // 2, m - 1 - m // 2) for m in v.shape]
    if boundary == "fill" and isinstance(fillvalue, int | float) and fillvalue == 0:
        return _conv(a, v, pads)  # the convolution's own zero padding
    pad_mode = _BOUNDARIES[boundary]
    extra = {"constant_values": fillvalue} if pad_mode == "constant" else {}
    return _conv(jnp.pad(a, pads, mode=pad_mode, **extra), v, [(0, 0), (0, 0)])


def convolve2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0,
               precision=None):
    """The 2-d convolution of in1 and in2 with a boundary condition (scipy.signal.convolve2d /
    jax.scipy.signal.convolve2d).

    in1, in2: 2-d arrays (ints and bools become float32). mode as convolve. boundary: "fill"
    (in1 extended by fillvalue, a scalar), "wrap" (periodically) or "symm" (mirrored, the edge
    repeated), as SciPy (JAX accepts only "fill" with fillvalue 0); "valid" results read no
    boundary. Differentiable in both inputs (and a traced fillvalue). Raises ValueError for
    inputs that are not 2-d, an unknown mode or boundary, or as convolve.
    """
    a, v = _operands("convolve2d", in1, in2, mode, ndim=2)
    return _convolve2d("convolve2d", a, v, mode, boundary, fillvalue)


def correlate2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0,
                precision=None):
    """The 2-d cross-correlation of in1 and in2 with a boundary condition
    (scipy.signal.correlate2d / jax.scipy.signal.correlate2d, real inputs): convolve2d of in1
    with in2 rotated by 180 degrees; in 'same' mode centered on the correlation (for an
    even-sized in2, one place from correlate's 'same', as SciPy). Arguments and errors as
    convolve2d."""
    from nova import lax

    a, v = _operands("correlate2d", in1, in2, mode, ndim=2)
    return _convolve2d("correlate2d", a, lax.rev(v, (0, 1)), mode, boundary, fillvalue, True)


def _breakpoints(bp, n):
    """SciPy's segment edges: the sorted unique values of 0, bp and n."""
    try:
        pts = np.atleast_1d(np.asarray(bp)).astype(np.int64, casting="same_kind")
    except TypeError:
        raise TypeError(f"detrend: bp must be ints, got {bp!r}{where_am_i()}") from None
    if pts.ndim != 1:
        raise ValueError(f"detrend: bp must be an int or a 1-d sequence of ints, got shape "
                         f"{pts.shape}{where_am_i()}")
    if np.any(pts > n) or np.any(pts < 0):
        raise ValueError(f"detrend: breakpoints must lie in [0, {n}] (the length of the "
                         f"axis), got {pts.tolist()}{where_am_i()}")
    return np.unique(np.concatenate([[0], pts, [n]])).tolist()


def _remove_line(seg, axis):
    """seg minus its least-squares line along axis (the normal equations in closed form,
    about the segment's mean position, so they are well conditioned)."""
    n = seg.shape[axis]
    mean = jnp.mean(seg, axis=axis, keepdims=True)
    if n == 1:
        return seg - mean
    shape = [1] * seg.ndim
    shape[axis] = n
    t = jnp.asarray((np.arange(n) - (n - 1) / 2.0).reshape(shape), dtype=seg.dtype)
    # sum_i t_i^2 = n (n^2 - 1) / 12
    slope = jnp.sum(t * (seg - mean), axis=axis, keepdims=True) * (12.0 / (n * (n * n - 1.0)))
    return seg - mean - slope * t


def detrend(data, axis: int = -1, type: str = "linear", bp=0, overwrite_data=None):
    """data with its trend along `axis` removed (scipy.signal.detrend /
    jax.scipy.signal.detrend).

    data: an array (ints and bools become float32); type "linear" (or "l"): subtracts the
    least-squares line of each segment between the breakpoints `bp` (an int or a sequence
    of ints in [0, n]; segments [0, bp_0), [bp_0, bp_1), ..., as SciPy), "constant" (or "c"):
    subtracts the mean (bp ignored). Result: data's shape, float dtype. Differentiable.
    overwrite_data is accepted for compatibility (Nova arrays are immutable). Raises
    ValueError for an unknown type, an axis out of range or breakpoints outside [0, n],
    TypeError for non-integer breakpoints.
    """
    if type not in ("linear", "l", "constant", "c"):
        raise ValueError(f"detrend: type must be 'linear' or 'constant', got {type!r}"
                         f"{where_am_i()}")
    (x,) = promote("detrend", data, to_inexact=True)
    if x.ndim == 0:
        raise ValueError(f"detrend: data must be at least 1-d, got a 0-d array{where_am_i()}")
    ax = normalize_axis(axis, x.ndim)
    if type in ("constant", "c"):
        return x - jnp.mean(x, axis=ax, keepdims=True)
    n = x.shape[ax]
    edges = _breakpoints(bp, n)
    pieces = []
    for lo, hi in itertools.pairwise(edges):
        seg = x[(slice(None),) * ax + (slice(lo, hi),)]
        pieces.append(_remove_line(seg, ax))
    return pieces[0] if len(pieces) == 1 else jnp.concatenate(pieces, axis=ax)

