"""nova.numpy.fft: numpy.fft's discrete Fourier transforms (as jax.numpy.fft), written with
Nova's ops -- DFT matmuls, the four-step Cooley-Tukey split and Bluestein's algorithm
(nova/numpy_impl/fft_plan.py, which cites the sources) -- so jit, grad, jvp and vmap apply.

Conventions (numpy's): the forward transform is X[k] = sum_n x[n] exp(-2 pi i n k / N), the
inverse carries the 1/N; `norm` moves the scale: "backward" (default, None) scales the inverse
by 1/N, "ortho" both by 1/sqrt(N), "forward" the forward by 1/N (N: the product of the
transformed lengths). `n` / `s` zero-pad or truncate each transformed axis at its end.
dtypes (jax.numpy's): float64 and complex128 compute in complex128; every other input (float32,
float16, bfloat16, integers, bool) in complex64; the real results of irfft / hfft are float32 or
float64. Derivatives follow from the ops (JAX's complex convention, see nova.numpy.real).
Errors: ValueError for a non-positive n or s entry (including irfft's default n = 0 for a
length-1 input, where numpy raises too), an axis out of range, repeated axes, s and axes of
different lengths, or an unknown norm; TypeError for a non-integer n and for complex input to
the real transforms (rfft, rfftn, rfft2, ihfft).
"""

from __future__ import annotations

import math
import operator

import numpy as np

from nova.core import dtypes
from nova.numpy_impl import fft_plan as plan
from nova.numpy_impl.util import asarray, normalize_axis, where_am_i
from nova.ops import complex as cx
from nova.ops import lax

__all__ = [
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
]

_NORMS = (None, "backward", "ortho", "forward")
_SWAP = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


# ---------------------------------------------------------------- argument checking

def _check_norm(norm, name):
    if not isinstance(norm, str | type(None)) or norm not in _NORMS:
        raise ValueError(f"{name}: invalid norm {norm!r}; expected None, 'backward', 'ortho' or "
                         f"'forward'{where_am_i()}")


def _scale(x, norm, total: int, inverse: bool):
    """x scaled for `norm` (total: the product of the transformed lengths)."""
    if norm == "ortho":
        return x * (1.0 / math.sqrt(total))
    if (norm == "forward") != inverse:  # forward transform under "forward", inverse otherwise
        return x * (1.0 / total)
    return x


def _length(n, name, arg="n"):
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{name}: {arg} must be an integer, got {type(n).__name__} {n!r}"
                        f"{where_am_i()}") from None
    if n < 1:
        raise ValueError(f"{name}: invalid number of FFT data points {arg}={n} (must be >= 1)"
                         f"{where_am_i()}")
    return n


def _complex_operand(a):
    x = asarray(a)
    if dtypes.is_complex(x.dtype):
        return x
    return x.astype(dtypes.complex128 if x.dtype == dtypes.float64 else dtypes.complex64)


def _real_operand(a, name):
    x = asarray(a)
    if dtypes.is_complex(x.dtype):
        raise TypeError(f"{name}: needs a real input, got {x.dtype} of shape {x.shape} (use fft "
                        f"for complex input){where_am_i()}")
    return x.astype(dtypes.float64 if x.dtype == dtypes.float64 else dtypes.float32)


def _resize(x, axis: int, n: int):
    """x truncated or zero-padded at the end of `axis` to length n."""
    m = x.shape[axis]
    if n < m:
        return lax.slice_in_dim(x, 0, n, axis=axis)
    if n > m:
        cfg = [(0, 0, 0)] * x.ndim
        cfg[axis] = (0, n - m, 0)
        return lax.pad(x, asarray(np.zeros((), x.dtype)), cfg)
    return x


def _one_axis(x, n, axis, name):
    """(axis normalized, length n) for a 1-d transform; n None -> the axis' length."""
    if x.ndim == 0:
        raise ValueError(f"{name}: axis {axis} is out of bounds for a 0-d array{where_am_i()}")
    ax = normalize_axis(axis, x.ndim)
    return ax, _length(x.shape[ax] if n is None else n, name)


def _axes_lengths(x, s, axes, name, default_axes=None):
    """numpy's rules for (s, axes): axes None -> the last len(s) axes (all, or default_axes,
    when s is None too); s None -> the axes' lengths. Returns (axes, lengths) as lists."""
    if axes is None:
        if s is not None:
            s = tuple(s)
            if len(s) > x.ndim:
                raise ValueError(f"{name}: s={s} has more entries than the input has dimensions "
                                 f"(shape {x.shape}){where_am_i()}")
            axes = tuple(range(x.ndim - len(s), x.ndim))
        else:
            axes = tuple(range(x.ndim)) if default_axes is None else default_axes
    axes = tuple(axes) if isinstance(axes, tuple | list) else (axes,)
    norm_axes = []
    for a in axes:
        if x.ndim == 0:
            raise ValueError(f"{name}: axis {a} is out of bounds for a 0-d array{where_am_i()}")
        norm_axes.append(normalize_axis(a, x.ndim))
    if len(set(norm_axes)) != len(norm_axes):
        raise ValueError(f"{name}: repeated axes are not supported, got axes={axes}"
                         f"{where_am_i()}")
    if s is None:
        s = [x.shape[a] for a in norm_axes]
    s = tuple(s)
    if len(s) != len(norm_axes):
        raise ValueError(f"{name}: s={s} and axes={axes} have different lengths"
                         f"{where_am_i()}")
    return norm_axes, [_length(v, name, "s entry") for v in s]


# ---------------------------------------------------------------- complex <-> complex

def _c2c(a, s, axes, norm, inverse, name, default_axes=None):
    _check_norm(norm, name)
    x = _complex_operand(a)
    axes, lengths = _axes_lengths(x, s, axes, name, default_axes)
    for ax, n in zip(axes, lengths, strict=True):
        x = _resize(x, ax, n)
    if x.size:
        for ax in axes:
            x = plan.complex_transform(x, ax, +1 if inverse else -1)
    return _scale(x, norm, math.prod(lengths), inverse)


def fft(a, n=None, axis=-1, norm=None):
    """The 1-d discrete Fourier transform along `axis` (numpy.fft.fft).

    a: any shape (real or complex); n: the transform length (a is zero-padded or truncated to
    it; default a.shape[axis]). Result: complex64 / complex128 (module docstring), a's shape
    with n along `axis`. Raises ValueError for n < 1, a bad axis or norm."""
    x = asarray(a)
    ax, n = _one_axis(x, n, axis, "fft")
    return _c2c(x, (n,), (ax,), norm, False, "fft")


def ifft(a, n=None, axis=-1, norm=None):
    """The inverse of fft along `axis` (numpy.fft.ifft): x[n] = (1/N) sum_k X[k] exp(2 pi i n k
    / N) under the default norm. Shapes, dtypes and errors as fft."""
    x = asarray(a)
    ax, n = _one_axis(x, n, axis, "ifft")
    return _c2c(x, (n,), (ax,), norm, True, "ifft")


def fftn(a, s=None, axes=None, norm=None):
    """The N-d discrete Fourier transform over `axes` (numpy.fft.fftn): default all axes, or
    the last len(s) when only s is given; s: the lengths (pad/truncate) per axis. Result:
    complex, a's shape with s along axes. Raises ValueError for s entries < 1, bad or repeated
    axes, len(s) != len(axes), a bad norm."""
    return _c2c(a, s, axes, norm, False, "fftn")


def ifftn(a, s=None, axes=None, norm=None):
    """The inverse of fftn (numpy.fft.ifftn); arguments, shapes and errors as fftn."""
    return _c2c(a, s, axes, norm, True, "ifftn")


def fft2(a, s=None, axes=(-2, -1), norm=None):
    """fftn over two axes, by default the last two (numpy.fft.fft2)."""
    return _c2c(a, s, axes, norm, False, "fft2")


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """ifftn over two axes, by default the last two (numpy.fft.ifft2)."""
    return _c2c(a, s, axes, norm, True, "ifft2")


# ---------------------------------------------------------------- real <-> half spectrum

def _r2c(a, s, axes, norm, name, default_axes=None):
    _check_norm(norm, name)
    x = _real_operand(a, name)
    axes, lengths = _axes_lengths(x, s, axes, name, default_axes)
    if not axes:
        raise ValueError(f"{name}: needs at least one axis, got axes={axes}{where_am_i()}")
    for ax, n in zip(axes, lengths, strict=True):
        x = _resize(x, ax, n)
    last = axes[-1]
    if x.size:
        x = plan.real_forward(x, last)
        for ax in axes[:-1]:
            x = plan.complex_transform(x, ax, -1)
    else:
        shape = list(x.shape)
        shape[last] = shape[last] // 2 + 1
        x = lax.full(tuple(shape), 0, dtypes.complex_dtype(x.dtype))
    return _scale(x, norm, math.prod(lengths), False)


def _c2r(a, s, axes, norm, name, default_axes=None):
    _check_norm(norm, name)
    x = _complex_operand(a)
    axes, lengths = _axes_lengths(x, s, axes, name, default_axes)
    if not axes:
        raise ValueError(f"{name}: needs at least one axis, got axes={axes}{where_am_i()}")
    if s is None:  # the half spectrum's m values along the last axis: n = 2 (m - 1)
        lengths[-1] = _length(2 * (x.shape[axes[-1]] - 1), name, "output length")
    last, n = axes[-1], lengths[-1]
    for ax, length in zip(axes[:-1], lengths[:-1], strict=True):
        x = _resize(x, ax, length)
    x = _resize(x, last, n // 2 + 1)
    part = dtypes.real_dtype(x.dtype)
    if x.size:
        for ax in axes[:-1]:
            x = plan.complex_transform(x, ax, +1)
        x = plan.real_inverse(x, last, n)
    else:
        shape = list(x.shape)
        shape[last] = n
        x = lax.full(tuple(shape), 0, part)
    return _scale(x, norm, math.prod(lengths), True)


def rfft(a, n=None, axis=-1, norm=None):
    """The 1-d transform of real input, its n // 2 + 1 non-negative frequencies
    (numpy.fft.rfft). a: real (float or integer) of any shape; n: the transform length.
    Result: complex64 / complex128, a's shape with n // 2 + 1 along `axis`. Raises TypeError
    for complex a, ValueError for n < 1, a bad axis or norm."""
    x = asarray(a)
    ax, n = _one_axis(x, n, axis, "rfft")
    return _r2c(x, (n,), (ax,), norm, "rfft")


def irfft(a, n=None, axis=-1, norm=None):
    """The inverse of rfft (numpy.fft.irfft): the real signal of length n (default
    2 (m - 1) for m values along `axis`) whose half spectrum is a (cropped or zero-padded to
    n // 2 + 1 first; the imaginary parts of the zero and Nyquist frequencies are ignored).
    Result: float32 / float64. Raises ValueError for n < 1 (also the default n = 0 of a
    length-1 a), a bad axis or norm."""
    x = asarray(a)
    if x.ndim == 0:
        raise ValueError(f"irfft: axis {axis} is out of bounds for a 0-d array{where_am_i()}")
    ax = normalize_axis(axis, x.ndim)
    n = _length(2 * (x.shape[ax] - 1) if n is None else n, "irfft")
    return _c2r(x, (n,), (ax,), norm, "irfft")


def rfftn(a, s=None, axes=None, norm=None):
    """rfft over the last of `axes`, then fft over the others (numpy.fft.rfftn). Result:
    complex, s along axes except s[-1] // 2 + 1 along the last. Errors as fftn, plus TypeError
    for complex input and ValueError for empty axes."""
    return _r2c(a, s, axes, norm, "rfftn")


def irfftn(a, s=None, axes=None, norm=None):
    """The inverse of rfftn (numpy.fft.irfftn): ifft over all but the last of `axes`, then
    irfft over the last, of output length s[-1] (default 2 (m - 1)). Result: real."""
    return _c2r(a, s, axes, norm, "irfftn")


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """rfftn over two axes, by default the last two (numpy.fft.rfft2)."""
    return _r2c(a, s, axes, norm, "rfft2")


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """irfftn over two axes, by default the last two (numpy.fft.irfft2)."""
    return _c2r(a, s, axes, norm, "irfft2")


def hfft(a, n=None, axis=-1, norm=None):
    """The transform of a Hermitian-symmetric signal given by its first half a (numpy.fft.hfft):
    irfft(conj(a), n) with the forward transform's scaling. Result: real, length n (default
    2 (m - 1)). Errors as irfft."""
    _check_norm(norm, "hfft")
    x = _complex_operand(a)
    if x.ndim == 0:
        raise ValueError(f"hfft: axis {axis} is out of bounds for a 0-d array{where_am_i()}")
    ax = normalize_axis(axis, x.ndim)
    n = _length(2 * (x.shape[ax] - 1) if n is None else n, "hfft")
    return _c2r(cx.conj(x), (n,), (ax,), _SWAP[norm], "hfft")


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of hfft (numpy.fft.ihfft): conj(rfft(a, n)) with the inverse's scaling.
    a: real; result: complex, n // 2 + 1 along `axis`. Errors as rfft."""
    _check_norm(norm, "ihfft")
    x = asarray(a)
    ax, n = _one_axis(x, n, axis, "ihfft")
    return cx.conj(_r2c(x, (n,), (ax,), _SWAP[norm], "ihfft"))


# ---------------------------------------------------------------- frequencies and shifts

def _freq_n(n, name):
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{name}: n must be an integer, got {type(n).__name__} {n!r}"
                        f"{where_am_i()}") from None
    if n < 0:
        raise ValueError(f"{name}: n must be >= 0, got {n}{where_am_i()}")
    return n


def _frequencies(k, n, d, dtype, name):
    dtype = dtypes.default_float if dtype is None else dtypes.canonicalize(dtype)
    if isinstance(d, int | float | np.number) and not isinstance(d, bool):
        with np.errstate(divide="ignore", invalid="ignore"):  # n = 0: rfftfreq is [nan]
            return asarray((k / (n * float(d))).astype(dtype))
    d = asarray(d)
    if d.ndim != 0:
        raise ValueError(f"{name}: d must be a scalar, got shape {d.shape}{where_am_i()}")
    inexact = dtype if dtypes.is_inexact(dtype) else dtypes.default_float
    return (asarray(k.astype(inexact)) / (d.astype(inexact) * n)).astype(dtype)


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an n-point fft (numpy.fft.fftfreq): [0, 1, ..., (n-1) // 2,
    -(n // 2), ..., -1] / (n d), in cycles per unit of d (the sample spacing). Shape (n,);
    dtype: `dtype` (default float32); n = 0 gives an empty array (and rfftfreq [nan], as
    jax.numpy). device is accepted and ignored (one device). Raises
    TypeError for a non-integer n, ValueError for n < 0 or a non-scalar d."""
    n = _freq_n(n, "fftfreq")
    k = np.concatenate([np.arange((n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return _frequencies(k, n, d, dtype, "fftfreq")


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an n-point rfft (numpy.fft.rfftfreq): [0, 1, ..., n // 2] /
    (n d). Shape (n // 2 + 1,); dtype and errors as fftfreq."""
    n = _freq_n(n, "rfftfreq")
    return _frequencies(np.arange(n // 2 + 1), n, d, dtype, "rfftfreq")


def _shift(x, axes, sign):
    from nova.numpy_impl.joining import roll

    x = asarray(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    axes = tuple(axes) if isinstance(axes, tuple | list) else (axes,)
    axes = tuple(normalize_axis(a, x.ndim) for a in axes)
    if not axes:
        return x
    return roll(x, tuple(sign * (x.shape[a] // 2) for a in axes), axes)


def fftshift(x, axes=None):
    """The zero frequency moved to the center (numpy.fft.fftshift): a roll by n // 2 along each
    of `axes` (default all). Shape and dtype: x's. Raises ValueError for a bad axis."""
    return _shift(x, axes, 1)


def ifftshift(x, axes=None):
    """The inverse of fftshift (numpy.fft.ifftshift): a roll by -(n // 2) along each axis."""
    return _shift(x, axes, -1)
