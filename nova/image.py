"""nova.image: resampling of arrays, jax.image's `resize` and `scale_and_translate`.

Every method but nearest-neighbour is separable: along each resized axis a weight matrix
W (input size, output size) is built by evaluating a kernel at the distance between each
output sample's position in input coordinates and each input sample, each column normalised to
sum to 1, and the image is contracted with W along that axis (one tensordot per axis). Pixels
are half-centred (pixel i covers [i, i + 1], centre i + 0.5). With antialiasing, a downsampling
axis (scale < 1) widens the kernel by 1 / scale, so that it low-pass filters as it interpolates
(the resampling filter of Wolberg, "Digital Image Warping", 1990, ch. 5). Output samples whose
position falls outside the input get 0.

When the scale and translation are known (always in `resize`), the weight matrices are built on
the host in float64 and enter the program as constants; when they are traced (e.g. under
`nova.grad` with respect to them) the same formulas run in nova.numpy, so the result is
differentiable in the image, the scale and the translation. Outside any transform the
contraction runs as one compiled program per shape.
"""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Sequence

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.core.trace import Tracer, current_trace
from nova.jit import jit
from nova.numpy_impl.util import asarray, normalize_axis, where_am_i

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """The resampling methods of `resize` and `scale_and_translate` (jax.image.ResizeMethod).

    NEAREST: nearest-neighbour (resize only). LINEAR: the triangle kernel (linear, bilinear,
    trilinear interpolation). LANCZOS3, LANCZOS5: the Lanczos kernel sinc(x) sinc(x / a) of
    radius a = 3, 5. CUBIC: Keys' cubic convolution kernel with a = -0.5 (Keys, "Cubic
    convolution interpolation for digital image processing", IEEE Trans. ASSP 29(6), 1981).
    CUBIC_PYTORCH: PyTorch's bicubic without antialiasing (Keys' kernel with a = -0.75 and the
    edge samples repeated past the border); CUBIC when antialias=True. AREA: each output sample
    is the average of the input it covers (a box filter when upsampling).
    """

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> ResizeMethod:
        """The method named `s`: "nearest"; "linear", "bilinear", "trilinear", "triangle";
        "cubic", "bicubic", "tricubic"; "lanczos3"; "lanczos5"; "cubic-pytorch",
        "bicubic-pytorch"; "area". Raises ValueError for another name."""
        try:
            return _METHOD_NAMES[s]
        except (KeyError, TypeError):
            raise ValueError(f"unknown resize method {s!r}; expected one of "
                             f"{sorted(_METHOD_NAMES)}") from None


_METHOD_NAMES = {
    "nearest": ResizeMethod.NEAREST,
    "linear": ResizeMethod.LINEAR, "bilinear": ResizeMethod.LINEAR,
    "trilinear": ResizeMethod.LINEAR, "triangle": ResizeMethod.LINEAR,
    "lanczos3": ResizeMethod.LANCZOS3, "lanczos5": ResizeMethod.LANCZOS5,
    "cubic": ResizeMethod.CUBIC, "bicubic": ResizeMethod.CUBIC, "tricubic": ResizeMethod.CUBIC,
    "cubic-pytorch": ResizeMethod.CUBIC_PYTORCH, "bicubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
    "area": ResizeMethod.AREA,
}

# A column of weights summing to less than this (the kernel misses every input sample) is
# set to zero instead of being normalised.
_MIN_COLUMN_SUM = 1000.0 * float(np.finfo(np.float32).eps)


# --- kernels: functions of (xp, x), x >= 0 the scaled distance, xp numpy or nova.numpy ---------

def _triangle(xp, x):
    return xp.maximum(1.0 - x, 0.0)


def _keys_cubic(a: float):
    """Keys' piecewise cubic with parameter a, support [0, 2)."""
    def kernel(xp, x):
        inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        outer = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        return xp.where(x < 1.0, inner, xp.where(x < 2.0, outer, 0.0))
    return kernel


def _lanczos(radius: float):
    """sinc(x) sinc(x / radius) on [0, radius], 0 past it; 1 near 0 (where 0 / 0 would be)."""
    def kernel(xp, x):
        safe = xp.maximum(x, 1e-3)  # keeps the unused branch (and its gradient) finite
        value = radius * xp.sin(math.pi * safe) * xp.sin(math.pi * safe / radius) \
            / (math.pi * math.pi * safe * safe)
        return xp.where(x > radius, 0.0, xp.where(x > 1e-3, value, 1.0))
    return kernel


# method -> (kernel, radius of its support); AREA has its own weights (_area_weights).
_KERNELS = {
    ResizeMethod.LINEAR: (_triangle, 1),
    ResizeMethod.LANCZOS3: (_lanczos(3.0), 3),
    ResizeMethod.LANCZOS5: (_lanczos(5.0), 5),
    ResizeMethod.CUBIC: (_keys_cubic(-0.5), 2),
    ResizeMethod.CUBIC_PYTORCH: (_keys_cubic(-0.75), 2),
}


def _area_weights(xp, inputs, out_size, scale, translation, dtype):
    """The length of the overlap of output sample j's footprint [(j - t) / s, (j + 1 - t) / s]
    with input sample i's [i, i + 1], as (input, output)."""
    left = (xp.arange(out_size, dtype=dtype) - translation) / scale
    right = left + 1.0 / scale
    return xp.maximum(xp.minimum(right[None, :], inputs[:, None] + 1.0)
                      - xp.maximum(left[None, :], inputs[:, None]), 0.0)


def _weight_matrix(xp, in_size: int, out_size: int, scale, translation, method: ResizeMethod,
                   antialias: bool, dtype):
    """The (in_size, out_size) resampling weights of one axis, computed with xp (numpy or
    nova.numpy) in float `dtype`: output sample j reads input i with weight W[i, j]."""
    if in_size == 0 or out_size == 0:
        return xp.zeros((in_size, out_size), dtype=dtype)
    # PyTorch's bicubic repeats the edge samples past the border (clamped taps) instead of
    # dropping the taps outside: weights on `pad` virtual samples each side fold onto the edges.
    edge = method == ResizeMethod.CUBIC_PYTORCH
    pad = _KERNELS[method][1] if edge else 0
    inputs = xp.arange(-pad, in_size + pad, dtype=dtype)
    # the position, in input coordinates (pixel centres at integers), of each output centre
    centre = (xp.arange(out_size, dtype=dtype) + 0.5 - translation) / scale - 0.5
    if method == ResizeMethod.AREA:
        w = _area_weights(xp, inputs, out_size, scale, translation, dtype)
    else:
        kernel = _KERNELS[method][0]
        width = xp.maximum(1.0 / scale, 1.0) if antialias else 1.0
        w = kernel(xp, xp.abs(centre[None, :] - inputs[:, None]) / width)
    if edge:
        fold = np.zeros((in_size, in_size + 2 * pad))
        fold[np.clip(np.arange(-pad, in_size + pad), 0, in_size - 1),
             np.arange(in_size + 2 * pad)] = 1.0
        w = xp.asarray(fold, dtype=dtype) @ w
    total = xp.sum(w, axis=0, keepdims=True)
    ok = xp.abs(total) > _MIN_COLUMN_SUM
    w = xp.where(ok, w / xp.where(ok, total, 1.0), 0.0)
    if not edge:
        inside = (centre >= -0.5) & (centre <= in_size - 0.5)
        w = xp.where(inside[None, :], w, 0.0)
    return w


def _contract(image, weights, axes):
    """image with each axis in `axes` contracted against its weight matrix (input, output)."""
    for w, d in zip(weights, axes, strict=True):
        image = jnp.moveaxis(jnp.tensordot(image, w, axes=[[d], [0]]), -1, d)
    return image


def _take_nearest(image, indices, axes):
    for idx, d in zip(indices, axes, strict=True):
        image = jnp.take(image, idx, axis=d)
    return image


_contract_compiled = jit(_contract, static_argnums=(2,))
_take_nearest_compiled = jit(_take_nearest, static_argnums=(2,))


def _staged(fn, compiled, *args):
    """fn(*args) inline inside a transform, else the compiled program (one per shape)."""
    return fn(*args) if current_trace() is not None else compiled(*args)


# --- argument checking ---------------------------------------------------------------------------

def _method(fn: str, method) -> ResizeMethod:
    if isinstance(method, ResizeMethod):
        return method
    if isinstance(method, str):
        if method not in _METHOD_NAMES:
            raise ValueError(f"{fn}: unknown method {method!r}; expected a ResizeMethod or one "
                             f"of {sorted(_METHOD_NAMES)}{where_am_i()}")
        return _METHOD_NAMES[method]
    raise TypeError(f"{fn}: method must be a ResizeMethod or a string, got "
                    f"{type(method).__name__} {method!r}{where_am_i()}")


def _image(fn: str, image) -> Array:
    x = asarray(image)
    if not (dtypes.is_float(x.dtype) or dtypes.is_int(x.dtype) or dtypes.is_bool(x.dtype)):
        raise TypeError(f"{fn}: image must be a real numeric array, got {x.dtype}{where_am_i()}")
    return x


def _inexact(x: Array) -> Array:
    return x if dtypes.is_float(x.dtype) else x.astype(dtypes.default_float)


def _shape(fn: str, shape, x: Array) -> tuple:
    try:
        out = tuple(operator.index(n) for n in shape)
    except TypeError:
        raise TypeError(f"{fn}: shape must be a sequence of ints, got {shape!r}"
                        f"{where_am_i()}") from None
    if len(out) != x.ndim:
        raise ValueError(f"{fn}: shape {out} must have one entry per dimension of the image "
                         f"of shape {tuple(x.shape)}{where_am_i()}")
    if any(n < 0 for n in out):
        raise ValueError(f"{fn}: shape {out} has a negative size{where_am_i()}")
    for d, (m, n) in enumerate(zip(x.shape, out, strict=True)):
        if m == 0 and n > 0:
            raise ValueError(f"{fn}: cannot resample axis {d} of size 0 (image of shape "
                             f"{tuple(x.shape)}) to size {n}{where_am_i()}")
    return out


def _per_axis(fn: str, name: str, v, k: int):
    """scale or translation as a (k,) array: a nova Array (maybe traced) or float64 NumPy."""
    if isinstance(v, Array) or (isinstance(v, list | tuple)
                                and any(isinstance(e, Array) for e in v)):
        a = asarray(v)
    else:
        a = np.asarray(v)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{fn}: {name} must be real numbers, got {a.dtype}{where_am_i()}")
    if tuple(a.shape) != (k,):
        raise ValueError(f"{fn}: {name} must have one entry per spatial dimension (shape "
                         f"({k},)), got shape {tuple(a.shape)}{where_am_i()}")
    if isinstance(a, Tracer):
        return a
    return np.asarray(a, np.float64)


# --- the public functions ------------------------------------------------------------------------

def _resample(x: Array, shape: tuple, axes: Sequence[int], scale, translation,
              method: ResizeMethod, antialias: bool) -> Array:
    """x (float) resampled along `axes` to `shape` (scale, translation: (len(axes),) arrays)."""
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    traced = isinstance(scale, Tracer) or isinstance(translation, Tracer)
    if traced:
        st = [_inexact(asarray(v)) for v in (scale, translation)]
        dt = dtypes.result_type(*st)
        scale, translation = (v.astype(dt) for v in st)
    weights = []
    for i, d in enumerate(axes):
        if traced:
            w = _weight_matrix(jnp, x.shape[d], shape[d], scale[i], translation[i], method,
                               antialias, dt)
        else:
            w = _weight_matrix(np, x.shape[d], shape[d], float(scale[i]),
                               float(translation[i]), method, antialias, np.float64)
        weights.append(w.astype(x.dtype))
    # Shrinking axes first keeps the intermediates small.
    order = sorted(range(len(axes)), key=lambda i: shape[axes[i]] / max(x.shape[axes[i]], 1))
    return _staged(_contract, _contract_compiled, x, tuple(weights[i] for i in order),
                   tuple(axes[i] for i in order))


def resize(image, shape: Sequence[int], method: str | ResizeMethod, antialias: bool = True,
           precision=None) -> Array:
    """`image` resampled to `shape`, as jax.image.resize.

    image: an array of any rank; shape: the output shape, one int per dimension (batch and
    channel axes are those left unchanged: every axis whose size changes is resampled, with
    scale = output size / input size). method: a `ResizeMethod` or its name: "nearest",
    "linear" / "bilinear" / "trilinear" / "triangle", "cubic" / "bicubic" / "tricubic",
    "lanczos3", "lanczos5", "cubic-pytorch" / "bicubic-pytorch", "area" (see ResizeMethod).
    antialias: when downsampling, widen the kernel to filter out what the output cannot
    represent (no effect when upsampling, nor for nearest and area). precision: accepted for
    compatibility with jax.image (Nova's matmul precision setting applies).

    Returns an array of `shape`: of image's dtype for nearest (which picks input sample
    floor((j + 0.5) * in / out), computed in float32 as JAX does), otherwise of image's dtype
    promoted to a float (integers and bools give float32). Differentiable in the image.
    Raises TypeError for a method that is neither a ResizeMethod nor a string, a non-int size
    or a non-numeric image; ValueError for an unknown method name, a shape of the wrong length
    or with a negative size, or an axis of size 0 resized to a non-zero size.
    """
    del precision
    fn = "resize"
    x = _image(fn, image)
    method = _method(fn, method)
    shape = _shape(fn, shape, x)
    axes = tuple(d for d in range(x.ndim) if x.shape[d] != shape[d])
    if method == ResizeMethod.NEAREST:
        indices = tuple(
            np.floor((np.arange(shape[d], dtype=np.float32) + np.float32(0.5))
                     * np.float32(x.shape[d]) / np.float32(shape[d])).astype(np.int32)
            for d in axes)
        return _staged(_take_nearest, _take_nearest_compiled, x, indices, axes)
    x = _inexact(x)
    if not axes:
        return x
    scale = np.array([shape[d] / x.shape[d] if shape[d] else 1.0 for d in axes])
    return _resample(x, shape, axes, scale, np.zeros(len(axes)), method, bool(antialias))


def scale_and_translate(image, shape: Sequence[int], spatial_dims: Sequence[int], scale,
                        translation, method: str | ResizeMethod, antialias: bool = True,
                        precision=None) -> Array:
    """`image` resampled to `shape` under the map x -> x * scale + translation of each spatial
    dimension, as jax.image.scale_and_translate.

    A point at input coordinate x (pixel i spans [i, i + 1]) lands at x * scale[k] +
    translation[k] along spatial_dims[k]; each output sample is computed from the input at the
    inverse image of its centre, and is 0 when that lies outside the input. For example
    PyTorch's align_corners=True interpolation of m samples to n is scale (n - 1) / (m - 1),
    translation 0.5 (1 - scale).

    image: an array; shape: the output shape (one int per dimension; dimensions outside
    spatial_dims keep their size). spatial_dims: K distinct axes. scale, translation: K
    numbers each (sequences or (K,) arrays, possibly traced: the result is differentiable in
    them and in the image). method: as `resize`, except "nearest", which is not supported.
    antialias: as `resize`. precision: accepted for compatibility (Nova's matmul precision
    setting applies). Returns an array of `shape` and image's dtype promoted to a float.

    Raises TypeError for a bad method type, non-numeric image, scale or translation;
    ValueError for the nearest method, an unknown method name, a shape of the wrong length,
    repeated or out-of-range spatial_dims, scale or translation of a length other than K, or a
    size change along a dimension outside spatial_dims.
    """
    del precision
    fn = "scale_and_translate"
    x = _image(fn, image)
    method = _method(fn, method)
    if method == ResizeMethod.NEAREST:
        raise ValueError(f"{fn}: the nearest method is not supported (use resize, or another "
                         f"method){where_am_i()}")
    shape = _shape(fn, shape, x)
    axes = tuple(normalize_axis(d, x.ndim, "spatial_dims") for d in spatial_dims)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{fn}: spatial_dims {tuple(spatial_dims)} repeat an axis of the "
                         f"image of shape {tuple(x.shape)}{where_am_i()}")
    for d in range(x.ndim):
        if d not in axes and shape[d] != x.shape[d]:
            raise ValueError(f"{fn}: axis {d} is not in spatial_dims {axes} but changes size, "
                             f"{x.shape[d]} -> {shape[d]}{where_am_i()}")
    scale = _per_axis(fn, "scale", scale, len(axes))
    translation = _per_axis(fn, "translation", translation, len(axes))
    x = _inexact(x)
    if not axes:
        return x
    return _resample(x, shape, axes, scale, translation, method, bool(antialias))
