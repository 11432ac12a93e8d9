"""Builds the PTX of every program in bench/gpu_cases.py into a kernel cache, on a machine without
a GPU, for bench/device_check.py to run on a lent one (see bench/README.md).

    .venv/bin/python bench/build_gpu_cache.py --arch sm_90a --cache .nova-gpu-cache

Each kernel's PTX is also assembled with `ptxas -arch=<arch>` when ptxas is on PATH, so a kernel
the GPU's driver would reject is caught here. Writes <cache>/manifest.json (cases, kernel
entries, the Nova and NumPy versions the keys were computed with).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90a",
                    help="CUDA architecture (H100/H200: sm_90a, Hopper's wgmma GEMMs; every "
                         "case is also built for the portable sm_90)")
    ap.add_argument("--cache", default=".nova-gpu-cache", help="kernel cache directory to fill")
    args = ap.parse_args()
    os.environ["NOVA_CACHE_DIR"] = os.path.abspath(args.cache)

    import numpy as np

    import nova
    from bench.gpu_cases import all_cases, compile_case, gpu_launches
    from nova.compiler import backend_cuda
    from nova.compiler.codegen.cuda.compile import ptxas_available, ptxas_info

    target = f"cuda:{args.arch}"
    manifest = {"target": target, "nova": nova.__version__, "numpy": np.__version__,
                "codegen": backend_cuda.CUDA_CODEGEN_VERSION, "cases": {}}
    failures = 0
    runs = [(case, target, args.arch) for case in all_cases()]
    if args.arch.endswith("a"):
        # device_check.py times the portable kernels beside these, and runs every program on
        # them when the architecture-specific ones fail their checks
        portable = args.arch[:-1]
        runs += [(case, f"cuda:{portable}", portable) for case in all_cases()]
    for case, target, arch in runs:
        t0 = time.perf_counter()
        try:
            compiled = compile_case(case, target)
        except Exception as e:  # noqa: BLE001 - report every case, then fail at the end
            print(f"FAIL {case.name} ({arch}): {type(e).__name__}: {e}")
            failures += 1
            continue
        launches = gpu_launches(compiled._exe)
        info = []
        for l in launches:
            entry = {"entry": l.entry, "grid": list(l.config.grid), "block": list(l.config.block)}
            if ptxas_available():
                entry.update(ptxas_info(l.ptx, arch))
            info.append(entry)
        manifest["cases"][case.name if arch == args.arch else f"{case.name}@{arch}"] = info
        print(f"ok   {case.name:32s} {arch:7s} {len(launches)} kernel(s) "
              f"{time.perf_counter() - t0:6.2f} s")
    with open(os.path.join(args.cache, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(args.cache) for n in ns)
    print(f"cache {args.cache}: {size / 2**20:.2f} MiB; kernel cache stats {backend_cuda.stats}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
