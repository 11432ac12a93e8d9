"""Backpropagation through time with lax.scan: `jit(value_and_grad(loss))` of a tanh RNN over T
steps, side by side with JAX (`jax.jit(jax.value_and_grad)` of the same `lax.scan`), PyTorch eager
(a Python loop under autograd) and NumPy (the forward and the backward through time written by
hand).

    .venv/bin/python bench/scan.py                       # default sizes, 2 threads
    .venv/bin/python bench/scan.py --steps 200 --hidden 256

float32; the loss is the mean of the last hidden state's squares plus the mean of every step's
output; the gradients of W (hidden x hidden), U (features x hidden) and b are checked against
NumPy's (max error relative to the largest value, 1e-4). Frameworks alternate in blocks of
calls; the table reports the best time per call and each one's ratio to Nova.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
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
    from nova import lax

    t_, b, d, h = args.steps, args.batch, args.features, args.hidden
    rng = np.random.default_rng(0)
    params = {"w": (rng.standard_normal((h, h)) * 0.9 / np.sqrt(h)).astype(np.float32),
              "u": (rng.standard_normal((d, h)) / np.sqrt(d)).astype(np.float32),
              "b": np.zeros(h, np.float32)}
    xs = rng.standard_normal((t_, b, d)).astype(np.float32)
    names = ("w", "u", "b")

    def numpy_value_and_grad():
        w, u, bias = params["w"], params["u"], params["b"]
        hs = [np.zeros((b, h), np.float32)]
        for x in xs:
            hs.append(np.tanh(hs[-1] @ w + x @ u + bias))
        loss = float((hs[-1] ** 2).mean() + sum(hh.mean() for hh in hs[1:]))
        gw, gu, gb = np.zeros_like(w), np.zeros_like(u), np.zeros_like(bias)
        dh = 2 * hs[-1] / hs[-1].size
        for k in range(t_, 0, -1):
            dh = dh + np.float32(1.0 / hs[k].size)
            dz = dh * (1 - hs[k] ** 2)
            gw += hs[k - 1].T @ dz
            gu += xs[k - 1].T @ dz
            gb += dz.sum(0)
            dh = dz @ w.T
        return loss, {"w": gw, "u": gu, "b": gb}

    def nova_loss(p, xs):
        def step(hh, x):
            hh = jnp.tanh(hh @ p["w"] + x @ p["u"] + p["b"])
            return hh, hh.mean()

        last, ys = lax.scan(step, jnp.zeros((b, h), np.float32), xs)
        return (last ** 2).mean() + ys.sum()

    nova_fn = nova.jit(nova.value_and_grad(nova_loss))
    n_params = {k: jnp.asarray(v) for k, v in params.items()}
    n_xs = jnp.asarray(xs)
    fns = {"nova": lambda: nova_fn(n_params, n_xs), "numpy": numpy_value_and_grad}
    try:
        import jax
        import jax.numpy as jjnp

        def jax_loss(p, xs):
            def step(hh, x):
                hh = jjnp.tanh(hh @ p["w"] + x @ p["u"] + p["b"])
                return hh, hh.mean()

            last, ys = jax.lax.scan(step, jjnp.zeros((b, h), jjnp.float32), xs)
            return (last ** 2).mean() + ys.sum()

        jax_fn = jax.jit(jax.value_and_grad(jax_loss))
        jp = {k: jjnp.asarray(v) for k, v in params.items()}
        jx = jjnp.asarray(xs)
        fns["jax.jit(value_and_grad)"] = lambda: jax.block_until_ready(jax_fn(jp, jx))
    except ImportError:
        pass
    try:
        import torch

        torch.set_num_threads(args.threads)
        tp = {k: torch.from_numpy(v.copy()).requires_grad_() for k, v in params.items()}
        tx = torch.from_numpy(xs)

        def torch_value_and_grad():
            for v in tp.values():
                v.grad = None
            hh = torch.zeros((b, h))
            total = 0.0
            for x in tx:
                hh = torch.tanh(hh @ tp["w"] + x @ tp["u"] + tp["b"])
                total = total + hh.mean()
            loss = (hh ** 2).mean() + total
            loss.backward()
            return loss.detach(), {k: v.grad for k, v in tp.items()}

        fns["torch eager (loop)"] = torch_value_and_grad
    except ImportError:
        pass

    ref_loss, ref = numpy_value_and_grad()
    for name, fn in fns.items():
        loss, got = fn()
        if abs(float(loss) - ref_loss) > 1e-4 * max(1.0, abs(ref_loss)):
            raise AssertionError(f"{name}: loss {float(loss)} against NumPy's {ref_loss}")
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
            for _ in range(5):
                t = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t)
    print(f"BPTT through lax.scan: {t_} steps, batch {b}, RNN {d}-{h}, float32, "
          f"{args.threads} threads")
    print(f"{'framework':<26} {'ms':>9} {'Nova speed-up':>14}")
    for name, t in best.items():
        print(f"{name:<26} {t * 1e3:9.3f} {t / best['nova']:13.2f}x")


if __name__ == "__main__":
    main()
