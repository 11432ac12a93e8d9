"""`nova.checkpoint` (alias `nova.remat`): gradient checkpointing, as jax.checkpoint.

Reverse mode normally keeps every intermediate value of the forward pass that the backward
reads. A checkpointed function keeps only its inputs: its backward first recomputes the
function's forward from them, then applies its VJP (Chen et al. 2016, "Training Deep Nets with
Sublinear Memory Cost"). Memory falls from every intermediate of the function to its inputs,
for one more forward evaluation of it.

How: the function is traced once into a closed Program (control_flow.trace_region: values it
reads from an enclosing trace become explicit inputs, so their cotangents flow too), and called
through a custom_vjp whose fwd saves the inputs and whose bwd re-runs the Program on them and
pulls the cotangents back. With prevent_cse (the default) the recomputation reads its inputs
through `lax.optimization_barrier`, so under jit common-subexpression elimination cannot merge
it back into the forward (the pass pipeline removes the barrier after its last cse).

Policies (jax.checkpoint_policies) choose intermediates to keep after all: `policy(prim,
*input_types, **params)` is asked for every equation of the traced function, and the outputs of
those it accepts (float ones) become residuals of the fwd. The bwd re-runs the Program with each
kept equation replaced by its saved outputs, wrapped in a custom_vjp whose rule is that
equation's own VJP at its (recomputed) inputs -- so the derivative still reaches them, and under
jit the kept equation's recomputation is dead code that dce removes. dots_saveable keeps the
matmul outputs (the expensive part) and recomputes the cheap elementwise work around them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from nova.core import dtypes
from nova.core.pytree import tree_flatten, tree_unflatten
from nova.core.trace import current_trace

def _is_dot(prim) -> bool:
    return getattr(prim, "name", None) == "dot_general"


def _name_of(prim, params):
    return params.get("name") if getattr(prim, "name", None) == "checkpoint_name" else None


class checkpoint_policies:
    """What a checkpointed function's forward keeps for its backward, as jax.checkpoint_policies.
    A policy is called `policy(prim, *input_types, **params)` for each equation of the traced
    function (prim a nova Primitive with a `.name`, input_types with `.shape` and `.dtype`) and
    returns True to keep that equation's outputs; any such callable may be passed to
    nova.checkpoint. Names are attached with `nova.checkpoint_name(x, "name")`."""

    @staticmethod
    def nothing_saveable(*_args, **_kwargs) -> bool:
        """Keep only the inputs; recompute everything (the default)."""
        return False

    @staticmethod
    def everything_saveable(*_args, **_kwargs) -> bool:
        """Keep everything: no recomputation, as without checkpoint."""
        return True

    @staticmethod
    def dots_saveable(prim, *_types, **_params) -> bool:
        """Keep the outputs of matrix products (dot_general), recompute the rest."""
        return _is_dot(prim)

    checkpoint_dots = dots_saveable

    @staticmethod
    def dots_with_no_batch_dims_saveable(prim, *_types, **params) -> bool:
        """Keep the outputs of matrix products without batch dimensions (the weight
        projections of a Transformer, not its per-head attention scores)."""
        if not _is_dot(prim):
            return False
        (_, (lhs_batch, _)) = params["dimension_numbers"]
        return not lhs_batch

    checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable

    @staticmethod
    def save_only_these_names(*names: str):
        """A policy keeping the values named (checkpoint_name) one of `names`."""
        keep = frozenset(names)

        def policy(prim, *_types, **params):
            return _name_of(prim, params) in keep

        return policy

    @staticmethod
    def save_any_names_but_these(*names: str):
        """A policy keeping every named value except those named one of `names`."""
        drop = frozenset(names)

        def policy(prim, *_types, **params):
            n = _name_of(prim, params)
            return n is not None and n not in drop

        return policy

    @staticmethod
    def save_anything_except_these_names(*names: str):
        """A policy keeping every value except those named one of `names`."""
        drop = frozenset(names)

        def policy(prim, *_types, **params):
            return _name_of(prim, params) not in drop

        return policy

    @staticmethod
    def save_from_both_policies(policy_1, policy_2):
        """A policy keeping what either policy keeps."""
        def policy(prim, *types, **params):
            return bool(policy_1(prim, *types, **params)) or bool(
                policy_2(prim, *types, **params))

        return policy


def checkpoint(fun: Callable | None = None, *, prevent_cse: bool = True, policy=None,
               static_argnums: int | tuple = ()) -> Callable:
    """fun, differentiated by recomputing its forward in the backward instead of keeping its
    intermediates (jax.checkpoint / jax.remat). Usable as a decorator, with or without
    arguments.

    fun's arguments are arrays, scalars or pytrees of them; those at `static_argnums` are static
    Python values (hashable), passed through untraced. prevent_cse: keep the recomputation
    apart from the forward under jit (turn off only inside a scan body, where nothing can be
    merged). policy: None or checkpoint_policies.nothing_saveable (keep the inputs only),
    checkpoint_policies.everything_saveable (keep everything: fun itself), or any policy of
    checkpoint_policies (dots_saveable, save_only_these_names(...), ...) or callable of that
    signature. Outside any transform the result is fun's. Raises TypeError for a policy that is
    not callable or a traced static argument, ValueError for a static_argnums entry outside
    [-len(args), len(args)), and what fun raises.
    """
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums)
    if not callable(fun):
        raise TypeError(f"checkpoint: fun must be callable, got {type(fun).__name__}")
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be callable (see nova.checkpoint_policies), "
                        f"got {type(policy).__name__}")
    if policy is checkpoint_policies.nothing_saveable:
        policy = None
    statics = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    if policy is checkpoint_policies.everything_saveable:
        return fun

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        n = len(args)
        bad = [i for i in statics if not -n <= i < n]
        if bad:
            raise ValueError(f"checkpoint: static_argnums {statics} must lie in [-{n}, {n}) "
                             f"for a call with {n} positional argument(s); {bad[0]} does not")
        if current_trace() is None:  # no transform: nothing is kept either way
            return fun(*args, **kwargs)
        static = {i % n for i in statics}
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves, tree = tree_flatten((dyn, kwargs))
        return _checkpointed(fun, args, static, leaves, tree, prevent_cse, policy)

    return wrapped


remat = checkpoint


def _keepable(e) -> bool:
    from nova.core.trace import CUSTOM_CALLS

    return (e.prim.vjp is not None and e.prim.name not in CUSTOM_CALLS
            and any(dtypes.is_inexact(v.type.dtype) for v in e.outputs))


def _kept(program, policy) -> list:
    """The equations of `program` whose outputs the policy keeps (those with a float output and
    a VJP rule). A kept checkpoint_name keeps its operand's producer too (one value, so no
    more memory): the backward then reads the saved value wherever the named one is needed."""
    if policy is None:
        return []
    kept = [e for e in program.eqns
            if _keepable(e) and policy(e.prim, *[v.type for v in e.inputs], **e.params)]
    producer = {id(v): e for e in program.eqns for v in e.outputs}
    ids = {id(e) for e in kept}
    for e in list(kept):
        p = producer.get(id(e.inputs[0])) if e.prim.name == "checkpoint_name" else None
        if p is not None and len(p.outputs) == 1 and _keepable(p) and id(p) not in ids:
            kept.append(p)
            ids.add(id(p))
    order = {id(e): k for k, e in enumerate(program.eqns)}
    return sorted(kept, key=lambda e: order[id(e)])


def _evaluate(program, args, replace=None) -> tuple[dict, list]:
    """Binds program's equations on args in the current context (as control_flow.inline); an
    equation in `replace` (id -> function of its inputs) is computed by that function instead.
    Returns (the environment, the outputs)."""
    from nova.core.source_info import attributed_to

    env = {id(v): a for v, a in zip(program.inputs, args, strict=True)}
    for e in program.eqns:
        ins = [env[id(v)] for v in e.inputs]
        with attributed_to(e.source):
            if replace is not None and id(e) in replace:
                outs = replace[id(e)](*ins)
            else:
                outs = e.prim.bind(*ins, **e.params)
                outs = outs if e.prim.multiple_results else [outs]
        for v, o in zip(e.outputs, outs, strict=True):
            env[id(v)] = o
    return env, [env[id(v)] for v in program.outputs]


def _saved_outputs(e, saved):
    """A function of e's inputs returning `saved` (e's outputs kept by the forward) whose
    derivative is e's own: a custom_vjp applying e's VJP rule at the inputs with the saved
    outputs as `out`, so inputs the rule does not read are not recomputed (dce, under jit)."""
    from nova.custom_derivatives import custom_vjp
    from nova.numpy_impl.util import asarray

    n = len(e.inputs)

    def value(*ins_and_saved):
        return tuple(ins_and_saved[n:])

    def fwd(*ins_and_saved):
        return tuple(ins_and_saved[n:]), tuple(ins_and_saved)

    def bwd(res, cts):
        ins, outs = list(res[:n]), list(res[n:])
        if e.prim.multiple_results:
            ct = tuple(asarray(c) if c is not None else _zeros(o) for c, o in
                       zip(cts, outs, strict=True))
            cts_in = e.prim.vjp(ct, *ins, out=tuple(outs), **e.params)
        else:
            cts_in = e.prim.vjp(asarray(cts[0]) if cts[0] is not None else _zeros(outs[0]),
                                *ins, out=outs[0], **e.params)
        cts_in = [c if c is not None and dtypes.is_inexact(v.type.dtype) else None
                  for c, v in zip(cts_in, e.inputs, strict=True)]
        return tuple(cts_in) + (None,) * len(outs)

    call = custom_vjp(value)
    call.defvjp(fwd, bwd)
    return lambda *ins: list(call(*ins, *saved))


def _zeros(x):
    from nova.ops import elementwise as ew

    return ew.zeros_like(x)


def _checkpointed(fun, args, static, leaves, tree, prevent_cse, policy):
    from nova.control_flow import _asarray, _aval, _region, inline, trace_region
    from nova.core.trace import Tracer
    from nova.custom_derivatives import custom_vjp
    from nova.grad import vjp
    from nova.ops.structural import optimization_barrier

    for i in static:
        if any(isinstance(x, Tracer) for x in tree_flatten(args[i])[0]):
            raise TypeError(f"checkpoint: argument {i} is in static_argnums but holds a traced "
                            "array; pass it as a traced argument instead")
    arrays = [_asarray(x, "a checkpointed function's argument") for x in leaves]

    def flat_fun(*vals):
        dyn, kwargs = tree_unflatten(tree, list(vals))
        it = iter(dyn)
        full = [args[i] if i in static else next(it) for i in range(len(args))]
        return fun(*full, **kwargs)

    program, consts, out_tree = trace_region(flat_fun, [_aval(a) for a in arrays])
    region = _region(program)
    inputs = arrays + list(consts)
    replayed = region.replay or region.program  # what inline binds
    kept = _kept(replayed, policy)

    def run(*xs):
        return tuple(inline(region, list(xs)))

    def fwd(*xs):
        if not kept:
            return run(*xs), (xs, ())
        env, outs = _evaluate(replayed, list(xs))
        saved = tuple(tuple(env[id(v)] for v in e.outputs) for e in kept)
        return tuple(outs), (xs, saved)

    floats = [k for k, a in enumerate(inputs) if dtypes.is_inexact(a.dtype)]

    def bwd(res, cts):
        xs, saved = res
        if prevent_cse:  # the saved values too: cse would merge their uses with the forward's
            both = optimization_barrier((list(xs), [list(s) for s in saved]))
            ins, saved = both[0], [tuple(s) for s in both[1]]
        else:
            ins = list(xs)
        replace = {id(e): _saved_outputs(e, vals) for e, vals in zip(kept, saved, strict=True)}

        def of_floats(*fs):  # integer inputs have no cotangent (custom_vjp takes None)
            full = list(ins)
            for k, f in zip(floats, fs, strict=True):
                full[k] = f
            if not kept:
                return run(*full)
            return tuple(_evaluate(replayed, full, replace)[1])

        out = [None] * len(ins)
        if floats:
            _, pull = vjp(of_floats, *[ins[k] for k in floats])
            for k, g in zip(floats, pull(tuple(cts)), strict=True):
                out[k] = g
        return tuple(out)

    call = custom_vjp(run)
    call.defvjp(fwd, bwd)
    return tree_unflatten(out_tree, list(call(*inputs)))
