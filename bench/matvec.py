"""Matrix-vector products: Nova's jitted `x @ w` / `w @ x` against NumPy (OpenBLAS) and PyTorch
(MKL), float32, GB/s of the matrix read (the product is memory-bound: 2 flops per element).

    .venv/bin/python bench/matvec.py                       # 1 and 2 threads, default shapes
    .venv/bin/python bench/matvec.py --threads 1 --shapes 4096x4096

Shapes are KxN: x (K,) @ w (K, N) ("x @ w", the "columns" kernel of
nova/compiler/codegen/cpu/gemv.py) and w.T stored (N, K) @ x ("w @ x", the "rows" kernel). Each
thread count runs in its own subprocess with the thread variables set before anything loads;
frameworks alternate in blocks of calls; we report the best wall time (with one thread the
calling thread's CPU time, robust to a shared machine). Nova's figure includes its jit call
(~15-30 us of Python per call: it dominates below ~1 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

DEFAULT_SHAPES = ["1024x1024", "768x3072", "3072x768", "4096x4096"]


def run_one(threads: int, shapes: list[str], use_torch: bool) -> list[dict]:
    import numpy as np

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import nova
    import nova.numpy as jnp

    torch = None
    if use_torch:
        try:
            import torch

            torch.set_num_threads(threads)
        except ImportError:
            torch = None
    clock = time.thread_time if threads == 1 else time.perf_counter
    rows = []
    for shape in shapes:
        k, n = (int(v) for v in shape.lower().split("x"))
        rng = np.random.default_rng(0)
        x = rng.standard_normal(k).astype(np.float32)
        w = rng.standard_normal((k, n)).astype(np.float32)
        wt = np.ascontiguousarray(w.T)
        xa, wa, wta = jnp.asarray(x), jnp.asarray(w), jnp.asarray(wt)
        vm, mv = nova.jit(lambda a, b: a @ b), nova.jit(lambda a, b: a @ b)
        for got, ref in ((vm(xa, wa), x.astype(np.float64) @ w), (mv(wta, xa), wt @ x)):
            err = float(np.abs(np.asarray(got) - ref).max() / np.abs(ref).max())
            if err > 1e-5:
                raise AssertionError(f"{shape}: relative error {err:.1e}")
        runs = {"x @ w": {"nova": lambda: vm(xa, wa), "numpy": lambda: x @ w},
                "w @ x": {"nova": lambda: mv(wta, xa), "numpy": lambda: wt @ x}}
        if torch is not None:
            tx, tw, twt = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(wt)
            runs["x @ w"]["torch"] = lambda: torch.matmul(tx, tw)
            runs["w @ x"]["torch"] = lambda: torch.matmul(twt, tx)
        for op, fns in runs.items():
            best = {name: float("inf") for name in fns}
            for _ in range(5):
                for name, fn in fns.items():
                    # OpenBLAS workers spin ~0.1 s after a call and take a core from whatever runs
                    # next (bench/matmul.py): pause before each block.
                    time.sleep(0.3 if threads > 1 else 0.0)
                    fn()
                    for _ in range(20):
                        t = clock()
                        fn()
                        best[name] = min(best[name], clock() - t)
            gbs = {name: k * n * 4 / max(t, 1e-9) / 1e9 for name, t in best.items()}
            peer = max(v for name, v in gbs.items() if name != "nova")
            rows.append({"shape": shape, "op": op, "threads": threads, "gb_s": gbs,
                         "ratio": gbs["nova"] / peer})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--shapes", nargs="*", default=DEFAULT_SHAPES)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print("RESULT " + json.dumps(run_one(a.threads[0], a.shapes, not a.no_torch)))
        return
    rows = []
    for th in a.threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(th), OPENBLAS_NUM_THREADS=str(th),
                   MKL_NUM_THREADS=str(th))
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--threads", str(th),
               "--shapes", *a.shapes] + (["--no-torch"] if a.no_torch else [])
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit(f"matvec benchmark with {th} threads failed:\n{res.stdout}\n{res.stderr}")
        line = [x for x in res.stdout.splitlines() if x.startswith("RESULT ")][-1]
        rows += json.loads(line[len("RESULT "):])
    names = [n for n in ("nova", "numpy", "torch") if any(n in r["gb_s"] for r in rows)]
    print(f"{'shape KxN':>10} {'op':>6} {'thr':>3} | " + " ".join(f"{n + ' GB/s':>11}"
                                                             for n in names) + " | vs best peer")
    for r in rows:
        figs = " ".join(f"{r['gb_s'].get(n, float('nan')):11.1f}" for n in names)
        print(f"{r['shape']:>10} {r['op']:>6} {r['threads']:>3} | {figs} | {r['ratio']:.2f}")


if __name__ == "__main__":
    main()
