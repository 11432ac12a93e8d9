"""Causal attention forward + backward side by side: Nova (the fused flash kernels, and the same
program with the attention pass off), PyTorch eager (manual softmax and
scaled_dot_product_attention), torch.compile (manual) and jax.jit (manual).

One step = o = causal_attention(q, k, v); loss = sum(o * w); dq, dk, dv. Shapes (B, H, T, D)
float32 with B = 4, H = 4, D = 64 and T = 256, 512, 1024 by default.

Each (framework, T) runs in its own process, so memory is measured per framework: the peak
resident set size sampled every 0.5 ms during the timed steps, minus the resident size just
before them (after compilation, so compilers' own memory is not counted; Nova's arena is touched
by the first measured step, so it is). glibc is told to return large blocks to the system on free
(MALLOC_MMAP_THRESHOLD_), so transient buffers show up in the peak for every framework. Nova's
planned peak (`compiled.memory_analysis()`) is printed too. Times: median of --repeat steps, as
wall-clock time and as CPU time of the process (all threads; less sensitive to other load on a
shared machine than wall time).

Run: python bench/attention.py [--t 256 512 1024] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

FRAMEWORKS = ["nova", "nova-unfused", "torch-manual", "torch-sdpa", "torch.compile", "jax.jit"]


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _PeakRSS:
    """Samples the resident set size in a thread; `peak` is the largest value seen."""

    def __init__(self):
        self.peak = _rss()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss())
            time.sleep(0.0005)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss())


def _inputs(b, h, t, d):
    rng = np.random.default_rng(0)
    return [rng.standard_normal((b, h, t, d)).astype(np.float32) for _ in range(4)]


def _nova_step(fused: bool, args):
    import nova
    import nova.numpy as jnp
    from nova.compiler import pipeline

    if not fused:
        pipeline.PASSES[:] = [p for p in pipeline.PASSES if p[0] != "attention"]

    def loss(q, k, v, w):
        return jnp.sum(nova.nn.scaled_dot_product_attention(q, k, v, causal=True) * w)

    compiled = nova.jit(nova.value_and_grad(loss, argnums=(0, 1, 2))).lower(*args).compile()

    def step():
        _, grads = compiled(*args)
        np.asarray(grads[0])

    return step, compiled.memory_analysis()["planned_peak_bytes"]


def _torch_step(kind: str, args):
    import torch
    import torch.nn.functional as F

    q, k, v, w = (torch.tensor(x, requires_grad=i < 3) for i, x in enumerate(args))
    t, d = q.shape[-2], q.shape[-1]
    tril = torch.tril(torch.ones(t, t, dtype=torch.bool))

    def manual(q, k, v, w):
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(d))
        s = s.masked_fill(~tril, float("-inf"))
        return (torch.softmax(s, dim=-1) @ v * w).sum()

    def sdpa(q, k, v, w):
        return (F.scaled_dot_product_attention(q, k, v, is_causal=True) * w).sum()

    fn = {"torch-manual": manual, "torch-sdpa": sdpa}.get(kind)
    if kind == "torch.compile":
        fn = torch.compile(manual)

    def step():
        for x in (q, k, v):
            x.grad = None
        fn(q, k, v, w).backward()

    if kind == "torch.compile":
        step()  # compiles
    return step, None


def _jax_step(args):
    import jax
    import jax.numpy as jnp

    t, d = args[0].shape[-2], args[0].shape[-1]
    tril = np.tril(np.ones((t, t), bool))

    def loss(q, k, v, w):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d)
        s = jnp.where(tril, s, -jnp.inf)
        return jnp.sum(jax.nn.softmax(s, axis=-1) @ v * w)

    dev = [jax.device_put(x) for x in args]
    compiled = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2))).lower(*dev).compile()

    def step():
        _, grads = compiled(*dev)
        grads[0].block_until_ready()

    return step, None


def worker(fw: str, b: int, h: int, t: int, d: int, repeat: int) -> dict:
    args = _inputs(b, h, t, d)
    if fw.startswith("nova"):
        step, planned = _nova_step(fw == "nova", args)
    elif fw == "jax.jit":
        step, planned = _jax_step(args)
    else:
        step, planned = _torch_step(fw, args)
    gc.collect()
    base = _rss()
    times, cpu = [], []
    with _PeakRSS() as mem:
        for _ in range(repeat + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            step()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    return {"ms": float(np.median(times[1:])) * 1e3, "cpu_ms": float(np.median(cpu[1:])) * 1e3,
            "peak_mb": (mem.peak - base) / 2**20,
            "planned_mb": None if planned is None else planned / 2**20}


def _run_worker(fw, b, h, t, d, repeat) -> dict | None:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072")
    if fw == "nova-unfused":  # its own caches: a cache keyed by the traced program is blind
        env["NOVA_CACHE_DIR"] = tempfile.mkdtemp(prefix="nova-bench-unfused-")  # to PASSES
    cmd = [sys.executable, __file__, "--worker", fw, "--b", str(b), "--h", str(h), "--d", str(d),
           "--t", str(t), "--repeat", str(repeat)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        print(f"  {fw} T={t}: failed\n{res.stderr.strip()[-2000:]}", file=sys.stderr)
        return None
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--b", type=int, default=4)
    ap.add_argument("--h", type=int, default=4)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--t", type=int, nargs="+", default=[256, 512, 1024])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--frameworks", nargs="+", default=FRAMEWORKS)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker, a.b, a.h, a.t[0], a.d, a.repeat)))
        return
    print(f"causal attention fwd+bwd, B={a.b} H={a.h} D={a.d} float32, {os.cpu_count()} CPUs; "
          f"median of {a.repeat} steps; memory: peak RSS above the pre-step baseline")
    print("| T | framework | ms | peer / Nova (time) | CPU ms (all threads) | peer / Nova (CPU) "
          "| peak MB | Nova planned MB |")
    print("|---|---|---|---|---|---|---|---|")
    for t in a.t:
        rows = {fw: _run_worker(fw, a.b, a.h, t, a.d, a.repeat) for fw in a.frameworks}
        ref = rows.get("nova")
        for fw, r in rows.items():
            if r is None:
                continue
            ratio = f"{r['ms'] / ref['ms']:.2f}" if ref else "-"
            cpu_ratio = f"{r['cpu_ms'] / ref['cpu_ms']:.2f}" if ref else "-"
            planned = f"{r['planned_mb']:.1f}" if r["planned_mb"] is not None else ""
            print(f"| {t} | {fw} | {r['ms']:.1f} | {ratio} | {r['cpu_ms']:.1f} | {cpu_ratio} | "
                  f"{r['peak_mb']:.1f} | {planned} |", flush=True)


if __name__ == "__main__":
    main()
