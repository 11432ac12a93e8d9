"""Structured control flow, as `jax.lax`'s: `cond`, `switch`, `while_loop`, `fori_loop`, `scan`,
`map` (exported as `nova.lax.*`).

Each construct is one equation whose parameters hold closed Programs (core/ir.py `Region`): the
branches of `cond`, the condition and body of `while`, the body of `scan`. A function passed in
is traced once, on abstract values, into its Region; values it reads from an enclosing trace
become operands of the equation (closure conversion: core/trace.py `Trace.captures`), so a
Region reads only its own inputs. Running the equation runs its Regions: with the "compiled"
backend each Region goes through the pass pipeline and the CPU backend once (cached by its
structural hash), else the reference interpreter runs it. Inside `jit` the equation is a host
step of the executable between generated kernels (a `host:` kernel, compiler/fuse.py): a scan or
while whose body compiled to generated kernels only runs as one native loop (the launcher's
`nova_scan` / `nova_while`, CPUExecutable.run_scan / run_while: no Python per iteration), any
other iterates from Python, calling the body's executable, as XLA's CPU backend runs a while
loop's body as a computation of its own. On CUDA targets nova/gpu/loops.py runs them.

Transforms, all expressed as the same primitives on transformed Regions:
- jvp: the equation again, each Region replaced by its jvp (tangents carried along).
- vjp: `cond` (a cond of the branches' VJPs) and `scan`. scan's VJP traces one step's forward
  and backward together and splits them by partial evaluation (_partial_eval, as JAX's): the
  forward scan stacks the values the backward reads (loop-invariant ones are recomputed there
  instead), a reverse scan reads them. `while_loop` has no reverse mode, as in JAX
  (its trip count is known only when it runs): `fori_loop` with Python int bounds is a scan
  and is reverse-differentiable.
- custom_vjp / custom_jvp functions called inside keep their rules: a Region keeps the
  rules' markers beside its compiled Program (Region.replay), and transforms replay that.
- vmap: Regions batched by the primitives' batching rules (nova/batching.py). A mapped `while`
  predicate runs the loop until every example is done, freezing the finished ones (select); a
  mapped `cond` index evaluates every branch and selects per example, as jax.vmap does.
"""

from __future__ import annotations

import builtins
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from nova.batching import _replay
from nova.config import config
from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ShapeError
from nova.core.interpreter import run_program
from nova.core.ir import Eqn, Program, Region, TensorType, Var, as_region
from nova.core.primitive import Cost, FusionKind, Primitive, Template, broadcast_batched
from nova.core.pytree import tree_flatten, tree_unflatten
from nova.core.source_info import attributed_to
from nova.core.trace import Trace, Tracer, current_trace, end_trace, trace_context
from nova.grad import _array_or_scalar, _where, jvp, vjp
from nova.ops import lax
from nova.ops.callback import has_effects

__all__ = ["cond", "fori_loop", "map", "scan", "switch", "while_loop"]


# --- Regions: tracing a function into one, running one, inlining one -----------------------------


def _asarray(x, what: str) -> Array:
    return _array_or_scalar(x, lambda: (f"{what}: expected arrays or Python scalars, got a "
                                        f"{type(x).__name__}{_where()}"))


def _aval(x) -> TensorType:
    return TensorType(tuple(x.shape), x.dtype)


def trace_region(fun: Callable, in_types: Sequence[TensorType]):
    """Traces `fun(*values)` (one value per type; it returns a pytree of arrays) into a Program.

    Returns (program, consts, out_tree): the program's inputs are the declared ones followed by
    one per value fun read from an enclosing trace, and `consts` lists those outer values in
    that order (arrays fun closed over outside any trace become constants of the program)."""
    t = Trace(concrete=False)
    try:
        with trace_context(t):
            ins = [t.new_input(ty) for ty in in_types]
            leaves, tree = tree_flatten(fun(*ins))
            outs = [t.lift(_asarray(o, "a traced function's output")) for o in leaves]
            program = t.to_program(outs)
    finally:
        end_trace(t)
    # Read by _region: a Program keeps no custom_vjp/custom_jvp markers (Trace.to_program);
    # the same Program with them kept is what transforms replay (Region.replay).
    program.custom_rules_dropped = t.custom_calls > 0
    program.custom_replay = t.to_program(outs, keep_custom_rules=True) if t.custom_calls \
        else None
    return program, [outer for outer, _ in t.captures], tree


def _region(program: Program, inputs: Sequence | None = None) -> Region:
    """The Region of a program traced by trace_region, with its inputs in the order `inputs`
    (default: as traced), keeping its custom rules' markers for transforms (Region.replay)."""
    inputs = list(program.inputs if inputs is None else inputs)
    replay = getattr(program, "custom_replay", None)
    if replay is not None:
        replay = Program(inputs, replay.eqns, replay.outputs)
    return Region(Program(inputs, program.eqns, program.outputs),
                  dropped_rules=getattr(program, "custom_rules_dropped", False), replay=replay)


def _check_rules(what: str, *regions: Region) -> None:
    """Differentiating a Region whose function called a custom_vjp / custom_jvp function and
    whose markers are gone (a Region a transform of such a Region built: second-order
    derivatives through the loop) would use the primitives' derivatives instead of the rule:
    refused."""
    if any(r.dropped_rules and r.replay is None for r in regions):
        raise NotImplementedError(
            f"differentiating twice through lax.{what} whose function calls a custom_vjp or "
            "custom_jvp function is not supported yet: the derivative's loop keeps no custom "
            "rules, so the second derivative would silently differ from the rule's. "
            f"Differentiate inside the body instead, or call the function outside the "
            f"loop{_where()}")


def _consts_first(program: Program, n_declared: int) -> Region:
    """The Region of a traced program with its captured inputs moved before the declared."""
    ins = program.inputs
    return _region(program, ins[n_declared:] + ins[:n_declared])


def _closed(fun: Callable, in_types) -> Region:
    """The Region of a function that reads nothing but its inputs (a transform's rule)."""
    program, consts, _ = trace_region(fun, in_types)
    if consts:  # a rule built here only reads its arguments
        raise AssertionError("a control-flow rule's function read a value of an outer trace")
    return _region(program)


def inline(region: Region, args: Sequence, effects: bool = True) -> list:
    """Binds the Region's equations on `args` in the current context (a trace, or eagerly);
    with its custom rules' markers (Region.replay) when it has them, so that a transform
    tracing this meets the rules. effects=False leaves out the io_callbacks (debug.print) in
    it, nested Regions included: a derivative rule's copy of a body must not repeat the
    effects of the primal equation it differentiates."""
    program = region.replay or region.program
    if not effects:
        program = _without_effects(program)
    env = {id(v): a for v, a in zip(program.inputs, args, strict=True)}
    for e in program.eqns:
        with attributed_to(e.source):
            outs = e.prim.bind(*[env[id(v)] for v in e.inputs], **e.params)
        outs = outs if e.prim.multiple_results else [outs]
        for v, o in zip(e.outputs, outs, strict=True):
            env[id(v)] = o
    return [env[id(v)] for v in program.outputs]


def _without_effects(program: Program) -> Program:
    """The program without its io_callback equations (their token and results, which only
    other io_callbacks read, no longer exist) and with effect-free copies of the Regions
    that held some; the program itself when it holds none."""
    if not any(has_effects(e) for e in program.eqns):
        return program
    eqns = []
    for e in program.eqns:
        if e.prim.effectful:
            continue
        if has_effects(e):
            params = {}
            for k, v in e.params.items():
                if isinstance(v, Region):
                    v = _region_without_effects(v)
                elif isinstance(v, tuple) and v and all(isinstance(r, Region) for r in v):
                    v = tuple(_region_without_effects(r) for r in v)
                params[k] = v
            e = Eqn(e.prim, e.inputs, params, e.outputs, e.source, e.stage)
        eqns.append(e)
    return Program(program.inputs, eqns, program.outputs, program.input_names)


def _region_without_effects(r: Region) -> Region:
    replay = None if r.replay is None else _without_effects(r.replay)
    return Region(_without_effects(r.program), r.dropped_rules, replay)


_EXECUTABLES: OrderedDict = OrderedDict()  # Region -> its compiled executable (most recent last)
_EXECUTABLES_KEPT = 256
_NO_COMPILER: list = []  # non-empty once compiling a Region found no MLIR


def _region_executable(region: Region):
    """The Region's compiled executable with the "compiled" backend (built once per structure,
    with the native launcher even for one kernel: native loops run its table), or None: another
    backend, or no MLIR here (a GPU machine running a carried cache), where the reference
    interpreter runs Regions."""
    if config.read("backend") != "compiled" or _NO_COMPILER:
        return None
    exe = _EXECUTABLES.get(region)
    if exe is None:
        from nova.compiler.backend_cpu import _launcher
        from nova.compiler.pipeline import run_passes
        from nova.jit import _compile_for_backend

        try:
            exe = _compile_for_backend(run_passes(region.program))
        except ImportError:
            _NO_COMPILER.append(True)
            return None
        if hasattr(exe, "pool_outputs"):  # cached for the process, as eager executables are
            exe.pool_outputs(False)
        if getattr(exe, "launcher", False) is None:
            exe.launcher = _launcher()
        _EXECUTABLES[region] = exe
        while len(_EXECUTABLES) > _EXECUTABLES_KEPT:
            _EXECUTABLES.popitem(last=False)
    else:
        _EXECUTABLES.move_to_end(region)
    return exe


def run_region(region: Region, args: Sequence[np.ndarray]) -> list:
    """The Region's outputs on NumPy values: its compiled executable (_region_executable), else
    the reference interpreter."""
    exe = _region_executable(region)
    if exe is None:
        return run_program(region.program, list(args))
    return [np.asarray(o) for o in exe([_contiguous(a) for a in args])]


def _typed(args: Sequence, types: Sequence, lead: tuple = ()) -> list[np.ndarray]:
    """`args` as contiguous arrays of `types` (TensorTypes), each with the leading axes `lead`:
    a native loop's operands."""
    return [_contiguous(np.asarray(a, t.dtype).reshape(lead + tuple(t.shape)))
            for a, t in zip(args, types, strict=True)]


def _contiguous(a) -> np.ndarray:
    a = np.asarray(a)  # (np.ascontiguousarray would make a 0-d array 1-d)
    return a if a.flags.c_contiguous else a.copy()


def _fresh(outs, args) -> tuple:
    """The outputs, each in a buffer of its own: a Region may hand back one of its inputs (an
    identity branch, a loop of no trips, a carry passed through), and the executable running
    this equation reuses an operand's memory once it is dead, which would change the result."""
    args = [a for a in args if isinstance(a, np.ndarray)]
    out = []
    for o in outs:
        o = np.asarray(o)
        if any(np.may_share_memory(o, a) for a in args) or \
                any(np.may_share_memory(o, p) for p in out):
            o = o.copy()
        out.append(o)
    return tuple(out)


def _region_cost(region: Region) -> Cost:
    flops = moved = 0
    for e in region.program.eqns:
        c = e.prim.cost([v.type for v in e.inputs], [v.type for v in e.outputs], **e.params)
        flops += c.flops
        moved += c.bytes
    return Cost(flops, moved)


def _io_bytes(in_types, out_types) -> int:
    return sum(t.nbytes for t in in_types) + sum(t.nbytes for t in out_types)


def _is_float(t) -> bool:
    return dtypes.is_inexact(t.dtype)


def _floats(ts) -> list[int]:
    return [i for i, t in enumerate(ts) if _is_float(t)]


def _types_text(ts) -> str:
    return "(" + ", ".join(str(t) for t in ts) + ")"


# --- batching a Region ---------------------------------------------------------------------------


def _batch_region(region: Region, flags: Sequence[bool], size: int, force=None):
    """The Region on inputs mapped along a new first axis where `flags`, by the primitives'
    batching rules. Returns (region, out_flags); `force[k]` True maps output k even when it
    does not depend on a mapped input (broadcast)."""
    program = region.replay or region.program  # (custom rules' markers batch by their rule)
    types = [TensorType((size, *v.type.shape), v.type.dtype) if f else v.type
             for v, f in zip(program.inputs, flags, strict=True)]
    out_flags: list = []

    def fun(*args):
        env = {id(v): (a, f) for v, a, f in zip(program.inputs, args, flags, strict=True)}
        _replay(program, env, size)
        out = []
        for k, v in enumerate(program.outputs):
            x, mapped = env[id(v)]
            if force is not None and force[k] and not mapped:
                (x,) = broadcast_batched([x], [False], size)
                mapped = True
            out.append(x)
            out_flags.append(mapped)
        return out

    return _closed(fun, types), out_flags


def _carry_fixed_point(region: Region, before: list, carry: list, after: list, size: int,
                       n_carry: int) -> list:
    """Which carries are mapped: those mapped on entry, and those the body maps (repeated until
    nothing changes, at most once per carry)."""
    carry = list(carry)
    for _ in range(n_carry + 1):
        _, out = _batch_region(region, before + carry + after, size)
        new = [a or b for a, b in zip(carry, out[:n_carry], strict=True)]
        if new == carry:
            return carry
        carry = new
    return carry


def _swap01(x):
    perm = (1, 0, *range(2, x.ndim))
    return lax.transpose(x, perm)


# --- scan ------------------------------------------------------------------------------------------


def _split(seq, *sizes):
    out, k = [], 0
    for n in sizes:
        out.append(list(seq[k:k + n]))
        k += n
    out.append(list(seq[k:]))
    return out


def _scan_rule(*types, body, length, reverse, n_consts, n_carry, primal_body=None):
    program = body.program
    consts, carry, xs = _split(types, n_consts, n_carry)
    for t in xs:
        if not t.shape or t.shape[0] != length:
            raise ShapeError(f"scan: every scanned operand needs a leading axis of the length "
                             f"{length}, got {t}")
    expect = consts + carry + [TensorType(t.shape[1:], t.dtype) for t in xs]
    got = [v.type for v in program.inputs]
    if got != expect:
        raise TypeError(f"scan: the body takes {_types_text(got)}, but the operands give "
                        f"{_types_text(expect)}")
    outs = [v.type for v in program.outputs]
    if outs[:n_carry] != carry:
        raise TypeError(f"scan: the body returns the carry {_types_text(outs[:n_carry])}, "
                        f"but it enters as {_types_text(carry)}")
    return tuple(outs[:n_carry] + [TensorType((length, *t.shape), t.dtype)
                                   for t in outs[n_carry:]])


def _scan_impl(*args, body, length, reverse, n_consts, n_carry, primal_body=None):
    consts, carry, xs = _split(args, n_consts, n_carry)
    ys_t = [v.type for v in body.program.outputs[n_carry:]]
    exe = _region_executable(body)
    if hasattr(exe, "run_scan"):  # the whole loop in one native call
        ins = [v.type for v in body.program.inputs]
        fixed = _typed(consts + carry, ins[:n_consts + n_carry])
        done = exe.run_scan(fixed[:n_consts], fixed[n_consts:],
                            _typed(xs, ins[n_consts + n_carry:], (length,)), ys_t, length,
                            reverse)
        if done is not None:
            return tuple(done[0]) + tuple(done[1])
    ys = [np.empty((length, *t.shape), t.dtype) for t in ys_t]
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        out = run_region(body, consts + carry + [x[i] for x in xs])
        carry = out[:n_carry]
        for y, o in zip(ys, out[n_carry:], strict=True):
            y[i] = o
    return _fresh(carry, args) + tuple(ys)


def _scan_cost(in_types, out_types, *, body, length, reverse, n_consts, n_carry,
               primal_body=None):
    c = _region_cost(body)
    return Cost(length * c.flops, length * c.bytes + _io_bytes(in_types, out_types))


def _replace_at(full: list, idx: list[int], vals) -> list:
    full = list(full)
    for i, v in zip(idx, vals, strict=True):
        full[i] = v
    return full


def _scan_vjp(cts, *args, out, body, length, reverse, n_consts, n_carry, primal_body=None):
    _check_rules("scan", body)
    program = body.program
    consts, _, xs = _split(args, n_consts, n_carry)
    in_t = [v.type for v in program.inputs]
    c_t, h_t, x_t = _split(in_t, n_consts, n_carry)
    y_t = [v.type for v in program.outputs[n_carry:]]
    fc, fh, fx, fy = _floats(c_t), _floats(h_t), _floats(x_t), _floats(y_t)
    if not (fc or fh or fx):
        return (None,) * len(args)
    n_x = len(x_t)
    # Under jit the forward scan below takes the primal scan's place (compiler/merge_scans.py),
    # so it runs the body's io_callbacks; eagerly the primal scan has run them already.
    outer = current_trace()
    rerun_effects = outer is not None and not outer.concrete

    # One step, forward and backward, traced together: the body's outputs, then the step's
    # cotangents (d carry, d consts so far + this step's, d x) from the outgoing ones.
    def joint(*a):
        c, h, x, ct_h, acc, ct_y = _split(a, n_consts, n_carry, n_x, len(fh), len(fc))
        primal_outs = []

        def f_local(cf, hf, xf):
            outs = inline(body, _replace_at(c, fc, cf) + _replace_at(h, fh, hf)
                          + _replace_at(x, fx, xf), effects=rerun_effects)
            primal_outs.extend(outs)
            return [outs[i] for i in fh], [outs[n_carry + j] for j in fy]

        _, pullback = vjp(f_local, [c[i] for i in fc], [h[i] for i in fh], [x[i] for i in fx])
        dc, dh, dx = pullback((list(ct_h), list(ct_y)))
        return (primal_outs + list(dh) + [lax.add(s, d) for s, d in zip(acc, dc, strict=True)]
                + list(dx))

    joint_t = (in_t + [h_t[i] for i in fh] + [c_t[i] for i in fc] + [y_t[j] for j in fy])
    joint_r = _closed(joint, joint_t)
    fwd, bwd, saved = _partial_eval(joint_r.program, n_consts, n_carry, n_x,
                                    len(program.outputs), len(fh) + len(fc))
    # A body with custom rules: its forward and backward hold what the rules computed, with
    # no markers left (differentiating them again is refused by _check_rules).
    fwd.dropped_rules = bwd.dropped_rules = joint_r.dropped_rules
    # Forward: the body again, also stacking the values the backward reads (its residuals).
    # `primal_body` lets the compiler merge it with the forward scan it repeats (merge_scans).
    res = scan_p.bind(*args, body=fwd, length=length, reverse=reverse, n_consts=n_consts,
                      n_carry=n_carry, primal_body=body)
    stacked = iter(res[len(program.outputs):])
    residuals = [xs[k] if kind == "x" else next(stacked) for kind, k in saved]
    # Backward: a reverse scan carrying (d carry, d consts), over the residuals and the ys'
    # cotangents.
    ct_h = [cts[i] for i in fh]
    ct_ys = [cts[n_carry + j] for j in fy]
    acc0 = [lax.full(consts[i].shape, 0, consts[i].dtype) for i in fc]
    outs = scan_p.bind(*consts, *ct_h, *acc0, *residuals, *ct_ys, body=bwd, length=length,
                       reverse=not reverse, n_consts=n_consts, n_carry=len(fh) + len(fc))
    d_init, d_consts, d_xs = _split(outs, len(fh), len(fc))[:3]
    result = [None] * len(args)
    for i, d in zip(fc, d_consts, strict=True):
        result[i] = d
    for i, d in zip(fh, d_init, strict=True):
        result[n_consts + i] = d
    for i, d in zip(fx, d_xs, strict=True):
        result[n_consts + n_carry + i] = d
    return tuple(result)


def _partial_eval(joint: Program, n_consts: int, n_carry: int, n_x: int, n_primal: int,
                  n_ct_carry: int):
    """Splits one step's joint program (inputs: consts, carry, x, then the cotangents: n_ct_carry
    carried (d carry, d consts), then the ys'; outputs: the body's n_primal outputs, then the
    step's cotangents) into a forward Region and a backward one, as
    JAX's partial evaluation does.

    Known equations read no cotangent. Those that read consts only are loop-invariant: the
    backward recomputes them (transposes of weights) rather than stack `length` copies. The
    other known values the backward reads are its residuals: an x input is read from xs as it
    is, any other (a carry, an activation) is stacked by the forward scan as an extra y.
    Returns (forward Region: consts, carry, x -> body outputs + stacked residuals; backward
    Region: consts, d carry, d consts, residuals, ys' cotangents -> cotangents; residuals as a
    list of ("x", index into xs) or ("stacked", None) in the backward's input order)."""
    ins = joint.inputs
    c_in, h_in, x_in = _split(ins, n_consts, n_carry, n_x)[:3]
    ct_in = ins[n_consts + n_carry + n_x:]
    known = {id(v) for v in c_in + h_in + x_in}
    invariant = {id(v) for v in c_in}
    known_eqns, unknown_eqns, invariant_eqns = [], [], []
    for e in joint.eqns:
        if all(id(v) in known for v in e.inputs):
            known_eqns.append(e)
            known.update(id(o) for o in e.outputs)
            if all(id(v) in invariant for v in e.inputs):
                invariant_eqns.append(e)
                invariant.update(id(o) for o in e.outputs)
        else:
            unknown_eqns.append(e)
    primal_outs, ct_outs = joint.outputs[:n_primal], joint.outputs[n_primal:]
    if not all(id(v) in known for v in primal_outs):  # the body's outputs read no cotangent
        raise AssertionError("scan VJP: a primal output depends on a cotangent")
    needed, order = {}, []
    for v in [v for e in unknown_eqns for v in e.inputs] + list(ct_outs):
        if id(v) in known and id(v) not in invariant and id(v) not in needed:
            needed[id(v)] = v
            order.append(v)
    x_pos = {id(v): k for k, v in enumerate(x_in)}
    from_xs = [v for v in order if id(v) in x_pos]
    stacked = [v for v in order if id(v) not in x_pos]
    fwd = Region(Program(c_in + h_in + x_in, known_eqns, list(primal_outs) + stacked))
    saved = [("x", x_pos[id(v)]) for v in from_xs] + [("stacked", None)] * len(stacked)
    # The backward's inputs: consts, then its carry (d carry, d consts), then the residuals and
    # the ys' cotangents (its xs).
    ct_carry, ct_y = ct_in[:n_ct_carry], ct_in[n_ct_carry:]
    bwd_ins = list(c_in) + list(ct_carry) + from_xs + stacked + list(ct_y)
    bwd = Region(Program(bwd_ins, invariant_eqns + unknown_eqns, list(ct_outs)))
    return fwd, bwd, saved


def _scan_jvp(tangents, *args, out, body, length, reverse, n_consts, n_carry, primal_body=None):
    _check_rules("scan", body)
    program = body.program
    in_t = [v.type for v in program.inputs]
    c_t, h_t, x_t = _split(in_t, n_consts, n_carry)
    y_t = [v.type for v in program.outputs[n_carry:]]
    fc, fh, fx, fy = _floats(c_t), _floats(h_t), _floats(x_t), _floats(y_t)
    consts, init, xs = _split(args, n_consts, n_carry)
    dconsts, dinit, dxs = _split(tangents, n_consts, n_carry)

    def step(*a):
        c, dc, h, dh, x, dx = _split(a, n_consts, len(fc), n_carry, len(fh), len(x_t))

        def f_local(cf, hf, xf):
            return inline(body, _replace_at(c, fc, cf) + _replace_at(h, fh, hf)
                          + _replace_at(x, fx, xf), effects=False)

        outs, touts = jvp(f_local, ([c[i] for i in fc], [h[i] for i in fh], [x[i] for i in fx]),
                          (list(dc), list(dh), list(dx)))
        return (outs[:n_carry] + [touts[i] for i in fh] + outs[n_carry:]
                + [touts[n_carry + j] for j in fy])

    step_t = (c_t + [c_t[i] for i in fc] + h_t + [h_t[i] for i in fh] + x_t
              + [x_t[i] for i in fx])
    region = _closed(step, step_t)
    res = scan_p.bind(*consts, *[dconsts[i] for i in fc], *init, *[dinit[i] for i in fh], *xs,
                      *[dxs[i] for i in fx], body=region, length=length, reverse=reverse,
                      n_consts=n_consts + len(fc), n_carry=n_carry + len(fh))
    _, dh_out, rest = _split(res, n_carry, len(fh))
    dys = rest[len(y_t):]
    t_out = [lax.full(o.shape, 0, o.dtype) for o in out]
    for i, d in zip(fh, dh_out, strict=True):
        t_out[i] = d
    for j, d in zip(fy, dys, strict=True):
        t_out[n_carry + j] = d
    return tuple(t_out)


def _scan_batch(args, batched, *, body, length, reverse, n_consts, n_carry, primal_body=None):
    size = next(a.shape[0] for a, b in zip(args, batched, strict=True) if b)
    n_ys = len(body.program.outputs) - n_carry
    cf, hf, xf = _split(list(batched), n_consts, n_carry)
    hf = _carry_fixed_point(body, cf, hf, xf, size, n_carry)
    region, _ = _batch_region(body, cf + hf + xf, size, force=hf + [True] * n_ys)
    consts, init, xs = _split(args, n_consts, n_carry)
    init = [broadcast_batched([x], [False], size)[0] if m and not b else x
            for x, m, b in zip(init, hf, batched[n_consts:n_consts + n_carry], strict=True)]
    xs = [_swap01(x) if b else x for x, b in zip(xs, xf, strict=True)]  # (length, B, ...)
    outs = scan_p.bind(*consts, *init, *xs, body=region, length=length, reverse=reverse,
                       n_consts=n_consts, n_carry=n_carry)
    carry = [x if m else broadcast_batched([x], [False], size)[0]
             for x, m in zip(outs[:n_carry], hf, strict=True)]
    return tuple(carry + [_swap01(y) for y in outs[n_carry:]])


scan_p = Primitive(
    "scan",
    shape_rule=_scan_rule,
    impl=_scan_impl,
    vjp=_scan_vjp,
    jvp=_scan_jvp,
    fusion=FusionKind.OPAQUE,
    kernel=Template("scan"),
    cost=_scan_cost,
    multiple_results=True,
    param_types={"body": as_region, "length": int, "reverse": bool, "n_consts": int,
                 "n_carry": int, "primal_body": as_region},
    batch=_scan_batch,
)


# --- while ---------------------------------------------------------------------------------------


def _while_rule(*types, cond, body, n_cond_consts, n_body_consts):
    cc, bc, carry = _split(types, n_cond_consts, n_body_consts)
    got = [v.type for v in cond.program.inputs]
    if got != cc + carry:
        raise TypeError(f"while: the condition takes {_types_text(got)}, but the operands give "
                        f"{_types_text(cc + carry)}")
    pred = [v.type for v in cond.program.outputs]
    if pred != [TensorType((), dtypes.bool_)]:
        raise TypeError(f"while: the condition must return one bool scalar, got "
                        f"{_types_text(pred)}")
    got = [v.type for v in body.program.inputs]
    if got != bc + carry:
        raise TypeError(f"while: the body takes {_types_text(got)}, but the operands give "
                        f"{_types_text(bc + carry)}")
    outs = [v.type for v in body.program.outputs]
    if outs != carry:
        raise TypeError(f"while: the body returns {_types_text(outs)}, but the carry enters as "
                        f"{_types_text(carry)}")
    return tuple(carry)


def _while_impl(*args, cond, body, n_cond_consts, n_body_consts):
    cc, bc, carry = _split(args, n_cond_consts, n_body_consts)
    exe, test = _region_executable(body), _region_executable(cond)
    if hasattr(exe, "run_while") and hasattr(test, "run_while"):
        ctypes_, btypes = [v.type for v in cond.program.inputs], \
            [v.type for v in body.program.inputs]
        done = exe.run_while(test, _typed(cc, ctypes_[:len(cc)]), _typed(bc, btypes[:len(bc)]),
                             _typed(carry, btypes[len(bc):]))
        if done is not None:
            return tuple(done)
    while bool(run_region(cond, cc + carry)[0]):
        carry = run_region(body, bc + carry)
    return _fresh(carry, args)


def _while_cost(in_types, out_types, *, cond, body, n_cond_consts, n_body_consts):
    """One iteration's cost (the trip count is known only when the loop runs)."""
    c, b = _region_cost(cond), _region_cost(body)
    return Cost(c.flops + b.flops, c.bytes + b.bytes + _io_bytes(in_types, out_types))


def _while_vjp(cts, *args, out, cond, body, n_cond_consts, n_body_consts):
    raise TypeError(
        "Reverse-mode differentiation does not work for lax.while_loop: its trip count is known "
        "only when the loop runs (as in JAX). Use lax.scan, or lax.fori_loop with Python int "
        f"bounds (which becomes a scan), or forward mode (jvp, jacfwd){_where()}")


def _while_jvp(tangents, *args, out, cond, body, n_cond_consts, n_body_consts):
    _check_rules("while_loop", body)
    n_cc, n_bc = n_cond_consts, n_body_consts
    cc_t, bc_t, h_t = _split([_aval(a) for a in args], n_cc, n_bc)
    fb, fh = _floats(bc_t), _floats(h_t)
    cc, bc, init = _split(args, n_cc, n_bc)
    _, dbc, dinit = _split(tangents, n_cc, n_bc)
    n = len(h_t)

    def body_jvp(*a):
        c, dc, h, dh = _split(a, n_bc, len(fb), n)

        def f_local(cf, hf):
            return inline(body, _replace_at(c, fb, cf) + _replace_at(h, fh, hf), effects=False)

        outs, touts = jvp(f_local, ([c[i] for i in fb], [h[i] for i in fh]), (list(dc), list(dh)))
        return outs + [touts[i] for i in fh]

    def cond_jvp(*a):
        # (the tangents do not change the predicate)
        return inline(cond, a[:n_cc + n], effects=False)

    tan_t = [h_t[i] for i in fh]
    cond_r = _closed(cond_jvp, cc_t + h_t + tan_t)
    body_r = _closed(body_jvp, bc_t + [bc_t[i] for i in fb] + h_t + tan_t)
    res = while_p.bind(*cc, *bc, *[dbc[i] for i in fb], *init, *[dinit[i] for i in fh],
                       cond=cond_r, body=body_r, n_cond_consts=n_cc, n_body_consts=n_bc + len(fb))
    t_out = [lax.full(o.shape, 0, o.dtype) for o in out]
    for i, d in zip(fh, res[n:], strict=True):
        t_out[i] = d
    return tuple(t_out)


def _any(pred):
    """True when any element of a bool vector is."""
    as_int = lax.convert_element_type(pred, dtypes.int32)
    return lax.gt(lax.reduce_max(as_int, (0,)), lax.full((), 0, dtypes.int32))


def _while_batch(args, batched, *, cond, body, n_cond_consts, n_body_consts):
    size = next(a.shape[0] for a, b in zip(args, batched, strict=True) if b)
    n_cc, n_bc = n_cond_consts, n_body_consts
    ccf, bcf, hf = _split(list(batched), n_cc, n_bc)
    n = len(hf)
    hf = _carry_fixed_point(body, bcf, hf, [], size, n)
    _, (pred_mapped,) = _batch_region(cond, ccf + hf, size)
    if pred_mapped:  # per-example trip counts: every carry is mapped then
        hf = [True] * n
    cc, bc, init = _split(args, n_cc, n_bc)
    init = [broadcast_batched([x], [False], size)[0] if m and not b else x
            for x, m, b in zip(init, hf, batched[n_cc + n_bc:], strict=True)]
    cond_b, _ = _batch_region(cond, ccf + hf, size)
    body_b, _ = _batch_region(body, bcf + hf, size, force=hf)
    if not pred_mapped:
        outs = while_p.bind(*cc, *bc, *init, cond=cond_b, body=body_b, n_cond_consts=n_cc,
                            n_body_consts=n_bc)
    else:
        cc_t, bc_t, h_t = [_aval(a) for a in cc], [_aval(a) for a in bc], [_aval(a) for a in init]

        def any_running(*a):
            return [_any(inline(cond_b, a)[0])]

        def step(*a):
            c, b, h = _split(a, n_cc, n_bc)
            running = inline(cond_b, c + h)[0]
            new = inline(body_b, b + h)
            return [lax.select(lax.broadcast_in_dim(running, x.shape, (0,)), y, x)
                    for y, x in zip(new, h, strict=True)]

        outs = while_p.bind(*cc, *cc, *bc, *init, cond=_closed(any_running, cc_t + h_t),
                            body=_closed(step, cc_t + bc_t + h_t), n_cond_consts=n_cc,
                            n_body_consts=n_cc + n_bc)
    return tuple(x if m else broadcast_batched([x], [False], size)[0]
                 for x, m in zip(outs, hf, strict=True))


while_p = Primitive(
    "while",
    shape_rule=_while_rule,
    impl=_while_impl,
    vjp=_while_vjp,
    jvp=_while_jvp,
    fusion=FusionKind.OPAQUE,
    kernel=Template("while"),
    cost=_while_cost,
    multiple_results=True,
    param_types={"cond": as_region, "body": as_region, "n_cond_consts": int,
                 "n_body_consts": int},
    batch=_while_batch,
)


# --- cond ----------------------------------------------------------------------------------------


def _regions(v) -> tuple:
    return tuple(as_region(b) for b in v)


def _cond_rule(index, *types, branches):
    if index.shape != () or index.dtype != dtypes.int32:
        raise TypeError(f"cond: the branch index must be an int32 scalar, got {index}")
    outs = None
    for k, br in enumerate(branches):
        got = [v.type for v in br.program.inputs]
        if got != list(types):
            raise TypeError(f"cond: branch {k} takes {_types_text(got)}, but the operands give "
                            f"{_types_text(types)}")
        o = [v.type for v in br.program.outputs]
        if outs is not None and o != outs:
            raise TypeError(f"cond: branch {k} returns {_types_text(o)}, branch 0 "
                            f"{_types_text(outs)}; every branch must return the same types")
        outs = o
    return tuple(outs)


def _cond_impl(index, *ops, branches):
    k = builtins.min(builtins.max(int(index), 0), len(branches) - 1)
    return _fresh(run_region(branches[k], list(ops)), ops)


def _cond_cost(in_types, out_types, *, branches):
    costs = [_region_cost(b) for b in branches]
    return Cost(builtins.max(c.flops for c in costs),
                builtins.max(c.bytes for c in costs) + _io_bytes(in_types, out_types))


def _cond_vjp(cts, index, *ops, out, branches):
    _check_rules("cond", *branches)
    op_t = [_aval(o) for o in ops]
    y_t = [v.type for v in branches[0].program.outputs]
    fo, fy = _floats(op_t), _floats(y_t)
    if not fo or not fy:
        return (None,) * (1 + len(ops))

    def branch_vjp(br):
        def f(*a):
            o, ct = a[:len(ops)], a[len(ops):]

            def f_local(of):
                outs = inline(br, _replace_at(o, fo, of), effects=False)
                return [outs[j] for j in fy]

            _, pullback = vjp(f_local, [o[i] for i in fo])
            return list(pullback(list(ct))[0])

        return _closed(f, op_t + [y_t[j] for j in fy])

    outs = cond_p.bind(index, *ops, *[cts[j] for j in fy],
                       branches=tuple(branch_vjp(br) for br in branches))
    result = [None] * (1 + len(ops))
    for i, d in zip(fo, outs, strict=True):
        result[1 + i] = d
    return tuple(result)


def _cond_jvp(tangents, index, *ops, out, branches):
    _check_rules("cond", *branches)
    op_t = [_aval(o) for o in ops]
    y_t = [v.type for v in branches[0].program.outputs]
    fo, fy = _floats(op_t), _floats(y_t)
    n = len(ops)

    def branch_jvp(br):
        def f(*a):
            o, do = a[:n], a[n:]

            def f_local(of):
                return inline(br, _replace_at(o, fo, of), effects=False)

            outs, touts = jvp(f_local, ([o[i] for i in fo],), (list(do),))
            return outs + [touts[j] for j in fy]

        return _closed(f, op_t + [op_t[i] for i in fo])

    res = cond_p.bind(index, *ops, *[tangents[1 + i] for i in fo],
                      branches=tuple(branch_jvp(br) for br in branches))
    t_out = [lax.full(o.shape, 0, o.dtype) for o in out]
    for j, d in zip(fy, res[len(y_t):], strict=True):
        t_out[j] = d
    return tuple(t_out)


def _cond_batch(args, batched, *, branches):
    size = next(a.shape[0] for a, b in zip(args, batched, strict=True) if b)
    index, ops = args[0], list(args[1:])
    n_out = len(branches[0].program.outputs)
    flags = list(batched[1:])
    force = [True] * n_out  # every output of a batching rule is mapped
    regions = tuple(_batch_region(br, flags, size, force=force)[0] for br in branches)
    if not batched[0]:
        return cond_p.bind(index, *ops, branches=regions)
    # A mapped index: every branch on every example, then each example's branch selected.
    last = len(branches) - 1
    k = lax.max(lax.min(index, lax.full(index.shape, last, index.dtype)),
                lax.full(index.shape, 0, index.dtype))
    results = inline(regions[last], ops)
    for b in range(last - 1, -1, -1):
        pick = lax.eq(k, lax.full(k.shape, b, k.dtype))
        outs = inline(regions[b], ops)
        results = [lax.select(lax.broadcast_in_dim(pick, r.shape, (0,)), o, r)
                   for o, r in zip(outs, results, strict=True)]
    return tuple(results)


cond_p = Primitive(
    "cond",
    shape_rule=_cond_rule,
    impl=_cond_impl,
    vjp=_cond_vjp,
    jvp=_cond_jvp,
    fusion=FusionKind.OPAQUE,
    kernel=Template("cond"),
    cost=_cond_cost,
    multiple_results=True,
    param_types={"branches": _regions},
    batch=_cond_batch,
)


# --- the public functions ------------------------------------------------------------------------


def _check_callable(what: str, **funs) -> None:
    for name, fn in funs.items():
        if not callable(fn):
            raise TypeError(f"lax.{what}: {name} must be a function, got "
                            f"{type(fn).__name__}{_where()}")


def _leaves_of(tree, what: str) -> tuple[list, object]:
    leaves, td = tree_flatten(tree)
    return [_asarray(x, what) for x in leaves], td


def _weak(tree) -> list[bool]:
    """Per leaf: a Python scalar (JAX's weak type), whose dtype a loop may adopt from its body."""
    return [isinstance(x, int | float | complex) for x in tree_flatten(tree)[0]]


def _adopt(leaves: list, weak: list, want_t: list, got_t: list) -> list | None:
    """The carry with each Python-scalar leaf converted to the dtype the body returns for it
    (as JAX promotes weakly typed loop inputs), or None when nothing would change."""
    if len(got_t) != len(want_t):
        return None
    new, changed = list(leaves), False
    for i, (w, a, b) in enumerate(zip(weak, want_t, got_t, strict=True)):
        if w and a.shape == b.shape and a.dtype != b.dtype:
            new[i] = lax.convert_element_type(leaves[i], b.dtype)
            changed = True
    return new if changed else None


def _check_same(what: str, got_tree, want_tree, got_t, want_t) -> None:
    if got_tree != want_tree:
        raise TypeError(f"{what} must have the structure of the input {want_tree}, got "
                        f"{got_tree}{_where()}")
    if got_t != want_t:
        diffs = "; ".join(f"leaf {i}: {a} where the input is {b}"
                          for i, (a, b) in enumerate(zip(got_t, want_t, strict=True)) if a != b)
        raise TypeError(f"{what} must have the input's shapes and dtypes: {diffs} (convert "
                        f"with .astype or start from a value of the type the body returns)"
                        f"{_where()}")


def switch(index, branches: Sequence[Callable], *operands):
    """`branches[index](*operands)`, as `jax.lax.switch`: one equation holding every branch.

    index: an integer scalar, clamped to [0, len(branches) - 1]. Every branch takes the
    operands (pytrees of arrays) and returns a pytree of the same structure, shapes and dtypes
    as the others. Under jit only the chosen branch runs; under vmap with a mapped index every
    branch runs and each example's result is selected. Differentiable in both modes with
    respect to the operands. Raises TypeError for a non-integer or non-scalar index, no
    branches, or branches whose outputs differ.
    """
    if callable(branches) or not isinstance(branches, Sequence):
        raise TypeError(f"switch: branches must be a sequence of functions, got "
                        f"{type(branches).__name__}{_where()}")
    branches = list(branches)
    if not branches:
        raise TypeError(f"switch: needs at least one branch{_where()}")
    for b in branches:
        if not callable(b):
            raise TypeError(f"switch: branches must be functions, got {type(b).__name__}"
                            f"{_where()}")
    if isinstance(index, bool | np.bool_):
        raise TypeError(f"switch: the index must be an integer, got the bool {index!r} (use "
                        f"lax.cond for a predicate){_where()}")
    index = _asarray(index, "switch index")
    if index.shape != () or index.dtype.kind not in "iu":
        raise TypeError(f"switch: the index must be an integer scalar, got shape "
                        f"{tuple(index.shape)} and dtype {index.dtype}{_where()}")
    if len(branches) == 1:
        return branches[0](*operands)
    index = lax.convert_element_type(index, dtypes.int32)
    index = lax.max(lax.min(index, lax.full((), len(branches) - 1, dtypes.int32)),
                    lax.full((), 0, dtypes.int32))
    leaves, td = _leaves_of(list(operands), "switch operands")
    types = [_aval(x) for x in leaves]
    traced = []
    for br in branches:
        program, consts, out_tree = trace_region(
            lambda *a, br=br: br(*tree_unflatten(td, a)), types)
        traced.append((program, consts, out_tree))
    t0 = traced[0]
    out_t0 = [v.type for v in t0[0].outputs]
    for k, (program, _, out_tree) in enumerate(traced[1:], start=1):
        out_t = [v.type for v in program.outputs]
        if out_tree != t0[2] or out_t != out_t0:
            raise TypeError(f"switch/cond: branch {k} returns {out_tree} {_types_text(out_t)}, "
                            f"branch 0 {t0[2]} {_types_text(out_t0)}: every branch must return "
                            f"the same structure, shapes and dtypes{_where()}")
    # Every branch takes the operands, then every branch's captured values (its own, and
    # unused inputs standing for the others').
    all_consts = [c for _, consts, _ in traced for c in consts]
    regions = []
    n = len(leaves)
    for k, (program, consts, _) in enumerate(traced):
        ins = list(program.inputs[:n])
        for j, (other, oc, _) in enumerate(traced):
            ins += list(program.inputs[n:]) if j == k else [Var(_aval(c)) for c in oc]
        regions.append(_region(program, ins))
    outs = cond_p.bind(index, *leaves, *all_consts, branches=tuple(regions))
    return tree_unflatten(t0[2], list(outs))


def cond(pred, true_fun: Callable, false_fun: Callable, *operands):
    """`true_fun(*operands)` if pred else `false_fun(*operands)`, as `jax.lax.cond`.

    pred: a bool or numeric scalar (nonzero is true), which may be traced: Python's `if` on a
    traced value raises under jit, this does not. The branches take the operands (pytrees of
    arrays) and return pytrees of equal structure, shapes and dtypes. Differentiable in both
    modes with respect to the operands; under vmap with a mapped pred both branches run and
    each example's result is selected. Raises TypeError for a non-scalar pred or branches whose
    outputs differ.
    """
    _check_callable("cond", true_fun=true_fun, false_fun=false_fun)
    pred = _asarray(pred, "cond predicate")
    if pred.shape != ():
        raise TypeError(f"cond: pred must be a scalar, got shape {tuple(pred.shape)}"
                        f"{_where()}")
    if pred.dtype != dtypes.bool_:
        pred = lax.ne(pred, lax.full((), 0, pred.dtype))
    return switch(lax.convert_element_type(pred, dtypes.int32), [false_fun, true_fun], *operands)


def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """Repeats `val = body_fun(val)` while `cond_fun(val)`, from init_val, as
    `jax.lax.while_loop`; returns the final val.

    init_val: a pytree of arrays (the carry); body_fun returns the same structure, shapes and
    dtypes; cond_fun returns a bool scalar. Both are traced once. Forward mode (jvp, jacfwd)
    works; reverse mode raises TypeError, as in JAX, since the trip count is known only when
    the loop runs: use `scan`, or `fori_loop` with Python int bounds. Under vmap each example
    runs its own number of iterations. Raises TypeError when body_fun changes the carry's
    structure or types, or cond_fun does not return a bool scalar.
    """
    _check_callable("while_loop", cond_fun=cond_fun, body_fun=body_fun)
    leaves, td = _leaves_of(init_val, "while_loop init_val")
    types = [_aval(x) for x in leaves]
    b_prog, b_consts, b_tree = trace_region(lambda *a: body_fun(tree_unflatten(td, a)), types)
    adopted = _adopt(leaves, _weak(init_val), types, [v.type for v in b_prog.outputs])
    if adopted is not None and b_tree == td:
        leaves = adopted
        types = [_aval(x) for x in leaves]
        b_prog, b_consts, b_tree = trace_region(lambda *a: body_fun(tree_unflatten(td, a)), types)
    _check_same("while_loop: body_fun's output", b_tree, td, [v.type for v in b_prog.outputs],
                types)
    c_prog, c_consts, _ = trace_region(lambda *a: cond_fun(tree_unflatten(td, a)), types)
    pred_t = [v.type for v in c_prog.outputs]
    if pred_t != [TensorType((), dtypes.bool_)]:
        raise TypeError(f"while_loop: cond_fun must return a bool scalar, got "
                        f"{_types_text(pred_t)}{_where()}")
    outs = while_p.bind(*c_consts, *b_consts, *leaves,
                        cond=_consts_first(c_prog, len(types)),
                        body=_consts_first(b_prog, len(types)),
                        n_cond_consts=len(c_consts), n_body_consts=len(b_consts))
    return tree_unflatten(td, list(outs))


def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1):
    """Scans f over the leading axis of xs carrying state, as `jax.lax.scan`:
    `carry, y = f(carry, x)` for each x; returns `(final carry, ys stacked)`.

    init: a pytree of arrays; f returns `(carry, y)` with carry of init's structure, shapes and
    dtypes, and y any pytree of arrays (or None). xs: a pytree of arrays with a common leading
    axis of size `length` (None: no xs, then `length` is required; f sees x = None). ys have
    shape (length, *y.shape). reverse=True scans from the last element (ys stay in xs's order).
    unroll is accepted for JAX compatibility; the loop runs the compiled body once per step
    either way. Differentiable in both modes (reverse mode saves each step's carry and
    recomputes the step's forward during the backward scan), and batches under vmap. Raises
    ValueError for leading axes that differ or disagree with `length`, TypeError when f does
    not return a pair or changes the carry's structure or types.
    """
    _check_callable("scan", f=f)
    if not isinstance(unroll, int | bool) or (not isinstance(unroll, bool) and unroll < 1):
        raise ValueError(f"scan: unroll must be a positive int or a bool, got {unroll!r}"
                         f"{_where()}")
    c_leaves, c_td = _leaves_of(init, "scan init")
    x_leaves, x_td = _leaves_of(xs, "scan xs")
    for x in x_leaves:
        if x.ndim == 0:
            raise ValueError(f"scan: every leaf of xs needs a leading axis to scan over, got a "
                             f"scalar{_where()}")
    sizes = sorted({int(x.shape[0]) for x in x_leaves})
    if length is not None:
        if not isinstance(length, int | np.integer) or isinstance(length, bool) or length < 0:
            raise ValueError(f"scan: length must be a non-negative int, got {length!r}"
                             f"{_where()}")
        length = int(length)
        if sizes and sizes != [length]:
            raise ValueError(f"scan: length {length} differs from the leading axes of xs "
                             f"{sizes}{_where()}")
    elif not sizes:
        raise ValueError(f"scan: xs is empty (None), so length must be given{_where()}")
    elif len(sizes) > 1:
        raise ValueError(f"scan: the leaves of xs have different leading axes {sizes}"
                         f"{_where()}")
    else:
        length = sizes[0]
    x_t = [TensorType(tuple(x.shape[1:]), x.dtype) for x in x_leaves]
    n_carry = len(c_leaves)
    weak = _weak(init)
    y_tree = []

    def body(c_t, *a):
        carry = tree_unflatten(c_td, a[:n_carry])
        x = tree_unflatten(x_td, a[n_carry:])
        res = f(carry, x)
        if not (isinstance(res, tuple | list) and len(res) == 2):
            raise TypeError(f"scan: f must return a pair (carry, y), got "
                            f"{type(res).__name__}{_where()}")
        new, y = res
        n_leaves, n_td = _leaves_of(new, "scan f's carry")
        got_t = [_aval(v) for v in n_leaves]
        if n_td == c_td and c_t != got_t and any(weak):
            raise _Retry(got_t)
        _check_same("scan: f's carry output", n_td, c_td, got_t, c_t)
        y_leaves, yt = _leaves_of(y, "scan f's y")
        y_tree.append(yt)
        return n_leaves + y_leaves

    c_t = [_aval(x) for x in c_leaves]
    try:
        program, consts, _ = trace_region(lambda *a: body(c_t, *a), c_t + x_t)
    except _Retry as r:  # a Python-scalar carry takes the dtype f returns for it
        c_leaves = _adopt(c_leaves, weak, c_t, r.types) or c_leaves
        c_t = [_aval(x) for x in c_leaves]
        weak = [False] * n_carry
        program, consts, _ = trace_region(lambda *a: body(c_t, *a), c_t + x_t)
    outs = scan_p.bind(*consts, *c_leaves, *x_leaves, body=_consts_first(program, len(c_t + x_t)),
                       length=length, reverse=bool(reverse), n_consts=len(consts),
                       n_carry=n_carry)
    return tree_unflatten(c_td, list(outs[:n_carry])), tree_unflatten(y_tree[0], list(outs[n_carry:]))


class _Retry(Exception):
    """Raised inside a scan body's trace: retrace with the carry types f returned."""

    def __init__(self, types):
        super().__init__("retrace")
        self.types = types


def _static_int(x):
    """x as a Python int when it is known while tracing (not a traced value), else None."""
    if isinstance(x, bool):
        return None
    if isinstance(x, int | np.integer):
        return int(x)
    if isinstance(x, np.ndarray) and x.shape == () and x.dtype.kind in "iu":
        return int(x)
    if isinstance(x, Array) and not isinstance(x, Tracer) and x.shape == () \
            and x.dtype.kind in "iu":
        return int(np.asarray(x))
    return None


def fori_loop(lower, upper, body_fun: Callable, init_val):
    """`val = body_fun(i, val)` for i in [lower, upper), as `jax.lax.fori_loop`; returns val.

    i is an int32 scalar. With bounds known while tracing (Python ints, or arrays outside any
    trace) the loop is a `scan` of upper - lower steps, differentiable in both modes; with a
    traced bound it is a `while_loop` (forward mode only). body_fun returns init_val's
    structure, shapes and dtypes (TypeError otherwise).
    """
    _check_callable("fori_loop", body_fun=body_fun)
    lo, hi = _static_int(lower), _static_int(upper)
    if lo is not None and hi is not None:
        def step(carry, _):
            i, val = carry
            return (lax.add(i, lax.full((), 1, dtypes.int32)), body_fun(i, val)), None

        start = Array(np.asarray(lo, np.int32))
        (_, val), _ = scan(step, (start, init_val), None, length=builtins.max(hi - lo, 0))
        return val
    lower = lax.convert_element_type(_asarray(lower, "fori_loop lower"), dtypes.int32)
    upper = lax.convert_element_type(_asarray(upper, "fori_loop upper"), dtypes.int32)

    def body(carry):
        i, hi_, val = carry
        return lax.add(i, lax.full((), 1, dtypes.int32)), hi_, body_fun(i, val)

    _, _, val = while_loop(lambda c: lax.lt(c[0], c[1]), body, (lower, upper, init_val))
    return val


def map(f: Callable, xs, *, batch_size: int | None = None):
    """`f` applied to each slice of xs (a pytree of arrays) along its leading axis, results
    stacked, as `jax.lax.map`: a scan with no carry, one example at a time (unlike vmap).
    batch_size: run f vmapped over blocks of that many slices (the remainder in one last
    block), as jax.lax.map's. Raises ValueError for a batch_size that is not a positive int."""
    _check_callable("map", f=f)
    if batch_size is None:
        _, ys = scan(lambda _, x: ((), f(x)), (), xs)
        return ys
    if not isinstance(batch_size, int | np.integer) or isinstance(batch_size, bool) \
            or batch_size < 1:
        raise ValueError(f"lax.map: batch_size must be a positive int, got {batch_size!r}"
                         f"{_where()}")
    from nova.batching import vmap

    leaves, td = _leaves_of(xs, "lax.map xs")
    n = int(leaves[0].shape[0]) if leaves else 0
    full = n // batch_size * batch_size
    parts = []
    if full:
        blocks = [lax.reshape(lax.slice(x, (0,) * x.ndim, (full, *x.shape[1:])),
                              (full // batch_size, batch_size, *x.shape[1:])) for x in leaves]
        _, ys = scan(lambda _, b: ((), vmap(f)(tree_unflatten(td, b))), (), blocks)
        parts.append(tree_flatten(ys))
    if n - full:
        rest = [lax.slice(x, (full,) + (0,) * (x.ndim - 1), x.shape) for x in leaves]
        parts.append(tree_flatten(vmap(f)(tree_unflatten(td, rest))))
    if full:
        parts[0] = ([lax.reshape(y, (full, *y.shape[2:])) for y in parts[0][0]], parts[0][1])
    if len(parts) == 1:
        return tree_unflatten(parts[0][1], parts[0][0])
    joined = [lax.concatenate([a, b], 0) for a, b in zip(parts[0][0], parts[1][0], strict=True)]
    return tree_unflatten(parts[0][1], joined)
