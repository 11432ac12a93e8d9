"""Train GPT-2 with Nova on real English text: `python examples/gpt2/train.py --config tiny`.

One `nova.jit` step holds the forward pass, `nova.value_and_grad`'s backward pass, gradient
clipping and the AdamW update (warmup + cosine schedule), with the model and optimizer state
donated so they are updated in place. The loop evaluates the validation loss every
`eval_interval` steps, shows loss, tokens/s and an MFU estimate in a progress bar, writes a
checkpoint every `ckpt_interval` steps (resume with --resume), and at the end draws the loss curve
(loss.png) and prints generated text. Batches are a function of (seed, step), so a resumed run
sees the same data as an uninterrupted one.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

import nova
import nova.nn as nn
import nova.optim as optim
import nova.random as nr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import configs  # noqa: E402
import data  # noqa: E402
import generate  # noqa: E402
import tokenizer as tok  # noqa: E402

CHECKPOINT = "ckpt.safetensors"
METRICS = "metrics.json"


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=sorted(configs.CONFIGS), default="tiny")
    ap.add_argument("--data", help="train on this UTF-8 text file instead of Shakespeare")
    ap.add_argument("--tokenizer", choices=sorted(tok.TOKENIZERS), default="gpt2")
    ap.add_argument("--vocab", choices=("full", "corpus"), help="override the config's vocab")
    ap.add_argument("--cache-dir", help=f"data cache (default {data.default_cache_dir()})")
    ap.add_argument("--out", help="output directory (default out/gpt2-CONFIG)")
    ap.add_argument("--steps", type=int, help="total optimizer steps (the schedule's length)")
    ap.add_argument("--stop-at", type=int, help="stop at this step with a checkpoint, as if "
                    "interrupted (continue with --resume)")
    ap.add_argument("--n-layer", type=int)
    ap.add_argument("--n-head", type=int)
    ap.add_argument("--n-embd", type=int)
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--block-size", type=int)
    ap.add_argument("--lr", type=float, help="peak learning rate")
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--eval-interval", type=int)
    ap.add_argument("--eval-batches", type=int)
    ap.add_argument("--ckpt-interval", type=int)
    ap.add_argument("--resume", action="store_true", help="continue from OUT/" + CHECKPOINT)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samples", type=int, default=3, help="texts generated at the end")
    ap.add_argument("--sample-tokens", type=int, default=100)
    ap.add_argument("--prompt", default="\n", help="start of the final samples (\\n, \\t, \\\\ "
                    "are escapes)")
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=200)
    ap.add_argument("--peak-tflops", type=float, help="device peak for the MFU estimate "
                    "(default: a stated CPU peak, see configs.cpu_peak_flops)")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap.parse_args(argv)


def run_config(args) -> configs.TrainConfig:
    cfg = configs.CONFIGS[args.config]
    overrides = {f: getattr(args, f) for f in ("n_layer", "n_head", "n_embd", "steps",
                                               "batch_size", "block_size", "lr",
                                               "warmup", "eval_interval", "eval_batches",
                                               "ckpt_interval", "vocab")
                 if getattr(args, f) is not None}
    cfg = dataclasses.replace(cfg, **overrides)
    for f in ("n_layer", "n_head", "n_embd", "steps", "batch_size", "block_size",
              "eval_interval", "eval_batches", "ckpt_interval"):
        if getattr(cfg, f) < 1:
            raise SystemExit(f"--{f.replace('_', '-')} must be >= 1, got {getattr(cfg, f)}")
    if cfg.n_embd % cfg.n_head:
        raise SystemExit(f"--n-embd ({cfg.n_embd}) must be a multiple of --n-head ({cfg.n_head})")
    if cfg.warmup < 0:
        raise SystemExit(f"--warmup must be >= 0, got {cfg.warmup}")
    if not 0 < cfg.lr < float("inf"):
        raise SystemExit(f"--lr must be a finite number > 0, got {cfg.lr}")
    if args.seed < 0:
        raise SystemExit(f"--seed must be >= 0, got {args.seed}")
    if args.data is not None and not os.path.isfile(args.data):
        raise SystemExit(f"--data {args.data!r}: " + ("is a directory, not a text file"
                         if os.path.isdir(args.data) else "no such file"))
    # Checked before any work, not after a whole run has trained.
    for f in ("stop_at", "peak_tflops"):
        v = getattr(args, f)
        if v is not None and not v > 0:
            raise SystemExit(f"--{f.replace('_', '-')} must be > 0, got {v}")
    if args.samples < 0 or args.sample_tokens < 1:
        raise SystemExit(f"--samples must be >= 0 and --sample-tokens >= 1, got {args.samples} "
                         f"and {args.sample_tokens}")
    if not 0 <= args.temperature < float("inf"):
        raise SystemExit(f"--temperature must be >= 0 (0 = greedy) and finite, got "
                         f"{args.temperature}")
    if args.top_k < 0:
        raise SystemExit(f"--top-k must be >= 0 (0 = no top-k filter), got {args.top_k}")
    return cfg


def check_data(args, cfg, tokenizer, vocab, train_ids, val_ids) -> None:
    """Before training: both splits hold a window of block_size + 1 tokens, and the final
    samples' prompt can be encoded for this model. Raises SystemExit saying what to change."""
    name = args.data or "the Shakespeare corpus"
    for split, ids in (("training", train_ids), ("validation", val_ids)):
        if ids.size < cfg.block_size + 1:
            raise SystemExit(
                f"{name}: the {split} split has {ids.size} tokens ({tokenizer.name}), fewer than "
                f"--block-size {cfg.block_size} + 1; give a longer text or a smaller --block-size"
            )
    if args.samples > 0:
        try:
            generate.check_prompt(tokenizer, vocab, generate.unescape_prompt(args.prompt))
        except (KeyError, ValueError) as e:
            raise SystemExit(f"--prompt {args.prompt!r} cannot be encoded for this model: "
                             f"{e.args[0]}") from None


def make_optimizer(cfg: configs.TrainConfig) -> optim.GradientTransformation:
    warmup = min(cfg.warmup, cfg.steps - 1)
    schedule = optim.warmup_cosine_decay_schedule(0.0, cfg.lr, warmup, cfg.steps, cfg.min_lr)
    return optim.chain(
        optim.clip_by_global_norm(cfg.grad_clip),
        optim.adamw(schedule, b1=0.9, b2=0.95, eps=1e-8, weight_decay=cfg.weight_decay,
                    mask=optim.weight_decay_mask),
    )


def make_train_step(opt, dropout: float):
    """The jitted step (model, opt_state, x, y, key) -> (model, opt_state, loss)."""
    train = dropout > 0

    @functools.partial(nova.jit, donate_argnums=(0, 1))
    def train_step(model, opt_state, x, y, key):
        def loss_fn(m):
            return m.loss(x, y, key=key if train else None, train=train)

        loss, grads = nova.value_and_grad(loss_fn)(model)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    return train_step


eval_loss = nova.jit(lambda model, x, y: model.loss(x, y))


def batch_at(tokens, cfg, seed: int, step: int):
    """The training batch of `step`: a function of (seed, step) only."""
    return data.get_batch(tokens, cfg.batch_size, cfg.block_size,
                          np.random.default_rng([seed, step]))


def evaluate(model, batches) -> float:
    return float(np.mean([float(eval_loss(model, x, y)) for x, y in batches]))


def load_data(args, cfg):
    tokenizer = tok.get_tokenizer(args.tokenizer)
    train_ids, val_ids = data.prepare(tokenizer, args.data, args.cache_dir)
    vocab = None
    if cfg.vocab == "corpus":
        vocab = tok.SubsetVocab(np.concatenate([train_ids, val_ids]))
        train_ids, val_ids = vocab.to_model(train_ids), vocab.to_model(val_ids)
    return tokenizer, vocab, train_ids, val_ids


def _save(out: Path, model, opt_state, step, meta, metrics):
    nn.save_checkpoint(out / CHECKPOINT, model, opt_state, step=step, config=meta)
    tmp = out / (METRICS + ".tmp")
    tmp.write_text(json.dumps(metrics))
    os.replace(tmp, out / METRICS)


def _restore(out: Path, model, opt_state, meta):
    path = out / CHECKPOINT
    if not path.exists():
        raise SystemExit(f"--resume: no checkpoint at {path}")
    try:
        saved = nn.checkpoint_metadata(path)["config"] or {}
    except nn.CheckpointError as e:
        raise SystemExit(f"--resume: {e}; delete it to start afresh") from None
    # The run's settings first (a clear message), then the tensors.
    for k in ("model", "tokenizer", "vocab_ids", "vocab_size", "data"):
        a, b = saved.get(k), meta.get(k)
        if a != b:
            if isinstance(a, dict) and isinstance(b, dict):  # name the fields that differ
                keys = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
                a, b = ({f: d.get(f) for f in keys} for d in (a, b))
            raise SystemExit(f"--resume: the checkpoint's {k} ({str(a)[:80]}) differs from this "
                             f"run's ({str(b)[:80]})")
    old, new = saved.get("train") or {}, meta["train"]
    changed = {f: (old.get(f), new.get(f)) for f in sorted(set(old) | set(new))
               if old.get(f) != new.get(f)}
    if changed:  # allowed (e.g. more --steps), but the run is no longer the uninterrupted one
        print("--resume: training settings changed since the checkpoint: " + ", ".join(
            f"{f} {a} -> {b}" for f, (a, b) in changed.items()))
    try:
        model, opt_state, step, saved = nn.load_checkpoint(path, model, opt_state)
    except (nn.CheckpointError, KeyError, ValueError) as e:
        raise SystemExit(f"--resume: {e}") from None
    metrics = json.loads((out / METRICS).read_text()) if (out / METRICS).exists() else {}
    for key in ("train", "val"):
        metrics[key] = [r for r in metrics.get(key, []) if r[0] <= step]
    return model, opt_state, step, metrics


@dataclasses.dataclass
class Run:
    """Everything one training run holds: settings, data, model, optimizer state and history."""

    args: argparse.Namespace
    cfg: configs.TrainConfig
    out: Path
    tokenizer: object
    vocab: tok.SubsetVocab | None
    train_ids: np.ndarray
    val_ids: np.ndarray
    model_cfg: nn.GPT2Config
    meta: dict
    key: object
    model: nn.GPT2
    opt: optim.GradientTransformation
    opt_state: object
    step: int = 0
    metrics: dict = dataclasses.field(default_factory=lambda: {"train": [], "val": []})


def setup(args) -> Run:
    """Data, model and optimizer for `args`, restored from the checkpoint with --resume."""
    cfg = run_config(args)
    out = Path(args.out or f"out/gpt2-{args.config}")
    out.mkdir(parents=True, exist_ok=True)
    tokenizer, vocab, train_ids, val_ids = load_data(args, cfg)
    check_data(args, cfg, tokenizer, vocab, train_ids, val_ids)
    vocab_size = vocab.size if vocab is not None else tokenizer.vocab_size
    # The head's width rounded up to a multiple of 64 (as nanoGPT's 50304): the matrix multiply
    # kernels run much faster on aligned widths. The extra ids never occur in the data (their
    # logits are trained down) and are never sampled.
    model_cfg = nn.GPT2Config(vocab_size=-(-vocab_size // 64) * 64, block_size=cfg.block_size,
                              n_layer=cfg.n_layer, n_head=cfg.n_head, n_embd=cfg.n_embd,
                              dropout=cfg.dropout)
    # The seed decides every batch: a resumed run reports a changed one with the settings.
    meta = {"model": model_cfg.to_dict(), "train": {**dataclasses.asdict(cfg), "seed": args.seed},
            "tokenizer": tokenizer.name, "data": args.data or "shakespeare",
            "vocab_size": vocab_size,
            "vocab_ids": None if vocab is None else vocab.ids.tolist()}
    key = nr.key(args.seed)
    model = nn.GPT2.init(model_cfg, key)
    opt = make_optimizer(cfg)
    run = Run(args, cfg, out, tokenizer, vocab, train_ids, val_ids, model_cfg, meta, key, model,
              opt, opt.init(model))
    if args.resume:
        run.model, run.opt_state, run.step, run.metrics = _restore(out, model, run.opt_state,
                                                                   meta)
        print(f"resumed from {out / CHECKPOINT} at step {run.step}")
    return run


def train_loop(run: Run, flops_tok: float, peak: float) -> dict:
    """Steps until the config's last step (or --stop-at); returns losses and timings."""
    args, cfg = run.args, run.cfg
    train_step = make_train_step(run.opt, cfg.dropout)
    eval_rng = np.random.default_rng([args.seed, 2**31 - 1])
    val_batches = [data.get_batch(run.val_ids, cfg.batch_size, cfg.block_size, eval_rng)
                   for _ in range(cfg.eval_batches)]
    stop = min(cfg.steps, args.stop_at) if args.stop_at else cfg.steps
    tokens_per_step = cfg.batch_size * cfg.block_size
    bar = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, initial=run.step, unit="step", dynamic_ncols=True)
        # The first call traces and compiles the step (~10 s for tiny on 2 cores, far less when
        # Nova's on-disk executable cache has it); say so instead of a silent 0 %.
        bar.set_postfix_str("compiling the training step")
    compile_s, times, losses = None, [], []
    while run.step < stop:
        x, y = batch_at(run.train_ids, cfg, args.seed, run.step)
        step_key = nr.fold_in(run.key, run.step) if cfg.dropout > 0 else None
        t0 = time.perf_counter()
        run.model, run.opt_state, loss = train_step(run.model, run.opt_state, x, y, step_key)
        loss = float(loss)
        dt = time.perf_counter() - t0
        if compile_s is None:
            compile_s = dt  # the first call traces, compiles and runs
        else:
            times.append(dt)
        if not math.isfinite(loss):
            raise FloatingPointError(f"the training loss is {loss} at step {run.step}")
        run.step += 1
        losses.append((run.step, loss))
        run.metrics["train"].append((run.step, loss))
        if run.step % cfg.eval_interval == 0 or run.step == cfg.steps:
            run.metrics["val"].append((run.step, evaluate(run.model, val_batches)))
        if bar is not None:
            post = {"loss": f"{loss:.3f}"}
            if times:  # (the first step's time is mostly compilation)
                tps = tokens_per_step / np.median(times[-20:])
                post.update({"tok/s": f"{tps:,.0f}", "mfu": f"{100 * flops_tok * tps / peak:.1f}%"})
            if run.metrics["val"]:
                post["val"] = f"{run.metrics['val'][-1][1]:.3f}"
            bar.set_postfix(post, refresh=False)
            bar.update(1)
        if run.step % cfg.ckpt_interval == 0 or run.step == stop:
            _save(run.out, run.model, run.opt_state, run.step, run.meta, run.metrics)
    if bar is not None:
        bar.close()
    step_s = float(np.median(times)) if times else None
    return {"losses": losses, "compile_s": compile_s, "step_s": step_s,
            "tokens_per_s": tokens_per_step / step_s if step_s else None}


def train(argv=None) -> dict:
    """Runs training; returns a summary dict (losses per step, val losses, timings, entropy,
    samples)."""
    args = parse_args(argv)
    run = setup(args)
    cfg, model_cfg = run.cfg, run.model_cfg
    vocab_size = run.meta["vocab_size"]
    n_params = run.model.num_parameters()
    n_pos = model_cfg.block_size * model_cfg.n_embd
    flops_tok = configs.flops_per_token(n_params - n_pos, cfg.n_layer, cfg.n_embd,
                                        cfg.block_size)
    peak = args.peak_tflops * 1e12 if args.peak_tflops else configs.cpu_peak_flops()
    entropy = data.unigram_entropy(run.train_ids)
    print(f"GPT-2 {args.config}: {n_params:,} parameters, {cfg.n_layer} layers x {cfg.n_head} "
          f"heads x {cfg.n_embd}, block {cfg.block_size}, vocab {vocab_size} "
          f"({run.tokenizer.name}, {cfg.vocab}; head padded to {model_cfg.vocab_size}); batch "
          f"{cfg.batch_size}x{cfg.block_size} tokens; {cfg.steps} steps")
    print(f"unigram entropy of the training tokens: {entropy:.3f} nats "
          f"({entropy / math.log(2):.3f} bits) per token")
    t_start = time.perf_counter()
    stats = train_loop(run, flops_tok, peak)
    summary = {**stats, "step": run.step, "val": run.metrics["val"], "unigram_entropy": entropy,
               "num_parameters": n_params, "wall_s": time.perf_counter() - t_start,
               "vocab_size": vocab_size, "model_vocab_size": model_cfg.vocab_size}
    print(f"{len(stats['losses'])} steps in {summary['wall_s']:.0f} s")
    if stats["step_s"]:
        print(f"step time {1e3 * stats['step_s']:.1f} ms (median), "
              f"{stats['tokens_per_s']:,.0f} tokens/s, MFU "
              f"{100 * flops_tok * stats['tokens_per_s'] / peak:.1f}% of {peak / 1e12:.3g} "
              f"TFLOP/s; first step (trace + compile + run) {stats['compile_s']:.1f} s")
    if run.metrics["val"]:
        at, v = run.metrics["val"][-1]
        print(f"validation loss {v:.3f} nats ({v / math.log(2):.3f} bits) per token at step "
              f"{at} vs unigram entropy {entropy:.3f} nats ({entropy / math.log(2):.3f} bits)")
    if run.step >= cfg.steps:
        if not args.no_plot:
            plot(run.metrics, entropy, run.out / "loss.png", args.config)
            print(f"loss curve: {run.out / 'loss.png'}")
        if args.samples > 0:
            summary["samples"] = generate.generate_text(
                run.model, run.tokenizer, run.vocab, generate.unescape_prompt(args.prompt),
                args.samples,
                args.sample_tokens, np.random.default_rng(args.seed), args.temperature,
                args.top_k or None, vocab_size=vocab_size)
            for i, text in enumerate(summary["samples"]):
                print(f"--- sample {i + 1} ---\n{text}")
    print(f"checkpoint: {run.out / CHECKPOINT} (step {run.step})")
    return summary


def plot(metrics, entropy, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    s, tl = np.array(metrics["train"]).T
    ax.plot(s, tl, lw=0.6, alpha=0.4, color="C0", label="train (per step)")
    k = max(1, len(tl) // 50)
    if len(tl) > k:
        ax.plot(s[k - 1:], np.convolve(tl, np.ones(k) / k, "valid"), color="C0",
                label=f"train ({k}-step mean)")
    if metrics["val"]:
        vs, vl = np.array(metrics["val"]).T
        ax.plot(vs, vl, "o-", color="C1", label="validation")
    ax.axhline(entropy, ls="--", color="gray", label=f"unigram entropy {entropy:.2f}")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title(f"GPT-2 {title} with Nova")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    train()
