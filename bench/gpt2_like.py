"""A GPT-2-shaped training step written in nova.numpy (for compiler benchmarks until nova.nn lands).

`loss(params, tokens, targets)`: token + position embeddings, pre-LN blocks with causal
self-attention and a GELU-tanh MLP of 4x width, final LN, tied head, mean cross-entropy.
"""

from __future__ import annotations

import numpy as np

import nova.numpy as jnp


def init(rng, n_layer=2, d=128, n_head=4, seq=64, vocab=256):
    def w(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    blocks = []
    for _ in range(n_layer):
        blocks.append({
            "ln_1": (np.ones(d, np.float32), np.zeros(d, np.float32)),
            "c_attn": (w(d, 3 * d), np.zeros(3 * d, np.float32)),
            "c_proj": (w(d, d, scale=0.02 / np.sqrt(2 * n_layer)), np.zeros(d, np.float32)),
            "ln_2": (np.ones(d, np.float32), np.zeros(d, np.float32)),
            "c_fc": (w(d, 4 * d), np.zeros(4 * d, np.float32)),
            "mlp_proj": (w(4 * d, d, scale=0.02 / np.sqrt(2 * n_layer)), np.zeros(d, np.float32)),
        })
    return {"wte": w(vocab, d), "wpe": w(seq, d, scale=0.01), "h": blocks,
            "ln_f": (np.ones(d, np.float32), np.zeros(d, np.float32))}


def layer_norm(x, p):
    g, b = p
    mu = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + 1e-5) * g + b


def attention(x, p, n_head):
    B, T, C = x.shape
    w, b = p
    qkv = x @ w + b
    q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]

    def heads(t):
        return jnp.transpose(t.reshape(B, T, n_head, C // n_head), (0, 2, 1, 3))

    q, k, v = heads(q), heads(k), heads(v)
    s = (q @ jnp.swapaxes(k, -1, -2)) * float(1.0 / np.sqrt(C // n_head))
    mask = np.tril(np.ones((T, T), bool))
    s = jnp.where(mask, s, -1e9)
    s = s - jnp.max(s, -1, keepdims=True)
    e = jnp.exp(s)
    a = e / jnp.sum(e, -1, keepdims=True)
    y = jnp.transpose(a @ v, (0, 2, 1, 3)).reshape(B, T, C)
    return y


def gelu(x):
    return 0.5 * x * (1 + jnp.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def loss(params, tokens, targets, n_head=4):
    B, T = tokens.shape
    x = params["wte"][tokens] + params["wpe"][:T]
    for blk in params["h"]:
        a = attention(layer_norm(x, blk["ln_1"]), blk["c_attn"], n_head)
        x = x + a @ blk["c_proj"][0] + blk["c_proj"][1]
        h = gelu(layer_norm(x, blk["ln_2"]) @ blk["c_fc"][0] + blk["c_fc"][1])
        x = x + h @ blk["mlp_proj"][0] + blk["mlp_proj"][1]
    x = layer_norm(x, params["ln_f"])
    logits = x @ params["wte"].T
    m = jnp.max(logits, -1, keepdims=True)
    logp = logits - m - jnp.log(jnp.sum(jnp.exp(logits - m), -1, keepdims=True))
    onehot = (targets[..., None] == jnp.arange(logits.shape[-1])).astype(jnp.float32)
    return -jnp.mean(jnp.sum(logp * onehot, -1))
