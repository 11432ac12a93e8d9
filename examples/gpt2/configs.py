"""Training configurations of the GPT-2 example: tiny (CPU, minutes), small, gpt2 (124M, a GPU)."""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Model shape, batch, optimizer and schedule of one run.

    vocab: "full" (the tokenizer's whole vocabulary: 50257 for GPT-2 BPE) or "corpus" (only the
    token ids that occur in the corpus, renumbered densely; see tokenizer.SubsetVocab).
    Learning rate: linear warmup from 0 to `lr` over `warmup` steps, cosine decay to `min_lr` at
    `steps`; AdamW (b1, b2 = 0.9, 0.95) with `weight_decay` on matrices only; gradients clipped
    to global norm `grad_clip`.
    """

    n_layer: int
    n_head: int
    n_embd: int
    block_size: int
    batch_size: int
    steps: int
    lr: float
    min_lr: float
    warmup: int
    vocab: str = "full"
    dropout: float = 0.0
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_interval: int = 100
    eval_batches: int = 8
    ckpt_interval: int = 200


CONFIGS = {
    # A few minutes on 2 CPU cores (800 steps of 512 tokens). With GPT-2 BPE the head would have
    # 50257 rows (most of the parameters and of each step's work); the tiny model keeps GPT-2's
    # tokenization but renumbers the ~19k token ids that occur in the Shakespeare corpus.
    "tiny": TrainConfig(n_layer=4, n_head=4, n_embd=128, block_size=64, batch_size=8, steps=800,
                        lr=3e-3, min_lr=3e-4, warmup=30, vocab="corpus", eval_interval=100,
                        eval_batches=8, ckpt_interval=200),
    # 4096 tokens a step over the full GPT-2 vocabulary: about 30 s a step on 2 CPU cores (a
    # 2 x 256 batch took 4.1 s); for a bigger machine.
    "small": TrainConfig(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=16,
                         steps=5000, lr=1e-3, min_lr=1e-4, warmup=200, vocab="full",
                         eval_interval=250, eval_batches=20, ckpt_interval=500),
    # GPT-2 small (124M parameters), 1024 positions; meant for a GPU.
    "gpt2": TrainConfig(n_layer=12, n_head=12, n_embd=768, block_size=1024, batch_size=8,
                        steps=10000, lr=6e-4, min_lr=6e-5, warmup=700, vocab="full",
                        eval_interval=500, eval_batches=40, ckpt_interval=1000),
}


def cpu_peak_flops() -> float:
    """A stated float32 peak for this CPU: cores x 3.0 GHz x 32 flop/cycle (two 8-wide AVX2 FMA
    units). Used only for the MFU estimate; pass --peak-tflops for another device."""
    return float(os.cpu_count() or 1) * 3.0e9 * 32


def flops_per_token(num_params: int, n_layer: int, n_embd: int, block_size: int) -> float:
    """Training flops per token (forward + backward, PaLM appendix B / nanoGPT's estimate):
    6 N for the matrix multiplies with N = non-position parameters, plus 12 L T d for
    attention's scores and weighted sums."""
    return 6.0 * num_params + 12.0 * n_layer * block_size * n_embd
