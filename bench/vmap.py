"""Per-example gradients with vmap: `jit(vmap(grad(loss), in_axes=(None, 0, 0)))` of a two-layer
MLP with a cross-entropy loss, side by side with JAX (`jax.jit(jax.vmap(jax.grad))`), PyTorch
(`torch.func.vmap(torch.func.grad)`, eager) and NumPy (the closed-form per-example gradients,
written by hand: outer products of each example's activations and errors).

    .venv/bin/python bench/vmap.py                 # default sizes, 2 threads
    .venv/bin/python bench/vmap.py --batch 256 --hidden 512

float32; the outputs are the per-example gradients of W1 (B, D, H), b1, W2 (B, H, C), b2, all
checked against NumPy's (max error relative to the largest value, 1e-4). Frameworks alternate
in blocks of calls; the table reports the best time per call and each one's ratio to Nova.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--features", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = str(args.threads)
    os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=true "
                          f"intra_op_parallelism_threads={args.threads}")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import nova.numpy as jnp
    import numpy as np

    import nova

    b, d, h, c = args.batch, args.features, args.hidden, args.classes
    rng = np.random.default_rng(0)
    params = {"w1": (rng.standard_normal((d, h)) / np.sqrt(d)).astype(np.float32),
              "b1": np.zeros(h, np.float32),
              "w2": (rng.standard_normal((h, c)) / np.sqrt(h)).astype(np.float32),
              "b2": np.zeros(c, np.float32)}
    x = rng.standard_normal((b, d)).astype(np.float32)
    y = rng.integers(0, c, b).astype(np.int32)
    names = ("w1", "b1", "w2", "b2")

    def numpy_grads():
        hid = np.tanh(x @ params["w1"] + params["b1"])
        z = hid @ params["w2"] + params["b2"]
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        dz = p
        dz[np.arange(b), y] -= 1
        dh = (dz @ params["w2"].T) * (1 - hid * hid)
        return {"w1": np.einsum("bi,bj->bij", x, dh), "b1": dh,
                "w2": np.einsum("bi,bj->bij", hid, dz), "b2": dz}

    def nova_loss(p, xi, yi):
        hid = jnp.tanh(xi @ p["w1"] + p["b1"])
        z = hid @ p["w2"] + p["b2"]
        return nova.nn.functional.cross_entropy(z[None], yi[None])

    nova_fn = nova.jit(nova.vmap(nova.grad(nova_loss), in_axes=(None, 0, 0)))
    np_params = {k: jnp.asarray(v) for k, v in params.items()}
    xa, ya = jnp.asarray(x), jnp.asarray(y)
    fns = {"nova": lambda: nova_fn(np_params, xa, ya), "numpy": numpy_grads}
    try:
        import jax
        import jax.numpy as jjnp

        def jax_loss(p, xi, yi):
            hid = jjnp.tanh(xi @ p["w1"] + p["b1"])
            z = hid @ p["w2"] + p["b2"]
            return -jax.nn.log_softmax(z)[yi]

        jax_fn = jax.jit(jax.vmap(jax.grad(jax_loss), in_axes=(None, 0, 0)))
        jp = {k: jjnp.asarray(v) for k, v in params.items()}
        jx, jy = jjnp.asarray(x), jjnp.asarray(y)
        fns["jax.jit(vmap(grad))"] = lambda: jax.block_until_ready(jax_fn(jp, jx, jy))
    except ImportError:
        pass
    try:
        import torch
        from torch.func import grad as tgrad
        from torch.func import vmap as tvmap

        torch.set_num_threads(args.threads)

        def torch_loss(p, xi, yi):
            hid = torch.tanh(xi @ p["w1"] + p["b1"])
            z = hid @ p["w2"] + p["b2"]
            return torch.nn.functional.cross_entropy(z[None], yi[None])

        tp = {k: torch.from_numpy(v) for k, v in params.items()}
        tx, ty = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
        torch_fn = tvmap(tgrad(torch_loss), in_dims=(None, 0, 0))
        fns["torch.func vmap(grad)"] = lambda: torch_fn(tp, tx, ty)
    except ImportError:
        pass

    ref = numpy_grads()
    for name, fn in fns.items():
        got = fn()
        for k in names:
            g = np.asarray(got[k])
            err = float(np.abs(g - ref[k]).max() / max(np.abs(ref[k]).max(), 1e-30))
            if g.shape != ref[k].shape or err > 1e-4:
                raise AssertionError(f"{name}: {k} shape {g.shape}, relative error {err:.1e}")
    best = {name: float("inf") for name in fns}
    for _ in range(args.rounds):
        for name, fn in fns.items():
            time.sleep(0.2)  # OpenBLAS workers spin after a call
            fn()
            for _ in range(10):
                t = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t)
    print(f"per-example gradients: batch {b}, MLP {d}-{h}-{c}, float32, {args.threads} threads")
    print(f"{'framework':<24} {'ms':>9} {'Nova speed-up':>14}")
    for name, t in best.items():
        print(f"{name:<24} {t * 1e3:9.3f} {t / best['nova']:13.2f}x")


if __name__ == "__main__":
    main()
