"""A small end-to-end Nova demo: a two-layer MLP learns to classify two interleaved spirals.

The whole training step -- forward, backward and the SGD update -- is one `nova.jit` of a function
that calls `nova.value_and_grad`, so it is traced into a single Program. Run: `make train`
(until the GPT-2 example lands) or `python examples/mlp_demo.py --steps 300`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import nova
import nova.numpy as jnp


def spirals(n: int, rng: np.random.Generator):
    """n points per class on two interleaved spirals; returns (x float32 (2n, 2), y int32 (2n,))."""
    t = np.sqrt(rng.random(n)) * 3 * np.pi
    a = np.stack([t * np.cos(t), t * np.sin(t)], 1) / (3 * np.pi)
    x = np.concatenate([a, -a]) + rng.normal(0, 0.02, (2 * n, 2))
    y = np.concatenate([np.zeros(n), np.ones(n)]).astype(np.int32)
    return x.astype(np.float32), y


def init(key_rng: np.random.Generator, hidden: int):
    def dense(i, o):
        return {"w": (key_rng.standard_normal((i, o)) * np.sqrt(2 / i)).astype(np.float32),
                "b": np.zeros(o, np.float32)}
    return {"l1": dense(2, hidden), "l2": dense(hidden, hidden), "out": dense(hidden, 2)}


def logits(params, x):
    h = jnp.tanh(x @ params["l1"]["w"] + params["l1"]["b"])
    h = jnp.tanh(h @ params["l2"]["w"] + params["l2"]["b"])
    return h @ params["out"]["w"] + params["out"]["b"]


def loss_fn(params, x, y):
    z = logits(params, x)
    m = jnp.max(z, axis=-1, keepdims=True)
    logp = z - m - jnp.log(jnp.sum(jnp.exp(z - m), axis=-1, keepdims=True))
    onehot = (jnp.expand_dims(y, 1) == jnp.arange(2)).astype(jnp.float32)
    return -jnp.mean(jnp.sum(logp * onehot, axis=-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--hidden", type=int, default=32)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x, y = spirals(256, rng)
    params = init(rng, args.hidden)

    @nova.jit
    def step(params, x, y):
        loss, grads = nova.value_and_grad(loss_fn)(params, x, y)
        new = nova.tree_util.tree_map(lambda p, g: p - args.lr * g, params, grads)
        return new, loss

    print(step.trace(params, x, y).as_text().splitlines()[0][:100] + " ...")
    t0 = time.perf_counter()
    first = None
    for i in range(args.steps):
        params, loss = step(params, x, y)
        first = float(loss) if first is None else first
        if i % 50 == 0 or i == args.steps - 1:
            print(f"step {i:4d}  loss {float(loss):.4f}")
    dt = time.perf_counter() - t0
    predict = nova.jit(lambda p, x: jnp.argmax(logits(p, x), axis=-1))
    acc = float(np.mean(np.asarray(predict(params, x)) == y))
    print(f"{args.steps} steps in {dt:.1f} s; loss {first:.3f} -> {float(loss):.3f}; "
          f"train accuracy {acc:.3f}; jit cache: {step.cache_info()}")


if __name__ == "__main__":
    main()
