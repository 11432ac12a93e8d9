"""nova.nn.initializers: weight initializers with jax.nn.initializers' API.

A builder (`normal(0.02)`, `glorot_uniform()`, `orthogonal()`, ...) returns an initializer,
a function `init(key, shape, dtype=None) -> Array` of a nova.random key; `zeros` and `ones` are
initializers themselves. dtype None is the builder's dtype, float32 unless the builder was given
one. The numbers are nova.random's, which are jax.random's (bit for bit for uniform, to a few
ulps for normal and truncated_normal), so a key gives the weights jax.nn.initializers gives.
Complex dtypes are refused with TypeError (jax.nn.initializers' complex branches are not built).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import nova.numpy as jnp
from nova import random
from nova.core import dtypes
from nova.core.array import Array
from nova.numpy_impl.util import normalize_axis, where_am_i
from nova.random import _shape

__all__ = [
    "Initializer",
    "constant",
    "delta_orthogonal",
    "glorot_normal",
    "glorot_uniform",
    "he_normal",
    "he_uniform",
    "kaiming_normal",
    "kaiming_uniform",
    "lecun_normal",
    "lecun_uniform",
    "normal",
    "ones",
    "orthogonal",
    "truncated_normal",
    "uniform",
    "variance_scaling",
    "xavier_normal",
    "xavier_uniform",
    "zeros",
]

Axes = int | Sequence[int]


@runtime_checkable
class Initializer(Protocol):
    """The type of what the builders return: init(key, shape, dtype=None) -> Array."""

    def __call__(self, key: Array, shape: Sequence[int], dtype: Any = None) -> Array: ...


def _dtype(dtype) -> Any:
    return dtypes.default_float if dtype is None else dtypes.canonicalize(dtype)


def _float_dtype(fn: str, dtype) -> Any:
    d = _dtype(dtype)
    if not dtypes.is_float(d):
        raise TypeError(f"{fn}: dtype must be a floating-point dtype, got {d}{where_am_i()}")
    return d


def zeros(key: Array, shape: Sequence[int], dtype: Any = None) -> Array:
    """An array of zeros of `shape` and `dtype` (default float32); the key is not used."""
    return jnp.zeros(_shape("zeros", shape), _dtype(dtype))


def ones(key: Array, shape: Sequence[int], dtype: Any = None) -> Array:
    """An array of ones of `shape` and `dtype` (default float32); the key is not used."""
    return jnp.ones(_shape("ones", shape), _dtype(dtype))


def constant(value, dtype: Any = None) -> Initializer:
    """An initializer giving arrays full of `value` (a scalar, or an array broadcastable to the
    shape asked for), of the dtype given to it, else `dtype`, else float32."""
    def init(key: Array, shape: Sequence[int], dtype: Any = dtype) -> Array:
        return jnp.full(_shape("constant", shape), value, _dtype(dtype))

    return init


def uniform(scale=1e-2, dtype: Any = None) -> Initializer:
    """An initializer drawing uniformly from [0, scale), as jax.nn.initializers.uniform."""
    def init(key: Array, shape: Sequence[int], dtype: Any = dtype) -> Array:
        d = _float_dtype("uniform", dtype)
        return random.uniform(key, _shape("uniform", shape), d) * jnp.asarray(scale, d)

    return init


def normal(stddev=1e-2, dtype: Any = None) -> Initializer:
    """An initializer drawing from N(0, stddev^2)."""
    def init(key: Array, shape: Sequence[int], dtype: Any = dtype) -> Array:
        d = _float_dtype("normal", dtype)
        return random.normal(key, _shape("normal", shape), d) * jnp.asarray(stddev, d)

    return init


def truncated_normal(stddev=1e-2, dtype: Any = None, lower=-2.0, upper=2.0) -> Initializer:
    """An initializer drawing stddev * z, z a standard normal truncated to (lower, upper).

    stddev is that of the normal before truncation (no correction is applied, as in JAX; the
    variance_scaling initializers apply one).
    """
    def init(key: Array, shape: Sequence[int], dtype: Any = dtype) -> Array:
        d = _float_dtype("truncated_normal", dtype)
        z = random.truncated_normal(key, lower, upper, _shape("truncated_normal", shape), d)
        return z * jnp.asarray(stddev, d)

    return init


def _axes(fn: str, name: str, axes: Axes, ndim: int) -> tuple:
    items = (axes,) if isinstance(axes, int) else tuple(axes)
    return tuple(normalize_axis(a, ndim, f"{fn}: {name}") for a in items)


def _fans(fn: str, shape: tuple, in_axis: Axes, out_axis: Axes, batch_axis: Axes) -> tuple:
    """(fan_in, fan_out) of a weight of `shape`: the input (output) size times the receptive
    field, the product of the axes that are neither input, output nor batch axes (a
    convolution's spatial axes)."""
    if len(shape) < 2 and isinstance(in_axis, int) and in_axis == -2:
        raise ValueError(f"{fn}: a weight needs at least 2 dimensions to have input and output "
                         f"sizes with the default in_axis=-2, got shape {shape}{where_am_i()}")
    ins = _axes(fn, "in_axis", in_axis, len(shape))
    outs = _axes(fn, "out_axis", out_axis, len(shape))
    batch = _axes(fn, "batch_axis", batch_axis, len(shape))
    named = ins + outs + batch
    if len(set(named)) != len(named):
        raise ValueError(f"{fn}: in_axis {in_axis}, out_axis {out_axis} and batch_axis "
                         f"{batch_axis} must be distinct axes of shape {shape}{where_am_i()}")
    receptive = math.prod(d for i, d in enumerate(shape) if i not in named)
    return (math.prod(shape[i] for i in ins) * receptive,
            math.prod(shape[i] for i in outs) * receptive)


_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")

# The standard deviation of a standard normal truncated to (-2, 2): sqrt(1 - 2 b phi(b) / Z)
# with b = 2, phi the normal density and Z = erf(b / sqrt 2) the mass kept (Johnson, Kotz,
# Balakrishnan, "Continuous univariate distributions" vol. 1, eq. 13.134). ~0.8796.
_TRUNCATED_STD = math.sqrt(
    1.0 - 2.0 * 2.0 * math.exp(-2.0) / math.sqrt(2.0 * math.pi) / math.erf(math.sqrt(2.0)))


def variance_scaling(scale, mode: str, distribution: str, in_axis: Axes = -2,
                     out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None
                     ) -> Initializer:
    """An initializer of variance scale / n, n set by `mode` from the weight's fans
    (He et al., "Delving deep into rectifiers", ICCV 2015, sec. 2.2; Glorot & Bengio, AISTATS
    2010, eq. 12): "fan_in", "fan_out", "fan_avg" ((in + out) / 2) or "fan_geo_avg"
    (sqrt(in * out)).

    fan_in = size of in_axis (product if several) x receptive field, fan_out likewise with
    out_axis; the receptive field is the product of the axes that are not in, out or batch axes.
    distribution: "truncated_normal" (a normal truncated at 2 standard deviations, rescaled so
    the result has the variance), "normal", or "uniform" (on [-sqrt(3 v), sqrt(3 v))). A weight
    of size 0 gives an empty array.

    Raises ValueError (when built) for an unknown mode or distribution or a negative scale;
    (when called) ValueError for a shape of fewer than 2 dimensions with the default in_axis,
    axes out of range or overlapping; TypeError for a non-float dtype.
    """
    if mode not in _MODES:
        raise ValueError(f"variance_scaling: mode must be one of {_MODES}, got {mode!r}"
                         f"{where_am_i()}")
    if distribution not in _DISTRIBUTIONS:
        raise ValueError(f"variance_scaling: distribution must be one of {_DISTRIBUTIONS}, got "
                         f"{distribution!r}{where_am_i()}")
    if not float(scale) >= 0.0:
        raise ValueError(f"variance_scaling: scale must be >= 0, got {scale}{where_am_i()}")

    def init(key: Array, shape: Sequence[int], dtype: Any = dtype) -> Array:
        fn = "variance_scaling"
        shape = _shape(fn, shape)
        d = _float_dtype(fn, dtype)
        fan_in, fan_out = _fans(fn, shape, in_axis, out_axis, batch_axis)
        if math.prod(shape) == 0:
            return jnp.zeros(shape, d)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
             "fan_geo_avg": math.sqrt(fan_in * fan_out)}[mode]
        std = math.sqrt(float(scale) / n)
        if distribution == "truncated_normal":
            z = random.truncated_normal(key, -2.0, 2.0, shape, d)
            return z * jnp.asarray(std / _TRUNCATED_STD, d)
        if distribution == "normal":
            return random.normal(key, shape, d) * jnp.asarray(std, d)
        return random.uniform(key, shape, d, -1.0, 1.0) * jnp.asarray(math.sqrt(3.0) * std, d)

    return init


def glorot_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                   dtype: Any = None) -> Initializer:
    """Glorot (Xavier) uniform (Glorot & Bengio, AISTATS 2010, eq. 16):
    variance_scaling(1.0, "fan_avg", "uniform")."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                  dtype: Any = None) -> Initializer:
    """Glorot (Xavier) normal: variance_scaling(1.0, "fan_avg", "truncated_normal")."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def lecun_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                  dtype: Any = None) -> Initializer:
    """LeCun uniform (LeCun et al., "Efficient BackProp", 1998, sec. 4.6):
    variance_scaling(1.0, "fan_in", "uniform")."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                 dtype: Any = None) -> Initializer:
    """LeCun normal: variance_scaling(1.0, "fan_in", "truncated_normal") (the initializer
    SELU networks assume, Klambauer et al., NeurIPS 2017)."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def he_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
               dtype: Any = None) -> Initializer:
    """He (Kaiming) uniform (He et al., ICCV 2015, eq. 10):
    variance_scaling(2.0, "fan_in", "uniform")."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
              dtype: Any = None) -> Initializer:
    """He (Kaiming) normal: variance_scaling(2.0, "fan_in", "truncated_normal")."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal


def _orthogonal_matrix(key: Array, rows: int, cols: int, dtype) -> Array:
    """A (rows, cols) matrix with orthonormal columns (rows >= cols) or rows, uniform (Haar)
    over such matrices: Q of a Gaussian matrix's QR with R's diagonal made positive (Mezzadri,
    "How to generate random matrices from the classical compact groups", Notices AMS 2007,
    sec. 5)."""
    tall = rows >= cols
    z = random.normal(key, (max(rows, cols), min(rows, cols)), dtype)
    q, r = jnp.linalg.qr(z)
    q = (q * jnp.sign(jnp.diagonal(r))[None, :]).astype(dtype)
    return q if tall else q.T


def orthogonal(scale=1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """An initializer of scale x a uniformly random orthogonal matrix (Saxe, McClelland,
    Ganguli, arXiv 1312.6120), as jax.nn.initializers.orthogonal.

    The weight, seen as a matrix of prod(shape) / shape[column_axis] rows by
    shape[column_axis] columns, has orthonormal columns when it has at least as many rows, else
    orthonormal rows (times scale). A shape with a 0 gives zeros. Raises ValueError for fewer
    than 2 dimensions or a column_axis out of range, TypeError for a non-float dtype.
    """
    def init(key: Array, shape: Sequence[int], dtype: Any = dtype) -> Array:
        shape = _shape("orthogonal", shape)
        d = _float_dtype("orthogonal", dtype)
        if len(shape) < 2:
            raise ValueError(f"orthogonal: the shape must have at least 2 dimensions, got "
                             f"{shape}{where_am_i()}")
        col = normalize_axis(column_axis, len(shape), "orthogonal: column_axis")
        if math.prod(shape) == 0:
            return jnp.zeros(shape, d)
        cols = shape[col]
        q = _orthogonal_matrix(key, math.prod(shape) // cols, cols, d)
        rest = shape[:col] + shape[col + 1:]
        q = jnp.moveaxis(jnp.reshape(q, (*rest, cols)), -1, col)
        return q * jnp.asarray(scale, d)

    return init


def delta_orthogonal(scale=1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """An initializer of convolution kernels that are an orthogonal matrix at the spatial
    centre and 0 elsewhere (Xiao et al., "Dynamical isometry and a mean field theory of CNNs",
    ICML 2018, algorithm 2).

    shape: (k, in, out), (k1, k2, in, out) or (k1, k2, k3, in, out) with in <= out; the centre
    is index (k - 1) // 2 of each spatial axis and holds orthogonal(scale, column_axis) of
    shape (in, out). Raises ValueError for another number of dimensions or in > out.
    """
    def init(key: Array, shape: Sequence[int], dtype: Any = dtype) -> Array:
        shape = _shape("delta_orthogonal", shape)
        d = _float_dtype("delta_orthogonal", dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"delta_orthogonal: the shape must have 3, 4 or 5 dimensions, "
                             f"got {shape}{where_am_i()}")
        if shape[-2] > shape[-1]:
            raise ValueError(f"delta_orthogonal: the input size shape[-2] = {shape[-2]} must "
                             f"not exceed the output size shape[-1] = {shape[-1]}"
                             f"{where_am_i()}")
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        w = orthogonal(scale, column_axis, d)(key, shape[-2:])
        return jnp.zeros(shape, d).at[centre].set(w)

    return init
