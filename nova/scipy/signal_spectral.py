"""Spectral analysis of nova.scipy.signal: stft, istft, csd, welch, spectrogram, coherence
(scipy.signal / jax.scipy.signal), written with nova.numpy.fft and Nova's movement ops, so jit,
vmap and grad apply.

Method: the signal (moved so that `axis` is last) is extended at both ends by nperseg // 2
samples (`boundary`, stft only), zero-padded at the end to a whole number of hops (`padded`),
cut into frames of nperseg samples every nperseg - noverlap, each frame detrended and
multiplied by the window, and transformed (rfft, or fft for two-sided spectra or complex
input) at length nfft. csd averages conj(X) Y over the frames (P. D. Welch, "The use of fast
Fourier transform for the estimation of power spectra: a method based on time averaging over
short, modified periodograms", IEEE Trans. Audio Electroacoustics 15(2), 1967); istft
overlap-adds the windowed inverse transforms and divides by the overlap-added squared window
(D. W. Griffin and J. S. Lim, "Signal estimation from modified short-time Fourier transform",
IEEE Trans. ASSP 32(2), 1984).

Scaling (scipy's): "density" multiplies by 1 / (fs sum(w^2)) (power per unit of frequency),
"spectrum" by 1 / (sum w)^2 (power); stft uses the square root of it. One-sided power spectra
double every bin but the zero frequency (and the Nyquist bin for even nfft).

dtypes: float64 / complex128 input computes in float64 / complex128; every other input
(float32, integers, bool) in float32 / complex64. Spectra are complex (stft, csd of two
signals) or real (welch, spectrogram's psd, coherence); freqs and times are real of that
precision. A window given by name is computed on the host (nova/scipy/signal_windows.py).
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.numpy_impl.util import asarray, normalize_axis, where_am_i
from nova.scipy import signal_frames as fr
from nova.scipy.signal_windows import window_values

__all__ = ["coherence", "csd", "spectrogram", "stft", "welch"]


def _precision(*arrays):
    """(real dtype, complex dtype) in which the spectra of `arrays` are computed."""
    wide = any(a.dtype in (dtypes.float64, dtypes.complex128) for a in arrays)
    return (dtypes.float64, dtypes.complex128) if wide else (dtypes.float32, dtypes.complex64)


def _positive(value, what, name):
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: {what} must be an integer, got {value!r}{where_am_i()}") from None
    if v < 1:
        raise ValueError(f"{name}: {what} must be a positive integer, got {v}{where_am_i()}")
    return v


def _window(name, window, nperseg, n_input, rdt):
    """(host window or None, the window as a Nova array of rdt, nperseg), following scipy: a
    named window defaults to nperseg = 256 and shrinks (with a warning) to the input length;
    an array window sets nperseg and must not be longer than the input."""
    if nperseg is not None:
        nperseg = _positive(nperseg, "nperseg", name)
    if isinstance(window, str | tuple):
        if nperseg is None:
            nperseg = 256
        if n_input is not None and nperseg > n_input:
            warnings.warn(f"{name}: nperseg = {nperseg} is greater than the input length = "
                          f"{n_input}, using nperseg = {n_input}", UserWarning, stacklevel=4)
            nperseg = n_input
        host = window_values(window, nperseg)
        return host, asarray(host.astype(rdt)), nperseg
    host = None if isinstance(window, Array) else np.asarray(window, np.float64)
    win = asarray(window).astype(rdt) if host is None else asarray(host.astype(rdt))
    if win.ndim != 1:
        raise ValueError(f"{name}: window must be 1-d, got shape {win.shape}{where_am_i()}")
    if n_input is not None and win.shape[0] > n_input:
        raise ValueError(f"{name}: the window (length {win.shape[0]}) is longer than the input "
                         f"signal (length {n_input}){where_am_i()}")
    if nperseg is not None and nperseg != win.shape[0]:
        raise ValueError(f"{name}: nperseg = {nperseg} differs from the window's length "
                         f"{win.shape[0]}{where_am_i()}")
    return host, win, win.shape[0]


def _overlap_nfft(name, nperseg, noverlap, nfft):
    if nfft is None:
        nfft = nperseg
    else:
        nfft = _positive(nfft, "nfft", name)
        if nfft < nperseg:
            raise ValueError(f"{name}: nfft = {nfft} must be >= nperseg = {nperseg}"
                             f"{where_am_i()}")
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    if not 0 <= noverlap < nperseg:
        raise ValueError(f"{name}: noverlap must be in [0, nperseg) = [0, {nperseg}), got "
                         f"{noverlap}{where_am_i()}")
    return noverlap, nfft


def _static(fs):
    return isinstance(fs, numbers.Real) and not isinstance(fs, bool)


def _per_fs(host_values, fs, rdt):
    """host_values / fs as a Nova array of rdt (fs a Python number or a 0-d Nova array)."""
    if _static(fs):
        return asarray((np.asarray(host_values, np.float64) / float(fs)).astype(rdt))
    return asarray(np.asarray(host_values).astype(rdt)) / asarray(fs).astype(rdt)


def _scale(host, win, fs, scaling, root, rdt, name):
    """The spectra's factor for `scaling` (its square root for stft, root=True)."""
    if scaling not in ("density", "spectrum"):
        raise ValueError(f"{name}: scaling must be 'density' or 'spectrum', got {scaling!r}"
                         f"{where_am_i()}")
    if host is not None and _static(fs):
        s = 1.0 / (float(fs) * np.sum(host * host)) if scaling == "density" else \
            1.0 / np.sum(host) ** 2
        return float(np.sqrt(s)) if root else float(s)
    if scaling == "density":
        s = 1.0 / (asarray(fs).astype(rdt) * jnp.sum(win * win))
    else:
        s = 1.0 / jnp.sum(win) ** 2
    return jnp.sqrt(s) if root else s


def _detrender(detrend, axis):
    if not detrend:
        return None
    if callable(detrend):
        if axis == -1:
            return detrend
        # scipy hands a callable the frames with the samples along the input's axis
        return lambda d: jnp.moveaxis(detrend(jnp.moveaxis(d, -1, axis)), axis, -1)
    from nova.scipy.signal import detrend as remove_trend

    return lambda d: remove_trend(d, axis=-1, type=detrend)


def _spectral(name, x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
              scaling, axis, mode, boundary, padded):
    """(freqs, times, spectra) with the frequencies along `axis` and the frames last: stft
    frames (mode "stft") or conj(X) Y products (mode "psd"; y None: x with itself)."""
    x = asarray(x)
    ys = [] if y is None else [asarray(y)]
    rdt, cdt = _precision(x, *ys)
    if x.ndim == 0:
        raise ValueError(f"{name}: x must be at least 1-d, got a 0-d array{where_am_i()}")
    ax = normalize_axis(axis, x.ndim)
    sigs = [jnp.moveaxis(s, normalize_axis(axis, s.ndim), -1) for s in [x, *ys]]
    if ys:
        try:
            lead = np.broadcast_shapes(sigs[0].shape[:-1], sigs[1].shape[:-1])
        except ValueError:
            raise ValueError(f"{name}: x (shape {x.shape}) and y (shape {ys[0].shape}) do not "
                             f"broadcast along the axes other than axis={axis}"
                             f"{where_am_i()}") from None
        length = max(s.shape[-1] for s in sigs)
        sigs = [jnp.pad(jnp.broadcast_to(s, (*lead, s.shape[-1])),
                        [(0, 0)] * len(lead) + [(0, length - s.shape[-1])]) for s in sigs]
    if sigs[0].size == 0:
        empty = jnp.zeros(x.shape, rdt)
        return empty, empty, empty
    cplx = any(dtypes.is_complex(s.dtype) for s in sigs)
    sigs = [s.astype(cdt if cplx else rdt) for s in sigs]
    n_input = sigs[0].shape[-1]
    host, win, nperseg = _window(name, window, nperseg, n_input, rdt)
    noverlap, nfft = _overlap_nfft(name, nperseg, noverlap, nfft)
    nstep = nperseg - noverlap
    onesided = bool(return_onesided)
    if onesided and cplx:
        warnings.warn(f"{name}: input is complex, returning a two-sided spectrum",
                      UserWarning, stacklevel=3)
        onesided = False
    scale = _scale(host, win, fs, scaling, mode == "stft", rdt, name)
    trend = _detrender(detrend, axis)
    specs = []
    for s in sigs:
        s = fr.extend(s, nperseg // 2, boundary, name)
        if padded:
            extra = (-(s.shape[-1] - nperseg) % nstep) % nperseg
            s = jnp.pad(s, [(0, 0)] * (s.ndim - 1) + [(0, extra)])
        length = s.shape[-1]
        segs = fr.frames(s, nperseg, nstep)
        if trend is not None:
            segs = trend(segs)
        segs = segs * win
        specs.append(jnp.fft.rfft(segs, n=nfft) if onesided else jnp.fft.fft(segs, n=nfft))
    if mode == "stft":
        out = specs[0] * scale
    elif ys:
        out = jnp.conj(specs[0]) * specs[1] * scale
    else:
        out = (jnp.real(specs[0]) ** 2 + jnp.imag(specs[0]) ** 2) * scale
    if onesided and mode == "psd":
        double = np.full(out.shape[-1], 2.0)
        double[0] = 1.0
        if nfft % 2 == 0:
            double[-1] = 1.0
        out = out * asarray(double.astype(rdt))
    cycles = np.fft.rfftfreq(nfft) if onesided else np.fft.fftfreq(nfft)  # per sample
    if _static(fs):
        freqs = asarray((cycles * float(fs)).astype(rdt))
    else:
        freqs = asarray(cycles.astype(rdt)) * asarray(fs).astype(rdt)
    centers = np.arange(nperseg / 2, length - nperseg / 2 + 1, nstep)
    if boundary is not None:
        centers = centers - nperseg / 2
    # the frequencies go to `axis` (counted from the end when negative, as scipy, so that
    # csd's broadcast leading axes stay in front); the frames stay last
    dest = int(axis) - 1 if int(axis) < 0 else ax
    return freqs, _per_fs(centers, fs, rdt), jnp.moveaxis(out, -1, dest)


def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1, scaling="spectrum"):
    """The short-time Fourier transform of x along `axis` (scipy.signal.stft /
    jax.scipy.signal.stft; method and scaling: module docstring).

    x: real or complex, the signal along `axis`; fs: the sampling frequency (a number or a 0-d
    array); window: a name or tuple (get_window, periodic) or a 1-d array of nperseg values;
    nperseg: samples per frame (a named window's nperseg larger than the signal shrinks to its
    length, with a UserWarning, as scipy); noverlap: default nperseg // 2; nfft: the transform
    length, default nperseg; detrend: False, "constant", "linear" or a callable applied to the
    frames; boundary: "zeros" (default), "even", "odd", "constant" or None (the signal is
    extended by nperseg // 2 at both ends); padded: zero-pad the end to whole frames; scaling:
    "spectrum" (default) or "psd" ("density").
    Returns (f, t, Zxx): f (nfreq,) in units of fs (nfft // 2 + 1 for a one-sided transform,
    nfft otherwise), t (nseg,) the frame centers in units of 1 / fs, Zxx complex of x's shape
    with `axis` replaced by nfreq and the frames appended last. Differentiable in x.
    Raises ValueError for nperseg, nfft < 1, nfft < nperseg, noverlap outside [0, nperseg),
    an unknown window, boundary or scaling, a window that is not 1-d, longer than x or not of
    length nperseg, or a 0-d x; TypeError for non-integer segment lengths.
    """
    scaling = {"psd": "density"}.get(scaling, scaling)
    return _spectral("stft", x, None, fs, window, nperseg, noverlap, nfft, detrend,
                     return_onesided, scaling, axis, "stft", boundary, padded)


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
        detrend="constant", return_onesided=True, scaling="density", axis=-1, average="mean"):
    """The cross power spectral density of x and y by Welch's method (scipy.signal.csd /
    jax.scipy.signal.csd): the frames' conj(X) Y, scaled, averaged over the frames.

    x, y: signals along `axis` (y None: x itself); the other axes broadcast and the shorter
    signal is zero-padded to the longer. nperseg default: 256 (shrunk to the signal's length)
    for a named window; detrend default "constant"; scaling "density" (V^2 / Hz) or
    "spectrum" (V^2); average "mean" or "median" (the median of the real and imaginary parts,
    divided by the median's bias for exponentially distributed periodograms,
    1 + sum_{k=1}^{(n-1)//2} (1 / (2k + 1) - 1 / (2k)) for n frames). Other arguments as stft
    (no boundary extension, no padding). Returns (f, Pxy): Pxy complex, x's shape with `axis`
    replaced by nfreq (one frame: that frame's product). Raises ValueError for an unknown
    average, or as stft.
    """
    return _average("csd", x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                    scaling, axis, average)


def _average(name, x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
             scaling, axis, average):
    if average not in ("mean", "median"):
        raise ValueError(f"{name}: average must be 'mean' or 'median', got {average!r}"
                         f"{where_am_i()}")
    freqs, _, pxy = _spectral(name, x, y, fs, window, nperseg, noverlap, nfft, detrend,
                              return_onesided, scaling, axis, "psd", None, False)
    if pxy.ndim < 2 or pxy.size == 0:
        return freqs, pxy
    nseg = pxy.shape[-1]
    if nseg == 1:
        return freqs, pxy[..., 0]
    if average == "mean":
        return freqs, jnp.mean(pxy, axis=-1)
    bias = 1.0 + sum(1.0 / (2 * k + 1) - 1.0 / (2 * k) for k in range(1, (nseg - 1) // 2 + 1))
    if dtypes.is_complex(pxy.dtype):
        med = jnp.median(jnp.real(pxy), axis=-1) + 1j * jnp.median(jnp.imag(pxy), axis=-1)
    else:
        med = jnp.median(pxy, axis=-1)
    return freqs, med / bias


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):
    """The power spectral density of x by Welch's method (scipy.signal.welch /
    jax.scipy.signal.welch): csd(x, x), real. Arguments and errors as csd. Returns (f, Pxx):
    Pxx real (float32 / float64), x's shape with `axis` replaced by nfreq."""
    return _average("welch", x, None, fs, window, nperseg, noverlap, nfft, detrend,
                    return_onesided, scaling, axis, average)


def spectrogram(x, fs=1.0, window=("tukey", 0.25), nperseg=None, noverlap=None, nfft=None,
                detrend="constant", return_onesided=True, scaling="density", axis=-1,
                mode="psd"):
    """The spectrogram of x: the per-frame spectra, not averaged (scipy.signal.spectrogram;
    jax.scipy.signal has none). noverlap default nperseg // 8; mode "psd" (real power per
    frame, as csd's frames), "complex" (the frames' transforms, as stft without boundary
    extension or padding, with `scaling`), "magnitude" (their absolute values), "angle" (their
    arguments) or "phase" (the arguments unwrapped along the frequencies). Returns (f, t, Sxx)
    shaped as stft's. Raises ValueError for an unknown mode, or as stft."""
    modes = ("psd", "complex", "magnitude", "angle", "phase")
    if mode not in modes:
        raise ValueError(f"spectrogram: mode must be one of {modes}, got {mode!r}"
                         f"{where_am_i()}")
    xa = asarray(x)
    if noverlap is None:
        n_input = xa.shape[normalize_axis(axis, xa.ndim)] if xa.ndim else None
        _, _, nperseg = _window("spectrogram", window, nperseg, n_input, dtypes.float32)
        noverlap = nperseg // 8
    kind = "psd" if mode == "psd" else "stft"
    freqs, times, sxx = _spectral("spectrogram", xa, None, fs, window, nperseg, noverlap, nfft,
                                  detrend, return_onesided, scaling, axis, kind, None, False)
    if mode == "magnitude":
        sxx = jnp.abs(sxx)
    elif mode in ("angle", "phase"):
        sxx = jnp.angle(sxx)
        if mode == "phase":
            sxx = jnp.unwrap(sxx, axis=normalize_axis(axis, xa.ndim) - xa.ndim - 1)
    return freqs, times, sxx


def coherence(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
              detrend="constant", axis=-1):
    """The magnitude-squared coherence of x and y, |Pxy|^2 / (Pxx Pyy) with Welch's estimates
    (scipy.signal.coherence; jax.scipy.signal has none): real, in [0, 1]. Arguments and errors
    as csd. Returns (f, Cxy)."""
    args = (fs, window, nperseg, noverlap, nfft, detrend, True, "density", axis, "mean")
    freqs, pxx = _average("coherence", x, None, *args)
    _, pyy = _average("coherence", y, None, *args)
    _, pxy = _average("coherence", x, y, *args)
    return freqs, (jnp.real(pxy) ** 2 + jnp.imag(pxy) ** 2) / pxx / pyy
