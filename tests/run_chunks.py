"""Runs the whole test suite as several pytest processes, each over a share of the test files
(`make test` calls it; `make test TESTS=...` runs one pytest as before).

Why: every kernel library a test compiles is dlopen-ed into the worker process and stays
mapped, and one process over the whole suite (~9,800 tests) reached the kernel's
vm.max_map_count (65,530 mappings here): late tests failed with "failed to map segment from
shared object" and SystemErrors from the MLIR bindings. Fresh processes per chunk stay far
below it. Files are dealt to chunks by size, largest first, so the chunks take similar time.

    python tests/run_chunks.py [chunks] [-- extra pytest arguments]

Exits 0 when every chunk passed, else 1, after running all chunks (a summary line each).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time


def _chunks(files: list, n: int) -> list:
    groups: list = [[] for _ in range(n)]
    sizes = [0] * n
    for f in sorted(files, key=lambda p: (-os.path.getsize(p), p)):
        i = sizes.index(min(sizes))
        groups[i].append(f)
        sizes[i] += os.path.getsize(f)
    return [sorted(g) for g in groups if g]


def main(argv: list) -> int:
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = argv[:argv.index("--")] if "--" in argv else argv
    n = int(args[0]) if args else 3
    here = os.path.dirname(os.path.abspath(__file__))
    files = sorted(glob.glob(os.path.join(here, "test_*.py")))
    results = []
    for k, group in enumerate(_chunks(files, n), start=1):
        print(f"== test chunk {k}/{n}: {len(group)} files", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-n", "2", *extra, *group])
        results.append((k, rc, time.perf_counter() - t0))
    for k, rc, dt in results:
        print(f"== chunk {k}: {'passed' if rc == 0 else f'FAILED (exit {rc})'} in {dt:.0f} s")
    return 0 if all(rc == 0 for _, rc, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
