"""Fused memory-bound ops side by side: softmax, layer norm and GELU(tanh) on a (8192, 768)
float32 array in NumPy, PyTorch eager, torch.compile, jax.jit and Nova (jit, compiled backend).

Prints milliseconds and effective GB/s (bytes read + written once), and each as a fraction of
the measured copy bandwidth of an array that size. The frameworks take turns: each of --rounds
rounds times every framework's three ops (best of --repeat calls after warm-up) one framework
after the other, and the table shows the median over rounds of those bests, so that a slow
spell of the shared machine lands on every framework alike instead of on whichever ran then.
Frameworks that are not installed are skipped (PyTorch: `pip install torch==2.13.0`, the CPU
build).

Run: python bench/fused_ops.py [--rows 8192] [--cols 768] [--repeat 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def best_time(fn, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def numpy_impls():
    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def layer_norm(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * g + b

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))

    return softmax, layer_norm, gelu


def nova_impls():
    import nova
    import nova.numpy as jnp

    def softmax(x):
        m = jnp.max(x, axis=-1, keepdims=True)
        e = jnp.exp(x - m)
        return e / jnp.sum(e, axis=-1, keepdims=True)

    def layer_norm(x, g, b):
        mu = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * g + b

    def gelu(x):
        return 0.5 * x * (1 + jnp.tanh(0.7978845608 * (x + 0.044715 * x**3)))

    return nova.jit(softmax), nova.jit(layer_norm), nova.jit(gelu)


def torch_impls(compiled: bool):
    import torch

    torch.set_num_threads(2)

    def softmax(x):
        return torch.softmax(x, -1)

    def layer_norm(x, g, b):
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, 1e-5)

    def gelu(x):
        return torch.nn.functional.gelu(x, approximate="tanh")

    fns = (softmax, layer_norm, gelu)
    if compiled:
        fns = tuple(torch.compile(f) for f in fns)
    return fns


def jax_impls():
    import jax
    import jax.numpy as jjnp

    def layer_norm(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / jjnp.sqrt(var + 1e-5) * g + b

    return (jax.jit(lambda x: jax.nn.softmax(x, -1)), jax.jit(layer_norm),
            jax.jit(lambda x: jax.nn.gelu(x, approximate=True)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", type=int, default=768)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.rows, args.cols)).astype(np.float32)
    g = rng.standard_normal(args.cols).astype(np.float32)
    b = rng.standard_normal(args.cols).astype(np.float32)
    nbytes = 2 * x.nbytes  # read once, write once
    out = np.empty_like(x)
    frameworks = {"numpy": lambda: numpy_impls()}
    frameworks["nova"] = nova_impls
    try:
        import torch  # noqa: F401

        frameworks["torch eager"] = lambda: torch_impls(False)
        frameworks["torch.compile"] = lambda: torch_impls(True)
    except ImportError:
        print("(PyTorch not installed: pip install torch==2.13.0)")
    try:
        import jax  # noqa: F401

        frameworks["jax.jit"] = jax_impls
    except ImportError:
        print("(JAX not installed)")
    ops = ("softmax", "layer_norm", "gelu_tanh")
    prepared = {}
    for name, make in frameworks.items():
        fns = make()
        if name.startswith("torch"):
            import torch

            xs, gs, bs = torch.from_numpy(x), torch.from_numpy(g), torch.from_numpy(b)
        elif name == "jax.jit":
            import jax.numpy as jjnp

            xs, gs, bs = jjnp.asarray(x), jjnp.asarray(g), jjnp.asarray(b)
        else:
            xs, gs, bs = x, g, b
        calls = [lambda f=fns, a=xs: f[0](a), lambda f=fns, a=xs, c=gs, d=bs: f[1](a, c, d),
                 lambda f=fns, a=xs: f[2](a)]
        block = (lambda r: r.block_until_ready()) if name in ("jax.jit", "nova") else (lambda r: r)
        prepared[name] = (calls, block)
    samples: dict[str, dict[str, list]] = {n: {op: [] for op in ops} for n in prepared}
    copies = []
    for _ in range(max(1, args.rounds)):
        copies.append(best_time(lambda: np.copyto(out, x), args.repeat))
        for name, (calls, block) in prepared.items():
            for op, c in zip(ops, calls, strict=True):
                samples[name][op].append(best_time(lambda c=c, blk=block: blk(c()), args.repeat))
    results = {n: {op: float(np.median(v)) for op, v in per.items()} for n, per in samples.items()}
    copy_s = float(np.median(copies))
    copy_bw = nbytes / copy_s / 1e9
    print(f"copy of {x.shape} float32: {copy_s * 1e3:.2f} ms = {copy_bw:.1f} GB/s "
          f"(median of {len(copies)} rounds)")
    print(f"\n{'framework':15s}" + "".join(f"{op:>26s}" for op in ops))
    for name, res in results.items():
        cells = "".join(f"{res[op] * 1e3:8.2f} ms {nbytes / res[op] / 1e9:5.1f} GB/s "
                        f"({nbytes / res[op] / 1e9 / copy_bw:4.2f})" for op in ops)
        print(f"{name:15s}{cells}")
    print("\nNova's speed-up (time of peer / time of Nova):")
    for name, res in results.items():
        if name != "nova":
            print(f"  vs {name:14s}" + "".join(f"{op}: {res[op] / results['nova'][op]:5.2f}x  "
                                                for op in ops))


if __name__ == "__main__":
    main()
