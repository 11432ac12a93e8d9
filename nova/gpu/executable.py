"""A GPU executable: the launch list of a compiled program, run over device buffers.

Built by nova/compiler/backend_cuda.py from PTX (from the kernel cache: no MLIR needed here).
Program outputs own buffers with fixed device addresses, intermediates share one arena laid out
by the memory plan, constants are uploaded once; an input gets a buffer of its own only when a
call needs one (a host value to upload, a donated argument to copy in). The first two calls run
the launches one by one (the first synchronizes, so a failing kernel is named); later calls
replay them as a CUDA graph, one per set of input addresses (calls from several threads take
turns: they share the buffers and the stream). An executable that reads device values on the
host mid-run (a while_loop or cond, nova/gpu/loops.py; a host callback, nova/gpu/host_call.py,
which synchronizes the stream, calls Python and uploads its results) always launches one by
one (`needs_host`).

Three ways to call it:
- `exe(values)`: host NumPy arrays in, host arrays out (copied in and back every call).
- `exe.call_on_device(values, donated, wrap)`: a GPU argument that is not donated is read where
  it is (the kernels never write it: no copy, not held twice; JAX's behaviour); a donated one is
  copied into the input's buffer (or not at all, below); results stay on the GPU. An output
  that is such an argument returned unchanged gets a copy of its own. Any other result is
  *lent*: it shows the
  executable's own output buffer (`SlotView`) instead of a copy. Before the next call
  overwrites that buffer, every lent result still alive is moved to a buffer of its own
  (copy-on-write), except a result passed back as the argument whose buffer it already shows
  (a training step's parameters, updated in place by the memory plan): that one costs no copy
  at all. So a loop `state = step(state)` with the state donated keeps the state on the device
  with at most one device-to-device copy per value not updated in place, and none for the rest.
  On the first call, donated arguments' buffers become the input buffers (no copy, and the
  state is not held twice). A result lent by another executable gets a buffer of its own
  (under its lender's lock) before a call reads it.
- `exe.call_direct(values, wrap)`: for eager ops (nova/jit.py `_eager_on_device`): the kernels
  read the arguments' own buffers and write fresh buffers that the results own; no graph, and
  the executable keeps no input or output buffers. An executable is called one way or the
  other (direct or not), not both.
"""

from __future__ import annotations

import collections
import hashlib
import threading
import weakref
from dataclasses import dataclass, field

import numpy as np

from nova.gpu.graph import Graph
from nova.gpu.memory import (
    DeviceBuffer,
    copy_device_to_device,
    copy_device_to_host,
    copy_host_to_device,
)
from nova.gpu.module import LaunchConfig, Module
from nova.gpu.stream import Stream, default_stream

_modules: dict = {}  # (device ordinal, sha256 of the PTX) -> loaded module (per process)

# CUDA graphs an executable keeps, one per set of input addresses. A loop that device_puts a
# fresh batch each step alternates between two addresses (the caching allocator hands the
# block of the batch before last back), and a few more cover an evaluation beside training.
GRAPHS_KEPT = 4
# Dynamic shared memory a kernel may take without opting in (cuFuncSetAttribute).
STATIC_SHARED_LIMIT = 48 * 1024


def load_module(ptx: str, ordinal: int | None = None) -> Module:
    """The loaded Module of a PTX text on device `ordinal` (None: the default device), loaded
    once per process and device."""
    key = (ordinal, hashlib.sha256(ptx.encode()).hexdigest())
    m = _modules.get(key)
    if m is None:
        m = _modules[key] = Module(ptx, ordinal)
    return m


class SlotView:
    """A lent result's buffer: `nbytes` bytes at device address `ptr`, an executable's value
    slot `slot` (see CUDAExecutable.call_on_device). `owner` is the lending executable's token
    and `lock` its call lock (reads of the result take it); `backing` is the DeviceBuffer that
    holds the bytes, kept alive by the view alone: a 0-d loss outliving its executable keeps
    its own block, not the program's memory. `free()` forgets the memory."""

    __slots__ = ("ptr", "nbytes", "slot", "owner", "lock", "backing")

    def __init__(self, exe, slot: int, ptr: int, nbytes: int, backing):
        self.owner, self.lock, self.backing = exe._token, exe._call_lock, backing
        self.slot, self.ptr, self.nbytes = slot, ptr, nbytes

    def free(self) -> None:
        self.ptr = self.owner = self.backing = None


def _own_foreign_results(values: list, token, ordinal_of) -> None:
    """Gives every argument lent by another executable (a SlotView whose owner is not `token`)
    a buffer of its own, copied under its lender's lock: a call then never reads another
    executable's slot while that executable's next call moves or overwrites it (found by
    review). Runs before the caller takes its own lock (no two call locks held at once)."""
    for v in values:
        buf = getattr(v, "_buffer", None)
        if type(buf) is not SlotView or buf.owner is token:
            continue
        with buf.lock:
            buf = v._buffer
            if type(buf) is not SlotView or buf.ptr is None:
                continue  # moved meanwhile
            ordinal = ordinal_of(v)
            own = DeviceBuffer(buf.nbytes, ordinal)
            copy_device_to_device(own.ptr, buf.ptr, buf.nbytes, default_stream(ordinal))
            v._buffer = own
            buf.free()


def _device_ordinal(v) -> int | None:
    device = getattr(v, "_device", None)
    return device.id if device is not None else None


@dataclass
class GPULaunch:
    """One kernel launch: entry `entry` of `ptx` over value slots (inputs then outputs).

    `kernel` is the codegen Kernel (for the memory plan's in-place rule), None for values
    computed on the host at build time (`host_value`, e.g. large constants), for control flow
    (`loop`) and for host callbacks run on every call (`host_call`)."""

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
    loop: object = None  # a control-flow equation's DeviceLoop (nova/gpu/loops.py)
    host_call: object = None  # a host callback's HostCall (nova/gpu/host_call.py), per call


def _runner(launch: GPULaunch):
    """The DeviceLoop or HostCall queueing launch `launch` (None for a kernel or a constant)."""
    return launch.loop if launch.loop is not None else launch.host_call


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
        self.output_types = [slot_types[s] for s in output_slots]  # results' types
        self._kernel_written = {s for l in launches for s in l.outputs
                                if l.ptx is not None or _runner(l) is not None}
        # A while, a cond or a host callback reads device values on the host mid-run (and a
        # callback is Python, which a graph cannot replay): no CUDA graph then.
        self.needs_host = any(_runner(l) is not None and _runner(l).needs_host
                              for l in launches)
        if self.needs_host:
            self.use_graph = False
        self.direct = False  # prepared for call_direct (set by its first call)
        self.calls = 0
        self._ready = False
        self._graphs: dict = {}  # input addresses -> Graph, least recently used first
        self.last_addresses: dict = {}  # slot -> device address in the latest run_device
        self.graphs_captured = 0
        self._graph_misses = 0  # calls since the last that found its graph
        # input addresses of the last calls (graph path)
        self._recent_keys: collections.deque = collections.deque(maxlen=GRAPHS_KEPT)
        self._cycling = False  # arguments have cycled through more address sets than graphs
        self.ordinal: int | None = None  # the device it runs on (set by its first call)
        self._lent: list = []  # weak references to the results that show an output slot
        self.lent_copies = 0  # lent results moved to buffers of their own (copy-on-write)
        self.staged_copies = 0  # arguments staged through a temporary buffer (call_on_device)
        self._token = object()  # identifies this executable's SlotViews
        self.started = 0  # calls that went past the set-up (arguments' buffers may be taken)
        # Calls share the device buffers and the stream: from several threads they take turns.
        self._call_lock = threading.Lock()

    # --- set-up on the first call (needs a GPU) -----------------------------------------------
    def _prepare(self, ordinal: int | None = None, adopt=None, direct: bool = False) -> None:
        """Allocates the buffers and loads the modules on device `ordinal`. adopt: {input slot:
        DeviceBuffer} taken as those inputs' buffers instead of new ones (donated arguments of
        the first call, which then need no copy). direct: no buffers for the inputs and for
        the outputs a kernel writes (call_direct brings its own)."""
        from nova.gpu.device import context, get_device_properties

        ordinal = context(ordinal).ordinal
        props = get_device_properties(ordinal)
        if not props.runs(self.target.split(":", 1)[1]):
            raise RuntimeError(f"this executable was compiled for {self.target}, but the GPU is "
                               f"{props.arch}: compile with target='cuda:{props.arch}'")
        self.ordinal = ordinal
        self.stream = default_stream(ordinal)
        self.buffers: dict[int, DeviceBuffer] = {}
        self.addr: dict[int, int] = {}
        arena_bytes = self.plan.arena_bytes if self.plan is not None else 0
        self.arena = DeviceBuffer(arena_bytes, ordinal) if arena_bytes else None
        offsets = self.plan.offsets if self.plan is not None else {}
        aliases = self.plan.aliases if self.plan is not None else {}
        slots = set(range(self.n_inputs)) | set(self.output_slots)
        for launch in self.launches:
            slots.update(launch.inputs)
            slots.update(launch.outputs)
        if direct:
            slots -= set(range(self.n_inputs)) | (set(self.output_slots) & self._kernel_written)
        for s in sorted(slots):
            if s in offsets:
                self.addr[s] = self.arena.ptr + offsets[s]
            elif s not in aliases:
                buf = (adopt or {}).get(s)
                if buf is not None and buf._alloc.ordinal == ordinal:
                    self.buffers[s] = buf
                    self.addr[s] = buf.ptr
                elif s >= self.n_inputs:
                    # An input gets a buffer of its own only when a call needs one (a host
                    # value or a donated argument to copy in, _input_buffer): a GPU argument
                    # that is not donated is read where it is.
                    self.buffers[s] = DeviceBuffer(self.slot_types[s].nbytes, ordinal)
                    self.addr[s] = self.buffers[s].ptr
        self._aliases = aliases
        for s, root in aliases.items():
            if root in self.addr:
                self.addr[s] = self.addr[root]
        self.functions = []
        for launch in self.launches:
            runner = _runner(launch)
            if runner is not None:
                runner.prepare(ordinal)
                self.functions.append(runner)
                continue
            if launch.host_value is not None:
                for s, value in zip(launch.outputs, launch.host_value, strict=True):
                    copy_host_to_device(self.addr[s], np.ascontiguousarray(value), self.stream)
                self.functions.append(None)
                continue
            fn = load_module(launch.ptx, ordinal).function(launch.entry)
            dynamic = launch.config.shared_bytes
            if dynamic > STATIC_SHARED_LIMIT and getattr(fn, "dynamic_optin", 0) < dynamic:
                fn.set_attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES", dynamic)  # opt in, once
                fn.dynamic_optin = dynamic
            self.functions.append(fn)
        self._ready = True

    def _launch_all(self, stream=None, addr=None) -> None:
        stream = stream or self.stream
        addr = addr or self.addr
        for launch, fn in zip(self.launches, self.functions, strict=True):
            if fn is None:
                continue
            if _runner(launch) is not None:
                fn.queue([addr[s] for s in launch.inputs], [addr[s] for s in launch.outputs],
                         stream)
                continue
            ptrs = [addr[s] for s in launch.inputs] + [addr[s] for s in launch.outputs]
            fn.launch(launch.config, ptrs, stream)

    def run_device(self, addr=None) -> None:
        """Queues the launch list on the stream over the addresses `addr` (default: the
        executable's own buffers): one by one for the first two calls, then as a CUDA graph.
        A graph holds its kernels' addresses, so there is one per set of input addresses
        (arguments read where they are), the last GRAPHS_KEPT of them kept."""
        addr = self.last_addresses = addr or self.addr
        if not self.use_graph or self.calls < 2:
            self._launch_all(addr=addr)
            if self.calls == 0:
                self.stream.synchronize()  # a failing kernel is reported at its first run
            return
        key = tuple(addr.get(i) for i in range(self.n_inputs))
        graph = self._graphs.pop(key, None)
        self._graph_misses = 0 if graph is not None else self._graph_misses + 1
        if self._graph_misses > GRAPHS_KEPT:
            self._cycling = True
        recurs = key in self._recent_keys
        self._recent_keys.append(key)
        if graph is None and self._cycling and not recurs:
            # Arguments cycling through more address sets than graphs are kept (more misses
            # in a row than graphs): capturing and instantiating a graph per call costs more
            # than launching (found by review: 19 captures in 21 calls over 7 pre-placed
            # batches). From then on a set gets a graph when it comes back within the last
            # GRAPHS_KEPT calls (two batches in turn do).
            self._launch_all(addr=addr)
            return
        if graph is None:
            # Captured on a stream of its own (nothing runs while capturing): the shared stream
            # never is in capture mode, where another thread's read of a result (a synchronize)
            # would be an error and would break the capture (found by a thread test).
            cap = Stream(self.ordinal)
            graph = Graph.capture(cap, lambda: self._launch_all(cap, addr))
            self.graphs_captured += 1
            while len(self._graphs) >= GRAPHS_KEPT:
                self._graphs.pop(next(iter(self._graphs)))
        self._graphs[key] = graph  # most recently used last
        graph.replay(self.stream)

    def __call__(self, values: list) -> list:
        with self._call_lock:
            return self._call(values)

    def _ensure_ready(self, ordinal: int | None, adopt=None, direct: bool = False) -> None:
        if self._ready:
            if ordinal is not None and ordinal != self.ordinal:
                raise ValueError(f"this executable runs on cuda:{self.ordinal}; its arguments "
                                 f"are on cuda:{ordinal} (compile it again for that device)")
            if direct != self.direct:
                raise RuntimeError("an executable runs either by call_direct or by the other "
                                   "calls, not both")
            return
        from nova.gpu.driver import GPUUnavailableError

        try:
            self._prepare(ordinal, adopt, direct)
            self.direct = direct
        except GPUUnavailableError as e:
            raise GPUUnavailableError(
                f"this program was compiled for {self.target} and needs an NVIDIA GPU to run: "
                f"{e}") from None

    def _input_buffer(self, i: int) -> int:
        """The address of input i's own buffer, allocated at its first use (with the
        addresses of the values the memory plan aliases to it)."""
        if i not in self.buffers:
            self.buffers[i] = DeviceBuffer(self.slot_types[i].nbytes, self.ordinal)
            self.addr[i] = self.buffers[i].ptr
            for s, root in self._aliases.items():
                if root == i:
                    self.addr[s] = self.addr[i]
        return self.addr[i]

    def _upload(self, i: int, v) -> None:
        t = self.slot_types[i]
        a = np.ascontiguousarray(np.asarray(v, dtype=t.dtype).reshape(t.shape))
        copy_host_to_device(self._input_buffer(i), a, self.stream)

    def _call(self, values: list) -> list:
        self._ensure_ready(None)
        self._release_lent(values, frozenset())
        for i, v in enumerate(values[: self.n_inputs]):
            self._upload(i, v)
        self.run_device()
        self.calls += 1
        outs = []
        for s, t in zip(self.output_slots, self.output_types, strict=True):
            host = np.empty(t.shape, t.dtype)
            copy_device_to_host(host, self.addr[s], self.stream)
            outs.append(host)
        return outs

    # --- device-resident calls ------------------------------------------------------------------
    def call_on_device(self, values: list, donated=frozenset(), wrap=None,
                       ordinal: int | None = None) -> list:
        """Runs with device-resident arguments and results.

        values: per program input, an array on this executable's GPU (an object with a
        `_buffer` whose `ptr` is a device address: nova's GPUArray) or a host value (uploaded).
        donated: indices of `values` the caller deletes after the call (their buffers may be
        taken). wrap(view, type): builds a result from a SlotView and its TensorType (default:
        the view itself). ordinal: the device the arguments are on (the first call fixes it).
        Returns one result per program output; see the module docstring for the lending rule.
        Raises ValueError when `ordinal` differs from the device of the first call."""
        _own_foreign_results(values[: self.n_inputs], self._token, _device_ordinal)
        with self._call_lock:
            adopt = {} if self._ready else self._adoptable(values, donated)
            self._ensure_ready(ordinal, adopt)
            self.started += 1
            for i, buf in adopt.items():
                if self.buffers.get(i) is buf:  # the argument now shows the executable's buffer
                    values[i]._buffer = SlotView(self, i, buf.ptr, buf.nbytes, buf)
            self._release_lent(values, donated)
            addr, temps = self._copy_in(values[: self.n_inputs], donated)
            self.run_device(addr)
            self.calls += 1
            # The temporaries go back to the caching allocator: their next user is ordered
            # after these launches on the same stream (memory.py).
            for tmp in temps:
                tmp.free()
            outs = []
            for s, t in zip(self.output_slots, self.output_types, strict=True):
                root = self._aliases.get(s, s)
                if addr[s] != self.addr.get(s):
                    # An argument read where it is, returned (or a view of it): a copy of
                    # its own, as the executable does not own that buffer.
                    own = DeviceBuffer(t.nbytes, self.ordinal)
                    copy_device_to_device(own.ptr, addr[s], t.nbytes, self.stream)
                    outs.append(wrap(own, t) if wrap is not None else own)
                    continue
                backing = self.buffers.get(root, self.arena)
                view = SlotView(self, s, addr[s], t.nbytes, backing)
                out = wrap(view, t) if wrap is not None else view
                outs.append(out)
                self._lent.append(weakref.ref(out))
            return outs

    def call_direct(self, values: list, wrap=None, ordinal: int | None = None) -> list:
        """Runs once over the arguments' own buffers (host values uploaded to temporaries) into
        fresh buffers that the results own: no graph, nothing lent, no input copies kept. For
        eager ops, whose executables are many and whose arguments change from call to call
        (the other calls keep a copy of every input). wrap(buffer, type) builds a result from
        its DeviceBuffer (default: the buffer). Raises ValueError for another device's
        arguments than the first call's."""
        _own_foreign_results(values[: self.n_inputs], self._token, _device_ordinal)
        with self._call_lock:
            self._ensure_ready(ordinal, direct=True)
            addr = dict(self.addr)
            temps = []
            for i, v in enumerate(values[: self.n_inputs]):
                buf = getattr(v, "_buffer", None)
                if buf is None:
                    tmp = DeviceBuffer(self.slot_types[i].nbytes, self.ordinal)
                    temps.append(tmp)
                    addr[i] = tmp.ptr
                    t = self.slot_types[i]
                    copy_host_to_device(tmp.ptr, np.asarray(v, dtype=t.dtype).reshape(t.shape),
                                        self.stream)
                else:
                    addr[i] = buf.ptr
            fresh = {}
            for s in self.output_slots:
                if s in self._kernel_written and s not in fresh:
                    fresh[s] = DeviceBuffer(self.slot_types[s].nbytes, self.ordinal)
                    addr[s] = fresh[s].ptr
            self._launch_all(self.stream, addr)
            if self.calls == 0:
                self.stream.synchronize()  # a failing kernel is reported at its first run
            self.calls += 1
            outs, given = [], set()
            for s, t in zip(self.output_slots, self.output_types, strict=True):
                buf = fresh.get(s)
                if buf is None or s in given:  # an argument, a constant, a repeated output
                    own = DeviceBuffer(t.nbytes, self.ordinal)
                    copy_device_to_device(own.ptr, addr[s], t.nbytes, self.stream)
                    buf = own
                given.add(s)
                outs.append(wrap(buf, t) if wrap is not None else buf)
            for tmp in temps:  # the next user of the block is ordered after these launches
                tmp.free()
            return outs

    def _copy_in(self, values: list, donated=frozenset()) -> tuple[dict, list]:
        """Puts the arguments where the kernels read them; returns (the call's slot
        addresses, temporaries to free once the launches are queued).

        A GPU argument that is not donated is read where it is (its address replaces the
        input's; the kernels never write a non-donated input). Host values are uploaded and
        donated GPU arguments copied into the input's own buffer (a donated input is the
        memory plan's to overwrite), unless the argument already is that buffer. A device
        source may show an input buffer that another argument's copy writes first (swapped
        state, ping-pong buffers: a lent result passed back): such sources are staged through
        a temporary buffer before any input buffer is written."""
        in_place, copies, written, ours = {}, {}, set(), set()
        for i, v in enumerate(values):
            buf = getattr(v, "_buffer", None)
            if buf is not None and i not in donated:
                in_place[i] = buf.ptr
                if type(buf) is SlotView and buf.owner is self._token and \
                        buf.ptr != self.addr.get(i):
                    # a result of ours still lent (also passed donated, so not moved out by
                    # _release_lent): its memory is the kernels' to write (found by review)
                    ours.add(buf.ptr)
                continue
            dst = self._input_buffer(i)
            if buf is None:
                copies[i] = None
                written.add(dst)
            elif buf.ptr != dst:
                copies[i] = buf.ptr
                written.add(dst)
        # The kernels may write a donated input's buffer (the memory plan updates it in
        # place): an argument read in place from one (the same result passed donated and not
        # donated) is staged too (found by review: read while being overwritten).
        clobbered = written | ours | {self.addr[i] for i in donated if i in self.buffers}
        staged = {}
        for i, src in copies.items():
            if src is not None and src in written and src not in staged:
                tmp = staged[src] = DeviceBuffer(self.slot_types[i].nbytes, self.ordinal)
                copy_device_to_device(tmp.ptr, src, self.slot_types[i].nbytes, self.stream)
                self.staged_copies += 1
        for i, src in in_place.items():
            if src in clobbered and src not in staged:
                tmp = staged[src] = DeviceBuffer(self.slot_types[i].nbytes, self.ordinal)
                copy_device_to_device(tmp.ptr, src, self.slot_types[i].nbytes, self.stream)
                self.staged_copies += 1
        for i, src in copies.items():
            if src is None:
                self._upload(i, values[i])
            else:
                src = staged[src].ptr if src in staged else src
                copy_device_to_device(self.addr[i], src, self.slot_types[i].nbytes, self.stream)
        if not in_place:
            return self.addr, list(staged.values())
        addr = dict(self.addr)
        for i, src in in_place.items():
            addr[i] = staged[src].ptr if src in staged else src
        for s, root in self._aliases.items():
            if root in in_place:
                addr[s] = addr[root]
        return addr, list(staged.values())

    def _adoptable(self, values: list, donated) -> dict:
        """{input slot: buffer} of the donated arguments whose own buffers (a whole
        DeviceBuffer of exactly the slot's size, passed once) can become the input buffers:
        the first call then copies none of them and does not hold the state twice."""
        counts = collections.Counter(map(id, values[: self.n_inputs]))
        adopt = {}
        for i in donated:
            if i >= self.n_inputs:
                continue
            v = values[i]
            buf = getattr(v, "_buffer", None)
            if (type(buf) is DeviceBuffer and counts[id(v)] == 1 and buf.ptr is not None
                    and buf.nbytes == self.slot_types[i].nbytes):
                adopt[i] = buf
        return adopt

    def _release_lent(self, values: list, donated) -> None:
        """Before a call writes its slots: every lent result still alive moves to a buffer of
        its own, except one passed as the argument whose buffer it shows and not donated (read
        in place; non-donated input buffers are never written) and one passed as a donated
        argument (read, in place or by a copy queued before any kernel, then deleted by the
        caller)."""
        if not self._lent:
            return
        in_place, consumed = set(), set()
        for i, v in enumerate(values[: self.n_inputs]):
            buf = getattr(v, "_buffer", None)
            if type(buf) is SlotView and buf.owner is self._token:
                if buf.ptr == self.addr.get(i):
                    in_place.add(id(v))
                if i in donated:
                    consumed.add(id(v))
        kept = []
        for ref in self._lent:
            a = ref()
            if a is None or getattr(a, "_deleted", False):
                continue
            buf = a._buffer
            if type(buf) is not SlotView or buf.owner is not self._token:
                continue  # moved already
            if id(a) in in_place and id(a) not in consumed:
                kept.append(ref)  # read in place, not written (not donated): stays lent
                continue
            if id(a) in consumed:
                continue  # read before any kernel runs, then deleted by the caller
            own = DeviceBuffer(buf.nbytes, self.ordinal)
            copy_device_to_device(own.ptr, buf.ptr, buf.nbytes, self.stream)
            a._buffer = own
            buf.free()
            self.lent_copies += 1
        self._lent = kept

    def as_text(self) -> str:
        return self.text

    def cost_analysis(self) -> dict:
        return self.costs

    def memory_analysis(self) -> dict:
        return self.memory
