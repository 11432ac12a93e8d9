"""A CPU executable: the launch list of a compiled program, run over host buffers.

Intermediate values live in one arena allocated when the executable is built (offsets from the
memory plan, nova/compiler/plan_memory.py); program outputs are fresh arrays for the caller. A
call runs each stretch of generated kernels as one native call through the launcher
(nova/runtime/launcher.py); with NOVA_PROFILE=1 every kernel is called (and timed) from Python.
An executable is not reentrant (its calls share the arena), so calls from several threads take
turns on a lock; different executables run at the same time.
"""

from __future__ import annotations

import atexit
import ctypes
import mmap
import os
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

# NOVA_PROFILE=1: time every launch; a table sorted by total time is printed at exit.
_PROFILE: dict[str, list] = {}
_DESCRIPTIONS: dict[str, str] = {}  # kernel name -> what it computes (describe_kernel)
_profiling = os.environ.get("NOVA_PROFILE") == "1"


def describe_kernel(kernel) -> str:
    """A short account of what a codegen Kernel computes, for the profile table: its kind, its
    distinctive primitives (movement and casts left out, first six kept) and the shape of its
    largest output, e.g. `contraction dot_general [2048, 768]` or
    `loop reduce_max exp reduce_sum div [64, 128, 128]`."""
    if kernel is None:
        return ""
    skip = {"constant", "reshape", "broadcast_in_dim", "transpose", "convert_element_type",
            "squeeze", "expand_dims", "copy"}
    ops: list[str] = []
    for e in kernel.program.eqns:
        name = e.prim.name
        if name not in skip and name not in ops:
            ops.append(name)
    more = " ..." if len(ops) > 6 else ""
    outs = [v.type for v in kernel.program.outputs]
    shape = list(max(outs, key=lambda t: t.nbytes).shape) if outs else []
    return f"{kernel.kind} {' '.join(ops[:6])}{more} {shape}"


def profile_table() -> str:
    """Per-kernel time (calls, total ms, mean us), sorted by total, plus host time between,
    and what each kernel computes (describe_kernel)."""
    rows = sorted(_PROFILE.items(), key=lambda kv: -kv[1][1])
    total_all = sum(total for _, total in _PROFILE.values()) or 1.0
    lines = [f"{'kernel':28s} {'calls':>7s} {'total ms':>10s} {'mean us':>9s} {'share':>6s}  what"]
    for name, (calls, total) in rows:
        lines.append(f"{name:28s} {calls:7d} {total * 1e3:10.2f} {total / calls * 1e6:9.1f} "
                     f"{total / total_all:6.1%}  {_DESCRIPTIONS.get(name, '')}")
    return "\n".join(lines)


def _print_profile():
    if _PROFILE:
        print("\nNOVA_PROFILE\n" + profile_table())


if _profiling:
    atexit.register(_print_profile)


# Arenas from this size up are mapped with 4 KiB pages (see allocate_arena).
SMALL_PAGE_ARENA_MIN = 4 << 20


def allocate_arena(nbytes: int) -> np.ndarray:
    """A uint8 buffer of `nbytes` bytes, 64-byte aligned, for a program's intermediates.

    From `SMALL_PAGE_ARENA_MIN` bytes up it is an anonymous mapping left on 4 KiB pages
    (MADV_NOHUGEPAGE). NumPy advises huge pages for its large allocations, and where the kernel
    compacts memory synchronously for advised regions (`defrag=madvise`, this machine's setting)
    the first touch of a fresh 107 MB arena stalled for 0.39 s of system time when no free 2 MiB
    blocks were left, against 0.08 s with 4 KiB pages; the step time did not move measurably
    (bench/NOTES.md, round 4). Elsewhere, or where mmap/madvise are unavailable, plain NumPy
    memory. Its contents start undefined either way (the plan writes before it reads).
    """
    if nbytes >= SMALL_PAGE_ARENA_MIN and hasattr(mmap, "MADV_NOHUGEPAGE"):
        try:
            m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            m.madvise(mmap.MADV_NOHUGEPAGE)
            arena = np.frombuffer(m, np.uint8)  # page-aligned; the view keeps the mapping alive
        except (OSError, ValueError):
            pass
        else:
            if getattr(_arena_population, "on", False):
                _populate_in_background(m, arena.ctypes.data, nbytes)
            return arena
    raw = np.empty(nbytes + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + nbytes]


# madvise(2) advice that faults a range in, writable, without changing its contents (Linux 5.14).
MADV_POPULATE_WRITE = 23

_arena_population = threading.local()


class populating_arenas:
    """`with populating_arenas():` arenas allocated inside (by executables built for a call that
    follows at once: jit's __call__) are faulted in by a background thread. Outside, an arena's
    pages are only touched when a call first writes them, so a program compiled ahead of time
    (`jit(f).lower(...).compile()`) holds no memory until it runs (found by review: a 256 MB
    arena was resident right after compile)."""

    def __enter__(self):
        self.prev = getattr(_arena_population, "on", False)
        _arena_population.on = True

    def __exit__(self, *exc):
        _arena_population.on = self.prev
        return False


def _populate_in_background(mapping, address: int, nbytes: int) -> None:
    """Faults the pages of a fresh arena in from another thread (inside `populating_arenas`;
    MADV_POPULATE_WRITE through ctypes, which releases the GIL), so that the first call does not
    take ~27,000 page faults for a 107 MB arena itself: the page tables fill while this thread
    goes on loading kernels and building the launch table. The contents are untouched, so a
    kernel may already write the arena meanwhile. Measured (bench/NOTES.md round 6): populating
    107 MB took 60-65 ms against 80-90 ms of first touches; a warm-cache small GPT-2 step's
    first call saved ~0.05 s. Where the advice is unknown (older kernels, not Linux) nothing
    happens."""
    libc = _libc()
    if libc is None:
        return

    def run(mapping=mapping):  # holds the mapping until the advice returns
        libc.madvise(address, nbytes, MADV_POPULATE_WRITE)

    threading.Thread(target=run, name="nova-arena-populate", daemon=True).start()


_libc_handle: list = []


def _libc():
    """libc's madvise through ctypes (None where unavailable)."""
    if not _libc_handle:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            libc.madvise.restype = ctypes.c_int
            _libc_handle.append(libc)
        except (OSError, AttributeError):
            _libc_handle.append(None)
    return _libc_handle[0]


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
    description: str = ""  # what it computes, when `kernel` is not at hand (executable cache)


_char = ctypes.c_char
_addressof = ctypes.addressof


def _address(a: np.ndarray) -> int:
    """The address of a contiguous array's first byte. ctypes' view of a writable buffer is
    ~3x cheaper than `a.ctypes.data` (which builds a helper object per call); read-only arrays
    take the slower route."""
    try:
        return _addressof(_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


def _view(buf: np.ndarray, t) -> np.ndarray:
    return buf.reshape(-1).view(np.uint8)[: t.nbytes].view(t.dtype).reshape(t.shape)


# Kernels may write with aligned (non-temporal) vector stores (codegen/cpu/loops.py NT_ALIGN):
# every buffer a kernel writes is at least this aligned. The arena is 64-byte aligned with
# 64-byte offsets and np.empty's malloc gives 16; only a donated input can be less aligned.
_WRITE_ALIGN = 16


def _reused(buf: np.ndarray, t) -> np.ndarray:
    """A donated input's buffer viewed as the value that reuses it, or a fresh array when the
    buffer is not aligned for the kernels' stores (donation permits reuse, it does not ask it)."""
    o = _view(buf, t)
    if _address(o) % _WRITE_ALIGN:
        return np.empty(t.shape, t.dtype)
    return o


# Fresh program outputs of at least this many bytes come from a small per-slot pool of earlier
# calls' buffers that nothing references any more. glibc serves such sizes with mmap (or a heap
# it trims back to the system), so a fresh output was page-faulted in on every call: 0.4 ms of
# a 19 ms step outside the kernels in bench/compile_and_overhead.py's warm process.
POOL_MIN_BYTES = 128 * 1024
# Buffers kept per output slot: two let a training loop that feeds each call's outputs to the
# next (outputs of call n alive while call n + 1 runs) reuse call n - 1's without allocating.
POOL_KEEP = 2
# Bytes all pools of the process may keep together (buffers in use by callers included): a
# program retraced for many shapes keeps pools for the first ones only.
POOL_BUDGET = 512 * 1024 * 1024
_pooled_bytes = [0]


class _OutputPool:
    """Output buffers an executable hands out and takes back once the caller drops them.

    A buffer is free when the pool holds the only reference to it (`sys.getrefcount`): every
    array, view or memoryview a caller keeps refers to it, so a buffer still in use is never
    handed out again. At most POOL_KEEP buffers per slot are kept, and at most POOL_BUDGET bytes
    by all pools of the process: beyond that a call allocates as NumPy would. Eager ops keep
    none (nova/compiler/eager.py)."""

    def __init__(self):
        self.free: dict[int, list] = {}
        self.enabled = True
        self.held = 0  # bytes this pool keeps (counted in _pooled_bytes until it is dropped)

    def __del__(self):
        if _pooled_bytes is not None:  # None once the module is torn down at exit
            _pooled_bytes[0] -= self.held

    def clear(self) -> None:
        _pooled_bytes[0] -= self.held
        self.held = 0
        self.free.clear()

    def take(self, s: int, t) -> np.ndarray:
        """A buffer of TensorType t for output slot s."""
        if t.nbytes < POOL_MIN_BYTES or not self.enabled:
            return np.empty(t.shape, t.dtype)
        kept = self.free.setdefault(s, [])
        for b in kept:
            # references: the list, this loop's name, getrefcount's argument
            if sys.getrefcount(b) == 3:
                return b
        b = np.empty(t.shape, t.dtype)
        if len(kept) < POOL_KEEP and _pooled_bytes[0] + t.nbytes <= POOL_BUDGET:
            kept.append(b)
            self.held += t.nbytes
            _pooled_bytes[0] += t.nbytes
        return b


class CPUExecutable:
    """Runs launches in order; values live in slots (program inputs first)."""

    def __init__(self, n_inputs: int, launches: list, output_slots: list, text: str,
                 costs: dict, memory: dict, plan=None, slot_types=None, launcher=None,
                 constants=None):
        """launcher: the native `nova_run` (nova/runtime/launcher.py), or None to call every
        kernel through ctypes from Python. constants: {slot: array} read by kernels but
        written by none (a shape-generic matmul's parameter vector), fixed for the
        executable's life."""
        self.constants = {s: np.ascontiguousarray(a) for s, a in (constants or {}).items()}
        self.launcher = launcher
        self.n_inputs = n_inputs
        self.launches = launches
        self.output_slots = output_slots
        self.text = text
        self.costs = costs
        self.memory = memory
        self.plan = plan
        self.slot_types = slot_types or {}
        self.views: dict[int, np.ndarray] = {}
        self.arena = None
        if plan is not None and plan.arena_bytes:
            # One aligned arena; each planned slot is a typed view at its offset.
            self.arena = allocate_arena(plan.arena_bytes)
            for s, off in plan.offsets.items():
                t = self.slot_types[s]
                self.views[s] = self.arena[off:off + t.nbytes].view(t.dtype).reshape(t.shape)
        self.aliases = dict(plan.aliases) if plan is not None else {}
        self._pool = _OutputPool()
        # One call at a time: every call shares the arena's intermediates and the native
        # launcher's slot array, so two threads calling at once computed wrong results.
        self._call_lock = threading.Lock()

    def pool_outputs(self, enabled: bool) -> None:
        """Whether fresh outputs of at least POOL_MIN_BYTES reuse dropped buffers (the default);
        False also releases the buffers kept so far."""
        self._pool.enabled = enabled
        if not enabled:
            self._pool.clear()

    # The plan of `_run_direct` (a tuple), None when the executable does not qualify, False
    # until the first call decides.
    _direct = False

    def __call__(self, values: list) -> list:
        """Runs the program on `values` (one per input slot); calls from several threads run
        one after the other (they share the arena), except one-kernel calls that touch nothing
        shared (`_plan_direct`)."""
        plan = self._direct
        if plan is False:
            with self._call_lock:
                plan = self._direct = self._plan_direct()
        if plan is not None:
            return self._run_direct(values, plan)
        with self._call_lock:
            if _profiling:
                return self._call_profiled(values)
            if self.launcher is not None:
                return self._run_native(values)
            return self._run(values, None)

    def _plan_direct(self):
        """The plan of a one-kernel call made without the slot table, the launcher or the
        lock (an eager op, a small jitted function: bench/NOTES.md round 24), or None.

        It qualifies when its one launch is a generated kernel reading program inputs and
        constants only and writing fresh buffers under POOL_MIN_BYTES (nothing in the arena,
        no donated buffer, no pool: every buffer it touches is the call's own or read-only),
        and every program output is one of those buffers, none twice. Not with NOVA_PROFILE.
        Returns (kernel, argument address template, ((position, input index), ...),
        ((position, shape, dtype), ...) per kernel output, program outputs as indices into
        those, or None when they are the same list)."""
        if _profiling or len(self.launches) != 1:
            return None
        (launch,) = self.launches
        if launch.fn is None:
            return None
        outs = list(launch.outputs)
        if (len(set(outs)) != len(outs) or len(set(self.output_slots)) != len(self.output_slots)
                or not set(self.output_slots) <= set(outs)):
            return None
        template = []
        in_pos = []
        for pos, s in enumerate(launch.inputs):
            if s < self.n_inputs:
                in_pos.append((pos, s))
                template.append(0)
            elif s in self.constants:
                template.append(_address(self.constants[s]))
            else:
                return None
        out_specs = []
        for s, t in zip(outs, launch.out_types, strict=True):
            if s < self.n_inputs or s in self.constants or s in self.views or \
                    s in self.aliases or t.nbytes >= POOL_MIN_BYTES:
                return None
            out_specs.append((len(template), t.shape, t.dtype))
            template.append(0)
        order = tuple(outs.index(s) for s in self.output_slots)
        if order == tuple(range(len(outs))):
            order = None
        return launch.fn, tuple(template), tuple(in_pos), tuple(out_specs), order

    def _run_direct(self, values: list, plan) -> list:
        """One kernel called directly (see _plan_direct): its arguments' addresses, then fresh
        outputs. Writable C-contiguous inputs are recognised by ctypes' view of their buffer
        (it refuses others); the rest go the general way (made contiguous, read-only ones by
        `_address`)."""
        fn, template, in_pos, out_specs, order = plan
        ptrs = list(template)
        keep = []  # inputs made contiguous here, alive until the kernel returns
        for pos, i in in_pos:
            v = values[i]
            if type(v) is not np.ndarray:
                v = np.asarray(v)
            try:
                ptrs[pos] = _addressof(_char.from_buffer(v))
            except (TypeError, ValueError, BufferError):
                if not v.flags.c_contiguous:
                    v = v.copy()
                    keep.append(v)
                ptrs[pos] = _address(v)
        bufs = []
        for pos, shape, dtype in out_specs:
            o = np.empty(shape, dtype)
            bufs.append(o)
            ptrs[pos] = _address(o)
        fn(*ptrs)
        if order is None:
            return bufs
        return [bufs[k] for k in order]

    def fresh_outputs(self) -> bool:
        """Whether every program output is a buffer a generated kernel writes and the call
        allocates (or takes from the pool of the caller's dropped ones): none is an argument,
        a constant, an arena view, a donated buffer or a host launch's result, none appears
        twice. Then each result is the caller's alone (nova.jit skips its sharing analysis,
        an eager op the overlap checks)."""
        fresh = getattr(self, "_fresh_outputs", None)
        if fresh is None:
            written = {s for l in self.launches if l.fn is not None for s in l.outputs}
            slots = self.output_slots
            fresh = len(set(slots)) == len(slots) and all(
                s in written and s >= self.n_inputs and s not in self.constants
                and s not in self.views and s not in self.aliases for s in slots)
            self._fresh_outputs = fresh
        return fresh

    def _call_profiled(self, values):
        t0 = time.perf_counter()
        times: list = []
        out = self._run(values, times)
        total = time.perf_counter() - t0
        for name, dt in times:
            rec = _PROFILE.setdefault(name, [0, 0.0])
            rec[0] += 1
            rec[1] += dt
        host = _PROFILE.setdefault("(host between kernels)", [0, 0.0])
        host[0] += 1
        host[1] += total - sum(dt for _, dt in times)
        return out

    def _prepare(self):
        """Per-launch argument recipes, so a call does no planning: arena views have fixed
        addresses; fresh arrays are only made for program outputs and host launches."""
        self._recipes = []
        # Program outputs a host launch produces: it may hand back a buffer it keeps (a large
        # constant's data, the same array on every call, or a closed-over Array's), while a
        # result is the caller's to write or donate: those are copied (_collect).
        self._host_outputs = frozenset(s for l in self.launches if l.fn is None
                                       for s in l.outputs) & frozenset(self.output_slots)
        n_slots = 1 + max([self.n_inputs - 1] + list(self.constants)
                          + [s for l in self.launches for s in l.inputs + l.outputs])
        self._n_slots = n_slots
        for launch in self.launches:
            outs = []
            for s, t in zip(launch.outputs, launch.out_types, strict=True):
                if s in self.views:
                    outs.append(("view", s, self.views[s]))
                elif s in self.aliases:
                    root = self.aliases[s]
                    if root in self.views:
                        outs.append(("view", s, _view(self.views[root], t)))
                    else:  # a donated input's buffer
                        outs.append(("alias", s, (root, t)))
                else:
                    outs.append(("fresh", s, t))
            self._recipes.append((launch, outs))
        self._view_addr = [0] * n_slots
        for launch, outs in self._recipes:
            for kind, s, x in outs:
                if kind == "view":
                    self._view_addr[s] = x.ctypes.data
        for s, a in self.constants.items():
            self._view_addr[s] = a.ctypes.data

    def _prepare_native(self):
        """Splits the launch list into segments: runs of generated kernels, each encoded as one
        launcher table (one native call), and host launches between them."""
        if not hasattr(self, "_recipes"):
            self._prepare()
        from nova.runtime.launcher import MAX_ARGS

        self._slots = np.zeros(self._n_slots, np.uint64)
        self._slots_ptr = self._slots.ctypes.data
        self._env0 = [None] * self._n_slots
        for launch, recipe in self._recipes:
            for kind, s, x in recipe:
                if kind == "view":
                    self._env0[s] = x
                    self._slots[s] = x.ctypes.data
        for s, a in self.constants.items():
            self._env0[s] = a
            self._slots[s] = a.ctypes.data
        segments = []
        words: list = []
        fresh: list = []
        count = 0

        def close():
            nonlocal words, fresh, count
            if count:
                table = np.asarray(words, np.int64)
                segments.append(("native", table, table.ctypes.data, count, fresh))
            words, fresh, count = [], [], 0

        for launch, recipe in self._recipes:
            nargs = len(launch.inputs) + len(launch.outputs)
            if launch.fn is None or nargs > MAX_ARGS:
                close()
                segments.append(("python", launch, recipe))
                continue
            address = ctypes.cast(launch.fn, ctypes.c_void_p).value
            words += [address, nargs] + list(launch.inputs) + list(launch.outputs)
            fresh += [(kind, s, x) for kind, s, x in recipe if kind != "view"]
            count += 1
        close()
        self._segments = segments

    def _run_native(self, values: list) -> list:
        """One native call per run of generated kernels (the whole step when no launch runs on
        the host): outputs are allocated first, their addresses written into the slot array."""
        if not hasattr(self, "_segments"):
            self._prepare_native()
        env = list(self._env0)
        slots = self._slots
        for i, v in enumerate(values):
            if type(v) is not np.ndarray:
                v = np.asarray(v)
            try:  # (ctypes views writable C-contiguous buffers only: see _run_direct)
                a = _addressof(_char.from_buffer(v))
            except (TypeError, ValueError, BufferError):
                v = v if v.flags.c_contiguous else v.copy()
                a = _address(v)
            env[i] = v
            slots[i] = a
        for seg in self._segments:
            if seg[0] == "native":
                _, _, table_ptr, count, fresh = seg
                for kind, s, x in fresh:
                    o = self._pool.take(s, x) if kind == "fresh" else \
                        _reused(env[x[0]], x[1])
                    env[s] = o
                    slots[s] = _address(o)
                done = self.launcher(table_ptr, count, self._slots_ptr)
                if done != count:
                    raise RuntimeError(f"native launcher stopped at launch {done} of {count}")
                continue
            _, launch, recipe = seg
            if launch.fn is not None:  # too many arguments for the launcher's table
                for kind, s, x in recipe:
                    if kind != "view":
                        o = self._pool.take(s, x) if kind == "fresh" else \
                            _reused(env[x[0]], x[1])
                        env[s] = o
                        slots[s] = _address(o)
                launch.fn(*[int(slots[s]) for s in launch.inputs + launch.outputs])
                continue
            outs = launch.host([env[s] for s in launch.inputs])
            for s, o in zip(launch.outputs, outs, strict=True):
                o = np.asarray(o)
                o = o if o.flags.c_contiguous else o.copy()
                env[s] = o
                slots[s] = _address(o)
        return self._collect(env)

    # -- native loops (nova/control_flow.py) --------------------------------------------------

    def _loop_table(self):
        """`(table address, launches, {kernel-written output slot: TensorType})` when every
        launch is a generated kernel in one launcher table and none writes a donated input's
        buffer: the executable can run as a native loop's body (run_scan, run_while). None
        otherwise (NOVA_PROFILE, no launcher, host launches, a kernel of too many arguments),
        and the caller iterates in Python. Called under the call lock."""
        if _profiling or self.launcher is None:
            return None
        if not hasattr(self, "_loop"):
            if not hasattr(self, "_segments"):
                self._prepare_native()
            segs = self._segments
            self._loop = None
            if all(seg[0] == "native" for seg in segs) and len(segs) <= 1:
                fresh = segs[0][4] if segs else []
                if all(kind == "fresh" for kind, _, _ in fresh):
                    table = (segs[0][2], segs[0][3]) if segs else (0, 0)
                    self._loop = table + ({s: t for _, s, t in fresh},)
        return self._loop

    def _bind_loop(self, fixed: list, keep: list) -> None:
        """Writes `fixed` values (kept alive in `keep`) into the first input slots: they stay
        put for a whole loop."""
        for i, v in enumerate(fixed):
            keep.append(v)
            self._slots[i] = _address(v)

    def _bind_scratch(self, written: set, keep: list) -> None:
        """One buffer (kept alive in `keep`) for each kernel-written slot no patch points into
        a loop's own arrays: intermediates outside the arena, and outputs copied after each
        iteration (a scalar ys row, a value two outputs show)."""
        for s, t in self._loop[2].items():
            if s not in written:
                b = np.empty(t.shape, t.dtype)
                keep.append(b)
                self._slots[s] = _address(b)

    def _slot_address(self, s: int) -> int:
        return self._slots_ptr + 8 * s

    def _carry_patches(self, first: int, carry: list, outputs: list, keep: list,
                       written: set) -> tuple[list, list]:
        """Patch words (launcher._LOOP_SOURCE) for carries entering at input slots
        first, first + 1, ... and leaving at program outputs `outputs` (indices): each carry
        has two buffers, A and B, that swap roles (iteration t reads B and writes A when t is
        even); B starts as a copy of the initial value. Returns (words, [(A, B)] per carry)."""
        words: list = []
        pairs = []
        for j, (c, k) in enumerate(zip(carry, outputs, strict=True)):
            a, b = np.empty_like(c), c.copy()
            keep += [a, b]
            pa, pb = _address(a), _address(b)
            pairs.append((a, b))
            words += [1, self._slot_address(first + j), pb, pa, 0]
            s = self.output_slots[k]
            if s in self._loop[2] and s not in written:
                written.add(s)
                words += [1, self._slot_address(s), pa, pb, 0]
            else:  # a carry passed through, or a value another output is written into
                words += [3, self._slot_address(s), pa, pb, c.nbytes]
        return words, pairs

    def run_scan(self, consts: list, carry: list, xs: list, ys_types: list, length: int,
                 reverse: bool) -> tuple[list, list] | None:
        """Runs this executable (a scan body: consts, carries, one row of each xs in; the new
        carries and one row of each ys, of TensorTypes `ys_types`, out) `length` times in one
        native call (nova_scan), rows in reverse order when `reverse`. Inputs are contiguous
        arrays of the body's input types (xs with the leading scan axis). Returns (final carries, stacked ys), both fresh
        arrays, or None when this executable cannot run natively (see _loop_table)."""
        from nova.runtime.launcher import loop_functions

        nc, nk = len(consts), len(carry)
        with self._call_lock:
            loop = self._loop_table()
            if loop is None:
                return None
            keep: list = []
            self._bind_loop(consts, keep)
            written: set = set()
            words, pairs = self._carry_patches(nc, carry, list(range(nk)), keep, written)
            for i, x in enumerate(xs):
                keep.append(x)
                row = x.nbytes // length if length else 0
                words += [0, self._slot_address(nc + nk + i), _address(x) if length else 0,
                          row, 0]
            ys = []
            for s, t in zip(self.output_slots[nk:], ys_types, strict=True):
                y = np.empty((length, *t.shape), t.dtype)
                ys.append(y)
                base = _address(y) if y.nbytes else 0
                if s in loop[2] and s not in written and not (base | t.nbytes) % _WRITE_ALIGN:
                    written.add(s)
                    words += [0, self._slot_address(s), base, t.nbytes, 0]
                else:  # copied after each iteration (a row the kernels' stores cannot take)
                    words += [2, self._slot_address(s), base, t.nbytes, t.nbytes]
            self._bind_scratch(written, keep)
            patch = np.asarray(words, np.int64)
            scan = loop_functions(self.launcher)[0]
            done = scan(loop[0], loop[1], self._slots_ptr, length, int(bool(reverse)),
                        patch.ctypes.data, len(words) // 5)
            if done != length:
                raise RuntimeError(f"native launcher stopped in scan iteration {done}")
            final = [a if length % 2 else b for a, b in pairs]
            return final, ys

    def run_while(self, cond: CPUExecutable, cond_consts: list, body_consts: list,
                  carry: list) -> list | None:
        """Runs `lax.while_loop` natively (nova_while): `cond` (cond_consts and the carries in,
        one bool scalar out) decides each trip and this executable (body_consts and the
        carries in, the new carries out) runs it. Inputs are contiguous arrays of the bodies'
        input types. Returns the final carries (fresh arrays), or None when either executable
        cannot run natively (see _loop_table)."""
        if cond is self:
            return None
        from nova.runtime.launcher import loop_functions

        # Region executables are shared by structure, so one may be this loop's body and
        # another loop's condition: the two locks are taken in one global order (by id), or
        # two threads running such loops wait on each other forever (found by review).
        first, second = sorted((self, cond), key=id)
        with first._call_lock, second._call_lock:
            loop, cloop = self._loop_table(), cond._loop_table()
            if loop is None or cloop is None:
                return None
            keep: list = []
            self._bind_loop(body_consts, keep)
            cond._bind_loop(cond_consts, keep)
            written: set = set()
            words, pairs = self._carry_patches(len(body_consts), carry,
                                               list(range(len(carry))), keep, written)
            self._bind_scratch(written, keep)
            cond._bind_scratch(set(), keep)
            for j, (a, b) in enumerate(pairs):  # the condition reads the carry being entered
                words += [1, cond._slot_address(len(cond_consts) + j), _address(b),
                          _address(a), 0]
            pred = cond.output_slots[0]
            patch = np.asarray(words, np.int64)
            loop_fn = loop_functions(self.launcher)[1]
            trips = loop_fn(cloop[0], cloop[1], cond._slots_ptr, cond._slot_address(pred),
                            loop[0], loop[1], self._slots_ptr, patch.ctypes.data,
                            len(words) // 5)
            if trips < 0:
                raise RuntimeError(f"native launcher stopped in while iteration {-1 - trips}")
            return [a if trips % 2 else b for a, b in pairs]

    def _run(self, values: list, times) -> list:
        if not hasattr(self, "_recipes"):
            self._prepare()
        env = [None] * self._n_slots
        for s, a in self.constants.items():
            env[s] = a
        # Buffer addresses, taken once per array: arena views have fixed ones (the per-launch
        # cost is then a list lookup per argument plus the ctypes call).
        addr = list(self._view_addr)
        for i, v in enumerate(values):
            v = np.asarray(v)
            # (np.ascontiguousarray would turn a 0-d array into shape (1,))
            v = v if v.flags.c_contiguous else v.copy()
            env[i] = v
            addr[i] = _address(v)
        for launch, recipe in self._recipes:
            if launch.fn is not None:
                for kind, s, x in recipe:
                    if kind == "view":
                        env[s] = x
                        continue
                    o = self._pool.take(s, x) if kind == "fresh" else \
                        _reused(env[x[0]], x[1])
                    env[s] = o
                    addr[s] = _address(o)
                ptrs = [addr[s] for s in launch.inputs]
                ptrs += [addr[s] for s in launch.outputs]
                if times is None:
                    launch.fn(*ptrs)
                else:
                    t = time.perf_counter()
                    launch.fn(*ptrs)
                    times.append((launch.name, time.perf_counter() - t))
                    if launch.name not in _DESCRIPTIONS:
                        _DESCRIPTIONS[launch.name] = launch.description or \
                            describe_kernel(launch.kernel)
            else:
                t = time.perf_counter()
                outs = launch.host([env[s] for s in launch.inputs])
                if times is not None:
                    times.append((launch.name + " (host)", time.perf_counter() - t))
                for s, o in zip(launch.outputs, outs, strict=True):
                    # Native kernels take bare pointers: a strided view (a reference's slice)
                    # must become contiguous before any kernel reads it.
                    o = np.asarray(o)
                    o = o if o.flags.c_contiguous else o.copy()
                    env[s] = o
                    addr[s] = _address(o)
        return self._collect(env)

    def _collect(self, env: list) -> list:
        """The program's outputs from the slot values (host launches' own buffers copied)."""
        host = self._host_outputs
        if not host:
            return [env[s] for s in self.output_slots]
        return [env[s].copy() if s in host else env[s] for s in self.output_slots]

    def reused_inputs(self) -> frozenset:
        """Program input slots whose buffers an intermediate takes in place (donated inputs the
        memory plan reuses): the only arguments a call writes into."""
        return frozenset(r for r in self.aliases.values() if r < self.n_inputs)

    def as_text(self) -> str:
        return self.text

    def cost_analysis(self) -> dict:
        return self.costs

    def memory_analysis(self) -> dict:
        return self.memory
