"""The inverse short-time Fourier transform of nova.scipy.signal (scipy.signal.istft /
jax.scipy.signal.istft): windowed inverse transforms of the frames, overlap-added and divided by
the overlap-added squared window (D. W. Griffin and J. S. Lim, "Signal estimation from modified
short-time Fourier transform", IEEE Trans. ASSP 32(2), 1984), so istft(stft(x)) == x wherever
the window satisfies the nonzero-overlap-add (NOLA) condition."""

from __future__ import annotations

import warnings

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.numpy_impl.util import asarray, normalize_axis, where_am_i
from nova.scipy import signal_frames as fr
from nova.scipy.signal_spectral import _overlap_nfft, _per_fs, _positive, _static, _window

__all__ = ["istft"]


def _lengths(z, nperseg, nfft, input_onesided, freq_axis):
    """(nperseg, nfft) with scipy's defaults from the number of frequencies."""
    nfreq = z.shape[freq_axis]
    default = 2 * (nfreq - 1) if input_onesided else nfreq
    nperseg = default if nperseg is None else _positive(nperseg, "nperseg", "istft")
    if nperseg < 1:
        raise ValueError(f"istft: nperseg must be a positive integer, got {nperseg} (from "
                         f"{nfreq} frequencies){where_am_i()}")
    if nfft is None:  # an odd nperseg's one-sided spectrum has (nperseg + 1) / 2 frequencies
        nfft = nperseg if input_onesided and nperseg == default + 1 else default
    return nperseg, nfft


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          input_onesided=True, boundary=True, time_axis=-1, freq_axis=-2, scaling="spectrum"):
    """The signal whose short-time Fourier transform (stft with the same arguments) is Zxx.

    Zxx: at least 2-d, its frequencies along freq_axis and its frames along time_axis (real
    input is taken as complex); fs, window, noverlap, nfft as stft; nperseg default
    2 (nfreq - 1) for a one-sided Zxx (input_onesided=True, inverted with irfft), nfreq
    otherwise (ifft); boundary=True drops the nperseg // 2 samples stft's boundary extension
    added at each end; scaling "spectrum" (default) or "psd" as the stft that made Zxx.
    Returns (t, x): x real (complex for a two-sided Zxx) of Zxx's shape without the two axes,
    the samples appended at time_axis's place (time_axis, less one when freq_axis comes before
    it), length nperseg + (nseg - 1) (nperseg - noverlap) (less the boundary); t =
    arange(x.shape[0]) / fs, as scipy and jax (for an N-d x the length of its first axis).
    Where the overlap-added squared window is below 1e-10 the samples are not divided (a
    UserWarning for a named or host window, as scipy's NOLA check). Differentiable in Zxx.
    Raises ValueError for a Zxx of fewer than 2 dimensions, equal time and frequency axes,
    nperseg or nfft < 1, nfft < nperseg, noverlap outside [0, nperseg), a window that is not
    1-d or not of length nperseg, an unknown scaling, or a bad axis.
    """
    z = asarray(Zxx)
    if z.ndim < 2:
        raise ValueError(f"istft: Zxx must be at least 2-d, got shape {z.shape}{where_am_i()}")
    fa, ta = normalize_axis(freq_axis, z.ndim), normalize_axis(time_axis, z.ndim)
    if fa == ta:
        raise ValueError(f"istft: time_axis and freq_axis must differ, got {time_axis} and "
                         f"{freq_axis} for shape {z.shape}{where_am_i()}")
    wide = z.dtype in (dtypes.float64, dtypes.complex128)
    rdt, cdt = (dtypes.float64, dtypes.complex128) if wide else (dtypes.float32,
                                                                  dtypes.complex64)
    z = z.astype(cdt)
    nseg = z.shape[ta]
    nperseg, nfft = _lengths(z, nperseg, nfft, input_onesided, fa)
    noverlap, nfft = _overlap_nfft("istft", nperseg, noverlap, nfft)
    nstep = nperseg - noverlap
    if isinstance(window, str | tuple):
        host, win, _ = _window("istft", window, nperseg, None, rdt)
    else:
        host, win, _ = _window("istft", window, None, None, rdt)
        if win.shape[0] != nperseg:
            raise ValueError(f"istft: the window must have length nperseg = {nperseg}, got "
                             f"{win.shape[0]}{where_am_i()}")
    if scaling not in ("spectrum", "psd"):
        raise ValueError(f"istft: scaling must be 'spectrum' or 'psd', got {scaling!r}"
                         f"{where_am_i()}")
    z = jnp.moveaxis(z, (fa, ta), (-2, -1))  # (..., nfreq, nseg)
    inv = jnp.fft.irfft(z, n=nfft, axis=-2) if input_onesided else jnp.fft.ifft(z, n=nfft,
                                                                               axis=-2)
    segs = jnp.swapaxes(inv[..., :nperseg, :], -1, -2)  # (..., nseg, nperseg)
    if host is not None and _static(fs):
        factor = np.sum(host) if scaling == "spectrum" else np.sqrt(fs * np.sum(host**2))
        segs = segs * float(factor)
    elif scaling == "spectrum":
        segs = segs * jnp.sum(win)
    else:
        segs = segs * jnp.sqrt(asarray(fs).astype(rdt) * jnp.sum(win * win))
    x = fr.overlap_add(segs * win, nstep)
    if host is not None:
        norm = fr.overlap_add_host(np.broadcast_to(host * host, (nseg, nperseg)), nstep)
    else:
        norm = fr.overlap_add(jnp.broadcast_to(win * win, (nseg, nperseg)), nstep)
    if boundary:
        half = nperseg // 2
        x = x[..., half: x.shape[-1] - half]
        norm = norm[half: norm.shape[0] - half]
    if host is not None:
        if np.any(norm <= 1e-10):
            warnings.warn("istft: the NOLA condition fails (the overlap-added squared window "
                          "vanishes somewhere), the STFT may not be invertible", UserWarning,
                          stacklevel=2)
        x = x / asarray(np.where(norm > 1e-10, norm, 1.0).astype(rdt))
    else:
        x = x / jnp.where(norm > 1e-10, norm, 1.0)
    if x.ndim > 1 and ta != z.ndim - 1:
        x = jnp.moveaxis(x, -1, ta - 1 if fa < ta else ta)
    return _per_fs(np.arange(x.shape[0]), fs, rdt), x
