"""nova.nn.functional's convolution and pooling, in PyTorch's names and layouts."""

from __future__ import annotations

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.nn.functional_basic import _pair
from nova.numpy_impl.util import asarray, where_am_i
from nova.ops import lax


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Array:
    """2-d convolution (cross-correlation), as torch.nn.functional.conv2d: x (N, C, H, W) or
    (C, H, W), weight (O, C / groups, kH, kW), bias (O,) or None -> (N, O, H', W'). stride,
    padding (ints, pairs, or "same" / "valid") and dilation per spatial axis. Runs
    lax.conv_general_dilated (im2col + Nova's GEMM). Raises ValueError / ShapeError for
    mismatched shapes or bad settings."""
    x, w = asarray(x), asarray(weight)
    unbatched = x.ndim == 3
    if unbatched:
        x = jnp.expand_dims(x, 0)
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"conv2d: x must be (N, C, H, W) or (C, H, W) and weight (O, C/groups, "
                         f"kH, kW); got {x.shape} and {w.shape}{where_am_i()}")
    s = _pair("conv2d: stride", stride)
    d = _pair("conv2d: dilation", dilation)
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"conv2d: padding must be 'same', 'valid', an int or a pair, got "
                             f"{padding!r}{where_am_i()}")
        pad = padding.upper()
    else:
        pad = [(p, p) for p in _pair("conv2d: padding", padding, low=0)]
    y = lax.conv_general_dilated(x, w, s, pad, rhs_dilation=d, feature_group_count=groups)
    if bias is not None:
        b = asarray(bias)
        if b.shape != (w.shape[0],):
            raise ValueError(f"conv2d: bias of shape {b.shape} for {w.shape[0]} output "
                             f"channels{where_am_i()}")
        y = y + jnp.reshape(b, (1, -1, 1, 1))
    return y[0] if unbatched else y


def _pool2d(name, x, kernel_size, stride, padding, computation, init):
    x = asarray(x)
    if x.ndim not in (3, 4):
        raise ValueError(f"{name}: x must be (N, C, H, W) or (C, H, W), got {x.shape}"
                         f"{where_am_i()}")
    k = _pair(f"{name}: kernel_size", kernel_size)
    s = k if stride is None else _pair(f"{name}: stride", stride)
    p = _pair(f"{name}: padding", padding, low=0)
    if any(2 * pp > kk for pp, kk in zip(p, k, strict=True)):
        raise ValueError(f"{name}: padding {p} must be at most half the kernel {k}"
                         f"{where_am_i()}")
    lead = x.ndim - 2
    return lax.reduce_window(x, init, computation, (1,) * lead + k, (1,) * lead + s,
                             [(0, 0)] * lead + [(q, q) for q in p])


def max_pool2d(x, kernel_size, stride=None, padding=0) -> Array:
    """The maximum over each kH x kW window, as torch.nn.functional.max_pool2d: x (N, C, H, W)
    or (C, H, W); stride defaults to the kernel size; padding (at most half the kernel) counts
    as -inf. The gradient goes to each window's maximum (the first one among ties, as PyTorch).
    Raises ValueError for bad sizes."""
    x = asarray(x)
    return _pool2d("max_pool2d", x, kernel_size, stride, padding, lax.max,
                   -np.inf if dtypes.is_float(x.dtype) else np.iinfo(x.dtype).min)


def avg_pool2d(x, kernel_size, stride=None, padding=0, count_include_pad: bool = True) -> Array:
    """The mean over each kH x kW window, as torch.nn.functional.avg_pool2d (zero padding
    counted in the mean unless count_include_pad=False). Raises ValueError for bad sizes."""
    x = asarray(x)
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"avg_pool2d: x must be a float array, got {x.dtype}{where_am_i()}")
    k = _pair("avg_pool2d: kernel_size", kernel_size)
    total = _pool2d("avg_pool2d", x, kernel_size, stride, padding, lax.add, 0.0)
    if count_include_pad or _pair("avg_pool2d: padding", padding, low=0) == (0, 0):
        return total / float(k[0] * k[1])
    ones = jnp.ones((1, *x.shape[-2:]), x.dtype)
    count = _pool2d("avg_pool2d", ones, kernel_size, stride, padding, lax.add, 0.0)
    return total / count
