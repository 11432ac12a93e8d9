"""Layers of a GPT-2 style Transformer: Linear, Embedding, LayerNorm, Dropout, MLP,
CausalSelfAttention and Block, with GPT-2's parameter names.

Every layer is a `Module` with a class-method `init(key, ...)` (deterministic in the key) and a
`__call__`. Randomness at call time is explicit: layers that drop out take ``key=`` (a nova.random
key) and ``train=`` (dropout is active only when train=True and the rate is > 0; otherwise the
layer is the identity and needs no key).

Initialization follows GPT-2 (Radford et al. 2019; OpenAI's gpt-2 and nanoGPT): weights
normal(0, std) with std 0.02 by default, biases zero, LayerNorm weight one and bias zero.
"""

from __future__ import annotations

import math

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.jit import jit
from nova.nn import functional as F
from nova.nn.module import Module, static_field
from nova.numpy_impl.util import asarray, where_am_i

__all__ = ["MLP", "Block", "CausalSelfAttention", "Conv2d", "Dropout", "Embedding", "LayerNorm",
           "Linear"]


def _normal_eager(key, shape, std, dtype):
    from nova import random

    return random.normal(key, shape, dtype) * std


# One compiled program per (shape, std, dtype) instead of one eager kernel per op.
_normal = jit(_normal_eager, static_argnums=(1, 2, 3))


def check_key(fn: str, key) -> None:
    """Raises TypeError unless `key` is a nova.random key (a uint32 array of shape (2,))."""
    shape = tuple(getattr(key, "shape", ()) or ())
    if not isinstance(key, Array) or shape != (2,) or key.dtype != jnp.uint32:
        what = (f"{key.dtype} array of shape {shape}" if isinstance(key, Array)
                else type(key).__name__)
        raise TypeError(f"{fn}: key must be a nova.random key (nova.random.key(seed): uint32 of "
                        f"shape (2,)), got {what}{where_am_i()}")


def _size(fn: str, name: str, value) -> int:
    """A layer size: an int >= 0 (not a float, bool or string). TypeError / ValueError."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{fn}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < 0:
        raise ValueError(f"{fn}: {name} must be >= 0, got {value}")
    return int(value)


def normal_init(key, shape, std: float, dtype=jnp.float32) -> Array:
    """normal(0, std) of `shape` (ints >= 0) and float `dtype` from `key` (a nova.random key);
    traces inline under jit. Raises TypeError for a non-int size or a missing key, ValueError
    for a negative size."""
    from nova.core.trace import current_trace

    check_key("normal_init", key)
    shape = tuple(_size("normal_init", f"shape[{i}]", d) for i, d in enumerate(shape))
    std, dtype = float(std), dtypes.canonicalize(dtype)
    if current_trace() is not None:
        return _normal_eager(key, shape, std, dtype)
    return _normal(key, shape, std, dtype)


def split_keys(key, num: int) -> list:
    """`num` independent keys from `key`, or `num` Nones when key is None."""
    if key is None:
        return [None] * num
    from nova import random

    ks = random.split(key, num)
    return [ks[i] for i in range(num)]


class Linear(Module):
    """y = x @ weight + bias with weight of shape (in_features, out_features).

    The weight layout is HF GPT-2's Conv1D (input dimension first), the transpose of PyTorch's
    nn.Linear, so GPT-2 checkpoints load without transposes. bias: (out_features,) or None.
    """

    weight: Array
    bias: Array | None = None

    @classmethod
    def init(cls, key, in_features: int, out_features: int, *, bias: bool = True,
             std: float = 0.02, dtype=jnp.float32) -> Linear:
        """weight (in_features, out_features) ~ normal(0, std) (GPT-2), bias (out_features,)
        zeros (or None), in float `dtype`. Raises TypeError for a non-int size or a key that is
        not a nova.random key, ValueError for a negative size."""
        w = normal_init(key, (in_features, out_features), std, dtype)
        b = jnp.zeros((out_features,), dtype) if bias else None
        return cls(w, b)

    def __call__(self, x) -> Array:
        """x: (..., in_features) -> (..., out_features). Raises ValueError on a size mismatch."""
        x = asarray(x)
        if x.ndim == 0 or x.shape[-1] != self.weight.shape[0]:
            raise ValueError(
                f"Linear: input of shape {x.shape} does not end in in_features = "
                f"{self.weight.shape[0]} (weight {self.weight.shape}){where_am_i()}"
            )
        y = x @ self.weight
        return y if self.bias is None else y + self.bias


class Conv2d(Module):
    """A 2-d convolution layer, as torch.nn.Conv2d: weight (out_channels, in_channels / groups,
    kH, kW), bias (out_channels,) or None; stride, padding ("same", "valid", an int or a pair),
    dilation and groups are static. Calls F.conv2d."""

    weight: Array
    bias: Array | None = None
    stride: tuple = static_field(default=(1, 1))
    padding: object = static_field(default=(0, 0))
    dilation: tuple = static_field(default=(1, 1))
    groups: int = static_field(default=1)

    @classmethod
    def init(cls, key, in_channels: int, out_channels: int, kernel_size, *, stride=1,
             padding=0, dilation=1, groups: int = 1, bias: bool = True,
             dtype=jnp.float32) -> Conv2d:
        """weight and bias ~ uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in =
        in_channels / groups x kH x kW (PyTorch's default initialization), in float `dtype`.
        Raises ValueError when groups does not divide both channel counts, TypeError for a key
        that is not a nova.random key."""
        import nova.random as nr

        check_key("Conv2d.init", key)
        k = F._pair("Conv2d: kernel_size", kernel_size)
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: groups={groups} must divide in_channels={in_channels} "
                             f"and out_channels={out_channels}")
        fan_in = in_channels // groups * k[0] * k[1]
        bound = 1.0 / math.sqrt(fan_in)
        kw, kb = nr.split(key)
        dt = dtypes.canonicalize(dtype)
        w = nr.uniform(kw, (out_channels, in_channels // groups, *k), dt, -bound, bound)
        b = nr.uniform(kb, (out_channels,), dt, -bound, bound) if bias else None
        pad = padding if isinstance(padding, str) else F._pair("Conv2d: padding", padding, low=0)
        return cls(w, b, F._pair("Conv2d: stride", stride), pad,
                   F._pair("Conv2d: dilation", dilation), int(groups))

    def __call__(self, x) -> Array:
        """x (N, in_channels, H, W) or (in_channels, H, W) -> (N, out_channels, H', W')."""
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)


class Embedding(Module):
    """A lookup table: weight (num_embeddings, embedding_dim); row i is the vector of index i."""

    weight: Array

    @classmethod
    def init(cls, key, num_embeddings: int, embedding_dim: int, *, std: float = 0.02,
             dtype=jnp.float32) -> Embedding:
        """weight (num_embeddings, embedding_dim) ~ normal(0, std) in float `dtype`. Raises
        TypeError for a non-int size or a key that is not a nova.random key, ValueError for a
        negative size."""
        return cls(normal_init(key, (num_embeddings, embedding_dim), std, dtype))

    def __call__(self, idx) -> Array:
        """idx: integer array (...) -> (..., embedding_dim). Out-of-range indices clamp (as JAX's
        gathers); raises TypeError for non-integer idx."""
        idx = asarray(idx)
        if not dtypes.is_int(idx.dtype):
            raise TypeError(f"Embedding: indices must be integers, got {idx.dtype}{where_am_i()}")
        return jnp.take(self.weight, idx, axis=0)


class LayerNorm(Module):
    """Layer normalization over the last axis with a learned scale `weight` and shift `bias`."""

    weight: Array
    bias: Array | None
    eps: float = static_field(default=1e-5)

    @classmethod
    def init(cls, dim: int, *, eps: float = 1e-5, bias: bool = True,
             dtype=jnp.float32) -> LayerNorm:
        """weight ones (dim,), bias zeros (dim,) (or None). Raises TypeError for a non-int dim,
        ValueError for dim < 0 or eps < 0."""
        dim = _size("LayerNorm.init", "dim", dim)
        if not float(eps) >= 0.0:
            raise ValueError(f"LayerNorm.init: eps must be >= 0, got {eps}")
        b = jnp.zeros((dim,), dtype) if bias else None
        return cls(jnp.ones((dim,), dtype), b, float(eps))

    def __call__(self, x) -> Array:
        """x: float (..., dim) -> same shape (see functional.layer_norm)."""
        return F.layer_norm(x, self.weight, self.bias, self.eps)


class Dropout(Module):
    """Inverted dropout with probability `rate`; no parameters."""

    rate: float = static_field(default=0.0)

    def __post_init__(self):
        if not 0.0 <= float(self.rate) < 1.0:
            raise ValueError(f"Dropout: rate must be in [0, 1), got {self.rate}")

    def __call__(self, x, *, key=None, train: bool = False) -> Array:
        """x unchanged unless train=True and rate > 0; then each element is zeroed with probability
        rate and the rest scaled by 1/(1 - rate), from `key` (required then: ValueError)."""
        if not train or self.rate == 0.0:
            return asarray(x)
        return F.dropout(x, self.rate, key)


class MLP(Module):
    """GPT-2's feed-forward block: c_proj(gelu_tanh(c_fc(x))), hidden width 4 * n_embd."""

    c_fc: Linear
    c_proj: Linear
    dropout: float = static_field(default=0.0)

    @classmethod
    def init(cls, key, n_embd: int, *, proj_std: float = 0.02, dropout: float = 0.0,
             dtype=jnp.float32) -> MLP:
        """c_fc: Linear(n_embd, 4 n_embd) with weight ~ normal(0, 0.02); c_proj: Linear(4 n_embd,
        n_embd) with weight ~ normal(0, proj_std) (GPT-2 passes 0.02 / sqrt(2 n_layer)); biases
        zero; dtype a float dtype. Raises TypeError for a non-int n_embd or a key that is not a
        nova.random key."""
        k1, k2 = split_keys(key, 2)
        return cls(Linear.init(k1, n_embd, 4 * n_embd, dtype=dtype),
                   Linear.init(k2, 4 * n_embd, n_embd, std=proj_std, dtype=dtype), float(dropout))

    def __call__(self, x, *, key=None, train: bool = False) -> Array:
        """x: (..., n_embd) -> (..., n_embd); dropout on the output when training."""
        y = self.c_proj(F.gelu(self.c_fc(x), approximate=True))
        return Dropout(self.dropout)(y, key=key, train=train)


class CausalSelfAttention(Module):
    """Multi-head causal self-attention with one fused q/k/v projection (GPT-2's c_attn).

    c_attn: Linear(n_embd, 3 n_embd) whose output splits into q, k, v (in that order, each n_embd
    wide, heads of n_embd / n_head contiguous inside each); c_proj: Linear(n_embd, n_embd).
    Dropout (rate `dropout`, when training) on the attention weights and on the output.
    """

    c_attn: Linear
    c_proj: Linear
    n_head: int = static_field(default=1)
    dropout: float = static_field(default=0.0)

    @classmethod
    def init(cls, key, n_embd: int, n_head: int, *, proj_std: float = 0.02,
             dropout: float = 0.0, dtype=jnp.float32) -> CausalSelfAttention:
        """c_attn: Linear(n_embd, 3 n_embd), weight ~ normal(0, 0.02); c_proj: Linear(n_embd,
        n_embd), weight ~ normal(0, proj_std); biases zero. Raises ValueError unless n_head >= 1
        divides n_embd, TypeError for a non-int size or a key that is not a nova.random key."""
        n_head = _size("CausalSelfAttention.init", "n_head", n_head)
        if n_head < 1 or n_embd % n_head:
            raise ValueError(f"CausalSelfAttention.init: n_head must be >= 1 and divide n_embd "
                             f"{n_embd}, got n_head {n_head}")
        k1, k2 = split_keys(key, 2)
        return cls(Linear.init(k1, n_embd, 3 * n_embd, dtype=dtype),
                   Linear.init(k2, n_embd, n_embd, std=proj_std, dtype=dtype),
                   int(n_head), float(dropout))

    def __call__(self, x, *, key=None, train: bool = False) -> Array:
        """x: (B, T, n_embd) -> (B, T, n_embd); query t attends to positions <= t."""
        x = asarray(x)
        if x.ndim != 3:
            raise ValueError(f"CausalSelfAttention: expected x of shape (B, T, C), got {x.shape}"
                             f"{where_am_i()}")
        b, t, c = x.shape
        hd = c // self.n_head
        q, k, v = jnp.split(self.c_attn(x), 3, axis=-1)

        def heads(z):  # (B, T, C) -> (B, H, T, hd)
            return jnp.transpose(jnp.reshape(z, (b, t, self.n_head, hd)), (0, 2, 1, 3))

        drop = self.dropout if train else 0.0
        k_att, k_out = split_keys(key, 2) if drop > 0.0 else (None, None)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), causal=True,
                                           dropout_p=drop, key=k_att)
        y = jnp.reshape(jnp.transpose(y, (0, 2, 1, 3)), (b, t, c))
        return Dropout(self.dropout)(self.c_proj(y), key=k_out, train=train)


class Block(Module):
    """A pre-norm Transformer block: x + attn(ln_1(x)), then + mlp(ln_2(.))."""

    ln_1: LayerNorm
    attn: CausalSelfAttention
    ln_2: LayerNorm
    mlp: MLP

    @classmethod
    def init(cls, key, n_embd: int, n_head: int, *, proj_std: float = 0.02,
             dropout: float = 0.0, dtype=jnp.float32) -> Block:
        """proj_std: std of the residual projections (attn.c_proj, mlp.c_proj)."""
        k1, k2 = split_keys(key, 2)
        return cls(
            LayerNorm.init(n_embd, dtype=dtype),
            CausalSelfAttention.init(k1, n_embd, n_head, proj_std=proj_std, dropout=dropout,
                                     dtype=dtype),
            LayerNorm.init(n_embd, dtype=dtype),
            MLP.init(k2, n_embd, proj_std=proj_std, dropout=dropout, dtype=dtype),
        )

    def __call__(self, x, *, key=None, train: bool = False) -> Array:
        """x: (B, T, n_embd) -> (B, T, n_embd)."""
        k1, k2 = split_keys(key, 2) if train else (None, None)
        x = x + self.attn(self.ln_1(x), key=k1, train=train)
        return x + self.mlp(self.ln_2(x), key=k2, train=train)
