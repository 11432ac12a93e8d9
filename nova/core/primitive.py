"""The primitive contract: one object per primitive answers every question the system asks of it.

A primitive declares (DESIGN.md "A primitive is declared once"):
  name, static params      -- `name`; params are keyword arguments of `bind`
  shape/dtype rule         -- `shape_rule(*in_types, **params) -> TensorType | tuple`
  NumPy reference          -- `impl(*np_arrays, **params) -> ndarray | tuple` (the test oracle)
  VJP rule                 -- `vjp(ct, *primals, out, **params) -> tuple` of cotangents (None = zero
                              or not differentiable), written with Nova ops so the backward is IR
  JVP rule                 -- `jvp(tangents, *primals, out, **params) -> tangent(s)`, or None: then
                              `nova.jvp` derives it from the (linear) VJP rule
  fusion kind              -- FusionKind
  kernel hook              -- what codegen needs (see KernelHook subclasses below)
  cost                     -- `cost(in_types, out_types, **params) -> Cost` (flops, bytes)
  batching rule            -- `batch(args, batched, **params) -> out(s)` for `nova.vmap`: `args`
                              with the mapped axis first where `batched[i]`, every output mapped
                              along its first axis (nova/batching.py). Elementwise primitives
                              (operands of one shape) and reductions over `axes` get theirs from
                              their kind; every other primitive with operands declares one
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nova.core.ir import TensorType


class FusionKind(enum.Enum):
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    MOVEMENT = "movement"
    CONTRACTION = "contraction"
    COMPOSITE = "composite"
    OPAQUE = "opaque"


@dataclass(frozen=True)
class Cost:
    """Work of one application: floating/integer operations and bytes that must move."""

    flops: int
    bytes: int


# --- kernel hooks -------------------------------------------------------------------------------
# A hook receives a builder object as an argument, so ops/ never imports the compiler. The builder
# protocol (names follow MLIR's arith/math ops, typed generically): add, sub, mul, div, rem, neg,
# max, min, exp, exp2, log, log1p, expm1, tanh, sin, cos, tan, atan, atan2, sqrt, rsqrt, abs,
# floor, ceil, round, pow, sign, cmp(pred, a, b), select(c, a, b), and_, or_, not_, xor,
# shl(a, b), shr(a, b, arithmetic),
# cast(x, dtype), const(value, dtype) (dtype None: the operands' element type; "index" for
# index arithmetic in IndexMap hooks), isnan, isinf.


@dataclass(frozen=True)
class Elementwise:
    """Scalar body: `body(b, *scalars, **params) -> scalar` (one output per element)."""

    body: Callable


@dataclass(frozen=True)
class Reduction:
    """Reduce over `params['axes']`: acc = combine(b, acc, x), starting from identity(dtype)."""

    identity: Callable  # (dtype) -> python scalar
    combine: Callable  # (b, acc, x) -> acc


@dataclass(frozen=True)
class IndexMap:
    """Movement: maps an output index (tuple of index values) to the input index it reads.

    `index_map(b, out_index, in_types, **params) -> in_index`. Used by codegen to fold the movement
    into the access pattern of the consuming kernel.
    """

    index_map: Callable


@dataclass(frozen=True)
class Template:
    """A kernel that codegen synthesizes from a named template (contraction, gather, sort, ...)."""

    name: str


KernelHook = Elementwise | Reduction | IndexMap | Template


def _default_cost(kind: FusionKind):
    def cost(in_types, out_types, **params):
        moved = sum(t.nbytes for t in in_types) + sum(t.nbytes for t in out_types)
        if kind in (FusionKind.ELEMENTWISE,):
            return Cost(sum(t.size for t in out_types), moved)
        if kind is FusionKind.REDUCTION:
            return Cost(sum(t.size for t in in_types), moved)
        return Cost(0, moved)

    return cost


class Primitive:
    """One primitive. See the module docstring for the contract of each field."""

    def __init__(
        self,
        name: str,
        *,
        shape_rule: Callable,
        impl: Callable,
        vjp: Callable,
        jvp: Callable | None,
        fusion: FusionKind,
        kernel: KernelHook,
        cost: Callable | None = None,
        multiple_results: bool = False,
        differentiable: bool = True,
        param_types: dict | None = None,
        registered: bool = True,
        batch: Callable | None = None,
        effectful: bool = False,
        axis_varying: bool = False,
    ):
        self.name = name
        self.shape_rule = shape_rule
        self.impl = impl
        self.vjp = vjp
        self.jvp = jvp
        self.fusion = fusion
        self.kernel = kernel
        self.cost = cost or _default_cost(fusion)
        self.multiple_results = multiple_results
        # False for ops whose outputs carry no derivative (comparisons, integer ops, random bits).
        self.differentiable = differentiable
        # Optional coercions applied to params (e.g. lists -> tuples) so equal params hash equal.
        self.param_types = param_types or {}
        if batch is None and fusion is FusionKind.ELEMENTWISE:
            batch = _batch_elementwise(self)
        elif batch is None and fusion is FusionKind.REDUCTION:
            batch = _batch_reduction(self)
        self.batch = batch
        # True for a call made for its effect (io_callback, debug.print): kept by dead-code
        # elimination although no result is read, never merged by cse (nova/ops/callback.py).
        self.effectful = effectful
        # True for a collective whose result differs between the members of a vmap axis even
        # for a replicated operand (ppermute; nova/collectives.py): never evaluated as a known
        # value while vmap traces.
        self.axis_varying = axis_varying
        # False for a transform's marker that only lives in traces (`custom_vjp_call`, removed
        # when a trace becomes a Program): the registry lists what Programs may hold.
        if registered:
            register(self)

    def __repr__(self):
        return f"{self.name}_p"

    def canonical_params(self, params: dict) -> dict:
        out = {}
        for k, v in params.items():
            conv = self.param_types.get(k)
            out[k] = conv(v) if conv is not None and v is not None else _freeze(v)
        return out

    def abstract_eval(self, in_types, **params):
        return self.shape_rule(*in_types, **params)

    def bind(self, *args, **params):
        from nova.core.trace import bind

        return bind(self, *args, **params)


def makes_effects(prim: Primitive, params: dict) -> bool:
    """Whether an equation of prim with params is made for an effect: an effectful primitive
    (io_callback), or a control-flow primitive whose Regions hold one."""
    if prim.effectful:
        return True
    for v in params.values():
        for r in (v if isinstance(v, tuple) else (v,)):
            body = getattr(r, "program", None)
            if body is not None and any(makes_effects(b.prim, b.params) for b in body.eqns):
                return True
    return False


def broadcast_batched(args, batched, size: int | None = None) -> list:
    """Batching helper: the unbatched operands broadcast along a new first axis of the batch's
    size (`size`, else the first batched operand's), the batched ones as they are."""
    if size is None:
        size = next(a.shape[0] for a, b in zip(args, batched, strict=True) if b)
    bcast = lookup("broadcast_in_dim")
    return [a if b else bcast.bind(a, shape=(size, *a.shape),
                                   broadcast_dimensions=tuple(range(1, len(a.shape) + 1)))
            for a, b in zip(args, batched, strict=True)]


def _batch_elementwise(prim):
    """Elementwise operands share one shape: broadcast the unbatched ones, then apply."""

    def batch(args, batched, **params):
        return prim.bind(*broadcast_batched(args, batched), **params)

    return batch


def _batch_reduction(prim):
    """A reduction of a batched operand reduces the same axes, one further on."""

    def batch(args, batched, *, axes, **params):
        return prim.bind(*args, axes=tuple(a + 1 for a in axes), **params)

    return batch


def _freeze(v):
    if isinstance(v, list | tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


_REGISTRY: dict[str, Primitive] = {}


def register(p: Primitive) -> None:
    if p.name in _REGISTRY:
        raise ValueError(f"primitive {p.name!r} is registered twice")
    _REGISTRY[p.name] = p


def lookup(name: str) -> Primitive:
    # The registry is filled when `nova` imports `nova.ops` (core never imports a layer above).
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown primitive nova.{name}") from None


def all_primitives() -> dict[str, Primitive]:
    return dict(_REGISTRY)


def same_type(*types: TensorType) -> TensorType:
    """Shape rule helper: all inputs must have one type; returns it."""
    t0 = types[0]
    for t in types[1:]:
        if t != t0:
            raise TypeError(f"operands must have the same type, got {t0} and {t}")
    return t0
