"""A GPU executable: the launch list of a compiled program, run over device buffers.

Built by nova/compiler/backend_cuda.py from PTX (from the kernel cache: no MLIR needed here).
Every value has a fixed device address for the executable's lifetime: program inputs and
outputs own buffers, intermediates share one arena laid out by the memory plan, constants are
uploaded once. The first call runs the launches one by one (so a failing kernel is named);
later calls replay them as one CUDA graph captured on the second call (calls from several
threads take turns: they share the buffers and the stream). A call copies the inputs
in, replays, and copies the outputs back (host NumPy arrays in and out).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field

import numpy as np

from nova.gpu.graph import Graph
from nova.gpu.memory import DeviceBuffer, copy_device_to_host, copy_host_to_device
from nova.gpu.module import LaunchConfig, Module
from nova.gpu.stream import default_stream

_modules: dict[str, Module] = {}  # sha256 of the PTX -> loaded module (per process)


def load_module(ptx: str) -> Module:
    """The loaded Module of a PTX text, loaded once per process."""
    key = hashlib.sha256(ptx.encode()).hexdigest()
    m = _modules.get(key)
    if m is None:
        m = _modules[key] = Module(ptx)
    return m


@dataclass
class GPULaunch:
    """One kernel launch: entry `entry` of `ptx` over value slots (inputs then outputs).

    `kernel` is the codegen Kernel (for the memory plan's in-place rule), None for values
    computed on the host at build time (`host_value`, e.g. large constants)."""

    name: str
    inputs: list
    outputs: list
    out_types: list
    ptx: str | None = None
    entry: str | None = None
    config: LaunchConfig | None = None
    kernel: object = None
    host_value: list | None = None
    info: dict = field(default_factory=dict)  # registers, shared bytes (from ptxas), kind


class CUDAExecutable:
    """Runs GPU launches in order; call with host arrays, returns host arrays."""

    def __init__(self, n_inputs: int, launches: list, output_slots: list, slot_types: dict,
                 plan, text: str, costs: dict, memory: dict, target: str, use_graph: bool = True):
        self.n_inputs = n_inputs
        self.launches = launches
        self.output_slots = output_slots
        self.slot_types = slot_types
        self.plan = plan
        self.text = text
        self.costs = costs
        self.memory = memory
        self.target = target
        self.use_graph = use_graph
        self.calls = 0
        self._ready = False
        self._graph = None
        # Calls share the device buffers and the stream: from several threads they take turns.
        self._call_lock = threading.Lock()

    # --- set-up on the first call (needs a GPU) -----------------------------------------------
    def _prepare(self) -> None:
        from nova.gpu.device import get_device_properties

        arch = get_device_properties().arch
        if self.target.split(":", 1)[1] != arch:
            raise RuntimeError(f"this executable was compiled for {self.target}, but the GPU is "
                               f"{arch}: compile with target='cuda:{arch}'")
        self.stream = default_stream()
        self.buffers: dict[int, DeviceBuffer] = {}
        self.addr: dict[int, int] = {}
        arena_bytes = self.plan.arena_bytes if self.plan is not None else 0
        self.arena = DeviceBuffer(arena_bytes) if arena_bytes else None
        offsets = self.plan.offsets if self.plan is not None else {}
        aliases = self.plan.aliases if self.plan is not None else {}
        slots = set(range(self.n_inputs)) | set(self.output_slots)
        for launch in self.launches:
            slots.update(launch.inputs)
            slots.update(launch.outputs)
        for s in sorted(slots):
            if s in offsets:
                self.addr[s] = self.arena.ptr + offsets[s]
            elif s not in aliases:
                buf = self.buffers[s] = DeviceBuffer(self.slot_types[s].nbytes)
                self.addr[s] = buf.ptr
        for s, root in aliases.items():
            self.addr[s] = self.addr[root]
        self.functions = []
        for launch in self.launches:
            if launch.host_value is not None:
                for s, value in zip(launch.outputs, launch.host_value, strict=True):
                    copy_host_to_device(self.addr[s], np.ascontiguousarray(value), self.stream)
                self.functions.append(None)
                continue
            self.functions.append(load_module(launch.ptx).function(launch.entry))
        self._ready = True

    def _launch_all(self) -> None:
        for launch, fn in zip(self.launches, self.functions, strict=True):
            if fn is None:
                continue
            ptrs = [self.addr[s] for s in launch.inputs] + [self.addr[s] for s in launch.outputs]
            fn.launch(launch.config, ptrs, self.stream)

    def run_device(self) -> None:
        """Queues the launch list on the stream (graph replay after the first two calls)."""
        if not self.use_graph or self.calls < 2:
            self._launch_all()
            if self.calls == 0:
                self.stream.synchronize()  # a failing kernel is reported at its first run
            return
        if self._graph is None:
            self._graph = Graph.capture(self.stream, self._launch_all)
        self._graph.replay()

    def __call__(self, values: list) -> list:
        with self._call_lock:
            return self._call(values)

    def _call(self, values: list) -> list:
        if not self._ready:
            from nova.gpu.driver import GPUUnavailableError

            try:
                self._prepare()
            except GPUUnavailableError as e:
                raise GPUUnavailableError(
                    f"this program was compiled for {self.target} and needs an NVIDIA GPU to run: "
                    f"{e}") from None
        for i, v in enumerate(values[: self.n_inputs]):
            t = self.slot_types[i]
            a = np.ascontiguousarray(np.asarray(v, dtype=t.dtype).reshape(t.shape))
            copy_host_to_device(self.addr[i], a, self.stream)
        self.run_device()
        self.calls += 1
        outs = []
        for s in self.output_slots:
            t = self.slot_types[s]
            host = np.empty(t.shape, t.dtype)
            copy_device_to_host(host, self.addr[s], self.stream)
            outs.append(host)
        return outs

    def as_text(self) -> str:
        return self.text

    def cost_analysis(self) -> dict:
        return self.costs

    def memory_analysis(self) -> dict:
        return self.memory
