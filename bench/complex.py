"""Complex arithmetic and FFTs side by side: nova.jit (complex values computed as float parts:
nova/compiler/legalize_complex.py; FFTs as DFT matmuls: nova/numpy_impl/fft_plan.py) against
NumPy, PyTorch eager and jax.jit, complex64.

    .venv/bin/python bench/complex.py
    .venv/bin/python bench/complex.py --n 262144 --fft 1024 128

Each result is checked against NumPy's, then the frameworks alternate in blocks of calls; the
table reports the best time per call and each one's ratio to Nova's (above 1: slower than Nova).
torch.compile is left out: its inductor backend does not generate code for complex tensors (it
falls back to eager with a warning), so its figure would be torch eager's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 20, help="elements of the elementwise cases")
    ap.add_argument("--matmul", type=int, default=256, help="square complex matmul size")
    ap.add_argument("--fft", type=int, nargs=2, default=[4096, 256], metavar=("LEN", "ROWS"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = str(args.threads)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import nova.numpy as jnp
    import numpy as np

    import nova

    try:
        import jax
        import jax.numpy as jjnp
    except ImportError:
        jax = None
    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None

    rng = np.random.default_rng(0)

    def cplx(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)

    z, w = cplx(args.n), cplx(args.n)
    m = args.matmul
    a, b = cplx(m, m), cplx(m, m)
    length, rows = args.fft
    sig = cplx(rows, length)
    real_sig = rng.standard_normal((rows, length)).astype(np.float32)
    cases = {  # name: (operands, function of a namespace with exp/abs/fft, tolerance)
        "z * w + z": ((z, w), lambda ns: lambda x, y: x * y + x, 1e-5),
        "exp(z) * w": ((z, w), lambda ns: lambda x, y: ns.exp(x) * y, 1e-4),
        "abs(z)": ((z,), lambda ns: lambda x: ns.abs(x), 1e-5),
        f"matmul {m}": ((a, b), lambda ns: lambda x, y: x @ y, 1e-3),
        f"fft {length} x {rows}": ((sig,), lambda ns: lambda x: ns.fft.fft(x), 1e-3),
        f"rfft {length} x {rows}": ((real_sig,), lambda ns: lambda x: ns.fft.rfft(x), 1e-3),
    }
    table = []
    for name, (xs, make, tol) in cases.items():
        fns = {}
        jitted = nova.jit(make(jnp))
        nx = [jnp.asarray(x) for x in xs]
        fns["nova"] = lambda jitted=jitted, nx=nx: nova.block_until_ready(jitted(*nx))
        fns["numpy"] = lambda f=make(np), xs=xs: f(*xs)
        if jax is not None:
            jf = jax.jit(make(jjnp))
            jx = [jjnp.asarray(x) for x in xs]
            fns["jax.jit"] = lambda jf=jf, jx=jx: jax.block_until_ready(jf(*jx))
        if torch is not None:
            tx = [torch.from_numpy(x) for x in xs]
            fns["torch"] = lambda f=make(torch), tx=tx: f(*tx)
        want = fns["numpy"]()
        got = np.asarray(fns["nova"]())
        err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
        if err > tol:
            raise AssertionError(f"{name}: relative error {err:.1e}")
        best = {k: float("inf") for k in fns}
        for _ in range(args.rounds):
            for k, fn in fns.items():
                time.sleep(0.1)
                fn()
                for _ in range(3):
                    t = time.perf_counter()
                    fn()
                    best[k] = min(best[k], time.perf_counter() - t)
        table.append((name, best))
        print(f"{name:<18} " + "  ".join(f"{k} {v * 1e3:8.3f} ms ({v / best['nova']:.3g}x)"
                                         for k, v in best.items()), flush=True)
    print(f"\ncomplex64, {args.threads} threads: best ms per call (ratio to Nova)")
    names = list(table[0][1])
    print("| case | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for name, best in table:
        print(f"| {name} | " + " | ".join(f"{best[k] * 1e3:.2f} ({best[k] / best['nova']:.2g}x)"
                                         for k in names) + " |")


if __name__ == "__main__":
    main()
