"""nova.scipy.signal: N-d convolution and correlation (the direct sum over
lax.conv_general_dilated, or through nova.numpy.fft: fftconvolve), their 2-d forms with boundary
conditions, and detrend, as jax.scipy.signal / scipy.signal; gradients flow to both operands.
The spectral analysis functions (stft, istft, welch, csd, spectrogram, coherence, get_window)
live in nova/scipy/signal_spectral.py, signal_istft.py and signal_windows.py and are
re-exported here."""

from __future__ import annotations

import itertools
import math

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.numpy_impl.util import normalize_axis, promote, where_am_i

__all__ = ["choose_conv_method", "coherence", "convolve", "convolve2d", "correlate",
           "correlate2d", "csd", "detrend", "fftconvolve", "get_window", "istft",
           "spectrogram", "stft", "welch"]

_MODES = ("full", "same", "valid")


def _operands(name, in1, in2, mode, ndim=None, allow_complex=False):
    """in1, in2 as arrays of one float dtype (ints and bools become float32, as JAX's; a
    complex pair stays complex where allow_complex), checked for rank and mode."""
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
    if dtypes.is_complex(dt) and not allow_complex:
        raise TypeError(f"{name}: complex inputs are not supported, got {dt}{where_am_i()}")
    if not dtypes.is_inexact(dt):
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
    with a zero-padded by `pads`, as one lax.conv_general_dilated (four for complex operands:
    the convolution primitive is real)."""
    from nova import lax

    if dtypes.is_complex(a.dtype):
        ar, ai, vr, vi = (jnp.real(a), jnp.imag(a), jnp.real(v), jnp.imag(v))
        return lax.complex(_conv(ar, vr, pads) - _conv(ai, vi, pads),
                           _conv(ar, vi, pads) + _conv(ai, vr, pads))

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

    in1, in2: arrays of the same rank (ints and bools become float32, as JAX's; complex
    inputs give the complex convolution). mode "full" (shape n + m - 1 per axis), "same"
    (in1's shape, centered on the full result as SciPy) or "valid" (n - m + 1 where one input
    is at least as large as the other in every axis). method: "direct" (the sum, as
    lax.conv_general_dilated), "fft" (fftconvolve) or "auto" (choose_conv_method's pick by
    size; both agree up to rounding). precision is accepted for compatibility.
    Differentiable in both inputs. Raises ValueError for an unknown mode or method, inputs of
    different ranks, empty inputs, or a 'valid' pair where neither input dominates.
    """
    _check_method("convolve", method)
    a, v = _operands("convolve", in1, in2, mode, allow_complex=True)
    return _dispatch("convolve", a, v, mode, method)


def correlate(in1, in2, mode: str = "full", method: str = "auto", precision=None):
    """The N-d cross-correlation of in1 and in2 (scipy.signal.correlate /
    jax.scipy.signal.correlate): out[k] = sum_j in1[j + k] conj(in2[j]), computed as
    convolve(in1, conj(in2) reversed along every axis, mode, method). Arguments, result
    shapes and errors as convolve (in 'valid' mode with in2 the larger, SciPy's result: the
    correlation of in2 with in1, reversed and conjugated)."""
    from nova import lax

    _check_method("correlate", method)
    a, v = _operands("correlate", in1, in2, mode, allow_complex=True)
    flipped = lax.rev(v, tuple(range(v.ndim)))
    if dtypes.is_complex(flipped.dtype):
        flipped = jnp.conj(flipped)
    return _dispatch("correlate", a, flipped, mode, method)


def _check_method(name, method):
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"{name}: method must be 'auto', 'direct' or 'fft', got {method!r}"
                         f"{where_am_i()}")


def _dispatch(name, a, v, mode, method):
    if method == "auto":
        method = _pick_method(a.shape, v.shape, mode)
    if method == "fft" and a.ndim > 0:
        return _fftconvolve(name, a, v, mode, tuple(range(a.ndim)))
    return _convolve(name, a, v, mode)


def _pick_method(s1, s2, mode):
    """'fft' when the direct sum's multiply-adds exceed _FFT_COST times those of the three
    FFTs (3 N log2 N, N the padded transform size); a rough cost model in the spirit of
    scipy.signal.choose_conv_method, calibrated loosely on Nova's CPU kernels."""
    if not s1 or 0 in s1 or 0 in s2:
        return "direct"
    full = [n + m - 1 for n, m in zip(s1, s2, strict=True)]
    if mode == "full":
        out = full
    elif mode == "same":
        out = list(s1)
    else:
        out = [abs(n - m) + 1 for n, m in zip(s1, s2, strict=True)]
    direct = math.prod(out) * min(math.prod(s1), math.prod(s2))
    from nova.scipy.fft import next_fast_len

    size = math.prod(next_fast_len(n, True) for n in full)
    return "fft" if direct > _FFT_COST * 3 * size * math.log2(max(size, 2)) else "direct"


_FFT_COST = 1.0


def choose_conv_method(in1, in2, mode: str = "full", measure: bool = False):
    """The method convolve / correlate use under method="auto" for these inputs
    (scipy.signal.choose_conv_method; a rough cost model, see _pick_method): "direct" or
    "fft". in1, in2: arrays (or shapes' worth of data) of the same rank; measure=True (timing
    both, as SciPy) is not supported. Raises ValueError for an unknown mode or inputs of
    different ranks, NotImplementedError for measure=True."""
    if measure:
        raise NotImplementedError(f"choose_conv_method: measure=True is not supported"
                                  f"{where_am_i()}")
    a, v = _operands("choose_conv_method", in1, in2, mode, allow_complex=True)
    return _pick_method(a.shape, v.shape, mode)


def _conv_axes(name, a, v, axes):
    """axes normalized (default: all), checked unique, and the non-convolved dimensions checked
    to broadcast (equal, or 1 in either input)."""
    if axes is None:
        axes = tuple(range(a.ndim))
    axes = tuple(axes) if isinstance(axes, tuple | list) else (axes,)
    norm = tuple(normalize_axis(ax, a.ndim) for ax in axes)
    if len(set(norm)) != len(norm):
        raise ValueError(f"{name}: repeated axes are not supported, got axes={axes}"
                         f"{where_am_i()}")
    for d in range(a.ndim):
        if d not in norm and a.shape[d] != v.shape[d] and 1 not in (a.shape[d], v.shape[d]):
            raise ValueError(f"{name}: in1 and in2 must agree (or be 1) along the axes that "
                             f"are not convolved, got shapes {a.shape} and {v.shape} with "
                             f"axes={axes}{where_am_i()}")
    return norm


def _fftconvolve(name, a, v, mode, axes):
    """The convolution of a and v along `axes` through the FFT (real or complex transforms),
    cut to `mode`; the other axes broadcast."""
    from nova.numpy import fft as nfft
    from nova.scipy.fft import next_fast_len

    if mode == "valid":
        big = [a.shape[d] >= v.shape[d] for d in axes]
        small = [a.shape[d] <= v.shape[d] for d in axes]
        if not all(big):
            if not all(small):
                raise ValueError(f"{name}: in 'valid' mode one input must be at least as large "
                                 f"as the other along every convolved axis, got shapes "
                                 f"{a.shape} and {v.shape}{where_am_i()}")
            a, v = v, a
    full = [a.shape[d] + v.shape[d] - 1 for d in axes]
    cplx = dtypes.is_complex(a.dtype)
    fshape = [next_fast_len(n, not cplx) for n in full]
    if cplx:
        out = nfft.ifftn(nfft.fftn(a, fshape, axes) * nfft.fftn(v, fshape, axes), fshape, axes)
    else:
        out = nfft.irfftn(nfft.rfftn(a, fshape, axes) * nfft.rfftn(v, fshape, axes), fshape,
                          axes)
    out = out.astype(a.dtype)
    index = [slice(None)] * out.ndim
    for d, n in zip(axes, full, strict=True):
        keep = {"full": n, "same": a.shape[d], "valid": a.shape[d] - v.shape[d] + 1}[mode]
        start = (n - keep) // 2  # centered, as SciPy: 'same' starts at (m - 1) // 2
        index[d] = slice(start, start + keep)
    return out[tuple(index)]


def fftconvolve(in1, in2, mode: str = "full", axes=None):
    """The N-d convolution of in1 and in2 through the FFT (scipy.signal.fftconvolve /
    jax.scipy.signal.fftconvolve): the transforms of both, zero-padded to next_fast_len of
    n + m - 1 along each of `axes`, multiplied and transformed back (rfftn / irfftn for real
    inputs, fftn / ifftn for complex).

    in1, in2: arrays of the same rank (ints and bools become float32; float64 stays float64;
    complex stays complex). axes: the convolved axes (default all); along the others the
    inputs must agree or be 1 (they broadcast, as SciPy; JAX needs them equal). mode and the
    result's shape along `axes` as convolve; 0-d inputs give in1 * in2. Differentiable in
    both inputs. Raises ValueError for an unknown mode, inputs of different ranks, empty
    inputs, bad or repeated axes, non-broadcasting other axes, or a 'valid' pair where
    neither input dominates along the convolved axes.
    """
    a, v = _operands("fftconvolve", in1, in2, mode, allow_complex=True)
    if a.ndim == 0:
        return a * v
    axes = _conv_axes("fftconvolve", a, v, axes)
    return _fftconvolve("fftconvolve", a, v, mode, axes)


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

    in1, in2: 2-d arrays (ints and bools become float32; complex ones give the complex
    convolution). mode as convolve. boundary: "fill"
    (in1 extended by fillvalue, a scalar), "wrap" (periodically) or "symm" (mirrored, the edge
    repeated), as SciPy (JAX accepts only "fill" with fillvalue 0); "valid" results read no
    boundary. Differentiable in both inputs (and a traced fillvalue). Raises ValueError for
    inputs that are not 2-d, an unknown mode or boundary, or as convolve.
    """
    a, v = _operands("convolve2d", in1, in2, mode, ndim=2, allow_complex=True)
    return _convolve2d("convolve2d", a, v, mode, boundary, fillvalue)


def correlate2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0,
                precision=None):
    """The 2-d cross-correlation of in1 and in2 with a boundary condition
    (scipy.signal.correlate2d / jax.scipy.signal.correlate2d): convolve2d of in1 with in2
    conjugated and rotated by 180 degrees; in 'same' mode centered on the correlation (for an
    even-sized in2, one place from correlate's 'same', as SciPy). Arguments and errors as
    convolve2d."""
    from nova import lax

    a, v = _operands("correlate2d", in1, in2, mode, ndim=2, allow_complex=True)
    v = jnp.conj(v)  # (SciPy conjugates in2; real in2 is itself)
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



# the spectral functions use detrend above, so they are imported after it
from nova.scipy.signal_istft import istft
from nova.scipy.signal_spectral import coherence, csd, spectrogram, stft, welch
from nova.scipy.signal_windows import get_window
