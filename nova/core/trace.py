"""Tracing: one current Trace records every primitive application into a Program.

Following autodidax's small design without interpreter levels: there is at most one current trace.
`jit` starts an abstract trace (values unknown); `grad`/`vjp`/`jvp` outside `jit` start a concrete
trace (each equation is also evaluated as it is recorded, so Python control flow on values works).
Transforms called inside an active trace record into that same trace, which is how `grad` appends
the backward to the forward's Program and how grad-of-grad and jit-of-grad compose.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from nova.core import dtypes
from nova.core.array import Array, _adopt
from nova.core.errors import (
    ConcretizationTypeError,
    ShapeError,
    TracerBoolConversionError,
    UnexpectedTracerError,
)
from nova.core.ir import Eqn, Program, TensorType, Var
from nova.core.primitive import Primitive, lookup, makes_effects
from nova.core.source_info import short, user_frame_line


class Tracer(Array):
    """An Array standing for a value of the current trace (`var`), with its value when known."""

    __slots__ = ("_args", "_source", "_trace", "_val", "_var")

    def __init__(self, trace: Trace, var: Var, val, source: str | None, args: frozenset):
        self._trace = trace
        self._var = var
        self._val = val
        self._source = source
        self._args = args
        self._deleted = False

    @property
    def aval(self) -> TensorType:
        return self._var.type

    @property
    def _value(self):
        return self._concretize("np.asarray()")

    def _concretize(self, what: str) -> np.ndarray:
        v = self._val
        if v is not None:
            # A GPU trace's value is a GPU Array: reading it is a device-to-host copy (once:
            # the GPU Array keeps its host copy), as a concrete value read in JAX is.
            return v if type(v) is np.ndarray else v._concrete(what)
        if not self._trace.active:
            _raise_escaped(self)
        if self._trace.kind == "vmap":
            raise ConcretizationTypeError(
                f"{what} needs a concrete value, but this is a traced {self.aval} inside "
                f"`vmap` that depends on a mapped argument: its value differs per example. "
                f"Use nova.numpy.where / array operations instead (value created at "
                f"{short(self._source)})")
        raise ConcretizationTypeError(
            f"{what} needs a concrete value, but this is a traced {self.aval} inside `jit`"
            f"{self._arg_text()}. Mark the argument static with `static_argnums`/"
            f"`static_argnames`, or use nova.numpy.where / array operations instead."
            f" (value created at {short(self._source)})"
        )

    def _arg_text(self) -> str:
        if not self._args:
            return ""
        return " derived from argument " + ", ".join(f"'{a}'" for a in sorted(self._args))

    def _concrete(self, what: str) -> np.ndarray:
        return self._concretize(what)

    def __bool__(self):
        if self._val is None and self._trace.kind == "vmap":
            raise TracerBoolConversionError(
                f"`if x:`/bool(x) on a traced {self.aval} inside `vmap` that depends on a "
                f"mapped argument: its value differs per example. Use nova.numpy.where or "
                f"nova.lax ops (value created at {short(self._source)})")
        if self._val is None:
            raise TracerBoolConversionError(
                f"`if x:`/bool(x) on a traced {self.aval} inside `jit`{self._arg_text()}: "
                f"its value is not known while tracing. Use `static_argnums`/`static_argnames` "
                f"for arguments that steer Python control flow, or nova.numpy.where. "
                f"(value created at {short(self._source)})"
            )
        return bool(self._concretize("bool()"))

    def __int__(self):
        return int(self._concretize("int()"))

    def __float__(self):
        return float(self._concretize("float()"))

    def __index__(self):
        if not dtypes.is_int(self.dtype):
            raise TypeError(f"only integer arrays can be used as an index, got {self.dtype}")
        return int(self._concretize("an index"))

    def item(self):
        return self._concretize("item()").item()

    def tolist(self):
        return self._concretize("tolist()").tolist()

    def __repr__(self):
        kind = "concrete" if self._val is not None else "abstract"
        return f"Tracer<{self.aval}, {kind}>"

    __str__ = __repr__


class Trace:
    """Records equations. `concrete=True` also evaluates each equation as it is recorded.

    A concrete trace whose `device` is a GPU (nova.runtime.devices.Device) keeps the values
    computed from GPU Arrays on that GPU: an equation with an input there runs as the eager op
    on the device (`_device_executor`) and its results are GPU Arrays; equations on host values
    only (constants and their broadcasts) compute on the host, and a host value combined with a
    GPU one is uploaded once. `device` is None for the host, and becomes a GPU's when a GPU
    Array enters a concrete trace (computation follows data).
    """

    def __init__(self, concrete: bool, device=None, kind: str = "jit"):
        self.concrete = concrete
        # An abstract trace of kind "vmap" still computes the values that depend on no mapped
        # input (constants, unmapped arguments, and what is computed from them only), so Python
        # code may read them, as under jax.vmap; "jit" stages everything (JAX's omnistaging).
        self.kind = kind
        self.known_values = False
        self.device = device
        self.inputs: list[Var] = []
        self.input_names: list[str] = []
        self.eqns: list[Eqn] = []
        self.tracers: dict[int, Tracer] = {}  # id(var) -> the tracer standing for it
        self.active = True
        self.stage = "fwd"  # reverse mode records its equations as "bwd"
        self._const_cache: dict[int, tuple] = {}  # id(buffer) -> (its tracer, the buffer)
        # ids of Vars known to hold only finite numbers: small constants and their broadcasts or
        # reshapes. Reverse mode skips its zero-cotangent masks for such partials (is_finite).
        self.finite: set[int] = set()
        # Hash-consing of values that depend on no input of the trace (see _CONSABLE): key ->
        # the outputs recorded first; `_input_free` holds the ids of such values' Vars.
        self._consed: dict = {}
        self._input_free: set[int] = set()
        # A GPU trace's GPU Arrays taken from outside (arguments, lifted constants) by id, and
        # its host values uploaded to a GPU: id(var) -> the GPU Array.
        self.borrowed: set[int] = set()
        self._uploaded: dict[int, Array] = {}
        self.custom_calls = 0  # custom_vjp/custom_jvp markers recorded (see to_program)
        # Set when a custom_vjp function ran without its rule here because its fwd was running
        # in another trace (a jit of it traced inside its own fwd): jit does not keep such a
        # Program for later calls.
        self.rules_bypassed = False
        # An abstract trace begun while another was current (a jit or vmap inside a transform)
        # may read that trace's values, and its ancestors': each such value read becomes an
        # extra input of this trace (closure conversion, as JAX's), listed in `captures` as
        # (the outer tracer, the input standing for it) in the order they were met.
        self.parent = None if concrete else current_trace()
        # (Under an enclosing jit everything is staged, as JAX's omnistaging does: no values.)
        self.known_values = kind == "vmap" and (self.parent is None or self.parent.concrete
                                                or self.parent.known_values)
        self.captures: list[tuple[Tracer, Var]] = []
        self._captured: dict[int, Tracer] = {}

    # --- values entering the trace ----------------------------------------------------------
    def new_input(self, type_: TensorType, value=None, name: str | None = None) -> Tracer:
        v = Var(type_, hint=name)
        self.inputs.append(v)
        self.input_names.append(name or f"arg{len(self.inputs) - 1}")
        args = frozenset([name]) if name else frozenset()
        return self._make(v, value, user_frame_line(), args)

    def _make(self, var: Var, val, source, args) -> Tracer:
        t = Tracer(self, var, val, source, args)
        self.tracers[id(var)] = t
        return t

    def tracer_of(self, var: Var) -> Tracer:
        return self.tracers[id(var)]

    def lift(self, x) -> Tracer:
        """Brings x into this trace: tracers of it pass through, arrays become constants."""
        if isinstance(x, Tracer):
            if x._trace is self:
                return x
            if x._trace.active and self._is_ancestor(x._trace):
                return self._capture(x)
            raise UnexpectedTracerError(
                f"a traced {x.aval} created at {short(x._source)} escaped the "
                f"{'jit' if not x._trace.concrete else 'grad'} trace that made it and was used "
                "afterwards. Return it from the transformed function instead of storing it "
                "(e.g. in a global or a closure)."
            )
        if isinstance(x, Array):
            if self.concrete and getattr(x, "_on_device", False) and not x._deleted:
                return self._lift_gpu_array(x)
            value, owned = x._concrete("a constant of a trace"), x._owned
        else:
            value, owned = np.asarray(x, dtype=dtypes.dtype_of_value(x)), False
        if not owned and value.size <= _CONS_CONSTANT_LIMIT:
            return self.constant(_frozen_copy(value))  # memory the caller can still write
        # A large buffer is taken by reference, once per trace however many Arrays wrap it (a
        # copy per use of a closed-over 256 MiB array took seconds and gigabytes): changing a
        # NumPy array while a trace runs is not supported.
        hit = self._const_cache.get(id(value))
        if hit is not None and hit[1] is value:
            return hit[0]
        t = self.constant(value)
        self._const_cache[id(value)] = (t, value)
        return t

    def _is_ancestor(self, trace: Trace) -> bool:
        t = self.parent
        while t is not None:
            if t is trace:
                return True
            t = t.parent
        return False

    def _capture(self, x: Tracer) -> Tracer:
        """The input of this trace standing for an enclosing trace's value x (once per value):
        x is first brought into this trace's parent (itself a capture there when x is from
        further out)."""
        hit = self._captured.get(id(x._var))
        if hit is not None:
            return hit
        outer = self.parent.lift(x)
        known = x._val if self.known_values and type(x._val) is np.ndarray else None
        t = self.new_input(TensorType(x.shape, x.dtype), known, name="closure")
        t._source = x._source
        self.captures.append((outer, t._var))
        self._captured[id(x._var)] = t
        return t

    def _lift_gpu_array(self, x: Array) -> Tracer:
        """A GPU Array as a constant of this concrete trace, its value left on the GPU (once per
        trace and array); the trace follows it onto its GPU if it was on the host."""
        hit = self._const_cache.get(id(x))
        if hit is not None and hit[1] is x:
            return hit[0]
        if self.device is None:
            self.device = x.device
        self.borrowed.add(id(x))
        t = self.constant(x)
        self._const_cache[id(x)] = (t, x)
        return t

    def constant(self, value: np.ndarray) -> Tracer:
        (out,) = self.add_eqn(lookup("constant"), [], {"value": value}, user_frame_line())
        return out

    # --- recording --------------------------------------------------------------------------
    def add_eqn(self, prim: Primitive, ins: list, params: dict, source: str | None) -> list:
        cons = None
        if prim.name in _CONSABLE:
            free = self._input_free
            if all(id(t._var) in free for t in ins):
                cons = _cons_key(prim, ins, params)
                if cons is not None:
                    hit = self._consed.get(cons)
                    if hit is not None:  # the recorded value, created at this line
                        return [Tracer(self, t._var, t._val, source, t._args) for t in hit]
                else:
                    cons = False  # input-free, but not worth a key (a large constant)
        in_vars = [t._var for t in ins]
        out_types = _check_shape_rule(prim, [v.type for v in in_vars], params, source)
        outs = [Var(t) for t in out_types]
        vals = [None] * len(outs)
        if prim.name in CUSTOM_CALLS:
            # The marker of a custom_vjp or custom_jvp function's call (custom_derivatives.py):
            # its results are its primal-output inputs, computed already; nothing is evaluated.
            self.custom_calls += 1
            n_args = params["n_args"]
            vals = [t._val for t in ins[n_args:n_args + len(outs)]]
        elif self.known_values and not prim.axis_varying and \
                all(type(t._val) is np.ndarray for t in ins) and not makes_effects(prim, params):
            # (an effect runs when the vmap replays its equations, not also while it traces)
            vals = evaluate(prim, [t._val for t in ins], params, out_types)
        elif self.concrete:
            if self.device is None:
                vals = evaluate(prim, [t._val for t in ins], params, out_types)
            else:
                vals = self._evaluate_on_device(prim, ins, params, out_types)
        # The argument names the result derives from (for messages): usually one set shared.
        args = _NO_ARGS
        for t in ins:
            a = t._args
            if a and a is not args:
                args = a if not args else args | a
        self.eqns.append(Eqn(prim, in_vars, params, outs, source, self.stage))
        if prim.name in _FINITE_KEEPING and id(in_vars[0]) in self.finite or prim.name == "constant" and _small_and_finite(params["value"]):
            self.finite.add(id(outs[0]))
        if len(outs) == 1:
            result = [self._make(outs[0], vals[0], source, args)]
        else:
            result = [self._make(v, val, source, args) for v, val in zip(outs, vals, strict=True)]
        if cons is not None:
            self._input_free.update(id(v) for v in outs)
            if cons is not False:
                self._consed[cons] = tuple(result)
        return result

    def _evaluate_on_device(self, prim, ins: list, params: dict, out_types: list) -> list:
        """The values of one equation of a GPU trace: GPU Arrays computed by the eager op on the
        GPU when an input is there or the result is large (host inputs uploaded once per
        trace), else NumPy values computed on the host (small results of host values, such as
        the scalars of a mean; or a primitive with no GPU kernel for these inputs: then from
        host copies, as an eager op does)."""
        vals = [t._val for t in ins]
        gpu = next((v for v in vals if type(v) is not np.ndarray), None)
        if gpu is not None:
            device = gpu.device
        elif prim.name == "constant" and isinstance(params["value"], Array):
            return [params["value"]]  # a GPU Array lifted into the trace
        elif ins and sum(t.size for t in out_types) > _HOST_RESULT_LIMIT:
            device = self.device
        else:
            return evaluate(prim, vals, params, out_types)
        if _device_executor is not None:
            args = [v if type(v) is not np.ndarray else self._upload(t, device)
                    for t, v in zip(ins, vals, strict=True)]
            with trace_context(None):  # the eager op, not an equation of this trace
                out = _device_executor(prim, args, params)
            if out is not NotImplemented:
                outs = list(out) if prim.multiple_results else [out]
                # (a result the device path left on the host joins the trace as a host value)
                return [o if o._on_device else o._concrete("a result") for o in outs]
        return evaluate(prim, [t._concretize("an operand") for t in ins], params, out_types)

    def _upload(self, t: Tracer, device) -> Array:
        """Host value of tracer t as a GPU Array on `device`, uploaded once per trace."""
        got = self._uploaded.get(id(t._var))
        if got is None or got.device != device:
            from nova.runtime.devices import GPUArray

            got = self._uploaded[id(t._var)] = GPUArray(t._val, device)
        return got

    def is_finite(self, x) -> bool:
        """Whether tracer x of this trace is known to hold only finite numbers (no inf, no NaN)."""
        return isinstance(x, Tracer) and x._trace is self and id(x._var) in self.finite

    def to_program(self, outputs: list, *, keep_custom_rules: bool = False) -> Program:
        """The Program of the recorded equations with `outputs` as its results.

        The markers of custom_vjp and custom_jvp calls (custom_derivatives.py) are removed: each marker's results
        become the primal outputs it marks, so the compiler sees only registered primitives (by
        then reverse mode has applied the custom rules it met). keep_custom_rules=True keeps
        them, for a Program that is replayed into another trace (jit's `_inline`), never
        compiled."""
        outs = [self.lift(o)._var for o in outputs]
        eqns = list(self.eqns)
        if self.custom_calls and not keep_custom_rules:
            eqns, outs = _without_custom_calls(eqns, outs)
        return Program(list(self.inputs), eqns, outs, list(self.input_names))


_NO_ARGS = frozenset()

# The names of the marker primitives of custom_vjp and custom_jvp calls (defined in
# nova/custom_derivatives.py, not registered: they live only in traces; Trace.to_program removes
# them). Both have params n_args, n_out, n_res, and results = inputs[n_args:n_args + n_out].
CUSTOM_VJP_CALL = "custom_vjp_call"
CUSTOM_JVP_CALL = "custom_jvp_call"
# (nova/custom_batching.py: a custom_vmap call, whose rule nova.vmap calls instead of batching)
CUSTOM_VMAP_CALL = "custom_vmap_call"
CUSTOM_CALLS = frozenset({CUSTOM_VJP_CALL, CUSTOM_JVP_CALL, CUSTOM_VMAP_CALL})


def _without_custom_calls(eqns: list, outs: list) -> tuple[list, list]:
    """`eqns` without custom_vjp/custom_jvp markers, each marker's results replaced by the primal
    outputs it marks (inputs n_args .. n_args + n_out), in later equations and in `outs`."""
    alias: dict[int, Var] = {}
    kept = []
    for e in eqns:
        if e.prim.name in CUSTOM_CALLS:
            n_args = e.params["n_args"]
            for o, v in zip(e.outputs, e.inputs[n_args:n_args + len(e.outputs)], strict=True):
                alias[id(o)] = alias.get(id(v), v)
            continue
        if alias and any(id(v) in alias for v in e.inputs):
            e = Eqn(e.prim, [alias.get(id(v), v) for v in e.inputs], e.params, e.outputs,
                    e.source, e.stage)
        kept.append(e)
    return kept, [alias.get(id(v), v) for v in outs]

# In a GPU trace, an equation of host values only whose results have more elements than this
# runs on the GPU from its uploaded inputs: a zero cotangent or a seed broadcast to a
# gradient's shape was filled on the host and then crossed PCIe whole. Smaller ones (the
# scalars of a mean, masks of constants) cost less on the host than a kernel launch.
_HOST_RESULT_LIMIT = 4096

# Primitives whose result holds only values of their (first) input.
_FINITE_KEEPING = frozenset({"broadcast_in_dim", "reshape", "transpose", "squeeze",
                             "expand_dims"})


# Primitives whose equations are recorded once per trace when every input depends on no input
# of the trace (constants, iotas and their broadcasts, reshapes, casts): the backward pass of a
# GPT-2 step asks for the same zeros and scalars hundreds of times (`zeros_like` in every
# zero-cotangent mask), 1,895 of the small step's 5,118 traced equations (bench/NOTES.md round
# 11). Such values have no derivative, so sharing one across a transform's region is exact.
# `copy` is not among them: a transform takes a copy to give its inputs an identity of their own.
_CONSABLE = frozenset({"constant", "iota", "broadcast_in_dim", "reshape", "convert_element_type",
                       "transpose", "squeeze", "expand_dims"})

# Constants up to this many elements are keyed by their bytes; larger ones are recorded each time.
_CONS_CONSTANT_LIMIT = 64


def _frozen_copy(value: np.ndarray) -> np.ndarray:
    """A read-only copy of a small constant taken from the caller's memory (a NumPy array, or
    an Array sharing the caller's buffer): the caller may write that memory after the trace took
    the value (JAX copies every such value to the device); the program keeps the value it had,
    and a fresh array with the same bytes, recorded once per trace, does not see the change."""
    out = np.array(value, copy=True)
    out.flags.writeable = False
    return out


def _cons_key(prim, ins: list, params: dict):
    """The hash-consing key of an input-free equation, or None when it gets none (a large or
    unhashable constant, an unhashable parameter)."""
    if prim.name == "constant":
        v = params["value"]
        if not isinstance(v, np.ndarray) or v.size > _CONS_CONSTANT_LIMIT:
            return None
        return ("constant", v.dtype, v.shape, v.tobytes())
    try:
        key = (prim.name, tuple([id(t._var) for t in ins]),
               tuple([(k, type(v), v) for k, v in params.items()]))
        hash(key)
    except TypeError:
        return None
    return key


def _small_and_finite(value) -> bool:
    """A constant of at most 1024 elements with no inf or NaN (larger ones are not scanned, nor
    a GPU Array's: that would read it back). Floats of every width, bfloat16 (NumPy kind 'V')
    included, are checked through float64."""
    if isinstance(value, Array):
        return False
    a = np.asarray(value)
    if a.size > 1024:
        return False
    if a.dtype.kind == "c":
        return bool(np.isfinite(a).all())
    if dtypes.is_float(a.dtype) or a.dtype.kind == "f":
        return bool(np.isfinite(a.astype(np.float64)).all())
    return a.dtype.kind in "biu"


def _check_shape_rule(prim, in_types, params, source) -> list:
    """The output types of `prim` on `in_types`; the rule's ShapeError / TypeError / ValueError
    re-raised naming the primitive and `source` (None: the user's line, found only then)."""
    try:
        out = prim.shape_rule(*in_types, **params)
    except (ShapeError, TypeError, ValueError) as e:
        where = short(source if source is not None else user_frame_line())
        kind = next(k for k in (ShapeError, TypeError, ValueError) if isinstance(e, k))
        raise kind(f"{e} (in nova.{prim.name}, at {where})") from None
    return list(out) if prim.multiple_results else [out]


# --- evaluation of one equation on concrete values -----------------------------------------------


def _reference_eval(prim: Primitive, values: list, params: dict, out_types: list) -> list:
    with np.errstate(all="ignore"):  # IEEE semantics (inf/nan) are intended, not warnings
        out = prim.impl(*values, **params)
    outs = list(out) if prim.multiple_results else [out]
    result = []
    for o, t in zip(outs, out_types, strict=True):
        o = np.asarray(o)
        if o.dtype != t.dtype:
            o = o.astype(t.dtype)
        if o.shape != t.shape:
            raise AssertionError(
                f"nova.{prim.name}: reference implementation returned shape {o.shape}, "
                f"shape rule says {t.shape}"
            )
        result.append(o)
    return result


# The executor of single equations on concrete values. The reference interpreter until a backend
# registers itself (the compiler does, so eager ops run through the same kernel cache).
_eager_executor: Callable = _reference_eval


def set_eager_executor(fn: Callable | None) -> None:
    global _eager_executor
    _eager_executor = fn or _reference_eval


def evaluate(prim, values, params, out_types) -> list:
    return _eager_executor(prim, values, params, out_types)


# Eager application of a primitive to arguments of which one lives on a device (a GPU Array,
# `Array._on_device`): fn(prim, args, params) -> the result, or NotImplemented to evaluate on
# the host instead. nova.jit installs one (the op runs on that device, as JAX's do).
_device_executor: Callable | None = None


def set_device_executor(fn: Callable | None) -> None:
    global _device_executor
    _device_executor = fn


# --- the current trace ---------------------------------------------------------------------------

_state = threading.local()


def current_trace() -> Trace | None:
    return getattr(_state, "trace", None)


class trace_context:
    """`with trace_context(t):` makes t the current trace; the previous one is restored after."""

    def __init__(self, trace: Trace | None):
        self.trace = trace

    def __enter__(self):
        self.prev = current_trace()
        _state.trace = self.trace
        return self.trace

    def __exit__(self, *exc):
        _state.trace = self.prev
        return False


class ensure_compile_time_eval:
    """`with ensure_compile_time_eval():` inside a traced function, operations whose operands
    are all concrete (NumPy arrays, Python scalars, Arrays: no traced value) are computed at
    once, while tracing, and give concrete Arrays, as jax.ensure_compile_time_eval: Python
    control flow on them works. Operations on traced values are recorded as usual. Nests."""

    def __enter__(self):
        self.prev = getattr(_state, "compile_time_eval", False)
        _state.compile_time_eval = True
        return self

    def __exit__(self, *exc):
        _state.compile_time_eval = self.prev
        return False


class FreshResults(list):
    """Results an eager executor returns when each is a buffer that evaluation allocated and
    nothing else refers to (the compiled one-equation executables: nova/compiler/eager.py):
    `bind` wraps them as owned Arrays without checking them for overlaps."""

    __slots__ = ()


def bind(prim: Primitive, *args, **params):
    """Applies a primitive: records it in the current trace, or evaluates it eagerly (also
    inside a trace, under ensure_compile_time_eval, when no operand is traced)."""
    if params:  # (an empty dict is canonical already)
        params = prim.canonical_params(params)
    trace = getattr(_state, "trace", None)  # current_trace()
    if trace is not None and getattr(_state, "compile_time_eval", False) and \
            not any(isinstance(a, Tracer) for a in args) and not prim.effectful:
        trace = None
    if trace is None:
        # Live host Arrays (the common case) give their buffer and cached aval (the TensorType
        # of that buffer) at once; anything else takes the general route below.
        vals = []
        in_types = []
        for a in args:
            if type(a) is not Array or a._deleted:
                vals = None
                break
            vals.append(a._value)
            t = a._aval
            in_types.append(t if t is not None else a.aval)
        if vals is None:
            if _device_executor is not None and any(getattr(a, "_on_device", False)
                                                    for a in args):
                out = _device_executor(prim, args, params)
                if out is not NotImplemented:
                    return out
            # Eager: any tracer here has escaped its trace (_host_value raises). The user's
            # line is looked up only for an error message (a stack walk per op otherwise).
            vals = [_host_value(a) for a in args]
            in_types = [TensorType(v.shape, v.dtype) for v in vals]
        out_types = _check_shape_rule(prim, in_types, params, None)
        raw = _eager_executor(prim, vals, params, out_types)  # evaluate()
        if type(raw) is FreshResults:
            if len(raw) == 1 and not prim.multiple_results:
                return _adopt(raw[0], out_types[0])
            outs = [_adopt(o, t) for o, t in zip(raw, out_types, strict=True)]
            return outs if prim.multiple_results else outs[0]
        outs = [Array(o, owned=_fresh(o, vals, raw)) for o in raw]
        for o, out in zip(raw, outs, strict=True):
            if not out._owned:  # a view of an argument: that argument is no longer Nova's alone
                for a, v in zip(args, vals, strict=True):
                    if isinstance(a, Array) and np.may_share_memory(o, v):
                        a._owned = False
    else:
        ins = [a if type(a) is Tracer and a._trace is trace else trace.lift(a) for a in args]
        outs = trace.add_eqn(prim, ins, params, user_frame_line())
    return outs if prim.multiple_results else outs[0]


def _fresh(o: np.ndarray, ins: list, outs: list) -> bool:
    """Whether an eager result is a buffer of its own (`Array.owned`: a jitted call it is donated
    to may then write into it without copying it first): writeable, and sharing memory with no
    argument and no other result. The compiled eager executables hand back fresh buffers; a
    reference implementation may return a view of its argument (a reshape): neither that
    result nor the argument is owned then (donating either would change what the other
    shows). Without this, every donated parameter or optimizer state built by eager ops
    (`jnp.zeros_like` in an optimizer's init) was copied on the first jitted call."""
    if not o.flags.writeable:
        return False
    return not any(np.may_share_memory(o, v) for v in ins if isinstance(v, np.ndarray)) and \
        not any(p is not o and np.may_share_memory(o, p) for p in outs)


def _raise_escaped(t: Tracer):
    raise UnexpectedTracerError(
        f"a traced {t.aval} created at {short(t._source)} escaped the trace that made it and "
        "was used afterwards. Return it from the transformed function instead of storing it."
    )


def _host_value(a) -> np.ndarray:
    if isinstance(a, Tracer):
        _raise_escaped(a)
    if isinstance(a, Array):
        return a._concrete("an operand")
    return np.asarray(a, dtype=dtypes.dtype_of_value(a))


def end_trace(trace: Trace) -> None:
    """Marks a trace finished: its tracers may no longer be used in new operations."""
    trace.active = False
