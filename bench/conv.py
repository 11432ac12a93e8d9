"""A convolution layer's training step: `jit(value_and_grad(loss))` of conv 3x3 "SAME" + ReLU +
mean of squares (the gradients of the input and the kernel), side by side with JAX
(`jax.jit(jax.value_and_grad)` of the same `lax.conv_general_dilated`), PyTorch eager
(`conv2d` + autograd, oneDNN) and torch.compile.

    .venv/bin/python bench/conv.py                      # batch 16, 32 -> 32 channels, 32x32
    .venv/bin/python bench/conv.py --batch 32 --channels 64 --size 16

float32, NCHW / OIHW; loss and gradients checked against JAX's when it is installed, else
PyTorch's (max error relative to the largest value, 1e-4). Frameworks alternate in blocks of
calls; the table reports the best time per call and each one's ratio to Nova. Nova's
convolution is im2col (one strided slice per kernel offset) and its generated GEMM
(nova/ops/convolution.py): no convolution library is called.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--out-channels", type=int, default=None)
    ap.add_argument("--size", type=int, default=32)
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

    b, c, s = args.batch, args.channels, args.size
    o = args.out_channels or c
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, c, s, s)).astype(np.float32)
    w = (rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)

    def nova_loss(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME")
        return jnp.mean(jnp.maximum(y, 0.0) ** 2)

    nova_fn = nova.jit(nova.value_and_grad(nova_loss, argnums=(0, 1)))
    xa, wa = jnp.asarray(x), jnp.asarray(w)
    fns = {"nova": lambda: nova_fn(xa, wa)}
    ref = None
    try:
        import jax
        import jax.numpy as jjnp

        def jax_loss(x, w):
            y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME")
            return jjnp.mean(jjnp.maximum(y, 0.0) ** 2)

        jax_fn = jax.jit(jax.value_and_grad(jax_loss, argnums=(0, 1)))
        jx, jw = jjnp.asarray(x), jjnp.asarray(w)
        fns["jax.jit(value_and_grad)"] = lambda: jax.block_until_ready(jax_fn(jx, jw))
        ref = "jax.jit(value_and_grad)"
    except ImportError:
        pass
    try:
        import torch

        torch.set_num_threads(args.threads)

        def torch_step(x, w):
            x = x.detach().requires_grad_(True)
            w = w.detach().requires_grad_(True)
            y = torch.nn.functional.conv2d(x, w, padding=1)
            loss = (torch.relu(y) ** 2).mean()
            loss.backward()
            return loss, (x.grad, w.grad)

        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        fns["torch eager"] = lambda: torch_step(tx, tw)
        compiled = torch.compile(torch_step)
        fns["torch.compile"] = lambda: compiled(tx, tw)
        ref = ref or "torch eager"
    except ImportError:
        pass

    def flat(out):
        loss, (gx, gw) = out
        return [np.asarray(loss.detach() if hasattr(loss, "detach") else loss, np.float64),
                np.asarray(gx.detach() if hasattr(gx, "detach") else gx, np.float64),
                np.asarray(gw.detach() if hasattr(gw, "detach") else gw, np.float64)]

    if ref is not None:
        want = flat(fns[ref]())
        for name, fn in fns.items():
            for k, (g, r) in enumerate(zip(flat(fn()), want, strict=True)):
                err = float(np.abs(g - r).max() / max(np.abs(r).max(), 1e-30))
                if g.shape != r.shape or err > 1e-4:
                    raise AssertionError(f"{name}: output {k} shape {g.shape}, relative "
                                         f"error {err:.1e}")
    best = {name: float("inf") for name in fns}
    for _ in range(args.rounds):
        for name, fn in fns.items():
            time.sleep(0.2)  # OpenBLAS / oneDNN workers spin after a call
            fn()
            for _ in range(5):
                t = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t)
    print(f"conv 3x3 SAME + ReLU, value and gradients: batch {b}, {c} -> {o} channels, "
          f"{s}x{s}, float32, {args.threads} threads")
    print(f"{'framework':<26} {'ms':>9} {'Nova speed-up':>14}")
    for name, t in best.items():
        print(f"{name:<26} {t * 1e3:9.3f} {t / best['nova']:13.2f}x")


if __name__ == "__main__":
    main()
