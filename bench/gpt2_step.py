"""GPT-2 training step, side by side: Nova, PyTorch eager, torch.compile (Inductor) and jax.jit.

The same model in every framework -- token and position embeddings, pre-LN blocks with causal
self-attention (one fused qkv projection), a GELU-tanh MLP of 4x width, final LayerNorm, weight-tied
head, mean cross-entropy -- and the same AdamW update inside the step (lr 6e-4, betas 0.9/0.95,
eps 1e-8, decoupled weight decay 0.1 on the 2-D weights only), float32, from the same initial
weights (NumPy, seeded, GPT-2 parameter names) and the same batch. Every framework runs in its own
process (so peak RSS is per framework), runs alternate, and the parent prints for each:
first-step time (trace + compile + one step), median step time after warm-up, tokens/s, peak RSS,
the step-0 loss (they must agree to 4 decimals), and Nova's ratio to each peer. Nova runs twice per
round against one fresh kernel-cache directory: cold (first process) and warm (second process).

Usage:
    python bench/gpt2_step.py                      # tiny and small configs, 3 rounds
    python bench/gpt2_step.py --config tiny --rounds 1 --steps 5 --smoke
    python bench/gpt2_step.py --frameworks nova,jax

Configs (issue 5): tiny = 2 layers, d_model 128, 4 heads, seq 64, batch 8, vocab 256;
small = 4 layers, d_model 256, 4 heads, seq 128, batch 8, vocab 4096.
Threads: every framework is limited to the same thread count (``--threads``, default 2).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CONFIGS = {
    "tiny": dict(n_layer=2, d=128, n_head=4, seq=64, batch=8, vocab=256),
    "small": dict(n_layer=4, d=256, n_head=4, seq=128, batch=8, vocab=4096),
}
LR, B1, B2, EPS, WD = 6e-4, 0.9, 0.95, 1e-8, 0.1
FRAMEWORKS = ("nova", "torch", "torch.compile", "jax")


def make_weights(cfg: dict, seed: int = 0) -> dict:
    """GPT-2-named float32 weights; Linear weights are (in, out) as in GPT-2's Conv1D."""
    import numpy as np

    rng = np.random.default_rng(seed)
    d, L, V, T = cfg["d"], cfg["n_layer"], cfg["vocab"], cfg["seq"]

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    w = {"wte.weight": normal(V, d), "wpe.weight": normal(T, d, std=0.01)}
    proj_std = 0.02 / (2 * L) ** 0.5
    for i in range(L):
        p = f"h.{i}."
        for ln in ("ln_1", "ln_2"):
            w[p + ln + ".weight"] = np.ones(d, np.float32)
            w[p + ln + ".bias"] = np.zeros(d, np.float32)
        w[p + "attn.c_attn.weight"] = normal(d, 3 * d)
        w[p + "attn.c_attn.bias"] = np.zeros(3 * d, np.float32)
        w[p + "attn.c_proj.weight"] = normal(d, d, std=proj_std)
        w[p + "attn.c_proj.bias"] = np.zeros(d, np.float32)
        w[p + "mlp.c_fc.weight"] = normal(d, 4 * d)
        w[p + "mlp.c_fc.bias"] = np.zeros(4 * d, np.float32)
        w[p + "mlp.c_proj.weight"] = normal(4 * d, d, std=proj_std)
        w[p + "mlp.c_proj.bias"] = np.zeros(d, np.float32)
    w["ln_f.weight"] = np.ones(d, np.float32)
    w["ln_f.bias"] = np.zeros(d, np.float32)
    return w


def make_batch(cfg: dict, seed: int = 1):
    import numpy as np

    rng = np.random.default_rng(seed)
    toks = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1)).astype(np.int32)
    return toks[:, :-1].copy(), toks[:, 1:].copy()


# ----------------------------------------------------------------------------------------------
# Workers: each builds the step, times it and prints one JSON line.


def _timed_steps(step, n_steps: int):
    import time

    times = []
    for _ in range(n_steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return times


def worker_nova(cfg, weights, idx, tgt, n_steps):
    import time

    import numpy as np

    import nova
    import nova.nn as nn
    import nova.optim as optim

    config = nn.GPT2Config(vocab_size=cfg["vocab"], block_size=cfg["seq"], n_layer=cfg["n_layer"],
                           n_head=cfg["n_head"], n_embd=cfg["d"])
    model = nn.GPT2.init(config, nova.random.key(0)).load_state_dict(weights)
    tx = optim.adamw(LR, b1=B1, b2=B2, eps=EPS, weight_decay=WD,
                     mask=lambda m: nova.tree_util.tree_map(lambda p: p.ndim >= 2, m))
    opt_state = tx.init(model)

    def train_step(model, opt_state, idx, tgt):
        loss, grads = nova.value_and_grad(lambda m: m.loss(idx, tgt))(model)
        updates, opt_state = tx.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    step = nova.jit(train_step, donate_argnums=(0, 1))
    state = [model, opt_state]
    losses = []

    def run():
        state[0], state[1], loss = step(state[0], state[1], idx, tgt)
        losses.append(float(np.asarray(loss)))

    t = time.perf_counter()
    run()
    first = time.perf_counter() - t
    return first, _timed_steps(run, n_steps), losses[0]


def torch_loss(cfg, P, attention=None):
    """loss_fn(idx, tgt) of this benchmark's GPT-2 in PyTorch over the parameter dict P (GPT-2's
    dotted names); attention(q, k, v) on (B, H, T, D) tensors, causal (default: written out as
    a masked softmax, as the other frameworks' users write it). bench/device_check.py passes
    scaled_dot_product_attention."""
    import torch
    import torch.nn.functional as F

    L, H = cfg["n_layer"], cfg["n_head"]

    def masked_softmax_attention(q, k, v):
        T = q.shape[-2]
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        s = (q @ k.transpose(-1, -2)) * (1.0 / q.shape[-1] ** 0.5)
        return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v

    attention = attention or masked_softmax_attention

    def loss_fn(idx, tgt):
        B, T = idx.shape
        x = P["wte.weight"][idx] + P["wpe.weight"][:T]
        C = x.shape[-1]
        for i in range(L):
            p = f"h.{i}."
            h = F.layer_norm(x, (C,), P[p + "ln_1.weight"], P[p + "ln_1.bias"], 1e-5)
            qkv = h @ P[p + "attn.c_attn.weight"] + P[p + "attn.c_attn.bias"]
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, dim=-1))
            y = attention(q, k, v).transpose(1, 2).reshape(B, T, C)
            x = x + y @ P[p + "attn.c_proj.weight"] + P[p + "attn.c_proj.bias"]
            h = F.layer_norm(x, (C,), P[p + "ln_2.weight"], P[p + "ln_2.bias"], 1e-5)
            h = F.gelu(h @ P[p + "mlp.c_fc.weight"] + P[p + "mlp.c_fc.bias"], approximate="tanh")
            x = x + h @ P[p + "mlp.c_proj.weight"] + P[p + "mlp.c_proj.bias"]
        x = F.layer_norm(x, (C,), P["ln_f.weight"], P["ln_f.bias"], 1e-5)
        logits = x @ P["wte.weight"].T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))

    return loss_fn


def _torch_model(cfg, weights):
    import torch

    P = {k: torch.tensor(v, requires_grad=True) for k, v in weights.items()}
    decay = [p for p in P.values() if p.ndim >= 2]
    no_decay = [p for p in P.values() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(B1, B2), eps=EPS, foreach=True)
    return torch_loss(cfg, P), opt


def worker_torch(cfg, weights, idx, tgt, n_steps, compiled: bool):
    import time

    import torch

    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    loss_fn, opt = _torch_model(cfg, weights)
    if compiled:
        loss_fn = torch.compile(loss_fn)
    idx_t, tgt_t = torch.tensor(idx, dtype=torch.long), torch.tensor(tgt, dtype=torch.long)
    losses = []

    def run():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(idx_t, tgt_t)
        loss.backward()
        opt.step()
        losses.append(float(loss))

    t = time.perf_counter()
    run()
    first = time.perf_counter() - t
    return first, _timed_steps(run, n_steps), losses[0]


def jax_loss(cfg, attention=None):
    """loss_fn(P, idx, tgt) of this benchmark's GPT-2 in JAX (P: GPT-2's dotted names);
    attention(q, k, v) on (B, T, H, D) arrays, causal (default: written out as a masked
    softmax). bench/device_check.py passes jax.nn.dot_product_attention."""
    import jax
    import jax.numpy as jnp
    import optax

    L, H = cfg["n_layer"], cfg["n_head"]

    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * g + b

    def masked_softmax_attention(q, k, v):
        q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
        T = q.shape[-2]
        s = (q @ jnp.swapaxes(k, -1, -2)) * (1.0 / q.shape[-1] ** 0.5)
        a = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -jnp.inf), axis=-1)
        return (a @ v).transpose(0, 2, 1, 3)

    attention = attention or masked_softmax_attention

    def loss_fn(P, idx, tgt):
        B, T = idx.shape
        x = P["wte.weight"][idx] + P["wpe.weight"][:T]
        C = x.shape[-1]
        for i in range(L):
            p = f"h.{i}."
            h = ln(x, P[p + "ln_1.weight"], P[p + "ln_1.bias"])
            qkv = h @ P[p + "attn.c_attn.weight"] + P[p + "attn.c_attn.bias"]
            q, k, v = (t.reshape(B, T, H, C // H) for t in jnp.split(qkv, 3, axis=-1))
            y = attention(q, k, v).reshape(B, T, C)
            x = x + y @ P[p + "attn.c_proj.weight"] + P[p + "attn.c_proj.bias"]
            h = ln(x, P[p + "ln_2.weight"], P[p + "ln_2.bias"])
            h = jax.nn.gelu(h @ P[p + "mlp.c_fc.weight"] + P[p + "mlp.c_fc.bias"], approximate=True)
            x = x + h @ P[p + "mlp.c_proj.weight"] + P[p + "mlp.c_proj.bias"]
        x = ln(x, P["ln_f.weight"], P["ln_f.bias"])
        logits = x @ P["wte.weight"].T
        return optax.softmax_cross_entropy_with_integer_labels(logits, tgt).mean()

    return loss_fn


def jax_adamw():
    """optax.adamw with this benchmark's hyperparameters, weight decay on the 2-D weights."""
    import jax
    import optax

    return optax.adamw(LR, b1=B1, b2=B2, eps=EPS, weight_decay=WD,
                       mask=lambda P: jax.tree_util.tree_map(lambda p: p.ndim >= 2, P))


def worker_jax(cfg, weights, idx, tgt, n_steps):
    import time

    import jax
    import jax.numpy as jnp
    import optax

    loss_fn, tx = jax_loss(cfg), jax_adamw()
    P = {k: jnp.asarray(v) for k, v in weights.items()}
    state = [P, tx.init(P)]

    @jax.jit
    def step(P, s, idx, tgt):
        loss, g = jax.value_and_grad(loss_fn)(P, idx, tgt)
        upd, s = tx.update(g, s, P)
        return optax.apply_updates(P, upd), s, loss

    idx_j, tgt_j = jnp.asarray(idx), jnp.asarray(tgt)
    losses = []

    def run():
        state[0], state[1], loss = step(state[0], state[1], idx_j, tgt_j)
        losses.append(float(loss))

    t = time.perf_counter()
    run()
    first = time.perf_counter() - t
    return first, _timed_steps(run, n_steps), losses[0]


def worker_main(framework: str, config: str, n_steps: int, warmup: int) -> None:
    import resource

    cfg = CONFIGS[config]
    weights = make_weights(cfg)
    idx, tgt = make_batch(cfg)
    if framework == "nova":
        first, times, loss0 = worker_nova(cfg, weights, idx, tgt, n_steps + warmup)
    elif framework in ("torch", "torch.compile"):
        first, times, loss0 = worker_torch(cfg, weights, idx, tgt, n_steps + warmup,
                                           compiled=framework == "torch.compile")
    elif framework == "jax":
        first, times, loss0 = worker_jax(cfg, weights, idx, tgt, n_steps + warmup)
    else:
        raise ValueError(f"unknown framework {framework!r}; expected one of {FRAMEWORKS}")
    step_s = statistics.median(times[warmup:])
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # ru_maxrss is KiB on Linux
    print(json.dumps({"framework": framework, "first_step_s": first, "step_s": step_s,
                      "tokens_per_s": cfg["batch"] * cfg["seq"] / step_s, "peak_rss_mb": peak_mb,
                      "loss0": loss0}))


# ----------------------------------------------------------------------------------------------
# Parent: alternate processes, collect medians, print the table.


def _spawn(framework, config, steps, warmup, threads, cache_dir):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), NOVA_CACHE_DIR=cache_dir,
               PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    # Bytecode caching as users have it: pip compiled the peers' .pyc files at install time,
    # while Nova runs from this checkout, so PYTHONDONTWRITEBYTECODE (set on the development
    # machine) would charge only Nova ~0.3 s of compiling its own source on every first step.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = [sys.executable, __file__, "--worker", framework, "--config", config,
           "--steps", str(steps), "--warmup", str(warmup)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        tail = "\n".join(out.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"{framework} worker ({config}) failed:\n{tail}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median_row(rows):
    keys = ("first_step_s", "step_s", "tokens_per_s", "peak_rss_mb", "loss0")
    return {k: statistics.median(r[k] for r in rows) for k in keys}


def run_config(config, frameworks, rounds, steps, warmup, threads):
    results = {f: [] for f in frameworks}
    warm = []
    errors = {}
    with tempfile.TemporaryDirectory(prefix="nova-bench-cache-") as root:
        for r in range(rounds):
            order = frameworks if r % 2 == 0 else list(reversed(frameworks))
            for fw in order:
                if fw in errors:
                    continue
                try:
                    if fw == "nova":
                        cache = os.path.join(root, f"round{r}")  # fresh: the first process is cold
                        results[fw].append(_spawn(fw, config, steps, warmup, threads, cache))
                        warm.append(_spawn(fw, config, steps, warmup, threads, cache))
                    else:
                        results[fw].append(_spawn(fw, config, steps, warmup, threads, root))
                except RuntimeError as e:
                    errors[fw] = str(e)
                    print(f"[{config}] {e}", file=sys.stderr)
    table = {fw: _median_row(rows) for fw, rows in results.items() if rows}
    if warm:
        table["nova (warm cache)"] = _median_row(warm)
    return table, errors


def print_table(config, table):
    cfg = CONFIGS[config]
    print(f"\n## {config}: {cfg}")
    print("| framework | first step s | step ms | tokens/s | peak RSS MB | step-0 loss |")
    print("|---|---|---|---|---|---|")
    for fw, r in table.items():
        print(f"| {fw} | {r['first_step_s']:.2f} | {r['step_s'] * 1e3:.1f} | "
              f"{r['tokens_per_s']:,.0f} | {r['peak_rss_mb']:.0f} | {r['loss0']:.5f} |")
    if "nova" in table:
        nv = table["nova"]
        print("\n| Nova vs | tokens/s ratio | first-step ratio (cold) | first-step ratio (warm) "
              "| peak RSS ratio |")
        print("|---|---|---|---|---|")
        warm = table.get("nova (warm cache)", nv)
        for fw, r in table.items():
            if fw.startswith("nova"):
                continue
            print(f"| {fw} | {nv['tokens_per_s'] / r['tokens_per_s']:.2f}x | "
                  f"{nv['first_step_s'] / r['first_step_s']:.2f} | "
                  f"{warm['first_step_s'] / r['first_step_s']:.2f} | "
                  f"{nv['peak_rss_mb'] / r['peak_rss_mb']:.2f} |")
        losses = [r["loss0"] for r in table.values()]
        spread = max(losses) - min(losses)
        print(f"\nstep-0 loss spread across frameworks: {spread:.2e} "
              f"({'agrees' if spread < 5e-5 else 'DISAGREES'} to 4 decimals)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS) + ["all"], default="all")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                    help=f"comma-separated subset of {FRAMEWORKS}")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per framework")
    ap.add_argument("--steps", type=int, default=20, help="timed steps after warm-up")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--smoke", action="store_true",
                    help="CI setting: tiny config, 1 round, 3 timed steps")
    ap.add_argument("--json", help="also write the results to this JSON file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker_main(a.worker, a.config, a.steps, a.warmup)
        return 0
    frameworks = [f.strip() for f in a.frameworks.split(",") if f.strip()]
    bad = [f for f in frameworks if f not in FRAMEWORKS]
    if bad:
        ap.error(f"unknown frameworks {bad}; choose from {FRAMEWORKS}")
    if a.smoke:
        a.config, a.rounds, a.steps, a.warmup = "tiny", 1, 3, 1
    configs = sorted(CONFIGS, reverse=True) if a.config == "all" else [a.config]
    everything, failed = {}, False
    for config in configs:
        table, errors = run_config(config, frameworks, a.rounds, a.steps, a.warmup, a.threads)
        print_table(config, table)
        everything[config] = {"results": table, "errors": errors}
        failed |= bool(errors)
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(everything, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
