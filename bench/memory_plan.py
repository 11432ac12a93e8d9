"""The device memory plan of the GPT-2 training step on a CUDA target, without a GPU or PTX.

`nova.compiler.backend_cuda.plan_program_memory` lowers every fusion kernel to its codegen form
(no MLIR, no ptxas) and plans the arena exactly as `compile_program` would, so the peak that
`nova.gpu.memory_stats()` would report for the step's intermediates can be read on the
development machine. The step is bench/gpu_cases.py's (the one bench/device_check.py times):
AdamW inside the step, model and optimizer state donated, TF32 matmuls.

Usage:
    python bench/memory_plan.py                         # 124M, cuda:sm_90a
    python bench/memory_plan.py --config small --loss plain
    python bench/memory_plan.py --json out.json

--loss plain computes the loss as cross_entropy of the whole logits (GPT2.__call__ then
F.cross_entropy) instead of GPT2.loss's chunked F.linear_cross_entropy: the comparison that
bench/NOTES.md round 15 records. About 1-2 minutes at 124M on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def plan(config: str, target: str, loss: str) -> dict:
    import nova
    from bench import gpu_cases
    from nova.compiler.backend_cuda import plan_program_memory
    from nova.nn import GPT2
    from nova.nn import functional as F

    case = gpu_cases.gpt2_step_case(config)
    saved = GPT2.loss
    if loss == "plain":
        def plain_loss(self, idx, targets, *, key=None, train=False, ignore_index=-100):
            return F.cross_entropy(self(idx, key=key, train=train), targets,
                                   ignore_index=ignore_index)
        GPT2.loss = plain_loss
    try:
        t0 = time.perf_counter()
        with gpu_cases.precision(case):
            jitted = nova.jit(case.fn, donate_argnums=case.donate)
            traced = jitted.trace(*case.specs)
            program = traced.lower(target=target).program
            donated = jitted._donated_leaves(traced._sig)
            out = plan_program_memory(program, target=target, donated=donated)
        out["seconds"] = time.perf_counter() - t0
    finally:
        GPT2.loss = saved
    out.update(config=config, target=target, loss=loss)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="124M", help="a name of bench/gpu_cases.GPT2_CONFIGS")
    ap.add_argument("--target", default="cuda:sm_90a")
    ap.add_argument("--loss", choices=("linear", "plain"), default="linear")
    ap.add_argument("--json", help="also write the result to this file")
    a = ap.parse_args(argv)
    r = plan(a.config, a.target, a.loss)
    gb = 1e9
    print(f"GPT-2 {r['config']} step on {r['target']}, loss {r['loss']}: planned peak "
          f"{r['peak_bytes'] / gb:.2f} GB = arena {r['arena_bytes'] / gb:.2f} GB + arguments "
          f"and outputs {(r['peak_bytes'] - r['arena_bytes']) / gb:.2f} GB; {r['launches']} "
          f"launches, {r['kernels']} distinct kernels, {r['in_place']} in place "
          f"({r['seconds']:.0f} s)")
    n, name = r["peak_launch"]
    print(f"live at the arena's peak (launch {n}, {name}):")
    for nbytes, s, producer in r["live_at_peak"]:
        print(f"  {nbytes / 1e6:9.1f} MB  slot {s:<6} from {producer}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
