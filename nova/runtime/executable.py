"""A CPU executable: the launch list of a compiled program, run over host buffers.

Intermediate values live in one arena allocated when the executable is built (offsets from the
memory plan, nova/compiler/plan_memory.py); program outputs are fresh arrays for the caller. An
executable is not reentrant: two threads must not call the same one at once.
"""

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
    kernel: object = None  # the codegen Kernel (None for host launches)


def _view(buf: np.ndarray, t) -> np.ndarray:
    return buf.reshape(-1).view(np.uint8)[: t.nbytes].view(t.dtype).reshape(t.shape)


class CPUExecutable:
    """Runs launches in order; values live in slots (program inputs first)."""

    def __init__(self, n_inputs: int, launches: list, output_slots: list, last_use: dict, text: str,
                 costs: dict, memory: dict, plan=None, slot_types=None):
        self.n_inputs = n_inputs
        self.launches = launches
        self.output_slots = output_slots
        self.last_use = last_use  # slot -> index of the last launch reading it
        self.text = text
        self.costs = costs
        self.memory = memory
        self.plan = plan
        self.slot_types = slot_types or {}
        self.views: dict[int, np.ndarray] = {}
        self.arena = None
        if plan is not None and plan.arena_bytes:
            # One aligned arena; each planned slot is a typed view at its offset.
            raw = np.empty(plan.arena_bytes + 64, np.uint8)
            start = (-raw.ctypes.data) % 64
            self.arena = raw[start:start + plan.arena_bytes]
            for s, off in plan.offsets.items():
                t = self.slot_types[s]
                self.views[s] = self.arena[off:off + t.nbytes].view(t.dtype).reshape(t.shape)
        self.aliases = dict(plan.aliases) if plan is not None else {}

    def __call__(self, values: list) -> list:
        env: dict[int, np.ndarray] = {}
        for i, v in enumerate(values):
            v = np.asarray(v)
            # (np.ascontiguousarray would turn a 0-d array into shape (1,))
            env[i] = v if v.flags.c_contiguous else v.copy()
        keep = set(self.output_slots)
        views, aliases = self.views, self.aliases
        for k, launch in enumerate(self.launches):
            ins = [env[s] for s in launch.inputs]
            if launch.fn is not None:
                outs = []
                for s, t in zip(launch.outputs, launch.out_types, strict=True):
                    if s in views:
                        outs.append(views[s])
                    elif s in aliases:
                        root = aliases[s]
                        outs.append(views[root] if root in views and t.dtype == views[root].dtype
                                    and t.shape == views[root].shape else _view(
                                        views.get(root, env.get(root)), t))
                    else:
                        outs.append(np.empty(t.shape, t.dtype))
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
