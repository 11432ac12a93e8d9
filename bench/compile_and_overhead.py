"""Compile time with a cold and a warm kernel cache, and per-step host overhead, for a jitted
2-layer GPT-2-sized training step (forward + backward + SGD in one program).

Cold and warm are separate processes sharing a fresh NOVA_CACHE_DIR. Host overhead is measured
two ways: calling every kernel from Python (NOVA_PROFILE-style timing of every launch: the step
time minus the time inside kernels), and on the default path, where the native launcher runs
the launch list in one call: the executable's time minus the time inside that call.
Run: python bench/compile_and_overhead.py
"""

from __future__ import annotations

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


def main():
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
