"""`jit`: trace once per signature into a Program, compile it, and replay the cached Executable.

Stages, as in JAX: `jit(f).trace(*args)` -> Traced -> `.lower()` -> Lowered -> `.compile()` ->
Compiled, each with `as_text()`. The cache key is the full signature: pytree structure, shapes and
dtypes of the dynamic leaves, the values of static arguments, the config flags that change
code and the device of the arguments (computation follows data: arguments on a GPU compile the
program for that GPU, whose results stay there; nova/runtime/devices.py). A mismatch retraces
(never replays a stale program); `cache_info()` counts hits and misses and records the reason
of each miss.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import gc
import inspect
import logging
import os
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from nova.collectives import bound_axes
from nova.config import config
from nova.core import dtypes
from nova.core.array import Array, _adopt
from nova.core.errors import CompilerError, DeletedArrayError, UnexpectedTracerError
from nova.core.interpreter import run_program
from nova.core.ir import Program, TensorType
from nova.core.pytree import _REGISTRY, PyTreeDef, tree_flatten, tree_map, tree_unflatten
from nova.core.source_info import short, user_frame_line
from nova.core.trace import (
    Trace,
    Tracer,
    _reference_eval,
    end_trace,
    set_device_executor,
    set_eager_executor,
    trace_context,
)
from nova.core.trace import (
    _state as _trace_state,
)
from nova.ops.callback import CALLBACKS, holds_callbacks
from nova.runtime.devices import Device, GPUArray
from nova.runtime.executable import populating_arenas


@dataclass(frozen=True)
class ShapeDtypeStruct:
    """Shape and dtype of an argument, for `jit(f).trace/lower` without real data."""

    shape: tuple
    dtype: np.dtype

    def __init__(self, shape, dtype):
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        object.__setattr__(self, "dtype", dtypes.canonicalize(dtype))


def _aval_of(x, name) -> TensorType:
    if isinstance(x, Array):
        return x.aval
    if isinstance(x, ShapeDtypeStruct):
        return TensorType(x.shape, x.dtype)
    if isinstance(x, np.ndarray | np.generic | int | float | bool):
        return TensorType(np.shape(x), dtypes.dtype_of_value(x))
    raise TypeError(
        f"jit: argument '{name}' of type {type(x).__name__} is not an array, a Python scalar or a "
        "pytree of them; mark it static with static_argnums/static_argnames"
    )


def _value_of(x, aval) -> np.ndarray:
    if isinstance(x, Array):
        return x._concrete("a jitted call's argument")
    return np.asarray(x, dtype=aval.dtype)


@dataclass(frozen=True)
class _Signature:
    tree: PyTreeDef
    avals: tuple
    leaf_names: tuple
    statics: tuple  # ((name, value), ...)
    flags: tuple
    device: Device | None = None  # the GPU the array arguments are on; None: the host

    def key(self):
        return (self.tree, self.avals, self.statics, self.flags, self.device)


@dataclass
class CacheInfo:
    hits: int = 0
    misses: int = 0
    miss_reasons: list = field(default_factory=list)
    size: int = 0


def _describe_change(old: _Signature, new: _Signature) -> str:
    if old.flags != new.flags:
        return f"config flags changed: {dict(old.flags)} -> {dict(new.flags)}"
    if old.device != new.device:
        return f"arguments moved: {old.device or 'cpu:0'} -> {new.device or 'cpu:0'}"
    if old.statics != new.statics:
        for (n, a), (_, b) in zip(old.statics, new.statics, strict=False):
            if a != b:
                return f"static argument '{n}' changed: {a!r} -> {b!r}"
        return "static arguments changed"
    if old.tree != new.tree:
        return f"argument pytree structure changed: {old.tree} -> {new.tree}"
    for n, a, b in zip(new.leaf_names, old.avals, new.avals, strict=True):
        if a != b:
            return f"argument '{n}' changed: {a} -> {b}"
    return "unknown change"


class Executable:
    """Runs a Program on host values. The reference interpreter until a backend replaces it."""

    def __init__(self, program: Program):
        self.program = program
        self._constants = [np.asarray(e.params["value"]) for e in program.eqns
                           if e.prim.name == "constant"]

    def __call__(self, values: list) -> list:
        # An output that is a constant's data (a closed-over Array returned as it is) is copied:
        # results are the caller's to write or donate (`_wrap_outputs` rules out arguments only).
        return [o.copy() if any(np.may_share_memory(o, c) for c in self._constants) else o
                for o in run_program(self.program, values)]


# The function turning a (pass-optimized) Program into an Executable; the compiler installs its own.
_backend_compile: Callable[[Program], Executable] = Executable


def set_backend_compile(fn: Callable | None) -> None:
    global _backend_compile
    _backend_compile = fn or Executable


_run_eqn = None  # nova.compiler.eager.run_eqn, imported on the first eager op


def _eager(prim, values, params, out_types):
    """Eager evaluation follows the configured backend, so eager and jitted code share one path."""
    global _run_eqn
    flags = config._values
    if flags["backend"] == "compiled" and prim.name not in CALLBACKS:
        # (a Python callback runs as itself: compiling it would only wrap the same call)
        if _run_eqn is None:
            from nova.compiler.eager import run_eqn as _run_eqn
        outs = _run_eqn(prim, values, params, out_types)
    else:
        outs = _reference_eval(prim, values, params, out_types)
    if flags["debug_nans"] and _has_nan(outs) and not _has_nan(values):
        raise FloatingPointError(
            f"debug_nans: nova.{prim.name} produced a NaN (at {short(user_frame_line())})")
    return outs


def _has_nan(arrays) -> bool:
    return any(np.asarray(a).dtype.kind == "f" and np.isnan(np.asarray(a, np.float64)).any()
               for a in arrays)


def _find_first_nan(program: Program, values: list):
    """Re-runs `program` equation by equation; raises FloatingPointError naming the first
    primitive that turned NaN-free inputs into a NaN, and the user's source line."""
    env = {id(v): np.asarray(a) for v, a in zip(program.inputs, values, strict=True)}
    for e in program.eqns:
        ins = [env[id(v)] for v in e.inputs]
        outs = _reference_eval(e.prim, ins, e.params, [o.type for o in e.outputs])
        if _has_nan(outs) and not _has_nan(ins):
            raise FloatingPointError(
                f"debug_nans: nova.{e.prim.name} produced a NaN (at {short(e.source)}); "
                f"inputs {[tuple(a.shape) for a in ins]}")
        for o, a in zip(e.outputs, outs, strict=True):
            env[id(o)] = a
    raise FloatingPointError("debug_nans: the compiled program produced a NaN, but the "
                             "equation-by-equation reference run did not (a backend bug)")


set_eager_executor(_eager)


_DEVICE_EAGER: dict = {}  # (primitive name, params key) -> nova.jit applying it
_HOST_ONLY: set = set()  # (primitive name, params key, argument types) with no GPU kernel


def _eager_on_device(prim, args, params):
    """An eager primitive with an argument on a GPU, run there: a cached `jit` of the one
    primitive (computation follows data, so it compiles for that GPU; results are GPU Arrays
    of their own: the executable reads the arguments where they are and keeps no buffers,
    CUDAExecutable.call_direct). NotImplemented (the caller computes on the host from host
    copies) when the params are not hashable, the primitive has no GPU kernel for these
    arguments or cannot be compiled here (remembered), or debug_nans is on (the host path
    names the user's line)."""
    from nova.compiler.cse import _param_key

    if config.read("debug_nans") or any(getattr(a, "_deleted", False) for a in args):
        return NotImplemented  # the host path names the op (or the deleted operand) and line
    try:
        key = (prim.name, tuple(sorted((k, _param_key(v)) for k, v in params.items())))
        hash(key)
    except TypeError:
        return NotImplemented
    where = (key, tuple(_aval_of(a, "x") if not isinstance(a, Array) else a.aval
                        for a in args))
    if where in _HOST_ONLY:
        return NotImplemented
    fn = _DEVICE_EAGER.get(key)
    if fn is None:
        def apply(*xs):
            return prim.bind(*xs, **params)

        apply.__name__ = prim.name
        fn = _DEVICE_EAGER[key] = jit(apply)
        fn._direct = True  # its CUDA executables run by call_direct (keep no buffers)
    try:
        return fn(*args)
    except (NotImplementedError, CompilerError):
        # Raised while compiling, before anything runs: no GPU kernel for the op, a kernel
        # missing from the cache on a machine without MLIR, a shape the CUDA codegen cannot
        # take (an empty reduction, a grid beyond CUDA's limits). The host computes it, as
        # before eager ops followed their arguments.
        _HOST_ONLY.add(where)
        return NotImplemented


set_device_executor(_eager_on_device)


def _uses_cpu_compiler() -> bool:
    return _backend_compile is Executable and config.read("backend") == "compiled"


def eval_shape(fun: Callable, *args, **kwargs):
    """The shapes and dtypes `fun(*args, **kwargs)` would return, as a pytree of
    ShapeDtypeStruct (jax.eval_shape), found by tracing fun abstractly: nothing is computed
    or compiled. Arguments are arrays, ShapeDtypeStructs (or anything with .shape and .dtype)
    or Python scalars (weakly typed), in pytrees; all of them are traced, as under jit. Raises
    what tracing fun raises (ShapeError, TypeError, ConcretizationTypeError for Python
    control flow on a traced value)."""
    traced = jit(fun).trace(*args, **kwargs)
    structs = [ShapeDtypeStruct(tuple(v.type.shape), v.type.dtype)
               for v in traced.program.outputs]
    return tree_unflatten(traced.out_tree, structs)


def _holds_custom_rules(e) -> bool:
    """Whether equation e holds a control-flow Region whose function called custom_vjp /
    custom_jvp functions: the passes rebuild such Regions without the rules' markers, so a
    transform must replay the traced Program (core/ir.py Region.replay)."""
    for v in e.params.values():
        for r in v if isinstance(v, tuple) else (v,):
            if getattr(r, "dropped_rules", False):
                return True
    return False


def _compile_for_backend(program: Program, donated=()):
    """The Executable for the configured backend ("compiled": MLIR-generated native kernels)."""
    if _uses_cpu_compiler():
        from nova.compiler.backend_cpu import compile_program

        return compile_program(program, donated=donated)
    return _backend_compile(program)


def _peak_bytes(program: Program) -> tuple[int, int]:
    """(peak live bytes over the equation order, bytes of intermediates), by a liveness scan."""
    from nova.compiler.plan_memory import live_bytes

    return live_bytes([(e.inputs, e.outputs) for e in program.eqns], program.inputs,
                      program.outputs)


def _wrap_outputs(raw: list, values: list, handed_over=(), leaves=None) -> list:
    """Arrays of an executable's outputs; one is Nova's own buffer (`owned`) unless it is an
    argument or a view of one. handed_over: flat indices of donated arguments whose buffers
    the executable wrote (an output written over one is Nova's: the argument is deleted).
    leaves: the call's argument leaves; an Array argument whose buffer an output shows is no
    longer owned either (donating it later must not write what the output shows)."""
    if all(o.base is None for o in raw):
        # Fast path: outputs that own their memory, none of them an argument or an argument's
        # base: all are Nova's own buffers (a small call spent ~4 us in the general rule).
        ids = {id(o) for o in raw}
        if len(ids) == len(raw) and not any(
                id(v) in ids or id(getattr(v, "base", None)) in ids for v in values):
            return [Array(o, owned=True) for o in raw]
    handed_over = frozenset(handed_over)
    ins = {id(v) for k, v in enumerate(values) if k not in handed_over}
    if leaves is not None:
        roots = {id(v if v.base is None else v.base): k for k, v in enumerate(values)
                 if k not in handed_over and isinstance(v, np.ndarray)}
        for o in raw:
            k = roots.get(id(o if o.base is None else o.base))
            if k is not None and isinstance(leaves[k], Array):
                leaves[k]._owned = False
    # An output returned twice (or two views of one buffer): each later one gets a buffer of
    # its own, so writing one result (np.asarray of it is writable) or donating it never shows
    # in another, as two results of a JAX call are distinct arrays.
    roots = collections.Counter([id(o if o.base is None else o.base) for o in raw])
    if len(roots) < len(raw):
        seen: set = set()
        fresh = []
        for o in raw:
            root = id(o if o.base is None else o.base)
            fresh.append(o.copy() if root in seen else o)
            seen.add(root)
        raw = fresh
    out = []
    for o in raw:
        base = o.base
        out.append(Array(o, owned=id(o) not in ins and (base is None or id(base) not in ins)))
    return out


class _gc_paused:
    """Python's cyclic garbage collector paused while a program is traced and compiled.

    Tracing and the passes allocate a few objects per equation (Vars, Eqns, tracers, params)
    and free almost none, so collections keep finding nothing while each full one walks the
    whole heap: the small GPT-2 step's trace took 207-211 ms with the collector on and
    173-195 ms with it off (bench/NOTES.md round 6). The previous state is restored, so a
    program that disabled the collector keeps it disabled."""

    def __enter__(self):
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self.was_enabled:
            gc.enable()
        return False


class Compiled:
    """A compiled program for one signature: call it, read its text, costs and memory."""

    def __init__(self, lowered: Lowered, out_tree: PyTreeDef, sig: _Signature, fn,
                 target: str | None = None):
        self._lowered = lowered
        self.out_tree = out_tree
        self._sig = sig
        self._fn = fn
        donated = fn._donated_leaves(sig) if fn else ()
        self._on_gpu = target is not None and target.startswith("cuda")
        if self._on_gpu:
            from nova.compiler.backend_cuda import compile_program as compile_cuda

            self._exe = compile_cuda(lowered.program, target=target, donated=donated)
        elif _uses_cpu_compiler() and not holds_callbacks(lowered._traced.program):
            # A process that compiled this traced program before loads the executable from the
            # disk cache without running the compiler (nova/compiler/executable_cache.py).
            from nova.compiler import executable_cache

            key = executable_cache.program_key(lowered._traced.program, donated)
            self._exe = executable_cache.load(key)
            self.from_cache = self._exe is not None
            if self._exe is None:
                from nova.compiler.backend_cpu import prefetch_generic_matmuls

                # LLVM builds the shape-generic matmul kernels on another core meanwhile.
                prefetch_generic_matmuls(lowered._traced.program)
                self._exe = _compile_for_backend(lowered.program, donated)
                executable_cache.store(key, self._exe)
        else:
            self._exe = _compile_for_backend(lowered.program, donated)

    from_cache = False  # True when the executable came from the executable cache
    _fresh = None  # whether every result is a fresh buffer (_wrap); None until the first call

    def _wrap(self, raw: list, values: list, leaves) -> list:
        """The results' Arrays (`_wrap_outputs`); Nova's own buffers at once when the executable
        says it always allocates every output (CPUExecutable.fresh_outputs): no sharing
        analysis per call."""
        fresh = self._fresh
        if fresh is None:
            query = getattr(self._exe, "fresh_outputs", None)
            fresh = self._fresh = bool(callable(query) and query())
        if fresh:
            return [_adopt(o) for o in raw]
        return _wrap_outputs(raw, values, self._overwritten(), leaves)

    def _unflatten(self, outs: list):
        tree = self.out_tree
        if tree.kind == "leaf" and len(outs) == 1:  # one array returned (tree_unflatten's case)
            return outs[0]
        return tree_unflatten(tree, outs)

    @property
    def program(self) -> Program:
        """The optimized Program (the passes run on first access when the executable came from
        the executable cache)."""
        return self._lowered.program

    def as_text(self) -> str:
        text = getattr(self._exe, "as_text", None)
        return text() if callable(text) else self.program.as_text()

    def cost_analysis(self) -> dict:
        """Total flops and bytes, and a per-kernel (or, without a compiler, per-equation) list,
        from the primitives' cost rules."""
        custom = getattr(self._exe, "cost_analysis", None)
        if callable(custom):
            return custom()
        per = []
        for e in self.program.eqns:
            c = e.prim.cost([v.type for v in e.inputs], [v.type for v in e.outputs], **e.params)
            per.append({"op": e.prim.name, "flops": c.flops, "bytes": c.bytes})
        return {
            "flops": sum(p["flops"] for p in per),
            "bytes accessed": sum(p["bytes"] for p in per),
            "per_op": per,
        }

    def memory_analysis(self) -> dict:
        """Bytes of arguments, outputs, intermediates and the peak live bytes (in bytes)."""
        custom = getattr(self._exe, "memory_analysis", None)
        if callable(custom):
            return {**custom(), "saved_for_backward_bytes": self.program.saved_for_backward_bytes()}
        peak, temps = _peak_bytes(self.program)
        return {
            "saved_for_backward_bytes": self.program.saved_for_backward_bytes(),
            "argument_bytes": sum(v.type.nbytes for v in self.program.inputs),
            "output_bytes": sum(v.type.nbytes for v in self.program.outputs),
            "temp_bytes": temps,
            "peak_bytes": peak,
        }

    def _call_flat(self, values: list, leaves=None, keep_inputs: bool = False) -> list:
        """Runs the executable on flat values. `leaves` (the arguments' leaves) lets a donated
        buffer that the executable overwrites be handed over as it is when it is Nova's alone
        (an owned Array that no other argument shares); any other (a NumPy argument, an Array
        sharing the caller's memory, one passed twice) is copied first: JAX likewise never
        writes a NumPy argument. keep_inputs: copy every overwritten argument (`values` stay
        intact, e.g. for debug_nans to re-run them)."""
        overwritten = self._overwritten()
        if overwritten:
            values = list(values)
            # An owned Array's buffer is Nova's alone (no view of it was handed out, no other
            # Array shares it): only the same Array passed twice shares it, so counting the
            # leaves by identity finds every sharing that matters.
            seen = collections.Counter(map(id, leaves)) if leaves is not None else {}
            for k in overwritten:
                leaf = leaves[k] if leaves is not None else None
                mine = isinstance(leaf, Array) and leaf._owned
                if keep_inputs or not mine or seen[id(leaf)] > 1:
                    values[k] = np.array(values[k], copy=True, order="C")
        return self._exe(values)

    def _overwritten(self) -> tuple:
        """Flat indices of the donated arguments whose buffers the executable writes (those an
        intermediate takes in place); all donated ones when the executable does not say."""
        cached = getattr(self, "_overwritten_cache", None)
        if cached is None:
            donated = self._fn._donated_leaves(self._sig) if self._fn else ()
            reused = getattr(self._exe, "reused_inputs", None)
            if callable(reused):
                taken = reused()
                donated = tuple(k for k in donated if k in taken)
            self._overwritten_cache = cached = donated
        return cached

    def _call_on_gpu(self, leaves, sig: _Signature, device: Device | None):
        """Runs a CUDA executable on `device`, the GPU of the arguments (None: the one its
        first call ran on, or the default GPU): GPU arguments are read on the device, host
        ones uploaded; the results are GPU Arrays (nova/gpu/executable.py: call_on_device).
        Then deletes the donated arguments. With debug_nans, a NaN in a result that no
        argument had is traced to its first equation on the host copies of the arguments.
        Raises DeletedArrayError for a deleted GPU argument."""
        vals = []
        for x, a, n in zip(leaves, sig.avals, sig.leaf_names, strict=True):
            if type(x) is GPUArray:
                if x._deleted:
                    raise DeletedArrayError(
                        f"argument '{n}' ({a} on {x._device}) was deleted (or donated to an "
                        "earlier call)")
                vals.append(x)
            else:
                vals.append(_value_of(x, a))
        debug_nans = config.read("debug_nans")
        host_in = [np.asarray(v) for v in vals] if debug_nans else None
        donated = self._fn._donated_leaves(sig) if self._fn else ()
        exe = self._exe

        def wrap(view, aval):
            return GPUArray._from_buffer(view, aval, Device("cuda", exe.ordinal))

        ordinal = device.id if device is not None else None
        started = exe.started
        try:
            if getattr(self._fn, "_direct", False):  # an eager op: nothing kept between calls
                outs = exe.call_direct(vals, wrap, ordinal=ordinal)
            else:
                outs = exe.call_on_device(vals, frozenset(donated), wrap, ordinal=ordinal)
            if debug_nans:
                host_out = [np.asarray(o) for o in outs]
                if _has_nan(host_out) and not _has_nan(host_in):
                    _find_first_nan(self.program, host_in)
        finally:
            # Once the executable may have taken the donated buffers (adopted or written them),
            # the donated arguments are gone even when the call raises (debug_nans): their
            # memory is the executable's now.
            if self._fn is not None and exe.started != started:
                self._fn._donate_inputs(leaves, sig)
        return tree_unflatten(self.out_tree, outs)

    def __call__(self, *args, **kwargs):
        leaves, sig = self._fn._flatten_args(args, kwargs)
        placed = sig.device
        if placed != self._sig.device:
            # A compiled program runs where it was compiled for: a CUDA one on its GPU (host
            # arguments uploaded), a CPU one on the host (GPU arguments read through host copies).
            sig = dataclasses.replace(sig, device=self._sig.device)
        if sig.key() != self._sig.key():
            raise TypeError(
                "Compiled function called with a different signature: "
                + _describe_change(self._sig, sig)
            )
        if self._on_gpu:
            return self._call_on_gpu(leaves, sig, placed)
        vals = [_value_of(x, a) for x, a in zip(leaves, sig.avals, strict=True)]
        raw = self._call_flat(vals, leaves)
        outs = self._wrap(raw, vals, leaves)
        if self._fn is not None:
            self._fn._donate_inputs(leaves, sig)
        return self._unflatten(outs)


class Lowered:
    """The Program after the compiler's passes, for one signature and target."""

    def __init__(self, traced: Traced, target: str | None):
        self._traced = traced
        self.target = target
        self._program: Program | None = None

    @property
    def program(self) -> Program:
        """The Program after the pass pipeline (run on first access)."""
        if self._program is None:
            from nova.compiler.pipeline import run_passes, target_options

            self._traced.verify()
            self._program = run_passes(self._traced.program,
                                       options=target_options(self.target))
        return self._program

    def as_text(self) -> str:
        return self.program.as_text()

    def compile(self) -> Compiled:
        t = self._traced
        return Compiled(self, t.out_tree, t._sig, t._fn, target=self.target)


class Traced:
    """The traced Program of a jitted function for one signature."""

    def __init__(self, program: Program, out_tree: PyTreeDef, sig: _Signature, fn: JitFunction):
        self.program = program
        self.out_tree = out_tree
        self._sig = sig
        self._fn = fn

    _verified = False
    replay: Program | None = None  # the program with its custom_vjp markers (jit._inline)
    captures: tuple | list = ()  # enclosing traces' values its last inputs stand for (jit._inline)
    cacheable: bool = True  # False: traced while a custom_vjp rule was bypassed (trace.py)

    def verify(self) -> None:
        """Checks the traced Program (SSA form, every equation's shape rule) once; raises
        nova.core.ir.IRError naming the first bad equation."""
        if not self._verified:
            self.program.verify()
            self._verified = True

    def as_text(self) -> str:
        return self.program.as_text()

    def lower(self, target: str | None = None) -> Lowered:
        """Lowered for `target` ("cpu", "cuda:sm_XX"; None: the GPU of the traced arguments
        that are on one, else the host). Raises UnexpectedTracerError for a Program that
        reads values of an enclosing transform (they exist only inside that transform)."""
        if self.captures:
            t = self.captures[0]
            raise UnexpectedTracerError(
                f"jit({getattr(self._fn._f, '__name__', 'f')}) was traced inside another "
                f"transform and reads its traced {t.aval} (created at {short(t._source)}); "
                "such a trace can only run inside that transform: call the jitted function "
                "there, or pass the value as an argument")
        if target is None:
            target = _target_of(self._sig.device)
        elif target == "cpu":
            target = None
        return Lowered(self, target)


class JitFunction:
    """The result of `nova.jit(f)`; see `jit`."""

    def __init__(self, f, static_argnums, static_argnames, donate_argnums):
        self._f = f
        try:
            self._params = list(inspect.signature(f).parameters.values())
        except (TypeError, ValueError):
            self._params = []
        names = [p.name for p in self._params]
        sa = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums or ())
        sn = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames or ())
        donate = (donate_argnums,) if isinstance(donate_argnums, int) \
            else tuple(donate_argnums or ())
        kinds = {p.kind for p in self._params}
        fname = getattr(f, "__name__", "f")
        if self._params and inspect.Parameter.VAR_POSITIONAL not in kinds:
            n_pos = sum(p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                   inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in self._params)
            for what, nums in (("static_argnums", sa), ("donate_argnums", donate)):
                bad = [i for i in nums if not -n_pos <= i < n_pos]
                if bad:
                    raise ValueError(f"jit({fname}): {what} {bad} out of range for a function "
                                     f"of {n_pos} positional argument(s)")
            # Negative positions count from the end of the signature's positional parameters
            # (a call passing the last one by keyword must not shift them onto another).
            sa, donate = tuple(i % n_pos for i in sa), tuple(i % n_pos for i in donate)
        # Static arguments can be named either way; each form implies the other (as in JAX).
        self._static_nums = set(sa) | {names.index(n) for n in sn if n in names}
        self._static_names = set(sn) | {names[i] for i in sa if 0 <= i < len(names)}
        both = sorted(set(donate) & self._static_nums)
        if both:
            raise ValueError(f"jit({fname}): argument(s) {both} are both static and donated: "
                             "a static argument is part of the cache key, not a buffer")
        self._donate = donate
        self._donated_of: dict = {}  # signature key -> flat indices of the donated leaves
        self._leaf_names: dict = {}  # argument structure -> the leaves' names (_flatten_args)
        if self._params and inspect.Parameter.VAR_KEYWORD not in kinds:
            unknown = [n for n in sn if n not in names]
            if unknown:
                raise ValueError(f"jit({fname}): static_argnames {unknown} name no parameter "
                                 f"of {fname} (parameters: {names})")
        self._cache: dict = {}
        # (code key, {avals: Compiled}): _call_plain's memo of its _cache lookups
        self._plain_memo: tuple = (None, {})
        self._traced: dict = {}  # sig key -> Traced, for calls inside another trace (_inline)
        self._last_sig: _Signature | None = None
        self._info = CacheInfo()
        _LIVE.add(self)
        functools.update_wrapper(self, f)

    # --- signature ------------------------------------------------------------------------------
    def _arg_name(self, i):
        if i < len(self._params) and self._params[i].kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            return self._params[i].name
        return f"arg{i}"

    def _flatten_args(self, args, kwargs):
        if not kwargs and not self._static_nums and all(map(_is_plain_leaf, args)):
            # Fast path: positional arrays and scalars only (x @ w): the structure of n plain
            # leaves is one interned treedef, built once (the general flatten walks three nodes
            # and interns each: ~5 of a small call's ~30 us).
            n = len(args)
            tree = _PLAIN_TREES.get(n)
            if tree is None:
                tree = _PLAIN_TREES[n] = tree_flatten(([0] * n, {}))[1]
            names = self._leaf_names.get(tree)
            if names is None:
                names = self._leaf_names[tree] = tuple(self._arg_name(i) for i in range(n))
            leaves = list(args)
            avals = tuple(_aval_of(x, nm) for x, nm in zip(leaves, names, strict=True))
            return leaves, _Signature(tree, avals, names, (), config.code_key(),
                                      self._placement(leaves, names))
        statics, dyn_args, dyn_kwargs = [], [], {}
        for i, a in enumerate(args):
            if i in self._static_nums:
                statics.append((self._arg_name(i), _hashable(a, self._arg_name(i))))
                dyn_args.append(None)
            else:
                dyn_args.append(a)
        for k in sorted(kwargs):
            if k in self._static_names:
                statics.append((k, _hashable(kwargs[k], k)))
            else:
                dyn_kwargs[k] = kwargs[k]
        leaves, tree = tree_flatten((dyn_args, dyn_kwargs))
        names = self._leaf_names.get(tree)
        if names is None:  # per structure: a training step's call flattens its state once
            names = []
            arg_defs, kw_def = tree.children
            for i, td in enumerate(arg_defs.children):
                n = td.num_leaves
                names += [self._arg_name(i) if n == 1 else f"{self._arg_name(i)}[{j}]"
                          for j in range(n)]
            for k, td in zip(kw_def.aux, kw_def.children, strict=True):
                n = td.num_leaves
                names += [k if n == 1 else f"{k}[{j}]" for j in range(n)]
            names = tuple(names)
            if len(self._leaf_names) > 256:
                self._leaf_names.clear()
            self._leaf_names[tree] = names
        avals = tuple(_aval_of(x, n) for x, n in zip(leaves, names, strict=True))
        sig = _Signature(tree, avals, names, tuple(statics), config.code_key(),
                         self._placement(leaves, names))
        return leaves, sig

    def _placement(self, leaves, names) -> Device | None:
        """The GPU that the arguments on a GPU are on (None when all are host values). Raises
        ValueError when they are on different GPUs."""
        device = first = None
        for x, n in zip(leaves, names, strict=True):
            if type(x) is GPUArray:
                if device is None:
                    device, first = x._device, n
                elif x._device != device:
                    raise ValueError(
                        f"jit({getattr(self._f, '__name__', 'f')}): argument '{first}' is on "
                        f"{device} and argument '{n}' on {x._device}; move them to one device "
                        "with nova.device_put")
        return device

    def _donated_leaves(self, sig: _Signature) -> tuple:
        """Flat indices of the leaves of the donated positional arguments."""
        if not self._donate:
            return ()
        cached = self._donated_of.get(sig.key())
        if cached is not None:
            return cached
        self._donated_of[sig.key()] = out = self._donated_leaves_uncached(sig)
        return out

    def _donated_leaves_uncached(self, sig: _Signature) -> tuple:
        dyn_args, _ = tree_unflatten(sig.tree, list(range(len(sig.avals))))
        out = []
        for i in self._donate:
            if i < len(dyn_args) and i not in self._static_nums:
                out += [x for x in tree_flatten(dyn_args[i])[0] if isinstance(x, int)]
        return tuple(out)

    def _rebuild(self, sig: _Signature, leaves, args, kwargs):
        dyn_args, dyn_kwargs = tree_unflatten(sig.tree, leaves)
        full_args = [args[i] if i in self._static_nums else dyn_args[i] for i in range(len(args))]
        full_kwargs = {k: (kwargs[k] if k in self._static_names else dyn_kwargs[k]) for k in kwargs}
        return full_args, full_kwargs

    # --- stages ---------------------------------------------------------------------------------
    def _trace_sig(self, sig: _Signature, args, kwargs) -> Traced:
        trace = Trace(concrete=False)
        with trace_context(trace):
            tracers = [trace.new_input(a, name=n) for a, n in zip(sig.avals, sig.leaf_names, strict=True)]
            fa, fk = self._rebuild(sig, tracers, args, kwargs)
            out = self._f(*fa, **fk)
            out_leaves, out_tree = tree_flatten(out)
            program = trace.to_program(out_leaves)
            # With custom_vjp calls: the equations with their markers, for a transform that
            # replays this function into its own trace (`_inline`) and must meet the rules.
            replay = trace.to_program(out_leaves, keep_custom_rules=True) \
                if trace.custom_calls else None
        end_trace(trace)
        traced = Traced(program, out_tree, sig, self)
        traced.replay = replay
        # Values read from an enclosing trace (f closes over an outer transform's value) are
        # extra inputs of this Program, bound to those values by `_inline`: such a Program
        # belongs to this call alone.
        traced.captures = [outer for outer, _ in trace.captures]
        traced.cacheable = not trace.rules_bypassed and not trace.captures
        if config.verify_passes:
            traced.verify()
        # Otherwise the compiler verifies it before its first pass; a program found in the
        # executable cache has the text of one that was verified when it was compiled, and
        # every equation's types already came from its shape rule as it was traced.
        return traced

    def trace(self, *args, **kwargs) -> Traced:
        """Traces f for the signature of these arguments (arrays or ShapeDtypeStructs)."""
        _, sig = self._flatten_args(args, kwargs)
        return self._trace_sig(sig, args, kwargs)

    def lower(self, *args, target: str | None = None, **kwargs) -> Lowered:
        """Lowered for `target` ("cpu", "cuda:sm_XX"; None: the GPU of the arguments that are
        on one, else the host)."""
        return self.trace(*args, **kwargs).lower(target=target)

    def _compiled_for(self, sig, args, kwargs, for_call: bool = False) -> Compiled:
        """The Compiled for sig (traced and compiled on a miss). for_call: a call follows at
        once, so a new executable's arena is faulted in meanwhile (`populating_arenas`)."""
        key = sig.key()
        hit = self._cache.get(key)
        if hit is not None:
            self._info.hits += 1
            return hit
        # Traced already (called inside another trace first): that miss was counted then.
        reason = "traced inside another trace" if key in self._traced else self._record_miss(sig)
        t0 = time.perf_counter()
        with _gc_paused(), (populating_arenas() if for_call else contextlib.nullcontext()):
            traced = self._traced.pop(key, None) or self._trace_sig(sig, args, kwargs)
            compiled = traced.lower().compile()
        if os.environ.get("NOVA_LOG_COMPILES") == "1":
            logging.getLogger("nova.compiler").warning(
                "nova compile of jit(%s) triggered by: %s; %d traced equations; %s; %.3f s",
                getattr(self._f, "__name__", "f"), reason,
                len(compiled._lowered._traced.program.eqns),
                "executable from the disk cache" if compiled.from_cache else "compiled",
                time.perf_counter() - t0)
        self._cache[key] = compiled
        self._info.size = len(self._cache)
        self._last_sig = sig
        return compiled

    def __call__(self, *args, **kwargs):
        flags = config._values
        if flags["disable_jit"]:  # op by op (nova.disable_jit), on Nova Arrays
            args, kwargs = tree_map(lambda x: Array(x) if type(x) is np.ndarray else x,
                                    (args, kwargs))
            return self._f(*args, **kwargs)
        trace = getattr(_trace_state, "trace", None)  # current_trace()
        if trace is None and not kwargs and not self._static_nums and not flags["debug_nans"]:
            out = self._call_plain(args)
            if out is not _MISS:
                return out
        if trace is not None and bound_axes():
            # inside vmap(axis_name=...): a Program traced before holds another axis's size
            # and axis_index input, so the function is traced again into the current trace
            return self._f(*args, **kwargs)
        leaves, sig = self._flatten_args(args, kwargs)
        if trace is not None:
            return self._inline(trace, sig, leaves, args, kwargs)
        compiled = self._compiled_for(sig, args, kwargs, for_call=True)
        if compiled._on_gpu:
            return compiled._call_on_gpu(leaves, sig, sig.device)
        vals = [_value_of(x, a) for x, a in zip(leaves, sig.avals, strict=True)]
        debug_nans = flags["debug_nans"]
        raw = compiled._call_flat(vals, leaves, keep_inputs=debug_nans)
        if debug_nans and _has_nan(raw) and not _has_nan(vals):
            _find_first_nan(compiled.program, vals)
        outs = compiled._wrap(raw, vals, leaves)
        self._donate_inputs(leaves, sig)
        return compiled._unflatten(outs)

    def _call_plain(self, args: tuple):
        """A call of positional arrays and Python scalars (no static arguments, no keywords,
        outside any trace, debug_nans off) whose signature is compiled: its cache key built
        directly (the key `_flatten_args` gives such a call: the plain treedef of len(args)
        leaves, no statics, the code flags, the host), the executable run and its results
        wrapped. _MISS for anything else (a subclass of Array such as a GPU Array or a tracer,
        a deleted Array, another argument type, a signature not compiled yet): the general
        path handles it, raising what it raises."""
        tree = _PLAIN_TREES.get(len(args))
        if tree is None:
            return _MISS
        avals = []
        vals = []
        for x in args:
            t = type(x)
            if t is Array:
                if x._deleted or Array in _REGISTRY:
                    return _MISS
                a = x._aval
                if a is None:
                    a = x.aval
                vals.append(x._value)
            elif t in _PLAIN_LEAF_TYPES:
                a = _aval_of(x, "")
                vals.append(np.asarray(x, dtype=a.dtype))
            else:
                return _MISS
            avals.append(a)
        # The lookups of _cache made here, remembered per code key (that tuple itself, held
        # by the memo, so its identity cannot be reused) and per avals (whose length gives
        # the treedef): hashing the full key took ~0.45 us of a ~4 us call, the memo ~0.1.
        flags_key = config.code_key()
        held, memo = self._plain_memo
        if held is not flags_key:
            memo = {}
            self._plain_memo = (flags_key, memo)
        avals = tuple(avals)
        compiled = memo.get(avals)
        if compiled is None:
            compiled = self._cache.get((tree, avals, (), flags_key, None))
            if compiled is None or compiled._on_gpu:
                return _MISS
            memo[avals] = compiled
        self._info.hits += 1
        leaves = list(args)
        raw = compiled._exe(vals) if not compiled._overwritten() else \
            compiled._call_flat(vals, leaves)
        outs = compiled._wrap(raw, vals, leaves)
        if self._donate:
            self._donate_inputs(leaves, compiled._sig)
        return compiled._unflatten(outs)

    def _record_miss(self, sig) -> str:
        """Counts a cache miss for sig; its reason (what changed since the last signature)."""
        self._info.misses += 1
        reason = "first call" if self._last_sig is None else _describe_change(self._last_sig, sig)
        self._info.miss_reasons.append(reason)
        return reason

    def _traced_for(self, sig, args, kwargs) -> Traced:
        """The traced Program for sig (traced on a miss, not compiled: the outer trace's
        compile covers it)."""
        key = sig.key()
        hit = self._cache.get(key)
        traced = hit._lowered._traced if hit is not None else self._traced.get(key)
        if traced is not None:
            self._info.hits += 1
            return traced
        self._record_miss(sig)
        traced = self._trace_sig(sig, args, kwargs)
        if traced.cacheable:  # (not one traced inside a custom_vjp's own fwd: see trace.py)
            self._traced[key] = traced
        self._last_sig = sig
        return traced

    def _inline(self, trace: Trace, sig, leaves, args, kwargs):
        """Inside another transform, replays this function's Program into the current trace.

        Inside an abstract trace (an outer jit) the traced Program, not compiled here: the
        outer compile optimizes it whole (JAX likewise inlines the jaxpr). Inside a concrete
        trace (eager grad, vjp, jvp) the optimized Program, whose fused operations (flash
        attention) evaluate ~25x faster op by op than their decomposition, unless the traced
        Program holds a stop_gradient (the passes drop it, and the outer transform must see
        it) or a loop whose function has custom rules (the passes rebuild its Region without
        their markers): then the traced Program."""
        traced = self._traced_for(sig, args, kwargs)
        p = traced.program
        if traced.replay is not None:  # custom_vjp rules the outer transform must meet
            p = traced.replay
        elif (trace.concrete and traced.cacheable
              and not any(e.prim.name == "stop_gradient" or _holds_custom_rules(e)
                          for e in p.eqns)):
            # (counted once above: compiling a program traced there is no second miss)
            compiled = self._cache.get(sig.key()) or self._compiled_for(sig, args, kwargs)
            p = compiled.program
        leaves = list(leaves) + list(traced.captures)
        env = {id(v): trace.lift(x if isinstance(x, Array) else Array(_value_of(x, v.type)))
               for v, x in zip(p.inputs, leaves, strict=True)}
        for e in p.eqns:
            outs = trace.add_eqn(e.prim, [env[id(v)] for v in e.inputs], e.params, e.source)
            for v, t in zip(e.outputs, outs, strict=True):
                env[id(v)] = t
        return tree_unflatten(traced.out_tree, [env[id(v)] for v in p.outputs])

    def _donate_inputs(self, leaves, sig: _Signature):
        """Deletes the donated arguments' Arrays (`leaves`, `sig`: the call's flattened
        arguments)."""
        for k in self._donated_leaves(sig):
            leaf = leaves[k]
            if isinstance(leaf, Array) and not isinstance(leaf, Tracer):
                leaf.delete()

    # --- introspection --------------------------------------------------------------------------
    def cache_info(self) -> CacheInfo:
        """Hits, misses, the reason of each miss, and the number of cached signatures."""
        return CacheInfo(self._info.hits, self._info.misses, list(self._info.miss_reasons),
                         len(self._cache))

    def clear_cache(self) -> None:
        self._cache.clear()
        self._plain_memo = (None, {})
        self._traced.clear()
        self._last_sig = None
        self._info = CacheInfo()


_LIVE: weakref.WeakSet = weakref.WeakSet()  # every JitFunction, for clear_caches


def clear_caches() -> None:
    """Drops every jitted function's traced Programs and executables (and their arenas) and
    the eager ops' executables, as jax.clear_caches: the next call traces and compiles again,
    its kernels coming from the kernel cache (in memory or on disk)."""
    from nova.compiler import eager

    for f in list(_LIVE):
        f.clear_cache()
    eager._executables.clear()
    _DEVICE_EAGER.clear()


@contextlib.contextmanager
def disable_jit(disable: bool = True):
    """Within the block, `nova.jit` functions run as plain Python, op by op, on concrete
    values (jax.disable_jit): print and pdb see values, Python control flow on them works.
    Transforms (grad, vmap) still apply. Nests; the previous setting returns on exit."""
    prev = config.read("disable_jit")
    config.update("disable_jit", bool(disable))
    try:
        yield
    finally:
        config.update("disable_jit", prev)


def typeof(x) -> TensorType:
    """The abstract value of x: its TensorType (shape and dtype), as jax.typeof gives a
    ShapedArray; a Python scalar gets its default dtype. Raises TypeError for a value that is
    not an array or scalar."""
    if not isinstance(x, Array | ShapeDtypeStruct | np.ndarray | np.generic | int | float | bool):
        raise TypeError(f"typeof: {type(x).__name__} is not an array or a scalar")
    return _aval_of(x, "x")


_PLAIN_TREES: dict = {}  # n -> the treedef of ([n plain leaves], {})
_MISS = object()  # JitFunction._call_plain: not handled there
_PLAIN_LEAF_TYPES = frozenset({np.ndarray, float, int, bool})


def _is_plain_leaf(x) -> bool:
    """An argument that flattens to itself: an Array (not a registered node) or a NumPy array
    or Python scalar."""
    t = type(x)
    return t in _PLAIN_LEAF_TYPES or (isinstance(x, Array) and t not in _REGISTRY)


def _target_of(device: Device | None) -> str | None:
    """The compile target of a program whose arguments are on `device`: "cuda:<target_arch>" of
    that GPU ("cuda:sm_90a" on Hopper), None (the host) for None."""
    if device is None:
        return None
    from nova.gpu import get_device_properties

    return f"cuda:{get_device_properties(device.id).target_arch}"


def _hashable(x, name):
    try:
        hash(x)
    except TypeError:
        raise TypeError(
            f"static argument '{name}' must be hashable, got {type(x).__name__}; pass arrays as "
            "dynamic arguments and tuples instead of lists"
        ) from None
    return x


def jit(
    f: Callable | None = None,
    *,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    donate_argnums: int | Sequence[int] = (),
):
    """Compiles f: traced once per signature into a Program, then run from the cache.

    static_argnums/static_argnames: arguments treated as compile-time constants (must be
    hashable; a new value retraces). donate_argnums: arguments whose buffers the call may reuse for
    its intermediates; the donated Arrays are deleted after the call (using them raises
    DeletedArrayError). A buffer the caller can still see is never written: a NumPy argument, an
    Array made by `asarray` from NumPy data or one whose values went out through `np.asarray`
    is copied first (only when the program would reuse it). Negative positions count from the
    end of f's positional parameters. Usable as `@jit` or `@jit(static_argnums=...)`.

    Raises ValueError for a position out of range of f's positional parameters, a
    static_argnames entry naming no parameter, or an argument both static and donated.
    """
    if f is None:
        return lambda g: jit(g, static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums)
    return JitFunction(f, static_argnums, static_argnames, donate_argnums)


def make_jaxpr(fun: Callable, static_argnums=(), axis_env=None, return_shape: bool = False,
               abstracted_axes=None):
    """jax.make_jaxpr: `make_jaxpr(f)(*args)` is f's traced Program, Nova's counterpart of a
    ClosedJaxpr (print it, or `.as_text()`, for the IR; `.eqns`, `.inputs`, `.outputs`).

    args may be arrays or ShapeDtypeStructs. return_shape=True: (program, the outputs as a
    pytree of ShapeDtypeStructs). static_argnums: as jit. axis_env (named axes for collectives
    outside a vmap) and abstracted_axes (shape polymorphism) are not supported
    (NotImplementedError): trace inside `nova.vmap(..., axis_name=...)` instead.
    """
    if axis_env is not None or abstracted_axes is not None:
        raise NotImplementedError("make_jaxpr: axis_env and abstracted_axes are not supported")

    def make(*args, **kwargs):
        traced = JitFunction(fun, static_argnums, (), ()).trace(*args, **kwargs)
        if not return_shape:
            return traced.program
        shapes = [ShapeDtypeStruct(v.type.shape, v.type.dtype) for v in traced.program.outputs]
        return traced.program, tree_unflatten(traced.out_tree, shapes)

    return make


def make_program(f: Callable, *, static_argnums=(), static_argnames=()):
    """`make_program(f)(*args)` returns the traced Program of f (like jax.make_jaxpr)."""

    def make(*args, **kwargs):
        return JitFunction(f, static_argnums, static_argnames, ()).trace(*args, **kwargs).program

    return make
