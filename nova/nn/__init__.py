"""nova.nn: Modules (dataclass pytrees), Transformer layers, GPT-2, functions and checkpoints.

A model is a `Module`, a pytree of arrays, so `nova.grad(loss)(model, x, y)` returns a gradient of
the model's shape and `nova.jit` compiles a whole training step. Freezing is `partition`/`combine`
(see nova/nn/module.py). Training versus evaluation is a call argument, not module state:
`model(idx, key=k, train=True)` applies dropout from key k, `model(idx)` does not (Flax's
`deterministic` style; nothing to switch back). Functions (relu, gelu, softmax, cross_entropy,
scaled_dot_product_attention, ...) are re-exported here from `nova.nn.functional`; checkpoints
(`save_checkpoint`, `load_checkpoint`) are safetensors files (nova/nn/checkpoint.py).
"""

from nova.nn.checkpoint import (
    CheckpointError,
    checkpoint_metadata,
    load_checkpoint,
    save_checkpoint,
)
from nova.nn.functional import (
    avg_pool2d,
    conv2d,
    cross_entropy,
    dropout,
    gelu,
    layer_norm,
    log_softmax,
    logsumexp,
    max_pool2d,
    one_hot,
    relu,
    scaled_dot_product_attention,
    silu,
    softmax,
)
from nova.nn.gpt2 import GPT2, GPT2Config
from nova.nn.layers import (
    MLP,
    Block,
    CausalSelfAttention,
    Conv2d,
    Dropout,
    Embedding,
    LayerNorm,
    Linear,
)
from nova.nn.module import Module, combine, partition, static_field

__all__ = [
    "GPT2", "MLP", "Block", "CausalSelfAttention", "CheckpointError", "Conv2d", "Dropout",
    "Embedding", "avg_pool2d", "conv2d", "max_pool2d",
    "GPT2Config", "LayerNorm", "Linear", "Module", "checkpoint_metadata", "combine",
    "cross_entropy", "dropout", "gelu", "layer_norm", "load_checkpoint", "log_softmax",
    "logsumexp", "one_hot", "partition", "relu", "save_checkpoint", "scaled_dot_product_attention",
    "silu", "softmax", "static_field",
]
