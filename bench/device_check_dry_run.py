"""Dry run of bench/device_check.py without a GPU, before spending device time on it.

    .venv/bin/python bench/device_check_dry_run.py

The CUDA driver is replaced by tests/fake_cuda_driver.py, whose launches run the generated
kernels in the SIMT simulator (nova/compiler/codegen/cuda/simulate.py), and every kernel is
compiled fresh into a temporary cache (MLIR needed). The correctness checks and the profile run
as on the GPU (slowly: several minutes); the timing sections' large programs are left out and
their torch parts fail here (no CUDA torch). The gpt2 section runs on a micro config: Nova's
step in the simulator (state put on the device, steps with it donated), torch
eager and jax on the CPU, so the step-0 losses and the loss after the last step are compared.
It catches bugs of the script and of the runtime's bookkeeping, not of the real driver or
hardware; figures it prints are meaningless.
"""

from __future__ import annotations

import os
import runpy
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)


def main() -> None:
    os.environ["NOVA_CACHE_DIR"] = tempfile.mkdtemp(prefix="nova-dry-run-")
    os.environ["NOVA_PROFILE_ITERS"] = "1"  # each simulated pass takes a while
    # The gpt2 section on a micro config (1 layer, 32 channels, 16 positions, batch 2): Nova's
    # step through the simulator, torch eager and jax on the CPU (torch.compile left out).
    os.environ.setdefault("NOVA_GPT2_CONFIG", "micro")
    os.environ.setdefault("NOVA_GPT2_FRAMEWORKS", "nova,torch,jax")
    for knob, value in (("STEPS", "2"), ("WARMUP", "1")):
        os.environ.setdefault(f"NOVA_GPT2_{knob}", value)
    import bench.gpu_cases as cases
    import nova.gpu.driver as drv
    from nova.compiler import backend_cuda
    from tests.fake_cuda_driver import FakeDriver

    fake = FakeDriver(total_memory=8 << 30)
    drv._driver = fake
    compile_to_ptx = backend_cuda.compile_to_ptx

    def recording(modules, **kw):
        ptx = compile_to_ptx(modules, **kw)
        for sym, text in modules.items():
            fake.register(ptx[sym], text)
        return ptx

    backend_cuda.compile_to_ptx = recording
    cases.MATMULS, cases.MEMBOUND, cases.ATTENTION = [], [], []  # too large for the simulator
    # The forced-tile GEMMs at small shapes (x @ w and the transposed weight gradient).
    cases.TILES[:] = [cases.tile_case(256, 256, 64, (128, 128)),
                      cases.tile_case(256, 256, 64, (64, 64)),
                      cases.tile_case(128, 256, 512, (64, 64))]
    # The GPT-2 step's 80 kernels too (the CHECKS list is shared: filter it in place).
    cases.CHECKS[:] = [c for c in cases.CHECKS if not c.name.startswith("gpt2")]
    runpy.run_path(os.path.join(ROOT, "bench", "device_check.py"), run_name="__main__")


if __name__ == "__main__":
    main()
