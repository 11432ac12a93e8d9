"""Control flow on the GPU: `lax.scan`, `lax.while_loop` and `lax.cond` equations of a CUDA
executable, their functions compiled into CUDA executables of their own.

A control-flow equation holds closed Programs (core/ir.py `Region`); the CUDA backend compiles
each Region like any program (passes, fusion, generated kernels, PTX from the kernel cache) and
the enclosing executable's launch list holds one `DeviceLoop` in its place. Running it queues
the Region executables' launches on the stream over addresses chosen per iteration, the GPU
counterpart of the CPU's native loops (nova/runtime/launcher.py `nova_scan`):
- scan: step t reads the carry step t - 1 wrote and writes the next into the other of two
  buffers per carry (no kernel reads the buffer it writes); the first step reads the initial
  carry where it is and the last writes the executable's output. Row idx of each scanned
  operand is read, and row idx of each stacked output written, in place (`base + idx * row
  bytes`) when that address is 64-byte aligned (the arena's alignment, which the kernels'
  vector accesses rely on), else through a staging buffer and a device-to-device copy.
  Nothing waits on the host, so a scan is captured into the executable's CUDA graph with the
  rest of its launches.
- while: each trip runs the condition's kernels, copies the predicate to the host (a
  synchronize) and, while it holds, the body's; the final carry is copied to the output.
- cond: the index is copied to the host (a synchronize), clamped as lax.switch does, and the
  chosen branch's kernels run into the outputs.
An executable holding a while or a cond reads device values on the host mid-run, so it is not
replayed as a CUDA graph (`needs_host`); neither is a scan whose body calls Python (a host
callback, nova/gpu/host_call.py, which then runs once per iteration, in the body's launch
order, as its Region executable's launch list queues it). A Region output no kernel writes (an operand passed
through, a constant, a value two outputs show) is copied into place after the Region runs.
"""

from __future__ import annotations

import numpy as np

from nova.gpu.memory import DeviceBuffer, copy_device_to_device, copy_device_to_host

# Addresses the generated kernels take: the arena's alignment (compiler/plan_memory.py ALIGN).
KERNEL_ALIGN = 64


class DeviceLoop:
    """One control-flow equation of a CUDA executable.

    prim: "scan", "while" or "cond"; params: the equation's parameters; regions: the compiled
    CUDA executables of its Regions, by role ({"body"} for scan, {"cond", "body"} for while,
    {"branch0", ...} for cond); in_types / out_types: the equation's operand and result
    TensorTypes (all of its results: those the enclosing program does not read are written
    to buffers of the loop's own)."""

    def __init__(self, prim: str, params: dict, regions: dict, in_types: list, out_types: list):
        if prim not in ("scan", "while", "cond"):
            raise ValueError(f"DeviceLoop: no GPU control flow for {prim!r}")
        self.prim = prim
        self.params = params
        self.regions = regions
        self.in_types = list(in_types)
        self.out_types = list(out_types)
        # Reads device values on the host mid-run (no CUDA graph): a while or a cond, here or
        # in a Region, or a host callback in a Region.
        self.needs_host = prim != "scan" or any(getattr(exe, "needs_host", False)
                                                for exe in regions.values())
        self.ordinal = None

    # --- set-up (needs a GPU) ---------------------------------------------------------------
    def prepare(self, ordinal: int) -> None:
        """Loads the Regions' kernels on device `ordinal` and allocates the loop's buffers:
        two per scan or while carry, and a scratch buffer per Region output a kernel writes
        (used where an output is not written in place)."""
        if self.ordinal == ordinal:
            return
        for exe in self.regions.values():
            exe._ensure_ready(ordinal, direct=True)
        self._scratch = {}
        for role, exe in self.regions.items():
            self._scratch[role] = {s: DeviceBuffer(exe.slot_types[s].nbytes, ordinal)
                                   for s in set(exe.output_slots) & exe._kernel_written}
        self._pairs = []
        if self.prim in ("scan", "while"):
            carry = self._carry_types()
            self._pairs = [(DeviceBuffer(t.nbytes, ordinal), DeviceBuffer(t.nbytes, ordinal))
                           for t in carry]
        self._rows = {}  # (role, input or output index) -> staging buffer of one row
        self.ordinal = ordinal

    def _carry_types(self) -> list:
        p = self.params
        if self.prim == "scan":
            return self.in_types[p["n_consts"]:p["n_consts"] + p["n_carry"]]
        return self.in_types[p["n_cond_consts"] + p["n_body_consts"]:]

    def _row_buffer(self, key, nbytes: int) -> int:
        buf = self._rows.get(key)
        if buf is None:
            buf = self._rows[key] = DeviceBuffer(nbytes, self.ordinal)
        return buf.ptr

    # --- running ------------------------------------------------------------------------------
    def _run_region(self, role: str, ins: list[int], dests: list[int], stream) -> None:
        """Queues Region `role` reading inputs at addresses `ins` and leaving output k at
        address dests[k]: kernels write their outputs there directly when the address is
        aligned, else into scratch buffers copied to it afterwards."""
        exe = self.regions[role]
        addr = dict(exe.addr)
        for i, a in enumerate(ins):
            addr[i] = a
        scratch = self._scratch[role]
        for s, buf in scratch.items():
            addr[s] = buf.ptr
        direct: set = set()
        copies = []
        for s, dst, t in zip(exe.output_slots, dests, exe.output_types, strict=True):
            if s in scratch and s not in direct and dst % KERNEL_ALIGN == 0:
                addr[s] = dst
                direct.add(s)
            else:
                copies.append((dst, s, t.nbytes))
        exe._launch_all(stream, addr)
        for dst, s, n in copies:
            if addr[s] != dst:
                copy_device_to_device(dst, addr[s], n, stream)

    def queue(self, ins: list[int], outs: list[int], stream) -> None:
        """Queues the loop on `stream`: operands at device addresses `ins`, results written to
        `outs` (one per equation result)."""
        if self.prim == "scan":
            self._scan(ins, outs, stream)
        elif self.prim == "while":
            self._while(ins, outs, stream)
        else:
            self._cond(ins, outs, stream)

    def _scan(self, ins, outs, stream) -> None:
        p = self.params
        nc, nk, length = p["n_consts"], p["n_carry"], p["length"]
        consts, cur, xs = ins[:nc], list(ins[nc:nc + nk]), ins[nc + nk:]
        x_rows = [t.nbytes // t.shape[0] if t.shape[0] else 0 for t in self.in_types[nc + nk:]]
        y_rows = [t.nbytes // length if length else 0 for t in self.out_types[nk:]]
        for t in range(length):
            idx = length - 1 - t if p["reverse"] else t
            rows = []
            for j, (x, row) in enumerate(zip(xs, x_rows, strict=True)):
                a = x + idx * row
                if a % KERNEL_ALIGN:
                    staged = self._row_buffer(("x", j), row)
                    copy_device_to_device(staged, a, row, stream)
                    a = staged
                rows.append(a)
            if t == length - 1:
                dests = list(outs[:nk])
            else:
                dests = [pair[t % 2].ptr for pair in self._pairs]
            ys = [y + idx * row for y, row in zip(outs[nk:], y_rows, strict=True)]
            self._run_region("body", consts + cur + rows, dests + ys, stream)
            cur = dests
        if length == 0:
            for dst, src, ty in zip(outs[:nk], cur, self.out_types[:nk], strict=True):
                copy_device_to_device(dst, src, ty.nbytes, stream)

    def _while(self, ins, outs, stream) -> None:
        p = self.params
        ncc, nbc = p["n_cond_consts"], p["n_body_consts"]
        cconsts, bconsts, cur = ins[:ncc], ins[ncc:ncc + nbc], list(ins[ncc + nbc:])
        flag = self._row_buffer(("pred",), 1)
        host = np.zeros((), np.bool_)
        t = 0
        while True:
            self._run_region("cond", cconsts + cur, [flag], stream)
            copy_device_to_host(host, flag, stream)  # (synchronizes the stream)
            if not host:
                break
            dests = [pair[t % 2].ptr for pair in self._pairs]
            self._run_region("body", bconsts + cur, dests, stream)
            cur = dests
            t += 1
        for dst, src, ty in zip(outs, cur, self.out_types, strict=True):
            copy_device_to_device(dst, src, ty.nbytes, stream)

    def _cond(self, ins, outs, stream) -> None:
        n = len(self.params["branches"])
        index = np.zeros((), self.in_types[0].dtype)
        copy_device_to_host(index, ins[0], stream)
        i = min(max(int(index), 0), n - 1)
        self._run_region(f"branch{i}", list(ins[1:]), list(outs), stream)
