"""Memory planning: buffer lifetimes over the launch list, offsets in one arena, in-place reuse.

Every intermediate value (written by one launch, read by later ones, not a program output) gets
a byte range of one arena allocated once per executable. Two values share bytes only if their
lifetimes [first write, last read] do not overlap (first-fit by decreasing size, 64-byte
aligned). A launch may also write an output over an input that dies at that launch when the
kernel reads each input element only at the index it writes (an elementwise loop kernel): the
output then takes the input's buffer, in place. A donated program input (`donate_argnums`)
may be reused the same way, by intermediates and by program outputs: a training step's new
parameters are written over the donated old ones (no allocation, no page faults, and the old
and new parameters are never both held). Other program outputs are fresh arrays handed to the
caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nova.compiler.fusion_rules import is_reduction, reduced_axes

ALIGN = 64


@dataclass
class MemoryPlan:
    offsets: dict = field(default_factory=dict)  # slot -> byte offset in the arena
    aliases: dict = field(default_factory=dict)  # slot -> slot whose buffer it takes (in place)
    arena_bytes: int = 0
    peak_bytes: int = 0  # arguments + outputs + arena
    naive_bytes: int = 0  # intermediates without any reuse

    def summary(self) -> dict:
        return {"arena_bytes": self.arena_bytes, "temp_bytes_without_reuse": self.naive_bytes,
                "in_place": len(self.aliases)}


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _epilogue_inplace_safe(gk, in_pos: int, out_pos: int) -> bool:
    """A GEMM's output over one of its epilogue inputs (not an operand of the dot_general),
    when the emitter set `schedule["epilogue_in_place"]` (the GPU's: the thread that stores an
    output element has read that element's epilogue inputs just before, from registers; no
    split-K, no partial sums in the output) and everything computed from the input is
    elementwise at the dot's output shape (a running sum acc + A @ B: linear_cross_entropy's
    weight gradient, 154 MB a chunk at GPT-2 124M). The CPU's GEMMs may store partial sums
    in the output before the epilogue and set no flag."""
    if not gk.schedule.get("epilogue_in_place"):
        return False
    dot = next((e for e in gk.program.eqns if e.prim.name == "dot_general"), None)
    if dot is None:
        return False
    v = gk.program.inputs[in_pos]
    o = gk.program.outputs[out_pos]
    shape = dot.outputs[0].type.shape
    if any(v is x for x in dot.inputs) or any(o is x for x in gk.program.inputs):
        return False
    if v.type.shape != shape or o.type.shape != shape or v.type.nbytes != o.type.nbytes:
        return False
    full = {id(v)}
    for e in gk.program.eqns:
        if not any(id(u) in full for u in e.inputs):
            continue
        if type(e.prim.kernel).__name__ != "Elementwise" or \
                any(q.type.shape != shape for q in e.outputs):
            return False
        full.update(id(q) for q in e.outputs)
    return True


def inplace_safe(gk, in_pos: int, out_pos: int) -> bool:
    """Can output `out_pos` of codegen kernel `gk` be written over input `in_pos`?

    True for loop kernels whose iteration shape is both values' shape, where everything
    computed from the input is elementwise (so element i of the input is read at index i only,
    in the same iteration, before element i of the output is stored). Also for row kernels
    whose emitter set `schedule["rows_in_place"]`: each row is computed by one block (GPU) or
    one thread (CPU), which finishes every reduction phase over the row before the last pass
    stores the full-shape outputs, and nothing is stored into an output before that pass.
    There the input may also reach the output through reductions over the kernel's reduced
    axes and the row values computed from them (elementwise at the row shape, reshaped
    between keep-dims and not, broadcast back along the reduced axes): a cross-entropy's
    gradient takes its logits' buffer (the GPT-2 124M step's largest buffer, 1.65 GB).
    """
    if gk.kind == "contraction":
        return _epilogue_inplace_safe(gk, in_pos, out_pos)
    if gk.kind != "loop":
        return False
    shape = tuple(gk.schedule.get("iter_shape", ()))
    red = tuple(gk.schedule.get("red_axes") or ())
    if red and not gk.schedule.get("rows_in_place"):
        return False
    v = gk.program.inputs[in_pos]
    o = gk.program.outputs[out_pos]
    if v.type.shape != shape or o.type.shape != shape or v.type.nbytes != o.type.nbytes:
        return False
    if any(o is x for x in gk.program.inputs):
        return False
    kept = [i for i in range(len(shape)) if i not in red]
    rows = tuple(shape[i] for i in kept)  # a row value's shape, and with the reduced axes as 1
    rows_kept = tuple(1 if i in red else d for i, d in enumerate(shape))
    full, per_row = {id(v)}, set()  # values depending on the input: per element, per row

    def row_shaped(t) -> bool:
        return t.shape in (rows, rows_kept)

    # Every equation that depends on the input, directly or through others, must be elementwise
    # at the iteration shape (then output element i depends on input element i only; a flip,
    # transpose or gather of an elementwise result reads other elements of the input) or, in a
    # row kernel, one of the per-row steps above.
    for e in gk.program.eqns:
        ins_full = [u for u in e.inputs if id(u) in full]
        ins_row = [u for u in e.inputs if id(u) in per_row]
        if not ins_full and not ins_row:
            continue
        outs = e.outputs
        elementwise = type(e.prim.kernel).__name__ == "Elementwise"
        if elementwise and all(q.type.shape == shape for q in outs):
            full.update(id(q) for q in outs)
        elif ins_full:
            if not (red and is_reduction(e) and tuple(sorted(reduced_axes(e))) == red
                    and all(row_shaped(q.type) for q in outs)):
                return False
            per_row.update(id(q) for q in outs)
        elif elementwise or e.prim.name == "reshape":
            if not all(row_shaped(q.type) for q in outs):
                return False
            per_row.update(id(q) for q in outs)
        elif e.prim.name == "broadcast_in_dim" and outs[0].type.shape == shape:
            (src,) = e.inputs
            dims = tuple(e.params["broadcast_dimensions"])
            if not ((src.type.shape == rows and dims == tuple(kept))
                    or (src.type.shape == rows_kept and dims == tuple(range(len(shape))))):
                return False
            full.add(id(outs[0]))
        else:
            return False
    return True


def live_bytes(steps, inputs, outputs) -> tuple[int, int]:
    """(peak live bytes, bytes of intermediates) when `steps` run in order without reuse.

    steps: (input Vars, output Vars) pairs, one per equation or kernel. A value is live from the
    step that writes it to its last reader; program inputs and outputs stay live throughout. The
    same scan serves the interpreter (equations) and the compiled executable (kernels).
    """
    last = {}
    for n, (ins, _) in enumerate(steps):
        for v in ins:
            last[id(v)] = n
    kept = {id(v) for v in outputs} | {id(v) for v in inputs}
    live = sum(v.type.nbytes for v in inputs)
    peak, temps = live, 0
    for n, (ins, outs) in enumerate(steps):
        for v in outs:
            live += v.type.nbytes
            temps += v.type.nbytes
        peak = max(peak, live)
        for v in {id(v): v for v in ins}.values():
            if last.get(id(v)) == n and id(v) not in kept:
                live -= v.type.nbytes
    return peak, temps


def plan_memory(launches, n_inputs: int, output_slots, slot_types: dict, donated=()) -> MemoryPlan:
    """Assigns arena offsets (and in-place aliases) to the intermediate slots of `launches`.

    launches: objects with `.inputs`, `.outputs` (slot lists), `.kernel` (codegen Kernel or None
    for host launches, whose outputs are not planned). slot_types: slot -> TensorType.
    """
    outputs = set(output_slots)
    first, last = {}, {}
    for n, launch in enumerate(launches):
        for s in launch.outputs:
            first.setdefault(s, n)
        for s in launch.inputs:
            last[s] = n
    plan = MemoryPlan()
    planned = [s for s in first if s not in outputs and s >= n_inputs
               and launches[first[s]].kernel is not None]
    # In place: an output takes the buffer of an input that dies at the same launch. A program
    # output may only take a donated input's buffer (the caller receives it; an arena range is
    # reused by the next call), and keeps it to the end: nothing after it may take it again.
    owner: dict[int, int] = {}  # slot -> slot that owns the underlying buffer
    held_by_output: set[int] = set()  # roots whose buffer a program output has taken
    for n, launch in enumerate(launches):
        if launch.kernel is None:
            continue
        taken = set()
        for op, s in enumerate(launch.outputs):
            is_output = s in outputs
            if is_output:
                if not donated or s < n_inputs or first.get(s) != n:
                    continue
            elif s not in planned:
                continue
            for ip, src in enumerate(launch.inputs):
                root = owner.get(src, src)
                dies_here = last.get(src) == n and launch.inputs.count(src) == 1
                if is_output:
                    reusable = root in donated
                else:
                    reusable = root in planned or root in donated
                reusable = reusable and root not in outputs and root not in held_by_output
                if dies_here and reusable and src not in taken and inplace_safe(launch.kernel, ip, op):
                    owner[s] = root
                    plan.aliases[s] = root
                    taken.add(src)
                    # The buffer now lives until the output's last use (to the end for a
                    # program output).
                    if is_output:
                        held_by_output.add(root)
                        last[root] = len(launches)
                    else:
                        last[root] = max(last.get(root, n), last.get(s, n))
                    break
    # Interval packing of the buffers that own memory (first fit, largest first).
    roots = [s for s in planned if s not in plan.aliases]
    lifetime = {}
    for s in roots:
        end = max([last.get(s, first[s])] + [last.get(a, first[a]) for a, r in plan.aliases.items() if r == s])
        lifetime[s] = (first[s], end)
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, start, end)
    for s in sorted(roots, key=lambda s: -slot_types[s].nbytes):
        size = _align(max(slot_types[s].nbytes, 1))
        start, end = lifetime[s]
        clashes = sorted((o, sz) for o, sz, a, b in placed if not (b < start or end < a))
        off = 0
        for o, sz in clashes:
            if off + size <= o:
                break
            off = max(off, o + sz)
        placed.append((off, size, start, end))
        plan.offsets[s] = off
        plan.arena_bytes = max(plan.arena_bytes, off + size)
    plan.naive_bytes = sum(slot_types[s].nbytes for s in planned)
    arg_bytes = sum(slot_types[s].nbytes for s in range(n_inputs))
    out_bytes = sum(slot_types[s].nbytes for s in set(output_slots)
                    if s >= n_inputs and s not in plan.aliases)
    host_bytes = sum(slot_types[s].nbytes for s in first if s not in planned and s not in outputs)
    plan.peak_bytes = arg_bytes + out_bytes + plan.arena_bytes + host_bytes
    return plan
