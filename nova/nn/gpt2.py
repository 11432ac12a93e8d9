"""GPT-2 (Radford et al., "Language Models are Unsupervised Multitask Learners", 2019) as a Module.

Parameter names are GPT-2's (as in HF transformers' GPT2Model and nanoGPT): ``wte.weight``,
``wpe.weight``, ``h.{i}.ln_1.weight``/``bias``, ``h.{i}.attn.c_attn.weight``/``bias``,
``h.{i}.attn.c_proj.*``, ``h.{i}.ln_2.*``, ``h.{i}.mlp.c_fc.*``, ``h.{i}.mlp.c_proj.*``,
``ln_f.*``; Linear weights are (in, out) like HF's Conv1D. The output head is tied to the token
embedding: logits = x @ wte.weight.T.

Initialization (GPT-2 / nanoGPT): every Linear weight and wte ~ normal(0, 0.02); the residual
projections attn.c_proj and mlp.c_proj ~ normal(0, 0.02 / sqrt(2 n_layer)) (GPT-2 paper, sec.
2.3); wpe ~ normal(0, 0.01) (OpenAI's gpt-2 model.py); biases zero; LayerNorm weight one, bias
zero.
"""

from __future__ import annotations

import dataclasses
import math

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.jit import jit
from nova.nn import functional as F
from nova.nn.layers import Block, Dropout, Embedding, LayerNorm, check_key, split_keys
from nova.nn.module import Module, static_field
from nova.numpy_impl.util import asarray, where_am_i

__all__ = ["GPT2", "GPT2Config"]


@dataclasses.dataclass(frozen=True)
class GPT2Config:
    """GPT-2's hyperparameters. vocab_size: tokens; block_size: the longest context (positions);
    n_layer blocks of n_head heads over n_embd channels; dropout: rate used when training;
    remat: checkpoint every block (nova.checkpoint: less memory, one more forward per step):
    False, True (keep each block's input only) or "dots" (also keep the outputs of the weight
    matmuls: checkpoint_policies.dots_with_no_batch_dims_saveable, recomputing only the
    normalizations, GELU and attention).

    Raises ValueError for non-positive sizes, n_embd not divisible by n_head, or a dropout rate
    outside [0, 1).
    """

    vocab_size: int = 50257
    block_size: int = 1024
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    # Gradient checkpointing (nova.checkpoint) of every block: a training step keeps each
    # block's input instead of its activations and recomputes them in the backward.
    remat: bool | str = False

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"GPT2Config: {name} must be a positive int, got {v!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"GPT2Config: n_embd {self.n_embd} is not divisible by n_head "
                             f"{self.n_head}")
        if not 0.0 <= float(self.dropout) < 1.0:
            raise ValueError(f"GPT2Config: dropout must be in [0, 1), got {self.dropout}")
        if self.remat not in (False, True, "dots"):
            raise ValueError(f"GPT2Config: remat must be False, True or 'dots', got "
                             f"{self.remat!r}")

    @classmethod
    def tiny(cls, vocab_size: int = 256, **overrides) -> GPT2Config:
        """2 layers, 4 heads, 128 channels, 64 positions (fits a CPU; byte vocabulary default)."""
        return cls(**{"vocab_size": vocab_size, "block_size": 64, "n_layer": 2, "n_head": 4,
                      "n_embd": 128, **overrides})

    @classmethod
    def gpt2(cls, **overrides) -> GPT2Config:
        """GPT-2 small (124M parameters): 12 layers, 12 heads, 768 channels, 1024 positions."""
        return cls(**overrides)

    def to_dict(self) -> dict:
        """The fields as a JSON-serializable dict (for checkpoints)."""
        return dataclasses.asdict(self)


def _init_gpt2(config: GPT2Config, key) -> GPT2:
    keys = split_keys(key, config.n_layer + 2)
    proj_std = 0.02 / math.sqrt(2 * config.n_layer)
    return GPT2(
        wte=Embedding.init(keys[0], config.vocab_size, config.n_embd, std=0.02),
        wpe=Embedding.init(keys[1], config.block_size, config.n_embd, std=0.01),
        h=[Block.init(keys[2 + i], config.n_embd, config.n_head, proj_std=proj_std,
                      dropout=config.dropout) for i in range(config.n_layer)],
        ln_f=LayerNorm.init(config.n_embd),
        config=config,
    )


# One compiled program builds all parameters.
_init_gpt2_jit = jit(_init_gpt2, static_argnums=0)


class GPT2(Module):
    """The GPT-2 language model: token + position embeddings, n_layer Blocks, final LayerNorm and
    the weight-tied output head."""

    wte: Embedding
    wpe: Embedding
    h: list
    ln_f: LayerNorm
    config: GPT2Config = static_field(default=None)

    @classmethod
    def init(cls, config: GPT2Config, key) -> GPT2:
        """Parameters from GPT-2's initialization (module docstring), deterministic in `key`
        (a nova.random key). Raises TypeError when config is not a GPT2Config."""
        if not isinstance(config, GPT2Config):
            raise TypeError(f"GPT2.init: config must be a GPT2Config, got {type(config).__name__}")
        check_key("GPT2.init", key)
        from nova.core.trace import current_trace

        if current_trace() is not None:
            return _init_gpt2(config, key)
        return _init_gpt2_jit(config, key)

    def _check_idx(self, name, idx) -> Array:
        idx = asarray(idx)
        if not dtypes.is_int(idx.dtype):
            raise TypeError(f"GPT2: {name} must be an integer array of token ids, got "
                            f"{idx.dtype}{where_am_i()}")
        if idx.ndim != 2:
            raise ValueError(f"GPT2: {name} must have shape (B, T), got {idx.shape}{where_am_i()}")
        if idx.shape[1] > self.config.block_size:
            raise ValueError(
                f"GPT2: sequence length T = {idx.shape[1]} exceeds block_size = "
                f"{self.config.block_size} ({name} of shape {idx.shape}){where_am_i()}"
            )
        if 0 in idx.shape:
            raise ValueError(f"GPT2: {name} of shape {idx.shape} is empty; B and T must be >= 1"
                             f"{where_am_i()}")
        return idx

    def __call__(self, idx, *, key=None, train: bool = False) -> Array:
        """idx: integer (B, T) token ids, T <= block_size -> logits float32 (B, T, vocab_size).

        train=True enables dropout (config.dropout > 0) and then needs `key`. Raises TypeError for
        non-integer idx; ValueError for a wrong rank, B or T = 0, T > block_size, or -- when idx
        is concrete (not traced) -- a token id outside [0, vocab_size). Under `jit` ids are not
        checked and an out-of-range id is clamped (as the embedding gather does).
        """
        return jnp.einsum("btc,vc->btv", self._hidden(idx, key, train), self.wte.weight)

    def _hidden(self, idx, key, train: bool) -> Array:
        """The final LayerNorm's output (B, T, n_embd), which the tied head maps to logits."""
        idx = self._check_idx("idx", idx)
        F.check_index_range("GPT2", "idx", idx, self.config.vocab_size)
        if train and self.config.dropout > 0.0 and key is None:
            raise ValueError(f"GPT2: train=True with dropout {self.config.dropout} needs a "
                             f"nova.random key (key=...){where_am_i()}")
        t = idx.shape[1]
        keys = split_keys(key, len(self.h) + 1) if train else [None] * (len(self.h) + 1)
        # Positions 0..T-1 are a slice of wpe (its gradient is a pad, not a scatter-add).
        x = self.wte(idx) + self.wpe.weight[:t]
        x = Dropout(self.config.dropout)(x, key=keys[0], train=train)
        for block, k in zip(self.h, keys[1:], strict=True):
            if self.config.remat:
                from nova.checkpoint import checkpoint, checkpoint_policies

                policy = checkpoint_policies.dots_with_no_batch_dims_saveable \
                    if self.config.remat == "dots" else None
                x = checkpoint(lambda b, x, k=k: b(x, key=k, train=train),
                               policy=policy)(block, x)
            else:
                x = block(x, key=k, train=train)
        return self.ln_f(x)

    def loss(self, idx, targets, *, key=None, train: bool = False,
             ignore_index: int = -100) -> Array:
        """Mean next-token cross-entropy (nats per token, float32 scalar) of `targets` (B, T)
        given `idx` (B, T); targets equal to ignore_index are left out. Raises as __call__, and
        ValueError when targets' shape differs from idx's or (concrete targets) a target is
        outside [0, vocab_size) and not ignore_index.

        The head and the loss are one `F.linear_cross_entropy`: a training step holds one
        chunk of logits (1,024 positions of GPT-2's 50,257 classes) instead of all of them and
        their gradient."""
        idx = self._check_idx("idx", idx)
        targets = self._check_idx("targets", targets)
        if targets.shape != idx.shape:
            raise ValueError(f"GPT2.loss: targets of shape {targets.shape} differ from idx of "
                             f"shape {idx.shape}{where_am_i()}")
        return F.linear_cross_entropy(self._hidden(idx, key, train), self.wte.weight, targets,
                                      ignore_index=ignore_index)
