"""Compile time with a cold and a warm kernel cache, and per-step host overhead, for a jitted
2-layer GPT-2-sized training step (forward + backward + SGD in one program).

Cold and warm are separate processes sharing a fresh NOVA_CACHE_DIR. Host overhead is measured
two ways: calling every kernel from Python (NOVA_PROFILE-style timing of every launch: the step
time minus the time inside kernels), and on the default path, where the native launcher runs
the launch list in one call: the executable's time minus the time inside that call.
Run: python bench/compile_and_overhead.py

`--dispatch`: per-call host overhead instead: a trivial jitted call and two eager ops on arrays
of 8 float32, for Nova, NumPy, PyTorch eager and JAX in one process, best of --reps x --calls
calls, the frameworks alternating within each repetition (pin to one core: `taskset -c 0`).
JAX calls end in block_until_ready. `--frameworks nova` measures Nova alone (A/B runs of two
trees: `PYTHONPATH=<tree> python bench/compile_and_overhead.py --dispatch --frameworks nova`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time, numpy as np
sys.path.insert(0, "bench")
import nova, nova.numpy as jnp
from gpt2_like import init, loss
rng = np.random.default_rng(0)
params = init(rng)
tokens = rng.integers(0, 256, (8, 64)).astype(np.int32)
targets = rng.integers(0, 256, (8, 64)).astype(np.int32)

@nova.jit
def step(params, tokens, targets):
    l, g = nova.value_and_grad(loss)(params, tokens, targets)
    return nova.tree_util.tree_map(lambda p, d: p - 0.1 * d, params, g), l

t = time.perf_counter()
compiled = step.lower(params, tokens, targets).compile()
compile_s = time.perf_counter() - t
exe = compiled._exe
steps = []
for _ in range(12):
    t = time.perf_counter(); params, l = step(params, tokens, targets); steps.append(time.perf_counter() - t)
step_s = float(np.median(steps[2:]))
# time inside kernels: run the executable's launches with per-launch timing
from nova.runtime import executable as ex
leaves = [np.asarray(a) for a in nova.tree_util.tree_leaves((params, tokens, targets))]
inside = []
for _ in range(10):
    times = []
    t = time.perf_counter(); exe._run(leaves, times); total = time.perf_counter() - t
    inside.append((total, sum(dt for _, dt in times)))
total = float(np.median([a for a, _ in inside])); kern = float(np.median([b for _, b in inside]))
# the default path: one native call per stretch of kernels (the launcher timed around each call)
native = []
if exe.launcher is not None:
    run_native = exe.launcher
    spent = [0.0]
    def timed(*a):
        t = time.perf_counter(); r = run_native(*a); spent[0] += time.perf_counter() - t
        return r
    exe.launcher = timed
    for _ in range(10):
        spent[0] = 0.0
        t = time.perf_counter(); exe(leaves); native.append((time.perf_counter() - t, spent[0]))
    exe.launcher = run_native
# the median of each run's own difference (medians of the two columns taken apart can mix runs)
n_total = float(np.median([a for a, _ in native])) if native else float("nan")
n_inside = n_total - float(np.median([a - b for a, b in native])) if native else float("nan")
fused = compiled.as_text()
print(json.dumps({"compile_s": compile_s, "step_s": step_s, "run_total_s": total,
                  "in_kernels_s": kern, "native_total_s": n_total, "native_inside_s": n_inside,
                  "launches": len(exe.launches),
                  "host_launches": sum(1 for l in exe.launches if l.fn is None),
                  "kernels": fused.count("nova.kernel"), "loss": float(l)}))
"""


def run(cache_dir):
    env = dict(os.environ, NOVA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _dispatch_cases(frameworks):
    """{(call, framework): zero-argument function} for the frameworks asked for (and installed)."""
    import numpy as np

    x0 = np.arange(8, dtype=np.float32)
    y0 = np.ones(8, np.float32)
    cases = {}
    if "nova" in frameworks:
        import nova.numpy as jnp

        import nova

        x, y = jnp.asarray(x0), jnp.asarray(y0)
        f = nova.jit(lambda a: a + 1.0)
        cases["jit(lambda a: a + 1.0)(x)", "nova"] = lambda: f(x)
        cases["eager x + y", "nova"] = lambda: x + y
        cases["eager x + 1.0", "nova"] = lambda: x + 1.0
    if "numpy" in frameworks:
        cases["eager x + y", "numpy"] = lambda: x0 + y0
        cases["eager x + 1.0", "numpy"] = lambda: x0 + 1.0
    if "torch" in frameworks:
        try:
            import torch
        except ImportError:
            pass
        else:
            torch.set_num_threads(1)
            tx, ty = torch.from_numpy(x0.copy()), torch.from_numpy(y0.copy())
            cases["eager x + y", "torch"] = lambda: tx + ty
            cases["eager x + 1.0", "torch"] = lambda: tx + 1.0
    if "jax" in frameworks:
        try:
            import jax
            import jax.numpy as jjnp
        except ImportError:
            pass
        else:
            jx, jy = jjnp.asarray(x0), jjnp.asarray(y0)
            jf = jax.jit(lambda a: a + 1.0)
            cases["jit(lambda a: a + 1.0)(x)", "jax"] = lambda: jf(jx).block_until_ready()
            cases["eager x + y", "jax"] = lambda: (jx + jy).block_until_ready()
            cases["eager x + 1.0", "jax"] = lambda: (jx + 1.0).block_until_ready()
    return cases


def dispatch(frameworks, reps: int, calls: int, clock=time.perf_counter) -> dict:
    """Best time per call in us for each (call, framework): reps rounds, each running every
    case `calls` times in turn (so a noisy stretch of the machine hits all frameworks).
    clock: time.perf_counter (wall), or time.thread_time for Nova-only A/B runs on a loaded
    machine (the calling thread's CPU time leaves out preemption; not for JAX, whose
    block_until_ready may wait on another thread)."""
    cases = _dispatch_cases(frameworks)
    for fn in cases.values():  # compile, warm the caches
        for _ in range(50):
            fn()
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(reps):
        for k, fn in cases.items():
            t = clock()
            for _ in range(calls):
                fn()
            best[k] = min(best[k], (clock() - t) / calls * 1e6)
    return best


def print_dispatch(best: dict) -> None:
    names = ["nova", "numpy", "torch", "jax"]
    calls = list(dict.fromkeys(c for c, _ in best))
    print("| call | Nova | NumPy | PyTorch eager | JAX | Nova / JAX |")
    print("|---|---|---|---|---|---|")
    for c in calls:
        cells = [f"{best[c, n]:.1f} us" if (c, n) in best else "" for n in names]
        ratio = ""
        if (c, "nova") in best and (c, "jax") in best:
            r = best[c, "nova"] / best[c, "jax"]
            ratio = f"{r:.2f}x slower" if r >= 1 else f"{1 / r:.2f}x faster"
        print(f"| `{c}` | " + " | ".join(cells) + f" | {ratio} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dispatch", action="store_true", help="per-call host overhead only")
    ap.add_argument("--frameworks", default="nova,numpy,torch,jax")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--json", action="store_true", help="print the dispatch times as JSON")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="dispatch: wall time, or the thread's CPU time (Nova-only A/B runs)")
    a = ap.parse_args()
    if a.dispatch:
        clock = time.thread_time if a.clock == "thread" else time.perf_counter
        best = dispatch(a.frameworks.split(","), a.reps, a.calls, clock)
        if a.json:
            print(json.dumps({f"{c}|{n}": t for (c, n), t in best.items()}))
        else:
            print_dispatch(best)
        return
    with tempfile.TemporaryDirectory() as d:
        cold = run(d)
        warm = run(d)
    print(f"kernels: {cold['kernels']} fused groups, {cold['launches']} launches "
          f"({cold['host_launches']} still on the host reference path)")
    print(f"compile (trace + passes + fusion + codegen + LLVM): cold {cold['compile_s']:.2f} s, "
          f"warm cache {warm['compile_s']:.2f} s ({warm['compile_s'] / cold['compile_s']:.2f}x)")
    for name, r in (("cold", cold), ("warm", warm)):
        host = r["run_total_s"] - r["in_kernels_s"]
        print(f"{name}: step {r['step_s'] * 1e3:.2f} ms (jit call); executable "
              f"{r['run_total_s'] * 1e3:.2f} ms of which kernels {r['in_kernels_s'] * 1e3:.2f} ms, "
              f"host between kernels {host * 1e3:.3f} ms = {100 * host / r['run_total_s']:.1f} %; "
              f"loss {r['loss']:.4f}")
        outside = r["native_total_s"] - r["native_inside_s"]
        print(f"{name}: native launcher (default): executable {r['native_total_s'] * 1e3:.2f} ms, "
              f"of which outside the native call(s) {outside * 1e3:.3f} ms = "
              f"{100 * outside / r['native_total_s']:.1f} %")


if __name__ == "__main__":
    main()
