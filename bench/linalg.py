"""Matrix decompositions side by side: nova.numpy.linalg under nova.jit (Nova's own loops of
generated kernels: nova/numpy_impl/decompositions.py) against NumPy (LAPACK), jax.jit of
jax.numpy.linalg (LAPACK through XLA's custom calls) and torch.linalg (LAPACK).

    .venv/bin/python bench/linalg.py                 # n = 64 and 256, float64
    .venv/bin/python bench/linalg.py --sizes 32 128 --dtype float32
    .venv/bin/python bench/linalg.py --ops eigh eigvalsh --sizes 32 48 64 256

Each result is checked against NumPy's (the factorization's identity or the values), then
frameworks alternate in blocks of calls; the table reports the best time per call and each
one's ratio to Nova's (above 1: slower than Nova).
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ops", nargs="+", default=None,
                    help="only these ops (cholesky solve qr eigvalsh eigh svdvals svd)")
    args = ap.parse_args()
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = str(args.threads)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import nova.numpy as jnp
    import numpy as np

    import nova

    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jjnp
    except ImportError:
        jax = None
    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None

    rng = np.random.default_rng(0)
    dt = np.dtype(args.dtype)
    tol = 1e-8 if dt == np.float64 else 2e-3
    rows = []
    for n in args.sizes:
        a = rng.standard_normal((n, n)).astype(dt)
        spd = (a @ a.T + n * np.eye(n)).astype(dt)
        b = rng.standard_normal((n, 4)).astype(dt)
        ops = {
            "cholesky": ((spd,), jnp.linalg.cholesky, np.linalg.cholesky,
                         "linalg.cholesky"),
            "solve": ((a, b), jnp.linalg.solve, np.linalg.solve, "linalg.solve"),
            "qr": ((a,), lambda x: jnp.linalg.qr(x)[1], lambda x: np.linalg.qr(x)[1], None),
            "eigvalsh": ((spd,), jnp.linalg.eigvalsh, np.linalg.eigvalsh, "linalg.eigvalsh"),
            "eigh": ((spd,), jnp.linalg.eigh, np.linalg.eigh, "linalg.eigh"),
            "svdvals": ((a,), lambda x: jnp.linalg.svd(x, compute_uv=False),
                        lambda x: np.linalg.svd(x, compute_uv=False), "linalg.svdvals"),
            "svd": ((a,), lambda x: jnp.linalg.svd(x, full_matrices=False),
                    lambda x: np.linalg.svd(x, full_matrices=False), None),
        }
        for name, (xs, nova_f, np_f, shared) in ops.items():
            if args.ops is not None and name not in args.ops:
                continue
            fns = {}
            jitted = nova.jit(nova_f)
            nx = [jnp.asarray(x) for x in xs]
            fns["nova"] = lambda jitted=jitted, nx=nx: nova.block_until_ready(jitted(*nx))
            fns["numpy"] = lambda np_f=np_f, xs=xs: np_f(*xs)
            if jax is not None:
                jf = jax.jit({"qr": lambda x: jjnp.linalg.qr(x)[1],
                              "svdvals": lambda x: jjnp.linalg.svd(x, compute_uv=False),
                              "svd": lambda x: jjnp.linalg.svd(x, full_matrices=False),
                              }.get(name) or getattr(jjnp.linalg, shared.split(".")[1]))
                jx = [jjnp.asarray(x) for x in xs]
                fns["jax.jit"] = lambda jf=jf, jx=jx: jax.block_until_ready(jf(*jx))
            if torch is not None:
                tf = {"qr": lambda x: torch.linalg.qr(x)[1],
                      "svdvals": torch.linalg.svdvals,
                      "svd": lambda x: torch.linalg.svd(x, full_matrices=False),
                      "eigvalsh": torch.linalg.eigvalsh, "eigh": torch.linalg.eigh,
                      "cholesky": torch.linalg.cholesky, "solve": torch.linalg.solve}[name]
                tx = [torch.from_numpy(x) for x in xs]
                fns["torch"] = lambda tf=tf, tx=tx: tf(*tx)
            # check: the values (eigh / svd by their identities)
            got = fns["nova"]()
            want = np_f(*xs)
            if name == "eigh":
                w, v = (np.asarray(z, np.float64) for z in got)
                err = np.abs(spd @ v - v * w).max() / np.abs(w).max()
            elif name == "svd":
                u, s, vh = (np.asarray(z, np.float64) for z in got)
                err = np.abs((u * s) @ vh - a).max() / np.abs(s).max()
            elif name == "qr":
                err = np.abs(np.abs(np.asarray(got)) - np.abs(want)).max() / np.abs(want).max()
            else:
                g = np.asarray(got, np.float64)
                err = np.abs(g - want).max() / max(np.abs(want).max(), 1e-30)
            if err > tol:
                raise AssertionError(f"{name} n={n}: relative error {err:.1e}")
            best = {k: float("inf") for k in fns}
            for _ in range(args.rounds):
                for k, fn in fns.items():
                    time.sleep(0.1)
                    fn()
                    for _ in range(3):
                        t = time.perf_counter()
                        fn()
                        best[k] = min(best[k], time.perf_counter() - t)
            rows.append((name, n, best))
            print(f"{name:<9} n={n:<4} " + "  ".join(
                f"{k} {v * 1e3:9.3f} ms ({v / best['nova']:.3g}x)" for k, v in best.items()),
                flush=True)
    print(f"\ndecompositions, {args.dtype}, {args.threads} threads: best ms per call "
          f"(ratio to Nova)")
    names = list(rows[0][2])
    print(f"{'op':<9} {'n':>5} " + " ".join(f"{k:>20}" for k in names))
    for name, n, best in rows:
        print(f"{name:<9} {n:>5} " + " ".join(
            f"{best[k] * 1e3:11.3f} ({best[k] / best['nova']:6.3g}x)" for k in names))


if __name__ == "__main__":
    main()
