"""1-d convolution and correlation of nova.numpy (numpy.convolve, numpy.correlate), over
lax.conv_general_dilated: generated GEMM kernels, differentiable in both operands."""

from __future__ import annotations

from nova.core import dtypes
from nova.numpy_impl.util import asarray, where_am_i

__all__ = ["convolve", "correlate"]


def _operands(name, a, v):
    a, v = asarray(a), asarray(v)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"{name}: a and v must be 1-d, got shapes {a.shape} and {v.shape}"
                         f"{where_am_i()}")
    if a.size == 0 or v.size == 0:
        raise ValueError(f"{name}: a and v cannot be empty (shapes {a.shape}, {v.shape})"
                         f"{where_am_i()}")
    dt = dtypes.result_type(a, v)
    if not dtypes.is_inexact(dt):
        dt = dtypes.default_float if not dtypes.is_int(dt) else dt
    return a.astype(dt), v.astype(dt)


def _full_conv(a, v, mode: str, name: str):
    """numpy.convolve(a, v, mode) for 1-d float a, v."""
    from nova.ops import lax

    if mode not in ("full", "same", "valid"):
        raise ValueError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}"
                         f"{where_am_i()}")
    if v.shape[0] > a.shape[0]:
        a, v = v, a  # convolution commutes; NumPy swaps so that v is the shorter
    n, m = a.shape[0], v.shape[0]
    if mode == "full":
        pads = [(m - 1, m - 1)]
    elif mode == "same":
        pads = [(m // 2, m - 1 - m // 2)]
    else:
        pads = [(0, 0)]
    flipped = lax.rev(v, (0,))
    if dtypes.is_complex(a.dtype):
        # The convolution primitive is real: (ar + i ai) * (wr + i wi) by its four real parts.
        def conv(x, w):
            return _conv1(x, w, n, m, pads)

        ar, ai, wr, wi = lax.real(a), lax.imag(a), lax.real(flipped), lax.imag(flipped)
        return lax.complex(lax.sub(conv(ar, wr), conv(ai, wi)),
                           lax.add(conv(ar, wi), conv(ai, wr)))
    is_float = dtypes.is_float(a.dtype)
    x = a if is_float else a.astype(dtypes.float64)
    w = flipped if is_float else flipped.astype(dtypes.float64)
    y = _conv1(x, w, n, m, pads)
    return y if is_float else y.astype(a.dtype)


def _conv1(x, w, n, m, pads):
    from nova.ops import lax

    y = lax.conv_general_dilated(lax.reshape(x, (1, 1, n)), lax.reshape(w, (1, 1, m)), (1,),
                                 pads)
    return lax.reshape(y, (y.shape[-1],))


def convolve(a, v, mode: str = "full"):
    """The discrete linear convolution of 1-d a and v, as numpy.convolve: mode "full" (length
    n + m - 1), "same" (length max(n, m), centered as NumPy) or "valid" (length
    max(n, m) - min(n, m) + 1). Integer inputs give integer results (computed in float64);
    complex inputs give the complex convolution (four real ones). Raises ValueError for inputs that are not 1-d or are empty, or an unknown mode."""
    a, v = _operands("convolve", a, v)
    return _full_conv(a, v, mode, "convolve")


def correlate(a, v, mode: str = "valid"):
    """The cross-correlation of 1-d a and v, as numpy.correlate:
    c[k] = sum_n a[n + k] conj(v[n]) (a complex v is conjugated, as NumPy and jnp), i.e.
    convolve(a, conj(v)[::-1], mode) (when v is the longer, NumPy's correlation of v with a,
    reversed); mode "valid" by default. Dtypes as convolve's. Raises as convolve."""
    from nova.ops import lax

    a, v = _operands("correlate", a, v)
    if dtypes.is_complex(v.dtype):
        v = lax.conj(v)
    if v.shape[0] > a.shape[0]:  # as NumPy: the correlation of v with a, reversed
        return lax.rev(_full_conv(v, lax.rev(a, (0,)), mode, "correlate"), (0,))
    return _full_conv(a, lax.rev(v, (0,)), mode, "correlate")
