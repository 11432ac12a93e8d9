"""More layers in PyTorch's semantics: normalizations (RMSNorm, GroupNorm, BatchNorm), Conv1d,
Bilinear, PReLU, MultiheadAttention, and the containers Sequential, Identity and Lambda, with
their functions (rms_norm, group_norm, batch_norm, conv1d, bilinear, prelu).

The conventions are nova/nn/layers.py's: each layer is a `Module` (a frozen dataclass pytree)
made by a class-method `init(...)` (taking a nova.random key first when it draws random
weights), hyperparameters are static fields, and randomness at call time is explicit (``key=``
and ``train=``; MultiheadAttention names it ``dropout_key=``, since its second argument is the
attention key). Channels are on axis 1 (N, C, ...), as PyTorch's and Conv2d's. Weights have
PyTorch's layouts and, where PyTorch nests them, its names, so PyTorch state dicts load with
`load_state_dict`.

Running statistics are not mutated: a module is immutable, so `BatchNorm` keeps them in a
separate `BatchNormState` pytree that is passed in and returned, as Equinox and Flax do::

    bn = BatchNorm.init(16)
    state = bn.initial_state()
    y, state = bn(x, state, train=True)   # batch statistics; state updated
    y, _ = bn(x, state)                   # evaluation: the running statistics

In a training step, return the new state as auxiliary output:
``(loss, state), grads = nova.value_and_grad(loss_fn, has_aux=True)(model, state, x)``. The
statistics carry no gradient.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.nn import functional as F
from nova.nn import initializers
from nova.nn.layers import _size, check_key, split_keys
from nova.nn.module import Module, static_field
from nova.numpy_impl.util import asarray, where_am_i
from nova.ops import lax

__all__ = [
    "BatchNorm",
    "BatchNormState",
    "Bilinear",
    "Conv1d",
    "GroupNorm",
    "Identity",
    "Lambda",
    "MultiheadAttention",
    "PReLU",
    "RMSNorm",
    "Sequential",
    "batch_norm",
    "bilinear",
    "conv1d",
    "group_norm",
    "prelu",
    "rms_norm",
]


def _float(fn: str, name: str, x) -> Array:
    a = asarray(x)
    if not dtypes.is_float(a.dtype):
        raise TypeError(f"{fn}: {name} must be a floating-point array, got {a.dtype}"
                        f"{where_am_i()}")
    return a


def _vector(fn: str, name: str, v, n: int, x: Array):
    """An optional per-feature parameter of shape (n,) (None stays None); ValueError else."""
    if v is None:
        return None
    v = asarray(v)
    if tuple(v.shape) != (n,):
        raise ValueError(f"{fn}: {name} must have shape ({n},) for x of shape {tuple(x.shape)}, "
                         f"got {tuple(v.shape)}{where_am_i()}")
    return v


def _eps(fn: str, eps) -> float:
    if not float(eps) >= 0.0:
        raise ValueError(f"{fn}: eps must be >= 0, got {eps}{where_am_i()}")
    return float(eps)


def _channels(v: Array, ndim: int) -> Array:
    """A (C,) vector shaped (C, 1, ..., 1) to broadcast against (N, C, spatial...)."""
    return jnp.reshape(v, (v.shape[0],) + (1,) * (ndim - 2))


def _uniform(key, shape, bound: float, dtype) -> Array:
    import nova.random as nr

    return nr.uniform(key, shape, dtypes.canonicalize(dtype), -bound, bound)


# --- functions -----------------------------------------------------------------------------------

def rms_norm(x, weight=None, eps: float | None = None) -> Array:
    """Root-mean-square normalization over the last axis (Zhang & Sennrich, "Root mean square
    layer normalization", NeurIPS 2019, eq. 4), as torch.nn.functional.rms_norm over the last
    dimension: x / sqrt(mean(x^2) + eps) * weight.

    x: float (..., D); weight: (D,) or None; eps: >= 0, default the machine epsilon of x's
    dtype (PyTorch's default). Returns x's shape and dtype. Raises TypeError for non-float x,
    ValueError for a weight not of shape (D,) or eps < 0.
    """
    fn = "rms_norm"
    x = _float(fn, "x", x)
    if x.ndim == 0:
        raise ValueError(f"rms_norm: x must have at least one dimension{where_am_i()}")
    weight = _vector(fn, "weight", weight, x.shape[-1], x)
    eps = float(dtypes.finfo(x.dtype).eps) if eps is None else _eps(fn, eps)
    y = x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if weight is None else y * weight


def group_norm(x, num_groups: int, weight=None, bias=None, eps: float = 1e-5) -> Array:
    """Group normalization (Wu & He, "Group normalization", ECCV 2018, eq. 1 with the groups of
    sec. 3.1), as torch.nn.functional.group_norm: the C channels of each sample split into
    num_groups groups, each normalized by its mean and biased variance over its channels and
    spatial positions, then scaled and shifted per channel.

    x: float (N, C, *); weight, bias: (C,) or None. Returns x's shape and dtype. Raises
    TypeError for non-float x, ValueError for x of fewer than 2 dimensions, num_groups < 1 or
    not dividing C, a parameter not of shape (C,), or eps < 0.
    """
    fn = "group_norm"
    x = _float(fn, "x", x)
    if x.ndim < 2:
        raise ValueError(f"group_norm: x must be (N, C, ...), got shape {tuple(x.shape)}"
                         f"{where_am_i()}")
    n, c = x.shape[0], x.shape[1]
    g = _size(fn, "num_groups", num_groups)
    if g < 1 or c % g:
        raise ValueError(f"group_norm: num_groups={num_groups} must be >= 1 and divide the "
                         f"{c} channels of x of shape {tuple(x.shape)}{where_am_i()}")
    weight = _vector(fn, "weight", weight, c, x)
    bias = _vector(fn, "bias", bias, c, x)
    eps = _eps(fn, eps)
    xg = jnp.reshape(x, (n, g, -1))
    xc = xg - jnp.mean(xg, axis=-1, keepdims=True)
    var = jnp.mean(xc * xc, axis=-1, keepdims=True)
    y = jnp.reshape(xc * lax.rsqrt(var + eps), x.shape)
    if weight is not None:
        y = y * _channels(weight, x.ndim)
    if bias is not None:
        y = y + _channels(bias, x.ndim)
    return y


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum=0.1, eps: float = 1e-5):
    """Batch normalization over axis 1 (Ioffe & Szegedy, ICML 2015, Algorithm 1), as
    torch.nn.functional.batch_norm, returning the updated running statistics instead of
    writing them: ``(y, new_running_mean, new_running_var)``.

    x: float (N, C, *). training=True normalizes by each channel's mean and biased variance
    over the batch and spatial axes and, when running statistics are given, returns them
    updated as (1 - momentum) * running + momentum * batch statistic (the variance unbiased,
    times m / (m - 1) for m values per channel), without gradient. training=False normalizes by
    running_mean and running_var (required then) and returns them unchanged. running_mean,
    running_var, weight, bias: (C,) or None; momentum: a number or scalar array in [0, 1].
    Returns y of x's shape and dtype, and the statistics (None when not given).

    Raises TypeError for non-float x; ValueError for x of fewer than 2 dimensions, parameters
    not of shape (C,), missing running statistics when not training, eps < 0, or training with
    one value per channel (its variance is undefined).
    """
    fn = "batch_norm"
    x = _float(fn, "x", x)
    if x.ndim < 2:
        raise ValueError(f"batch_norm: x must be (N, C, ...), got shape {tuple(x.shape)}"
                         f"{where_am_i()}")
    c = x.shape[1]
    running_mean = _vector(fn, "running_mean", running_mean, c, x)
    running_var = _vector(fn, "running_var", running_var, c, x)
    weight = _vector(fn, "weight", weight, c, x)
    bias = _vector(fn, "bias", bias, c, x)
    eps = _eps(fn, eps)
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"batch_norm: give both running_mean and running_var or neither"
                         f"{where_am_i()}")
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        m = x.size // c
        if m <= 1:
            raise ValueError(f"batch_norm: training needs more than one value per channel, "
                             f"got x of shape {tuple(x.shape)}{where_am_i()}")
        mean = jnp.mean(x, axis=axes)
        xc = x - _channels(mean, x.ndim)
        var = jnp.mean(xc * xc, axis=axes)
        if running_mean is not None:
            batch_mean = lax.stop_gradient(mean).astype(running_mean.dtype)
            batch_var = lax.stop_gradient(var * (m / (m - 1))).astype(running_var.dtype)
            running_mean = (1 - momentum) * running_mean + momentum * batch_mean
            running_var = (1 - momentum) * running_var + momentum * batch_var
    else:
        if running_mean is None:
            raise ValueError(f"batch_norm: training=False normalizes by the running "
                             f"statistics: give running_mean and running_var{where_am_i()}")
        mean, var = running_mean.astype(x.dtype), running_var.astype(x.dtype)
        xc = x - _channels(mean, x.ndim)
    y = xc * _channels(lax.rsqrt(var + eps), x.ndim)
    if weight is not None:
        y = y * _channels(weight, x.ndim)
    if bias is not None:
        y = y + _channels(bias, x.ndim)
    return y, running_mean, running_var


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Array:
    """1-d convolution (cross-correlation), as torch.nn.functional.conv1d: x (N, C, L) or
    (C, L), weight (O, C / groups, K), bias (O,) or None -> (N, O, L') with L' = floor((L + 2
    padding - dilation (K - 1) - 1) / stride) + 1. padding: an int or "same" / "valid" ("same"
    needs stride 1, as PyTorch). Runs lax.conv_general_dilated. Raises ValueError for
    mismatched shapes or bad settings, TypeError for non-float operands."""
    x, w = asarray(x), asarray(weight)
    unbatched = x.ndim == 2
    if unbatched:
        x = jnp.expand_dims(x, 0)
    if x.ndim != 3 or w.ndim != 3:
        raise ValueError(f"conv1d: x must be (N, C, L) or (C, L) and weight (O, C/groups, K); "
                         f"got {tuple(asarray(x).shape)} and "
                         f"{tuple(w.shape)}{where_am_i()}")
    (s,) = F._pair("conv1d: stride", stride, n=1)
    (d,) = F._pair("conv1d: dilation", dilation, n=1)
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"conv1d: padding must be 'same', 'valid' or an int, got "
                             f"{padding!r}{where_am_i()}")
        if padding == "same" and s != 1:
            raise ValueError(f"conv1d: padding='same' needs stride 1, got stride {s}"
                             f"{where_am_i()}")
        pad = padding.upper()
    else:
        (p,) = F._pair("conv1d: padding", padding, n=1, low=0)
        pad = [(p, p)]
    if groups < 1 or x.shape[1] % groups or w.shape[0] % groups \
            or x.shape[1] // groups != w.shape[1]:
        raise ValueError(f"conv1d: x has {x.shape[1]} channels and weight {tuple(w.shape)}; "
                         f"with groups={groups} weight must be (O, {x.shape[1]} / groups, K) "
                         f"with O divisible by groups{where_am_i()}")
    y = lax.conv_general_dilated(x, w, (s,), pad, rhs_dilation=(d,), feature_group_count=groups)
    if bias is not None:
        b = asarray(bias)
        if tuple(b.shape) != (w.shape[0],):
            raise ValueError(f"conv1d: bias of shape {tuple(b.shape)} for {w.shape[0]} output "
                             f"channels{where_am_i()}")
        y = y + jnp.reshape(b, (1, -1, 1))
    return y[0] if unbatched else y


def bilinear(x1, x2, weight, bias=None) -> Array:
    """y_o = x1^T A_o x2 + b_o, as torch.nn.functional.bilinear: x1 (..., in1), x2 (..., in2)
    with the same leading axes, weight (out, in1, in2), bias (out,) or None -> (..., out).
    Raises ValueError for mismatched shapes, TypeError for non-float inputs."""
    fn = "bilinear"
    x1, x2, w = (_float(fn, n, v) for n, v in (("x1", x1), ("x2", x2), ("weight", weight)))
    if w.ndim != 3 or x1.ndim == 0 or x2.ndim == 0 or x1.shape[-1] != w.shape[1] \
            or x2.shape[-1] != w.shape[2] or x1.shape[:-1] != x2.shape[:-1]:
        raise ValueError(f"bilinear: expected x1 (..., in1), x2 (..., in2) and weight "
                         f"(out, in1, in2); got {tuple(x1.shape)}, {tuple(x2.shape)} and "
                         f"{tuple(w.shape)}{where_am_i()}")
    y = jnp.einsum("...i,oij,...j->...o", x1, w, x2)
    if bias is None:
        return y
    b = asarray(bias)
    if tuple(b.shape) != (w.shape[0],):
        raise ValueError(f"bilinear: bias of shape {tuple(b.shape)} for {w.shape[0]} outputs"
                         f"{where_am_i()}")
    return y + b


def prelu(x, weight) -> Array:
    """max(0, x) + weight * min(0, x) (He et al., "Delving deep into rectifiers", ICCV 2015,
    eq. 1), as torch.nn.functional.prelu: weight (1,) shared, or (C,) one slope per channel of
    axis 1 (x of 2 or more dimensions). Returns x's shape and dtype. Raises ValueError for
    another weight shape, TypeError for non-float x."""
    x = _float("prelu", "x", x)
    w = asarray(weight)
    c = x.shape[1] if x.ndim >= 2 else 1
    if w.ndim != 1 or w.shape[0] not in (1, c):
        raise ValueError(f"prelu: weight must have shape (1,) or ({c},) (the channels of axis 1) "
                         f"for x of shape {tuple(x.shape)}, got {tuple(w.shape)}"
                         f"{where_am_i()}")
    slope = _channels(w, x.ndim) if x.ndim >= 2 and w.shape[0] > 1 else w.reshape(())
    return jnp.where(x >= 0, x, slope * x)


# --- normalization layers ------------------------------------------------------------------------

class RMSNorm(Module):
    """RMS normalization over the last axis with a learned scale `weight` (D,) or None
    (torch.nn.RMSNorm with normalized_shape D); eps None is the dtype's machine epsilon."""

    weight: Array | None
    eps: float | None = static_field(default=None)

    @classmethod
    def init(cls, dim: int, *, eps: float | None = None, elementwise_affine: bool = True,
             dtype=jnp.float32) -> RMSNorm:
        """weight ones (dim,) (None without elementwise_affine). Raises TypeError for a non-int
        dim, ValueError for dim < 0 or eps < 0."""
        dim = _size("RMSNorm.init", "dim", dim)
        eps = None if eps is None else _eps("RMSNorm.init", eps)
        return cls(jnp.ones((dim,), dtype) if elementwise_affine else None, eps)

    def __call__(self, x) -> Array:
        """x: float (..., dim) -> same shape (see rms_norm)."""
        return rms_norm(x, self.weight, self.eps)


class GroupNorm(Module):
    """Group normalization of (N, C, *) inputs with per-channel weight and bias (C,) or None
    (torch.nn.GroupNorm)."""

    weight: Array | None
    bias: Array | None
    num_groups: int = static_field(default=1)
    eps: float = static_field(default=1e-5)

    @classmethod
    def init(cls, num_groups: int, num_channels: int, *, eps: float = 1e-5,
             affine: bool = True, dtype=jnp.float32) -> GroupNorm:
        """weight ones, bias zeros (num_channels,) (None without affine). Raises TypeError for
        non-int sizes, ValueError unless num_groups >= 1 divides num_channels, or eps < 0."""
        fn = "GroupNorm.init"
        g, c = _size(fn, "num_groups", num_groups), _size(fn, "num_channels", num_channels)
        if g < 1 or c % g:
            raise ValueError(f"{fn}: num_groups={g} must be >= 1 and divide num_channels={c}")
        w, b = (jnp.ones((c,), dtype), jnp.zeros((c,), dtype)) if affine else (None, None)
        return cls(w, b, g, _eps(fn, eps))

    def __call__(self, x) -> Array:
        """x: float (N, C, *) -> same shape (see group_norm)."""
        return group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


class BatchNormState(Module):
    """BatchNorm's running statistics: running_mean, running_var (C,) and num_batches_tracked,
    an int32 scalar (PyTorch's buffers, under its names)."""

    running_mean: Array
    running_var: Array
    num_batches_tracked: Array


class BatchNorm(Module):
    """Batch normalization over axis 1 of (N, C, *) inputs (torch.nn.BatchNorm1d/2d/3d in one
    class). weight, bias: (C,) or None. The running statistics live in a `BatchNormState`
    passed to and returned by each call (see the module docstring). momentum None averages
    all batches seen so far with equal weight (PyTorch's cumulative moving average);
    track_running_stats=False keeps no statistics and always normalizes by the batch's."""

    weight: Array | None
    bias: Array | None
    num_features: int = static_field(default=0)
    eps: float = static_field(default=1e-5)
    momentum: float | None = static_field(default=0.1)
    track_running_stats: bool = static_field(default=True)

    @classmethod
    def init(cls, num_features: int, *, eps: float = 1e-5, momentum: float | None = 0.1,
             affine: bool = True, track_running_stats: bool = True,
             dtype=jnp.float32) -> BatchNorm:
        """weight ones, bias zeros (num_features,) (None without affine). Raises TypeError for
        a non-int num_features, ValueError for eps < 0 or a momentum outside [0, 1]."""
        fn = "BatchNorm.init"
        c = _size(fn, "num_features", num_features)
        if momentum is not None and not 0.0 <= float(momentum) <= 1.0:
            raise ValueError(f"{fn}: momentum must be in [0, 1] or None, got {momentum}")
        w, b = (jnp.ones((c,), dtype), jnp.zeros((c,), dtype)) if affine else (None, None)
        return cls(w, b, c, _eps(fn, eps), None if momentum is None else float(momentum),
                   bool(track_running_stats))

    def initial_state(self, dtype=jnp.float32) -> BatchNormState | None:
        """Running mean zeros, variance ones, 0 batches tracked (None without
        track_running_stats)."""
        if not self.track_running_stats:
            return None
        c = self.num_features
        return BatchNormState(jnp.zeros((c,), dtype), jnp.ones((c,), dtype),
                              jnp.zeros((), jnp.int32))

    def __call__(self, x, state: BatchNormState | None, *, train: bool = False):
        """x: float (N, num_features, *) -> (y of x's shape, the new state).

        train=True (or no running statistics): normalize by the batch statistics and, when
        tracking, return the state updated (see batch_norm); train=False: normalize by the
        state's statistics and return it unchanged. Raises TypeError when tracking and state
        is not a BatchNormState; otherwise as batch_norm."""
        if not self.track_running_stats:
            y, _, _ = batch_norm(x, None, None, self.weight, self.bias, True, 0.0, self.eps)
            return y, state
        if not isinstance(state, BatchNormState):
            raise TypeError(f"BatchNorm: state must be a BatchNormState (bn.initial_state()), "
                             f"got {type(state).__name__}{where_am_i()}")
        if not train:
            y, _, _ = batch_norm(x, state.running_mean, state.running_var, self.weight,
                                 self.bias, False, 0.0, self.eps)
            return y, state
        count = state.num_batches_tracked + 1
        momentum = (1.0 / count.astype(state.running_mean.dtype) if self.momentum is None
                    else self.momentum)
        y, mean, var = batch_norm(x, state.running_mean, state.running_var, self.weight,
                                  self.bias, True, momentum, self.eps)
        return y, BatchNormState(mean, var, count)


# --- convolution, bilinear, activation -----------------------------------------------------------

class Conv1d(Module):
    """A 1-d convolution layer, as torch.nn.Conv1d: weight (out_channels, in_channels / groups,
    K), bias (out_channels,) or None; stride, padding (an int, "same" or "valid"), dilation
    and groups are static. Calls conv1d."""

    weight: Array
    bias: Array | None = None
    stride: int = static_field(default=1)
    padding: object = static_field(default=0)
    dilation: int = static_field(default=1)
    groups: int = static_field(default=1)

    @classmethod
    def init(cls, key, in_channels: int, out_channels: int, kernel_size: int, *, stride=1,
             padding=0, dilation=1, groups: int = 1, bias: bool = True,
             dtype=jnp.float32) -> Conv1d:
        """weight and bias ~ uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels /
        groups x K (PyTorch's default), in float `dtype`. Raises ValueError when groups does not
        divide both channel counts, TypeError for a key that is not a nova.random key."""
        import nova.random as nr

        check_key("Conv1d.init", key)
        (k,) = F._pair("Conv1d: kernel_size", kernel_size, n=1)
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv1d: groups={groups} must divide in_channels={in_channels} "
                             f"and out_channels={out_channels}")
        bound = 1.0 / math.sqrt(in_channels // groups * k)
        kw, kb = nr.split(key)
        w = _uniform(kw, (out_channels, in_channels // groups, k), bound, dtype)
        b = _uniform(kb, (out_channels,), bound, dtype) if bias else None
        pad = padding if isinstance(padding, str) else \
            F._pair("Conv1d: padding", padding, n=1, low=0)[0]
        return cls(w, b, F._pair("Conv1d: stride", stride, n=1)[0], pad,
                   F._pair("Conv1d: dilation", dilation, n=1)[0], int(groups))

    def __call__(self, x) -> Array:
        """x (N, in_channels, L) or (in_channels, L) -> (N, out_channels, L')."""
        return conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                      self.groups)


class Bilinear(Module):
    """y = x1^T A x2 + b, as torch.nn.Bilinear: weight (out, in1, in2), bias (out,) or None."""

    weight: Array
    bias: Array | None = None

    @classmethod
    def init(cls, key, in1_features: int, in2_features: int, out_features: int, *,
             bias: bool = True, dtype=jnp.float32) -> Bilinear:
        """weight and bias ~ uniform(-1/sqrt(in1), 1/sqrt(in1)) (PyTorch's default). Raises
        TypeError for non-int sizes or a key that is not a nova.random key."""
        import nova.random as nr

        fn = "Bilinear.init"
        check_key(fn, key)
        i1, i2 = _size(fn, "in1_features", in1_features), _size(fn, "in2_features", in2_features)
        o = _size(fn, "out_features", out_features)
        bound = 1.0 / math.sqrt(i1) if i1 else 0.0
        kw, kb = nr.split(key)
        return cls(_uniform(kw, (o, i1, i2), bound, dtype),
                   _uniform(kb, (o,), bound, dtype) if bias else None)

    def __call__(self, x1, x2) -> Array:
        """x1 (..., in1), x2 (..., in2) -> (..., out)."""
        return bilinear(x1, x2, self.weight, self.bias)


class PReLU(Module):
    """The parametric ReLU with learned slopes `weight` (num_parameters,): one shared, or one
    per channel of axis 1 (torch.nn.PReLU)."""

    weight: Array

    @classmethod
    def init(cls, num_parameters: int = 1, *, init: float = 0.25, dtype=jnp.float32) -> PReLU:
        """weight = init (num_parameters,). Raises TypeError for a non-int num_parameters,
        ValueError for num_parameters < 1."""
        n = _size("PReLU.init", "num_parameters", num_parameters)
        if n < 1:
            raise ValueError(f"PReLU.init: num_parameters must be >= 1, got {n}")
        return cls(jnp.full((n,), init, dtype))

    def __call__(self, x) -> Array:
        """x: float, of any shape -> same shape (see prelu)."""
        return prelu(x, self.weight)


# --- containers ----------------------------------------------------------------------------------

class Identity(Module):
    """Returns its input (torch.nn.Identity): a placeholder with no parameters."""

    def __call__(self, x) -> Array:
        """x as an Array, unchanged."""
        return asarray(x)


class Lambda(Module):
    """A function as a layer (Equinox's Lambda): `fn` (static, so hashable) applied to the input;
    no parameters. E.g. Sequential([Linear.init(k, 4, 8), Lambda(nova.nn.relu), ...])."""

    fn: Callable = static_field(default=None)

    def __post_init__(self):
        if not callable(self.fn):
            raise TypeError(f"Lambda: fn must be callable, got {type(self.fn).__name__}")

    def __call__(self, x) -> Array:
        """fn(x)."""
        return self.fn(x)


def _takes(layer, name: str) -> bool:
    """Whether layer's __call__ takes a keyword argument `name` (key=, train=)."""
    try:
        params = inspect.signature(type(layer).__call__).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD
                                 for p in params.values())


class Sequential(Module):
    """Layers applied in order (torch.nn.Sequential, Equinox's Sequential): `layers`, a list or
    tuple of Modules (wrap a plain function in Lambda). Parameters are named
    ``layers.<i>.<name>``.

    A call passes ``train=`` to the layers whose __call__ takes it and a key of its own (split
    from ``key=``) to those that take ``key=``; layers that need more (BatchNorm's state) do
    not fit a Sequential: call them explicitly.
    """

    layers: tuple = ()

    def __post_init__(self):
        if not isinstance(self.layers, list | tuple):
            raise TypeError(f"Sequential: layers must be a list or tuple of modules, got "
                            f"{type(self.layers).__name__}")
        bad = [i for i, layer in enumerate(self.layers) if not isinstance(layer, Module)]
        if bad:
            raise TypeError(f"Sequential: layers {bad} are not Modules (got "
                            f"{type(self.layers[bad[0]]).__name__}); wrap functions in Lambda")

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, i):
        """The i-th layer, or a Sequential of a slice of them."""
        if isinstance(i, slice):
            return Sequential(self.layers[i])
        return self.layers[i]

    def __iter__(self):
        return iter(self.layers)

    def __call__(self, x, *, key=None, train: bool = False):
        """x through every layer in order."""
        keys = split_keys(key, len(self.layers))
        for layer, k in zip(self.layers, keys, strict=True):
            kwargs = {}
            if _takes(layer, "train"):
                kwargs["train"] = train
            if k is not None and _takes(layer, "key"):
                kwargs["key"] = k
            x = layer(x, **kwargs)
        return x


# --- attention -----------------------------------------------------------------------------------

class _OutProj(Module):
    """MultiheadAttention's output projection in PyTorch's nn.Linear layout, weight (out, in),
    so that its state dict names (out_proj.weight, out_proj.bias) and shapes are PyTorch's."""

    weight: Array
    bias: Array | None = None

    def __call__(self, x) -> Array:
        y = x @ self.weight.T
        return y if self.bias is None else y + self.bias


def _mask(fn: str, name: str, m, shape: tuple):
    """A PyTorch attention mask as (keep: bool or None, additive: float or None) broadcast
    against (N, H, L, S); bool True means "do not attend", float is added to the scores."""
    if m is None:
        return None, None
    m = asarray(m)
    try:
        np.broadcast_shapes(tuple(m.shape), shape)
    except ValueError:
        raise ValueError(f"{fn}: {name} of shape {tuple(m.shape)} does not broadcast to the "
                         f"scores' (N, H, L, S) = {shape}{where_am_i()}") from None
    if dtypes.is_bool(m.dtype):
        return jnp.logical_not(m), None
    if dtypes.is_float(m.dtype):
        return None, m
    raise TypeError(f"{fn}: {name} must be bool (True = do not attend) or float (added to the "
                    f"scores), got {m.dtype}{where_am_i()}")


class MultiheadAttention(Module):
    """Multi-head attention (Vaswani et al., "Attention is all you need", sec. 3.2.2), as
    torch.nn.MultiheadAttention, with its parameter names and layouts (a PyTorch state dict
    loads as it is): in_proj_weight (3E, E) and in_proj_bias (3E,) (q, k, v stacked), or
    q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim) when kdim or vdim
    differ from E; out_proj.weight (E, E) (out, in) and out_proj.bias; bias_k, bias_v (1, 1, E)
    with add_bias_kv. num_heads, dropout (on the attention weights, when training),
    batch_first and add_zero_attn are static.

    Unlike PyTorch, a query that may attend to nothing gets zero weights and a zero output
    (PyTorch gives NaN), as nova's attention functions.
    """

    in_proj_weight: Array | None
    in_proj_bias: Array | None
    out_proj: _OutProj
    q_proj_weight: Array | None = None
    k_proj_weight: Array | None = None
    v_proj_weight: Array | None = None
    bias_k: Array | None = None
    bias_v: Array | None = None
    num_heads: int = static_field(default=1)
    dropout: float = static_field(default=0.0)
    batch_first: bool = static_field(default=False)
    add_zero_attn: bool = static_field(default=False)

    @classmethod
    def init(cls, key, embed_dim: int, num_heads: int, *, dropout: float = 0.0,
             bias: bool = True, add_bias_kv: bool = False, add_zero_attn: bool = False,
             kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
             dtype=jnp.float32) -> MultiheadAttention:
        """PyTorch's initialization: input projections Xavier-uniform (Glorot & Bengio 2010),
        out_proj.weight uniform(-1/sqrt(E), 1/sqrt(E)), biases zero, bias_k and bias_v
        Xavier-normal. Raises ValueError unless num_heads >= 1 divides embed_dim, or for a
        dropout outside [0, 1); TypeError for non-int sizes or a key that is not a nova.random
        key."""
        fn = "MultiheadAttention.init"
        check_key(fn, key)
        e, h = _size(fn, "embed_dim", embed_dim), _size(fn, "num_heads", num_heads)
        kd = e if kdim is None else _size(fn, "kdim", kdim)
        vd = e if vdim is None else _size(fn, "vdim", vdim)
        if h < 1 or e % h:
            raise ValueError(f"{fn}: num_heads={h} must be >= 1 and divide embed_dim={e}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"{fn}: dropout must be in [0, 1), got {dropout}")
        dt = dtypes.canonicalize(dtype)
        ks = split_keys(key, 6)
        xavier = initializers.glorot_uniform(in_axis=-1, out_axis=-2, dtype=dt)
        if kd == e and vd == e:
            fields = {"in_proj_weight": xavier(ks[0], (3 * e, e))}
        else:
            fields = {"in_proj_weight": None, "q_proj_weight": xavier(ks[0], (e, e)),
                      "k_proj_weight": xavier(ks[1], (e, kd)),
                      "v_proj_weight": xavier(ks[2], (e, vd))}
        if add_bias_kv:
            normal = initializers.glorot_normal(in_axis=1, out_axis=0, dtype=dt)
            fields["bias_k"], fields["bias_v"] = normal(ks[3], (1, 1, e)), normal(ks[4], (1, 1, e))
        out = _OutProj(_uniform(ks[5], (e, e), 1.0 / math.sqrt(e) if e else 0.0, dt),
                       jnp.zeros((e,), dt) if bias else None)
        return cls(in_proj_bias=jnp.zeros((3 * e,), dt) if bias else None, out_proj=out,
                   num_heads=h, dropout=float(dropout), batch_first=bool(batch_first),
                   add_zero_attn=bool(add_zero_attn), **fields)

    @property
    def embed_dim(self) -> int:
        return self.out_proj.weight.shape[0]

    def _project(self, query, key, value):
        e = self.embed_dim
        if self.in_proj_weight is not None:
            wq, wk, wv = (self.in_proj_weight[i * e:(i + 1) * e] for i in range(3))
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        for name, t, w in (("query", query, wq), ("key", key, wk), ("value", value, wv)):
            if t.shape[-1] != w.shape[1]:
                raise ValueError(f"MultiheadAttention: {name} of shape {tuple(t.shape)} does not "
                                 f"end in its projection's input size {w.shape[1]}"
                                 f"{where_am_i()}")
        b = self.in_proj_bias
        return [t @ w.T if b is None else t @ w.T + b[i * e:(i + 1) * e]
                for i, (t, w) in enumerate(((query, wq), (key, wk), (value, wv)))]

    def __call__(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                 attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False, *,
                 dropout_key=None, train: bool = False):
        """Attention of `query` over `key` / `value`; returns (attn_output, attn_weights).

        query (L, N, E), key (S, N, kdim), value (S, N, vdim) -- (N, L, E) ... with batch_first,
        (L, E) ... unbatched -- one float dtype. key_padding_mask: (N, S) ((S,) unbatched),
        attn_mask: (L, S) or (N * num_heads, L, S); bool True = do not attend, or float added to
        the scores. is_causal: query i attends to keys j <= i (combined with attn_mask; PyTorch
        takes it as a hint that attn_mask is causal). attn_output has query's layout with E
        features; attn_weights (N, L, S) averaged over heads (average_attn_weights) or
        (N, num_heads, L, S) (batch axis absent unbatched; S counts bias_k and the zero key),
        after dropout, or None without need_weights. Dropout applies when train=True and needs
        `dropout_key` (a nova.random key). Without need_weights the scores go through
        F.scaled_dot_product_attention.

        Raises ValueError for mismatched shapes or masks, TypeError for non-float inputs or a
        mask of another dtype.
        """
        fn = "MultiheadAttention"
        q, k, v = (_float(fn, n, t) for n, t in (("query", query), ("key", key),
                                                 ("value", value)))
        unbatched = q.ndim == 2
        if unbatched:
            q, k, v = (jnp.expand_dims(t, 0) for t in (q, k, v))
            if key_padding_mask is not None:
                key_padding_mask = jnp.expand_dims(asarray(key_padding_mask), 0)
        elif not self.batch_first:
            q, k, v = (jnp.swapaxes(t, 0, 1) for t in (q, k, v))
        if q.ndim != 3 or k.ndim != 3 or v.ndim != 3 or k.shape[:2] != v.shape[:2] \
                or q.shape[0] != k.shape[0]:
            raise ValueError(f"{fn}: expected query (L, N, E), key (S, N, kdim) and value "
                             f"(S, N, vdim) (batch first with batch_first, or without N); got "
                             f"{tuple(asarray(query).shape)}, {tuple(asarray(key).shape)}, "
                             f"{tuple(asarray(value).shape)}{where_am_i()}")
        n, tq, s = q.shape[0], q.shape[1], k.shape[1]
        h, e = self.num_heads, self.embed_dim
        q, k, v = self._project(q, k, v)
        extra = 0
        if self.bias_k is not None:
            k = jnp.concatenate([k, jnp.broadcast_to(self.bias_k, (n, 1, e))], axis=1)
            v = jnp.concatenate([v, jnp.broadcast_to(self.bias_v, (n, 1, e))], axis=1)
            extra += 1

        def heads(t):  # (N, T, E) -> (N, H, T, E / H)
            return jnp.transpose(jnp.reshape(t, (n, t.shape[1], h, e // h)), (0, 2, 1, 3))

        q, k, v = heads(q), heads(k), heads(v)
        if self.add_zero_attn:
            zeros = jnp.zeros((n, h, 1, e // h), k.dtype)
            k, v = jnp.concatenate([k, zeros], axis=2), jnp.concatenate([v, zeros], axis=2)
            extra += 1
        mask = self._masks(key_padding_mask, attn_mask, is_causal, (n, h, tq, s), extra)
        if mask is not None and dtypes.is_float(mask.dtype):
            mask = mask.astype(q.dtype)
        drop = self.dropout if train else 0.0
        if need_weights:
            scores = (q @ jnp.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(e // h))
            if mask is not None:
                scores = (scores + mask if dtypes.is_float(mask.dtype)
                          else jnp.where(mask, scores, -jnp.inf))
            weights = F.softmax(scores, axis=-1)
            if drop > 0.0:
                weights = F.dropout(weights, drop, dropout_key)
            y = weights @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, mask=mask, dropout_p=drop,
                                               key=dropout_key)
        y = self.out_proj(jnp.reshape(jnp.transpose(y, (0, 2, 1, 3)), (n, tq, e)))
        if unbatched:
            y = y[0]
        elif not self.batch_first:
            y = jnp.swapaxes(y, 0, 1)
        if not need_weights:
            return y, None
        if average_attn_weights:
            weights = jnp.mean(weights, axis=1)
        return y, weights[0] if unbatched else weights

    def _masks(self, key_padding_mask, attn_mask, is_causal, shape, extra):
        """One mask of the scores (N, H, L, S + extra) from PyTorch's: bool (True = attend) when
        every given mask is bool, else float (added; -inf where a bool mask forbids); None when
        there is none. The extra key columns (bias_k, the zero key) are never masked."""
        fn = "MultiheadAttention"
        n, h, tq, s = shape
        if attn_mask is not None:
            attn_mask = asarray(attn_mask)
            if attn_mask.ndim == 3:
                if attn_mask.shape != (n * h, tq, s):
                    raise ValueError(f"{fn}: a 3-d attn_mask must have shape (N * num_heads, L, "
                                     f"S) = {(n * h, tq, s)}, got {tuple(attn_mask.shape)}"
                                     f"{where_am_i()}")
                attn_mask = jnp.reshape(attn_mask, shape)
            elif attn_mask.ndim != 2:
                raise ValueError(f"{fn}: attn_mask must be (L, S) or (N * num_heads, L, S), got "
                                 f"shape {tuple(attn_mask.shape)}{where_am_i()}")
        if key_padding_mask is not None:
            key_padding_mask = asarray(key_padding_mask)
            if tuple(key_padding_mask.shape) != (n, s):
                raise ValueError(f"{fn}: key_padding_mask must have shape (N, S) = {(n, s)}, "
                                 f"got {tuple(key_padding_mask.shape)}{where_am_i()}")
            key_padding_mask = key_padding_mask[:, None, None, :]
        parts = [_mask(fn, "attn_mask", attn_mask, shape),
                 _mask(fn, "key_padding_mask", key_padding_mask, shape)]
        if is_causal:
            parts.append((jnp.arange(tq)[:, None] >= jnp.arange(s)[None, :], None))
        keeps = [kp for kp, _ in parts if kp is not None]
        adds = [a for _, a in parts if a is not None]
        keep = None
        for kp in keeps:
            keep = kp if keep is None else jnp.logical_and(keep, kp)
        if adds:
            mask = adds[0] if len(adds) == 1 else adds[0] + adds[1]
            if keep is not None:
                mask = jnp.where(keep, mask, -jnp.inf)
            fill = 0.0
        elif keep is not None:
            mask, fill = keep, True
        else:
            return None
        mask = jnp.broadcast_to(mask, np.broadcast_shapes(tuple(mask.shape), shape))
        if extra:
            mask = jnp.concatenate([mask, jnp.full(shape[:3] + (extra,), fill, mask.dtype)],
                                   axis=-1)
        return mask

