"""Window functions by name for nova.scipy.signal (scipy.signal.get_window), computed on the host
in float64 (a window depends only on its static length) and handed to Nova as a constant.

Formulas (M points, n = 0..M-1; the symmetric window, used for filter design, is evaluated at M
points; the periodic one, for spectral analysis (fftbins=True, scipy's default), is the symmetric
window of M + 1 points without its last point):

- general cosine windows (hann, hamming, blackman, nuttall, blackmanharris, flattop):
  w[n] = sum_j (-1)^j a_j cos(2 pi j n / (M - 1)); coefficients from
  F. J. Harris, "On the use of windows for harmonic analysis with the discrete Fourier
  transform", Proc. IEEE 66(1), 1978 (nuttall: A. H. Nuttall, "Some windows with very good
  sidelobe behavior", IEEE Trans. ASSP 29(1), 1981; flattop: scipy's / Harris' 5-term values).
- bartlett: 1 - |2n / (M - 1) - 1|; triang: the triangle that stays nonzero at its ends;
  boxcar: ones; cosine: sin(pi (n + 1/2) / M); parzen, bohman: Harris (1978).
- tukey(alpha): a cosine taper over the first and last alpha (M - 1) / 2 points (Harris 1978).
- gaussian(std): exp(-(n - (M - 1) / 2)^2 / (2 std^2)); kaiser(beta): I0(beta sqrt(1 -
  (2n / (M - 1) - 1)^2)) / I0(beta) (J. F. Kaiser, "Nonrecursive digital filter design using
  the I0-sinh window function", Proc. IEEE ISCAS 1974).
"""

from __future__ import annotations

import operator

import numpy as np

from nova.core import dtypes
from nova.numpy_impl.util import asarray, where_am_i

__all__ = ["get_window"]

_COSINE = {
    "hann": (0.5, 0.5),
    "hamming": (0.54, 0.46),
    "blackman": (0.42, 0.5, 0.08),
    "nuttall": (0.3635819, 0.4891775, 0.1365995, 0.0106411),
    "blackmanharris": (0.35875, 0.48829, 0.14128, 0.01168),
    "flattop": (0.21557895, 0.41663158, 0.277263158, 0.083578947, 0.006947368),
}

# scipy's other spellings of the names
_ALIASES = {
    "han": "hann", "hamm": "hamming", "ham": "hamming", "black": "blackman",
    "blk": "blackman", "nutl": "nuttall", "nut": "nuttall", "blackharr": "blackmanharris",
    "bkh": "blackmanharris", "flat": "flattop", "flt": "flattop", "bart": "bartlett",
    "brt": "bartlett", "triangle": "triang", "tri": "triang", "box": "boxcar", "ones": "boxcar",
    "rect": "boxcar", "rectangular": "boxcar", "halfcosine": "cosine", "parz": "parzen",
    "par": "parzen", "bman": "bohman", "bmn": "bohman", "tuk": "tukey", "gauss": "gaussian",
    "gss": "gaussian", "ksr": "kaiser", "general hamming": "general_hamming",
}


def _general_cosine(m, coeffs):
    t = np.linspace(0.0, 2.0 * np.pi, m)
    return sum((-1) ** j * a * np.cos(j * t) for j, a in enumerate(coeffs))


def _triang(m):
    n = np.arange(1, (m + 1) // 2 + 1)
    if m % 2 == 0:
        half = (2 * n - 1.0) / m
        return np.concatenate([half, half[::-1]])
    half = 2 * n / (m + 1.0)
    return np.concatenate([half, half[-2::-1]])


def _parzen(m):
    n = np.arange(-(m - 1) / 2.0, (m - 1) / 2.0 + 0.5)
    a = np.abs(n) / (m / 2.0)
    inner = 1 - 6 * a**2 + 6 * a**3
    outer = 2 * (1 - a) ** 3
    return np.where(np.abs(n) <= (m - 1) / 4.0, inner, outer)


def _bohman(m):
    a = np.abs(np.linspace(-1, 1, m)[1:-1])
    w = (1 - a) * np.cos(np.pi * a) + np.sin(np.pi * a) / np.pi
    return np.concatenate([[0.0], w, [0.0]])


def _tukey(m, alpha=0.5):
    if alpha <= 0:
        return np.ones(m)
    if alpha >= 1:
        return _general_cosine(m, _COSINE["hann"])
    n = np.arange(m)
    width = alpha * (m - 1) / 2.0
    w = np.ones(m)
    lo, hi = n < width, n > (m - 1) - width
    w[lo] = 0.5 * (1 + np.cos(np.pi * (n[lo] / width - 1)))
    w[hi] = 0.5 * (1 + np.cos(np.pi * ((n[hi] - (m - 1)) / width + 1)))
    return w


def _symmetric(name, m, params):
    """The symmetric window `name` of m >= 2 points, float64."""
    if name in _COSINE:
        return _general_cosine(m, _COSINE[name])
    n = np.arange(m)
    if name == "general_hamming":
        return _general_cosine(m, (params[0], 1.0 - params[0]))
    if name == "boxcar":
        return np.ones(m)
    if name == "bartlett":
        return 1.0 - np.abs(2.0 * n / (m - 1) - 1.0)
    if name == "triang":
        return _triang(m)
    if name == "cosine":
        return np.sin(np.pi * (n + 0.5) / m)
    if name == "parzen":
        return _parzen(m)
    if name == "bohman":
        return _bohman(m)
    if name == "tukey":
        return _tukey(m, *params)
    if name == "gaussian":
        return np.exp(-((n - (m - 1) / 2.0) ** 2) / (2.0 * params[0] ** 2))
    beta = params[0]  # kaiser
    return np.i0(beta * np.sqrt(1 - (2.0 * n / (m - 1) - 1.0) ** 2)) / np.i0(beta)


# name -> (least, most) parameters after the name
_PARAMS = {"tukey": (0, 1), "gaussian": (1, 1), "kaiser": (1, 1), "general_hamming": (1, 1)}
_NAMES = (*_COSINE, "boxcar", "bartlett", "triang", "cosine", "parzen", "bohman", *_PARAMS)


def _parse(window):
    """(canonical name, parameter tuple) of a window spec: a name or (name, *params)."""
    if isinstance(window, tuple):
        if not window or not isinstance(window[0], str):
            raise ValueError(f"get_window: a window tuple must start with the window's name, "
                             f"got {window!r}{where_am_i()}")
        name, params = window[0], tuple(float(p) for p in window[1:])
    elif isinstance(window, str):
        name, params = window, ()
    else:
        raise TypeError(f"get_window: window must be a name or a (name, *parameters) tuple, "
                        f"got {type(window).__name__}{where_am_i()}")
    canon = _ALIASES.get(name.lower(), name.lower())
    if canon not in _NAMES:
        raise ValueError(f"get_window: unknown window {name!r}; known: "
                         f"{', '.join(sorted(_NAMES))}{where_am_i()}")
    least, most = _PARAMS.get(canon, (0, 0))
    if not least <= len(params) <= most:
        need = "no parameters" if most == 0 else f"{least} to {most} parameter(s)"
        raise ValueError(f"get_window: the {canon!r} window takes {need} (pass a tuple such as "
                         f"({canon!r}, value)), got {window!r}{where_am_i()}")
    return canon, params


def window_values(window, nx: int, fftbins: bool = True) -> np.ndarray:
    """get_window's values as a host float64 numpy array (for nova's spectral functions)."""
    name, params = _parse(window)
    if nx <= 1:
        return np.ones(nx)
    if fftbins:
        return _symmetric(name, nx + 1, params)[:-1]
    return _symmetric(name, nx, params)


def get_window(window, Nx, fftbins=True, *, dtype=None):
    """The window `window` of Nx points (scipy.signal.get_window).

    window: a name ("hann", "hamming", "blackman", "bartlett", "boxcar", "triang", "cosine",
    "nuttall", "blackmanharris", "flattop", "parzen", "bohman", "tukey", scipy's aliases such
    as "han" or "rect") or a tuple with the parameters: ("tukey", alpha=0.5),
    ("gaussian", std), ("kaiser", beta), ("general_hamming", alpha). fftbins=True (default):
    the periodic window, for spectral analysis; False: the symmetric one (as
    nova.numpy.hanning and friends). Formulas and sources: module docstring.
    Result: shape (Nx,), dtype `dtype` (default float32); Nx <= 1 gives ones.
    Raises TypeError for a non-integer Nx or a window that is neither a name nor a tuple,
    ValueError for a negative Nx, an unknown name, or missing / extra parameters.
    """
    try:
        nx = operator.index(Nx)
    except TypeError:
        raise TypeError(f"get_window: Nx must be an integer, got {type(Nx).__name__} {Nx!r}"
                        f"{where_am_i()}") from None
    if nx < 0:
        raise ValueError(f"get_window: Nx must be >= 0, got {nx}{where_am_i()}")
    dt = dtypes.default_float if dtype is None else dtypes.canonicalize(dtype)
    return asarray(window_values(window, nx, fftbins).astype(dt))
