"""The programs the GPU device check runs: one list shared by bench/build_gpu_cache.py (which
compiles their PTX here, without a GPU) and bench/device_check.py (which runs them on a lent GPU
from the carried cache). Both must build exactly these programs with exactly these shapes,
dtypes and matmul precisions, or the kernel cache misses.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import numpy as np

import nova
import nova.numpy as jnp
from nova.core import dtypes
from nova.nn import functional as F

S = nova.ShapeDtypeStruct
f32, bf16 = np.float32, dtypes.bfloat16


@dataclass(frozen=True)
class Case:
    """A jitted function, its argument specs, the matmul precision it is compiled under and the
    relative error it must meet against the NumPy reference interpreter (max |got - want| over
    max |want|, per output)."""

    name: str
    fn: object
    specs: tuple
    precision: str = "highest"
    tol: float = 2e-5
    ints: tuple = ()  # (argument position, upper bound) of integer arguments (labels)
    donate: tuple = ()  # donate_argnums of the jitted function
    meta: object = None  # what a section needs besides the specs (the GPT-2 step's config)


def _ln_loss(x, w, b):
    return jnp.sum(F.layer_norm(x, w, b) ** 2)


def _ce(logits, labels):
    return F.cross_entropy(logits, labels)


def _bias_grad(dy, x):
    """A product, its column sums and the column sums of dy: a LayerNorm's input-side
    cotangent with its weight and bias gradients."""
    g = dy * x
    axes = tuple(range(g.ndim - 1))
    return g, jnp.sum(g, axis=axes), jnp.sum(dy, axis=axes)


def _mlp_step(w1, b1, w2, b2, g, x, labels):
    """One SGD step of a layer-normed GELU MLP classifier (forward, backward and update)."""

    def loss(params):
        w1, b1, w2, b2, g = params
        h = F.gelu(F.layer_norm(x, g, None) @ w1 + b1, approximate=True)
        return F.cross_entropy(h @ w2 + b2, labels)

    value, grads = nova.value_and_grad(loss)((w1, b1, w2, b2, g))
    return (value,) + tuple(p - 0.1 * d for p, d in zip((w1, b1, w2, b2, g), grads, strict=True))


def _attention_loss(q, k, v):
    return jnp.sum(F.scaled_dot_product_attention(q, k, v, causal=True) ** 2)


def _masks(t: int) -> tuple:
    """A bool (t, t) mask with a fully masked row and an additive one with -inf entries (fixed
    seed: the cache keys hold the constants)."""
    rng = np.random.default_rng(7)
    keep = rng.random((t, t)) > 0.3
    keep[1] = False
    bias = rng.standard_normal((t, t)).astype(np.float32)
    bias[4, :5] = -np.inf
    return keep, bias


_KEEP, _BIAS = _masks(50)


def _attention_loss_select(q, k, v):
    return jnp.sum(F.scaled_dot_product_attention(q, k, v, mask=_KEEP) ** 2)


def _attention_loss_add(q, k, v):
    return jnp.sum(F.scaled_dot_product_attention(q, k, v, mask=_BIAS) ** 2)


def _attention_loss_none(q, k, v):
    return jnp.sum(F.scaled_dot_product_attention(q, k, v) ** 2)


def attention_grad(loss):
    return nova.value_and_grad(loss, argnums=(0, 1, 2))


def _rnn_loss(w, u, h, xs):
    """BPTT through lax.scan: the forward scan stacks residuals, the backward scan reads them
    (both run by nova/gpu/loops.py on the GPU, captured into the CUDA graph)."""
    from nova import lax

    def step(h, x):
        h = jnp.tanh(h @ w + x @ u)
        return h, jnp.sum(h)

    hl, ys = lax.scan(step, h, xs)
    return jnp.sum(hl * hl) + jnp.sum(ys)


def _while_and_switch(limit, i, v):
    """A while_loop (its predicate read on the host each trip) and a switch (its index)."""
    from nova import lax

    n, v = lax.while_loop(lambda c: c[0] < limit, lambda c: (c[0] + 1, jnp.sin(c[1]) + 0.5),
                          (jnp.asarray(0, jnp.int32), v))
    return n, lax.switch(i, [lambda x: x * 2.0, jnp.cos, jnp.tanh], v)


def _gpt2_tiny_case() -> Case:
    """One SGD training step of nova.nn's tiny GPT-2 (2 layers, 4 heads, 128 channels, 64
    positions, vocabulary 256, batch 8): loss, gradients and the updated parameters. The
    parameters are the case's leading arguments (the model's pytree leaves), then the token
    and target ids."""
    from nova.nn import GPT2, GPT2Config

    config = GPT2Config.tiny()
    leaves, tree = nova.tree_util.tree_flatten(GPT2.init(config, nova.random.key(0)))
    batch, n = 8, len(leaves)

    def step(*args):
        model = nova.tree_util.tree_unflatten(tree, list(args[:n]))
        idx, tgt = args[n:]
        loss, grads = nova.value_and_grad(lambda m: m.loss(idx, tgt))(model)
        new = nova.tree_util.tree_map(lambda p, g: p - 0.01 * g, model, grads)
        return (loss, *nova.tree_util.tree_leaves(new))

    ids = S((batch, config.block_size), np.int32)
    specs = tuple(S(x.shape, x.dtype) for x in leaves) + (ids, ids)
    return Case("gpt2_tiny_sgd_step", step, specs, tol=1e-3,
                ints=((n, config.vocab_size), (n + 1, config.vocab_size)))


# Correctness: every kind of GPU kernel the backend generates, at small and edge shapes.
def DOUBLE(a):  # noqa: N802 - one function shared with device_check.py
    """a * 2.0: the program of device_check.py's `device arrays` section."""
    return a * 2.0


DOUBLE_SHAPE = (257, 33)

CHECKS = [
    _gpt2_tiny_case(),
    # Attention forward + backward: the flash kernels (codegen/cuda/attention.py), every mask
    # kind; T = 50 and 100 leave tails in the query and key tiles, D = 64 a head dim of GPT-2.
    Case("causal_attention_value_and_grad", attention_grad(_attention_loss),
         (S((2, 4, 64, 32), f32),) * 3, tol=1e-4),
    Case("attention_select_value_and_grad", attention_grad(_attention_loss_select),
         (S((2, 50, 16), f32),) * 3, tol=1e-4),
    Case("attention_add_value_and_grad", attention_grad(_attention_loss_add),
         (S((2, 50, 16), f32),) * 3, tol=1e-4),
    Case("attention_tails_value_and_grad", attention_grad(_attention_loss_none),
         (S((2, 2, 100, 64), f32),) * 3, tol=1e-4),
    # The TF32 tensor-core kernels (attention_mma.py) on hardware: fragments, the cp.async ring,
    # dq's atomics, tails (T = 100); D = 40: a one-buffer forward tile and the SIMT backward.
    Case("causal_attention_tf32_value_and_grad", attention_grad(_attention_loss),
         (S((2, 4, 100, 64), f32),) * 3, "tf32", tol=5e-3),
    Case("attention_select_tf32_d40_value_and_grad", attention_grad(_attention_loss_select),
         (S((2, 50, 40), f32),) * 3, "tf32", tol=5e-3),
    Case("elementwise_gelu_bias", lambda x, b: F.gelu(x + b, approximate=True),
         (S((64, 256), f32), S((256,), f32))),
    Case("elementwise_odd_shape", lambda x: jnp.exp(x) * 2.0 - x, (S((7, 13), f32),)),
    # The program device_check.py's `device arrays` section jits on a GPU array (computation
    # follows data): its kernel must be in the carried cache (no MLIR on the GPU machine).
    Case("device_array_double", DOUBLE, (S(DOUBLE_SHAPE, f32),)),
    Case("elementwise_bf16_round_trip", lambda x: (x.astype(bf16) * 3).astype(f32),
         (S((32, 64), f32),), tol=1e-2),
    Case("concat_pad", lambda x, y: jnp.pad(jnp.concatenate([x, y], axis=1), ((0, 0), (4, 4))),
         (S((16, 32), f32), S((16, 32), f32))),
    Case("softmax", lambda x: F.softmax(x), (S((64, 1000), f32),)),
    Case("layer_norm_grad", nova.grad(_ln_loss, argnums=(0, 1, 2)),
         (S((32, 768), f32), S((768,), f32), S((768,), f32)), tol=1e-4),
    Case("cross_entropy_value_and_grad", nova.value_and_grad(_ce),
         (S((16, 500), f32), S((16,), np.int32)), tol=1e-4, ints=((1, 500),)),
    Case("argmax", lambda x: jnp.argmax(x, axis=-1), (S((8, 1024), f32),), tol=0.0),
    Case("column_sum", lambda x: jnp.sum(x, axis=0), (S((300, 40), f32),), tol=1e-5),
    Case("embedding_grad_scatter_add",
         nova.grad(lambda w, ids: jnp.sum(jnp.take(w, ids, axis=0) ** 2)),
         (S((50, 16), f32), S((8, 12), np.int32)), tol=1e-5, ints=((1, 50),)),
    Case("column_softmax", lambda x: F.softmax(x, axis=0), (S((100, 72), f32),), tol=1e-5),
    # Split over the rows (codegen/cuda/column_split.py): a partials and a finishing launch.
    Case("column_sum_split", _bias_grad, (S((4, 512, 256), f32), S((4, 512, 256), f32)),
         tol=1e-5),
    Case("matmul_bias_tanh", lambda x, w, b: jnp.tanh(x @ w + b),
         (S((100, 70), f32), S((70, 130), f32), S((130,), f32)), tol=1e-5),
    # TF32 keeps 10 mantissa bits: ~3e-4 of the largest |x @ w|, which is ~30 here while tanh's
    # output is at most 1, so the error relative to the output's maximum is ~1e-2.
    Case("matmul_bias_tanh_tf32", lambda x, w, b: jnp.tanh(x @ w + b),
         (S((100, 70), f32), S((70, 130), f32), S((130,), f32)), "tf32", tol=2e-2),
    Case("matmul_nt_tf32", lambda x, w: jnp.matmul(x, w.T),
         (S((128, 64), f32), S((96, 64), f32)), "tf32", tol=2e-3),
    Case("batched_matmul", lambda x, w: x @ w, (S((3, 64, 32), f32), S((3, 32, 48), f32)),
         tol=1e-5),
    Case("matmul_bf16", lambda x, w: x @ w, (S((64, 64), bf16), S((64, 128), bf16)), tol=1e-2),
    # m16n8k16 fragments on hardware: tile and K-slice edges, operands transposed in memory.
    Case("matmul_bf16_edges_nt", lambda x, w: x @ w.T, (S((70, 40), bf16), S((130, 40), bf16)),
         tol=1e-2),
    Case("matmul_f16_tn_bias", lambda x, w, b: jnp.tensordot(x, w, axes=([0], [0])) + b,
         (S((48, 64), np.float16), S((48, 24), np.float16), S((24,), np.float16)), tol=5e-3),
    # Both operands transposed (ldmatrix .trans on both tiles) and K = 256: the cp.async ring
    # wraps around several times.
    Case("matmul_bf16_tt_ring", lambda x, w: x.T @ w.T, (S((256, 64), bf16), S((128, 256), bf16)),
         tol=1e-2),
    Case("matmul_tf32_ring", lambda x, w: x @ w, (S((96, 512), f32), S((512, 160), f32)), "tf32",
         tol=2e-3),
    Case("mlp_sgd_step", _mlp_step,
         (S((256, 1024), f32), S((1024,), f32), S((1024, 512), f32), S((512,), f32),
          S((256,), f32), S((512, 256), f32), S((512,), np.int32)), tol=1e-4, ints=((6, 512),)),
    Case("mlp_sgd_step_tf32", _mlp_step,
         (S((256, 1024), f32), S((1024,), f32), S((1024, 512), f32), S((512,), f32),
          S((256,), f32), S((512, 256), f32), S((512,), np.int32)), "tf32", tol=5e-3,
         ints=((6, 512),)),
    Case("scan_rnn_value_and_grad", nova.value_and_grad(_rnn_loss, argnums=(0, 1, 2)),
         (S((64, 64), f32), S((32, 64), f32), S((16, 64), f32), S((12, 16, 32), f32)),
         tol=1e-4),
    Case("while_loop_and_switch", _while_and_switch,
         (S((), np.int32), S((), np.int32), S((1000,), f32)), ints=((0, 6), (1, 3))),
]


# Timing: matmul (TF32 against torch with TF32 on; bf16 against torch bf16) at n^3.
MATMUL_SIZES = (1024, 4096)


def matmul_case(n: int, dtype, precision: str) -> Case:
    tag = "tf32" if precision == "tf32" else np.dtype(dtype).name
    return Case(f"matmul_{tag}_{n}", lambda x, w: x @ w, (S((n, n), dtype), S((n, n), dtype)),
                precision, tol=2e-3 if precision == "tf32" else 1e-2)


MATMULS = [matmul_case(n, f32, "tf32") for n in MATMUL_SIZES] + \
          [matmul_case(n, bf16, "highest") for n in MATMUL_SIZES]

# Timing: GPT-2 124M's GEMM shapes with each wgmma tile forced (config "gemm_tile"), to measure
# what codegen/cuda/split_k.py's cost model assumes (bench/NOTES.md round 16): (m, n, k) of
# x @ w, and a weight gradient x^T @ dy over 8192 rows.
TILE_SHAPES = ((8192, 768, 768), (8192, 768, 3072), (8192, 3072, 768), (768, 3072, 8192))
TILE_CHOICES = ((128, 256), (128, 128), (64, 64))


def tile_case(m: int, n: int, k: int, tile: tuple) -> Case:
    if m < k:  # the weight gradient: x (k, m) transposed
        fn, specs = (lambda x, w: x.T @ w), (S((k, m), f32), S((k, n), f32))
    else:
        fn, specs = (lambda x, w: x @ w), (S((m, k), f32), S((k, n), f32))
    return Case(f"gemm_{m}x{n}x{k}_tile{tile[0]}x{tile[1]}", fn, specs, "tf32", tol=2e-3,
                meta={"tile": tile, "mnk": (m, n, k)})


TILES = [tile_case(*shape, tile) for shape in TILE_SHAPES for tile in TILE_CHOICES]

# Timing: fused memory-bound ops (GB/s of compulsory traffic against a device-to-device copy).
ROWS, COLS = 8192, 4096
MEMBOUND = [
    Case("mb_softmax", lambda x: F.softmax(x), (S((ROWS, COLS), f32),), tol=1e-5),
    Case("mb_layer_norm", lambda x, w, b: F.layer_norm(x, w, b),
         (S((ROWS, COLS), f32), S((COLS,), f32), S((COLS,), f32)), tol=1e-4),
    Case("mb_gelu_bias", lambda x, b: F.gelu(x + b, approximate=True),
         (S((ROWS, COLS), f32), S((COLS,), f32)), tol=1e-5),
    Case("mb_add_scale", lambda x, y: (x + y) * 0.5, (S((ROWS, COLS), f32), S((ROWS, COLS), f32)),
         tol=1e-6),
    # GPT-2 124M's bias / LayerNorm weight gradients: 768 columns over 8192 rows (split).
    Case("mb_bias_grad", _bias_grad, (S((ROWS, 768), f32), S((ROWS, 768), f32)), tol=1e-5),
]


# Timing: causal attention forward + backward (value_and_grad of sum(o²) over q, k, v) against
# torch's scaled_dot_product_attention + autograd; (batch, heads, T, D).
ATTENTION_SHAPES = ((4, 12, 1024, 64), (2, 16, 2048, 128))


def attention_case(b: int, h: int, t: int, d: int, precision: str = "highest") -> Case:
    # TF32 (tensor cores, attention_mma.py): ~1e-3 of the largest gradient.
    tag = "_tf32" if precision == "tf32" else ""
    return Case(f"attention_causal_b{b}h{h}t{t}d{d}{tag}", attention_grad(_attention_loss),
                (S((b, h, t, d), f32),) * 3, precision, tol=5e-3 if precision == "tf32" else 1e-4)


ATTENTION = [attention_case(*shape, precision=p) for shape in ATTENTION_SHAPES
             for p in ("highest", "tf32")]



def eval_shape(f, *args):
    """The pytree of ShapeDtypeStructs that f(*args) returns (args: arrays or
    ShapeDtypeStructs), from f's trace alone: nothing is computed."""
    traced = nova.jit(f).trace(*args)
    return nova.tree_util.tree_unflatten(
        traced.out_tree, [S(v.type.shape, v.type.dtype) for v in traced.program.outputs])


# Timing: one training step of bench/gpt2_step.py's GPT-2 with AdamW inside the step, against
# torch eager, torch.compile and jax.jit (bench/device_check.py's `gpt2` section). The config is
# NOVA_GPT2_CONFIG (default "124M"; "" leaves the section out); build the cache with the same.
# 124M: GPT-2 small with the vocabulary padded to 50304 (a multiple of 128, as nanoGPT / llm.c
# do) for every framework; "micro" is for the dry run's simulator.
GPT2_CONFIGS = {
    "124M": dict(n_layer=12, d=768, n_head=12, seq=1024, batch=8, vocab=50304),
    "small": dict(n_layer=4, d=256, n_head=4, seq=128, batch=8, vocab=4096),
    "tiny": dict(n_layer=2, d=128, n_head=4, seq=64, batch=8, vocab=256),
    "micro": dict(n_layer=1, d=32, n_head=2, seq=16, batch=2, vocab=64),
}


def gpt2_optimizer():
    """bench/gpt2_step.py's AdamW (lr 6e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the
    2-D weights only)."""
    import nova.optim as optim
    from bench.gpt2_step import B1, B2, EPS, LR, WD

    return optim.adamw(LR, b1=B1, b2=B2, eps=EPS, weight_decay=WD,
                       mask=lambda m: nova.tree_util.tree_map(lambda p: p.ndim >= 2, m))


def gpt2_step_case(name: str) -> Case:
    """One AdamW training step of nova.nn.GPT2 at config `name` of GPT2_CONFIGS, under TF32
    matmuls, jitted with the model and optimizer state donated: step(model, opt_state, idx,
    tgt) -> (model, opt_state, loss), idx and tgt (batch, seq) int32. The specs are pytrees of
    ShapeDtypeStructs (model, AdamW state, ids, ids); `meta` is the config dict. Raises
    KeyError for an unknown name."""
    import nova.optim as optim
    from nova.nn import GPT2, GPT2Config

    cfg = GPT2_CONFIGS[name]
    config = GPT2Config(vocab_size=cfg["vocab"], block_size=cfg["seq"], n_layer=cfg["n_layer"],
                        n_head=cfg["n_head"], n_embd=cfg["d"])
    tx = gpt2_optimizer()
    model = eval_shape(lambda key: GPT2.init(config, key), S((2,), np.uint32))
    opt_state = eval_shape(tx.init, model)

    def train_step(model, opt_state, idx, tgt):
        loss, grads = nova.value_and_grad(lambda m: m.loss(idx, tgt))(model)
        updates, opt_state = tx.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    ids = S((cfg["batch"], cfg["seq"]), np.int32)
    return Case(f"gpt2_{name}_adamw_step", train_step, (model, opt_state, ids, ids), "tf32",
                tol=2e-3, donate=(0, 1), meta=dict(cfg, name=name))


GPT2_CONFIG = os.environ.get("NOVA_GPT2_CONFIG", "124M")
GPT2 = [gpt2_step_case(GPT2_CONFIG)] if GPT2_CONFIG else []


def all_cases() -> list:
    return CHECKS + MATMULS + MEMBOUND + ATTENTION + GPT2 + TILES


@contextlib.contextmanager
def precision(case: Case):
    """The case's matmul precision (and forced GEMM tile, for TILES) for the duration (a
    compiled function's signature includes them: compile and call under the same ones)."""
    saved = nova.config.read("matmul_precision"), nova.config.read("gemm_tile")
    nova.config.update("matmul_precision", case.precision)
    tile = case.meta.get("tile") if isinstance(case.meta, dict) else None
    nova.config.update("gemm_tile", tuple(tile) if tile else None)
    try:
        yield
    finally:
        nova.config.update("matmul_precision", saved[0])
        nova.config.update("gemm_tile", saved[1])


def compile_case(case: Case, target: str):
    """nova.jit(case.fn, donate_argnums=case.donate) lowered for `target` and compiled under the
    case's matmul precision."""
    with precision(case):
        jitted = nova.jit(case.fn, donate_argnums=case.donate)
        return jitted.lower(*case.specs, target=target).compile()


def gpu_launches(exe) -> list:
    """The launches with PTX of a CUDA executable, those of its control-flow Regions included
    (nova/gpu/loops.py), in launch order."""
    out = []
    for launch in exe.launches:
        if launch.ptx is not None:
            out.append(launch)
        if launch.loop is not None:
            for region in launch.loop.regions.values():
                out += gpu_launches(region)
    return out


def random_args(case: Case, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    bounds = dict(case.ints)
    out = []
    for i, s in enumerate(case.specs):
        if np.dtype(s.dtype).kind in "iu":
            out.append(rng.integers(0, bounds.get(i, 2), s.shape).astype(s.dtype))
        else:
            out.append(rng.standard_normal(s.shape).astype(s.dtype))
    return out


def kernel_facts(exe) -> list:
    """What each GPU kernel of an executable was generated as (schedule, tiles, cp.async
    stages, shared memory) and what the driver reports for it (registers, static shared
    bytes, max threads), for reading a slow kernel's figures."""
    facts = []
    for launch, fn in zip(exe.launches, getattr(exe, "functions", []) or [], strict=False):
        if launch.ptx is None or fn is None:
            continue
        rec = {"entry": launch.entry, "grid": list(launch.config.grid),
               "block": list(launch.config.block),
               "dynamic_shared_bytes": launch.config.shared_bytes}
        sched = getattr(launch.kernel, "schedule", {}) or {}
        rec.update({k: sched[k] for k in ("gpu_schedule", "tile", "stages") if k in sched})
        for attr in ("NUM_REGS", "SHARED_SIZE_BYTES", "MAX_THREADS_PER_BLOCK"):
            try:
                rec[attr.lower()] = fn.attribute(attr)
            except Exception as ex:  # noqa: BLE001 - a fact we could not read
                rec[attr.lower()] = f"{type(ex).__name__}"
        facts.append(rec)
    return facts
