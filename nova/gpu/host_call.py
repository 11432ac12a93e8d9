"""Host callbacks on the GPU: a `pure_callback` or `io_callback` equation of a CUDA executable.

The CUDA backend (nova/compiler/backend_cuda.py) puts one `HostCall` in the launch list where
the program calls Python. Running it does what JAX's GPU callbacks do, at that point of the
stream: wait for the work queued before it (a stream synchronize: the kernels computing the
operands, and any earlier callback's copies), copy the operands device -> host, call the Python
function (the equation's reference, nova/ops/callback.py, which hands the callback read-only
NumPy copies and checks its results), copy the results host -> device into the launch's output
buffers (each copy synchronizes before the host array goes away), and return, so the launches
after it read the results. Nothing may be captured into a CUDA graph around it (a graph would
replay the kernels but not the Python call), so an executable holding one runs its launches
one by one (CUDAExecutable.needs_host), like one holding a while_loop or cond; inside a scan,
while or cond body (nova/gpu/loops.py) it runs once per iteration, as the body's kernels do.
Callbacks run in launch order, which is the program's: io_callback's order is kept.
"""

from __future__ import annotations

import numpy as np

from nova.gpu.memory import copy_device_to_host, copy_host_to_device


class HostCall:
    """One host-callback equation of a CUDA executable.

    fn(arrays) -> arrays: runs the equation on host NumPy arrays (the operands in order; the
    results, one per equation output, in order); in_types / out_types: the operands' and
    results' TensorTypes; name: the kernel's name (for error messages)."""

    needs_host = True  # reads device values on the host mid-run (no CUDA graph)

    def __init__(self, name: str, fn, in_types: list, out_types: list):
        self.name = name
        self.fn = fn
        self.in_types = list(in_types)
        self.out_types = list(out_types)

    def prepare(self, ordinal: int) -> None:
        """Nothing to load or allocate (the executable owns the operand and result buffers)."""

    def queue(self, ins: list[int], outs: list[int], stream) -> None:
        """Runs the callback between the work queued on `stream` before and after it: operands
        at device addresses `ins`, results written to `outs`. Returns once the results are on
        the device; an exception of the callback propagates (nothing after it is queued)."""
        stream.synchronize()  # the operands' kernels (and a failing kernel is named here)
        args = []
        for ptr, t in zip(ins, self.in_types, strict=True):
            host = np.empty(t.shape, t.dtype)
            args.append(copy_device_to_host(host, ptr, stream))
        results = self.fn(args)
        if len(results) != len(self.out_types):
            raise RuntimeError(f"cuda backend: host callback {self.name} returned "
                               f"{len(results)} arrays for {len(self.out_types)} outputs")
        for ptr, value, t in zip(outs, results, self.out_types, strict=True):
            host = np.ascontiguousarray(np.asarray(value, dtype=t.dtype).reshape(t.shape))
            copy_host_to_device(ptr, host, stream)
