"""GFLOP/s of Nova's generated CPU matmul kernels against NumPy (OpenBLAS) and PyTorch (MKL).

    .venv/bin/python bench/matmul.py                    # 1 and 2 threads, default shapes
    .venv/bin/python bench/matmul.py --threads 1 --shapes 1024 --tiles '{"KC": 128}'

Shapes: n means (n x n) @ (n x n); "MxKxN" means (M x K) @ (K x N). GFLOP/s = 2 M N K / time.
Each thread count runs in its own subprocess with OPENBLAS_NUM_THREADS / OMP_NUM_THREADS set
before NumPy loads (and threadpoolctl, when installed, pins NumPy as well), so NumPy's thread
pool cannot leak across configurations. PyTorch (`torch.matmul`, MKL in the CPU build; skipped
when torch is not installed or with --no-torch) runs with `torch.set_num_threads` at the same
count. Nova and the peers run in alternating blocks of calls, so that all see the same machine
load; we report the best and the median wall time of each, and Nova's ratio to the faster peer
(issue 5's target: >= 0.9x the faster of OpenBLAS and MKL at the same thread count). With
one thread we also report the rate from the calling thread's CPU time (time.thread_time), which
stays meaningful while other processes share the cores (the wall time then includes time spent
descheduled). Nova is timed through MatmulKernel.__call__ (~5 us of Python checks per call).
NumPy and PyTorch are only peers here: Nova's kernels never call them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

DEFAULT_SHAPES = ["256", "512", "1024", "2048", "1024x768x3072"]


def parse_shape(s: str) -> tuple[int, int, int]:
    parts = [int(x) for x in s.lower().split("x")]
    if len(parts) == 1:
        return parts[0], parts[0], parts[0]
    m, k, n = parts
    return m, k, n


def run_one(threads: int, shapes: list[str], tiles_override: dict, budget_s: float,
            use_torch: bool = True) -> list[dict]:
    import numpy as np

    torch = None
    if use_torch:
        try:
            import torch
        except ImportError:
            torch = None
        else:
            torch.set_num_threads(threads)

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from nova.compiler.codegen.cpu.matmul import MatmulSpec, build_matmuls, plan

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # the environment variables set by the parent already pin OpenBLAS
        threadpool_limits = None

    specs, tiles = {}, {}
    for s in shapes:
        m, k, n = parse_shape(s)
        name = f"mm_{m}x{k}x{n}"
        specs[name] = MatmulSpec(1, m, n, k, threads=threads)
        tiles[name] = {**plan(specs[name]), **tiles_override}
    so = os.path.join(tempfile.mkdtemp(prefix="nova-bench-"), "mm.so")
    t0 = time.perf_counter()
    kernels = build_matmuls(specs, so, tiles)
    compile_s = time.perf_counter() - t0

    rng = np.random.default_rng(0)
    results = []
    for name, spec in specs.items():
        m, n, k = spec.m, spec.n, spec.k
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        out = np.empty((m, n), np.float32)
        kernels[name](a, b, out=out)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        err = float(np.abs(out - ref).max() / np.abs(ref).max())
        flop = 2.0 * m * n * k

        def numpy_mm():
            np.matmul(a, b)

        def nova_mm():
            kernels[name](a, b, out=out)

        runs = [("nova", nova_mm), ("numpy", numpy_mm)]
        if torch is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            tout = torch.empty((m, n), dtype=torch.float32)

            def torch_mm():
                torch.matmul(ta, tb, out=tout)

            runs.append(("torch", torch_mm))
        times = {kind: [] for kind, _ in runs}
        ctx = threadpool_limits(threads) if threadpool_limits else None
        if ctx:
            ctx.__enter__()
        try:
            # Blocks of consecutive calls, alternating between Nova and the peers for `rounds`
            # rounds, with a pause before each block whose first call is not counted.
            # Interleaving single calls is unfair with threads: OpenBLAS' idle workers spin for
            # up to ~0.1 s (2^28 cycles) after a call and take the second core from whatever
            # runs next (measured: a 2-thread Nova call right after NumPy ran at 1-thread speed);
            # the OpenMP pools of Nova and PyTorch spin after a call as well.
            rounds = 4
            block = int(max(3, min(50, budget_s / 2 / rounds / max(flop / 60e9, 1e-6))))
            for _ in range(rounds):
                for kind, fn in runs:
                    time.sleep(0.3 if threads > 1 else 0.0)
                    fn()
                    for _ in range(block):
                        w0, c0 = time.perf_counter(), time.thread_time()
                        fn()
                        times[kind].append((time.perf_counter() - w0, time.thread_time() - c0))
            reps = rounds * block
        finally:
            if ctx:
                ctx.__exit__(None, None, None)
        row = {"shape": f"{m}x{k}x{n}", "threads": threads, "err": err, "reps": reps,
               "tiles": {key: tiles[name][key] for key in
                         ("MR", "NR", "KC", "MC", "NC", "threads", "split")}}
        for kind, ts in times.items():
            wall = [t[0] for t in ts]
            row[kind] = {"best": flop / min(wall) / 1e9,
                         "median": flop / statistics.median(wall) / 1e9}
            if threads == 1:
                row[kind]["cpu_best"] = flop / max(1e-9, min(t[1] for t in ts)) / 1e9
        results.append(row)
    results.append({"compile_s": compile_s, "kernels": len(specs)})
    return results


def report(rows: list[dict]) -> None:
    """Print one line per (shape, threads): GFLOP/s best / median of each framework, and Nova's
    ratio to the faster peer (by best wall time; with one thread also by CPU time)."""
    peers = [k for k in ("numpy", "torch") if any(k in r for r in rows)]
    head = f"{'shape (MxKxN)':>16} {'thr':>3} | {'nova best':>9} {'median':>7}"
    for p in peers:
        head += f" | {p + ' best':>10} {'median':>7}"
    print(head + f" | {'vs best peer':>12} {'median':>7} | {'cpu-time ratio':>14} | tiles")
    for r in rows:
        if "shape" not in r:
            print(f"  (compiled {r['kernels']} kernels in {r['compile_s']:.2f} s)")
            continue
        nv = r["nova"]
        line = f"{r['shape']:>16} {r['threads']:>3} | {nv['best']:9.1f} {nv['median']:7.1f}"
        for p in peers:
            line += (f" | {r[p]['best']:10.1f} {r[p]['median']:7.1f}" if p in r
                     else f" | {'-':>10} {'-':>7}")
        here = [r[p] for p in peers if p in r]
        best = max(here, key=lambda x: x["best"])
        median = max(x["median"] for x in here)
        cpu = ""
        if "cpu_best" in nv:
            top = max(x["cpu_best"] for x in here)
            cpu = f"{nv['cpu_best']:5.1f}/{top:5.1f}={nv['cpu_best'] / top:.2f}"
        t = r["tiles"]
        print(f"{line} | {nv['best'] / best['best']:12.2f} {nv['median'] / median:7.2f} | "
              f"{cpu:>14} | {t['MR']}x{t['NR']} KC={t['KC']} MC={t['MC']} NC={t['NC']} "
              f"thr={t['threads']}/{t['split']} err={r['err']:.1e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--shapes", nargs="*", default=DEFAULT_SHAPES)
    ap.add_argument("--tiles", default="{}", help="JSON overriding plan() entries (experiments)")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of runs per shape")
    ap.add_argument("--no-torch", action="store_true", help="NumPy as the only peer")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        rows = run_one(args.threads[0], args.shapes, json.loads(args.tiles), args.budget,
                       use_torch=not args.no_torch)
        print("RESULT " + json.dumps(rows))
        return
    rows = []
    for th in args.threads:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(th), OMP_NUM_THREADS=str(th),
                   MKL_NUM_THREADS=str(th))
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--threads", str(th),
               "--shapes", *args.shapes, "--tiles", args.tiles, "--budget", str(args.budget)]
        if args.no_torch:
            cmd.append("--no-torch")
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit(f"benchmark with {th} threads failed:\n{res.stdout}\n{res.stderr}")
        line = [x for x in res.stdout.splitlines() if x.startswith("RESULT ")][-1]
        rows += json.loads(line[len("RESULT "):])
    try:
        load = os.getloadavg()[0]
        print(f"load average before the last run: {load:.1f} on {os.cpu_count()} CPUs")
    except OSError:
        pass
    report(rows)


if __name__ == "__main__":
    main()
