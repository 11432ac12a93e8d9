"""A CPU executable: the launch list of a compiled program, run over NumPy-allocated buffers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Launch:
    """One kernel call: `fn(*input_ptrs, *output_ptrs)`, or a host function on arrays."""

    name: str
    inputs: list  # value slots
    outputs: list  # value slots
    out_types: list  # TensorType of each output
    fn: object = None  # ctypes function (generated kernel)
    host: object = None  # python callable(list of arrays) -> list of arrays (no kernel yet)


class CPUExecutable:
    """Runs launches in order; values live in slots (program inputs first)."""

    def __init__(self, n_inputs: int, launches: list, output_slots: list, last_use: dict, text: str,
                 costs: dict, memory: dict):
        self.n_inputs = n_inputs
        self.launches = launches
        self.output_slots = output_slots
        self.last_use = last_use  # slot -> index of the last launch reading it
        self.text = text
        self.costs = costs
        self.memory = memory

    def __call__(self, values: list) -> list:
        env: dict[int, np.ndarray] = {}
        for i, v in enumerate(values):
            v = np.asarray(v)
            # (np.ascontiguousarray would turn a 0-d array into shape (1,))
            env[i] = v if v.flags.c_contiguous else v.copy()
        keep = set(self.output_slots)
        for k, launch in enumerate(self.launches):
            ins = [env[s] for s in launch.inputs]
            if launch.fn is not None:
                outs = [np.empty(t.shape, t.dtype) for t in launch.out_types]
                launch.fn(*[a.ctypes.data for a in ins], *[o.ctypes.data for o in outs])
            else:
                outs = launch.host(ins)
            for s, o in zip(launch.outputs, outs, strict=True):
                env[s] = o
            for s in set(launch.inputs):
                if self.last_use.get(s) == k and s not in keep and s >= self.n_inputs:
                    del env[s]
        return [env[s] for s in self.output_slots]

    def as_text(self) -> str:
        return self.text

    def cost_analysis(self) -> dict:
        return self.costs

    def memory_analysis(self) -> dict:
        return self.memory
