"""Text generation with a GPT-2 Module: one compiled forward at a fixed length, host-side sampling.

The forward is compiled once for inputs of shape (batch, block_size): a context shorter than the
block is padded on the right (causal attention never lets a position see later ones, so padding
cannot change the logits at the last real position) and a longer one is cropped to its last
block_size tokens. Each new token reuses the same compiled program; no recompilation per token.
"""

from __future__ import annotations

import re

import numpy as np

import nova
import nova.numpy as jnp


def _logits_at(model, idx, pos):
    # logits of every sequence at position `pos` (a traced int32 scalar): (B, V)
    logits = model(idx)
    return jnp.take(logits, pos, axis=1)


_logits_at_jit = nova.jit(_logits_at)


def sample_logits(logits: np.ndarray, rng: np.random.Generator, temperature: float = 1.0,
                  top_k: int | None = None) -> np.ndarray:
    """One token per row of logits (B, V) float: softmax(logits / temperature) restricted to the
    top_k largest logits (all when None); temperature 0 picks the argmax. Returns int64 (B,).

    Raises ValueError for a negative temperature or top_k < 1.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1 or None, got {top_k}")
    logits = np.asarray(logits, np.float64)
    if temperature == 0:
        return logits.argmax(axis=-1)
    z = logits / temperature
    if top_k is not None and top_k < z.shape[-1]:
        kth = np.partition(z, -top_k, axis=-1)[:, -top_k][:, None]
        z = np.where(z < kth, -np.inf, z)
    z = z - z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)
    u = rng.random((p.shape[0], 1))
    return np.minimum((np.cumsum(p, axis=-1) < u).sum(axis=-1), p.shape[-1] - 1)


def generate(model, context: np.ndarray, max_new_tokens: int, rng: np.random.Generator,
             temperature: float = 1.0, top_k: int | None = None,
             vocab_size: int | None = None) -> np.ndarray:
    """Continues each row of `context` (int (B, t), model ids, t >= 1) by max_new_tokens tokens,
    sampling only ids below vocab_size (default: the model's; a head padded past the real
    vocabulary has ids that are never sampled).

    Returns int64 (B, t + max_new_tokens). Raises ValueError for an empty context.
    """
    limit = vocab_size or model.config.vocab_size
    context = np.asarray(context, np.int64)
    if context.ndim != 2 or context.shape[1] == 0:
        raise ValueError(f"context must be a non-empty (B, t) array of token ids, got shape "
                         f"{context.shape}")
    block = model.config.block_size
    out = context
    window = np.zeros((out.shape[0], block), np.int32)
    for _ in range(max_new_tokens):
        ctx = out[:, -block:]
        n = ctx.shape[1]
        window[:, :n] = ctx
        window[:, n:] = 0
        logits = _logits_at_jit(model, window, np.int32(n - 1))
        nxt = sample_logits(np.asarray(logits)[:, :limit], rng, temperature, top_k)
        out = np.concatenate([out, nxt[:, None]], axis=1)
    return out


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\"}


def unescape_prompt(prompt: str) -> str:
    """A command-line prompt with the escapes \\n (newline), \\t (tab) and \\\\ (backslash)
    replaced, so that `--prompt "ROMEO.\\n"` can end in a newline; any other character,
    non-ASCII ones and other backslashes included, is kept as it is."""
    return re.sub(r"\\([nt\\])", lambda m: _ESCAPES[m.group(1)], prompt)


def check_prompt(tokenizer, vocab, prompt: str) -> np.ndarray:
    """The prompt's token ids in the model's numbering (int64 (t,)).

    Raises ValueError for an empty prompt; KeyError naming the tokens (ids and text) outside
    `vocab` (a tokenizer.SubsetVocab) when the model was trained on a corpus subset.
    """
    ids = tokenizer.encode(prompt)
    if not ids:
        raise ValueError("the prompt is empty: give at least one character")
    ids = np.asarray(ids, np.int64)
    if vocab is None:
        return ids
    try:
        return vocab.to_model(ids).astype(np.int64)
    except KeyError as e:  # name the pieces of text, not only their ids
        pieces = ", ".join(repr(tokenizer.decode([t])) for t in vocab.missing(ids)[:10])
        raise KeyError(f"{e.args[0]}: the text pieces {pieces}") from None


def generate_text(model, tokenizer, vocab, prompt: str, num_samples: int, max_new_tokens: int,
                  rng: np.random.Generator, temperature: float = 1.0,
                  top_k: int | None = None, vocab_size: int | None = None) -> list[str]:
    """num_samples continuations of `prompt` as text (prompt included). `vocab` is a
    tokenizer.SubsetVocab for a model trained on a corpus subset, or None; vocab_size: the
    number of real ids (see generate).

    Raises ValueError for an empty prompt; KeyError for prompt tokens outside the model's vocab.
    """
    ids = check_prompt(tokenizer, vocab, prompt)
    context = np.tile(ids[None, :], (num_samples, 1))
    out = generate(model, context, max_new_tokens, rng, temperature, top_k, vocab_size)
    if vocab is not None:
        out = vocab.to_tokenizer(out)
    return [tokenizer.decode(row) for row in out]
