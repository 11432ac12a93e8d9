"""Two environments (two checkouts' .venv) sharing one kernel cache must not bring two OpenMP
runtimes into one process: a cached threaded kernel's rpath names the libiomp5.so of the
environment that built it, while kernels compiled now resolve against this environment's copy.
Two copies abort the process ("OMP: Error #15: Initializing libiomp5.so, but found libiomp5.so
already initialized"), which is how `make train` died in a fresh clone on a machine where another
checkout had trained before."""

import os
import shutil
import subprocess
import sys
import textwrap

from nova.compiler.codegen.cpu.compile import openmp_runtime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Both processes claim two cores, so that 512x256 elementwise kernels (>= MIN_THREADED_ELEMENTS)
# are OpenMP kernels on any host; each prints the libiomp5.so files mapped into it.
_PRELUDE = """
import dataclasses, sys
import numpy as np
from nova.compiler.codegen.cpu import matmul
dev = dataclasses.replace(matmul.host_device(), cores=2)
matmul.host_device = lambda: dev
import nova, nova.numpy as jnp

def mapped_runtimes():
    with open("/proc/self/maps") as f:
        return sorted({ln.split()[-1] for ln in f if ln.rstrip().endswith("/libiomp5.so")})

x = np.linspace(-1.0, 1.0, 512 * 256, dtype=np.float32).reshape(512, 256)
"""

# Process 1: the "other environment" -- its runtime is a copy in another folder.
_BUILD = _PRELUDE + """
from nova.compiler.codegen.cpu import compile as cc
cc.openmp_runtime = lambda: sys.argv[1]
y = np.asarray(nova.jit(lambda a: jnp.exp(a) * 2.0)(x))
np.testing.assert_allclose(y, np.exp(x) * 2.0, rtol=1e-6)
print("MAPPED", mapped_runtimes())
"""

# Process 2: this environment -- the cached kernel first, then a kernel compiled now.
_USE = _PRELUDE + """
y = np.asarray(nova.jit(lambda a: jnp.exp(a) * 2.0)(x))
z = np.asarray(nova.jit(lambda a: jnp.tanh(a) + 1.0)(x))
np.testing.assert_allclose(y, np.exp(x) * 2.0, rtol=1e-6)
np.testing.assert_allclose(z, np.tanh(x) + 1.0, rtol=1e-6, atol=1e-6)
print("MAPPED", mapped_runtimes())
"""


def _run(code, cache, *args):
    env = dict(os.environ, NOVA_CACHE_DIR=cache, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                          capture_output=True, text=True, timeout=300)


def _mapped(res):
    assert res.returncode == 0, res.stdout + res.stderr
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("MAPPED")][-1]
    return eval(line[len("MAPPED "):])  # noqa: S307 - a list literal printed by our child


def test_a_kernel_cached_by_another_environment_uses_this_environments_openmp(tmp_path):
    ours = openmp_runtime()
    other_lib = tmp_path / "other-venv" / "lib"
    other_lib.mkdir(parents=True)
    other = str(other_lib / "libiomp5.so")
    shutil.copy(ours, other)
    cache = str(tmp_path / "cache")

    built = _mapped(_run(_BUILD, cache, other))
    assert built == [other]  # the cached kernel really is threaded and linked to the copy

    used = _mapped(_run(_USE, cache))
    assert used == [ours]

    # The other environment deleted (`make clean` there): its cached kernels still load.
    shutil.rmtree(tmp_path / "other-venv")
    assert _mapped(_run(_USE, cache)) == [ours]
