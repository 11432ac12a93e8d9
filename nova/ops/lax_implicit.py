"""jax.lax's implicit-function derivatives: custom_linear_solve and custom_root."""

from __future__ import annotations

from collections.abc import Callable

from nova.core import dtypes
from nova.ops.composite import _jnp


def _closure_convert(fun: Callable, example):
    """fun (a function of one pytree like `example`) as call(leaves, consts) reading only its
    arguments, and consts: the values of enclosing traces fun reads (fun is traced once, on
    abstract values, as control flow's bodies are)."""
    from nova.control_flow import _region, inline, trace_region
    from nova.core.ir import TensorType
    from nova.core.pytree import tree_flatten, tree_unflatten

    leaves, tree = tree_flatten(example)
    types = [TensorType(tuple(x.shape), x.dtype) for x in leaves]
    program, consts, out_tree = trace_region(lambda *ls: fun(tree_unflatten(tree, ls)), types)
    region = _region(program)

    def call(arg_leaves, const_vals):
        return tree_unflatten(out_tree, inline(region, list(arg_leaves) + list(const_vals)))

    return call, list(consts), out_tree


def _float_leaves(name: str, tree):
    from nova.core.pytree import tree_flatten

    jnp = _jnp()
    leaves, td = tree_flatten(tree)
    leaves = [jnp.asarray(x) for x in leaves]
    for x in leaves:
        if not dtypes.is_float(x.dtype):
            raise TypeError(f"{name}: the arrays must be floats, got dtype {x.dtype}")
    return leaves, td


def custom_linear_solve(matvec: Callable, b, solve: Callable,
                        transpose_solve: Callable | None = None, symmetric: bool = False,
                        has_aux: bool = False):
    """x = solve(matvec, b) with derivatives by implicit differentiation of A x = b
    (jax.lax.custom_linear_solve): solve is never differentiated through (it may be an
    iterative loop).

    matvec: the linear map A (a pytree of b's structure to one), differentiable, closing over
    its parameters theta. b: a pytree of float arrays. solve(matvec, b) -> x (with aux when
    has_aux). Reverse mode: b's cotangent is u = transpose_solve(vecmat, x_bar), vecmat = A^T
    (the VJP of matvec; matvec itself when symmetric, and then solve serves as
    transpose_solve), and theta's is -(d/dtheta <u, A(theta) x>). Forward mode transposes that
    rule (transpose_solve must then be written in differentiable operations). Values solve
    closes over get no derivative. Raises TypeError for non-float b or a matvec whose output
    structure differs from b's; NotImplementedError when reverse mode meets a missing
    transpose_solve.
    """
    import nova
    from nova.core.pytree import tree_unflatten
    from nova.core.trace import current_trace

    if transpose_solve is None and symmetric:
        transpose_solve = solve
    b_leaves, b_tree = _float_leaves("custom_linear_solve", b)
    b = tree_unflatten(b_tree, b_leaves)
    if current_trace() is None:  # no derivative can be asked for
        return solve(matvec, b)
    mv, mv_consts, mv_tree = _closure_convert(matvec, b)
    if mv_tree != b_tree:
        raise TypeError(f"custom_linear_solve: matvec returns the structure {mv_tree}, b has "
                        f"{b_tree}")
    sv, sv_consts, _ = _closure_convert(lambda rhs: solve(matvec, rhs), b)

    def solution(out):
        return out[0] if has_aux else out

    @nova.custom_vjp
    def linear_solve(b_leaves, mv_consts, sv_consts):
        return sv(b_leaves, sv_consts)

    def fwd(b_leaves, mv_consts, sv_consts):
        out = sv(b_leaves, sv_consts)
        return out, (solution(out), mv_consts)

    def bwd(res, g):
        from nova.core.pytree import tree_leaves

        x, mv_c = res
        if transpose_solve is None:
            raise NotImplementedError("custom_linear_solve: reverse mode needs transpose_solve "
                                      "(or symmetric=True)")

        def matvec_of(v):
            return mv(tree_leaves(v), mv_c)

        if symmetric:
            vecmat = matvec_of
        else:
            pull = nova.vjp(matvec_of, x)[1]

            def vecmat(u):
                return pull(u)[0]

        u = solution(transpose_solve(vecmat, solution(g)))
        pull_c = nova.vjp(lambda c: mv(tree_leaves(x), c), mv_c)[1]
        (c_bar,) = pull_c(u)
        return tree_leaves(u), [-c for c in c_bar], None

    linear_solve.defvjp(fwd, bwd)
    return linear_solve(b_leaves, mv_consts, sv_consts)


def custom_root(f: Callable, initial_guess, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False):
    """x = solve(f, initial_guess), a root of f, with derivatives by the implicit function
    theorem (jax.lax.custom_root): f(x(theta), theta) = 0 gives dx = -(df/dx)^-1 (df/dtheta)
    dtheta, for the parameters theta f closes over; solve is never differentiated through.

    f: a pytree -> the same structure. solve(f, guess) -> x (with aux when has_aux).
    tangent_solve(g, y) solves g(x) = y for the linear g = f linearized at the root (a scalar:
    `lambda g, y: y / g(1.0)`; vectors: a solve with `nova.jacobian(g)(y)`). Reverse mode
    transposes tangent_solve (as JAX does), so it must be linear and differentiable in y; the
    cotangent reaching theta is -(df/dtheta)^T u. initial_guess gets no derivative. Raises
    TypeError for non-float guesses or an f whose output structure differs from its input's.
    """
    import nova
    from nova.core.pytree import tree_leaves, tree_unflatten
    from nova.core.trace import current_trace

    jnp = _jnp()
    g_leaves, g_tree = _float_leaves("custom_root", initial_guess)
    guess = tree_unflatten(g_tree, g_leaves)
    if current_trace() is None:
        return solve(f, guess)
    fc, f_consts, f_tree = _closure_convert(f, guess)
    if f_tree != g_tree:
        raise TypeError(f"custom_root: f returns the structure {f_tree}, initial_guess has "
                        f"{g_tree}")
    sv, sv_consts, _ = _closure_convert(lambda g0: solve(f, g0), guess)

    def solution(out):
        return out[0] if has_aux else out

    @nova.custom_vjp
    def root(g_leaves, f_consts, sv_consts):
        return sv(g_leaves, sv_consts)

    def fwd(g_leaves, f_consts, sv_consts):
        out = sv(g_leaves, sv_consts)
        return out, (solution(out), f_consts)

    def bwd(res, ct):
        x, f_c = res
        xl = tree_leaves(x)

        def linearized(v):  # df/dx at the root, applied to v
            vl = [jnp.broadcast_to(jnp.asarray(t, p.dtype), p.shape)
                  for t, p in zip(tree_leaves(v), xl, strict=True)]
            return nova.jvp(lambda *z: fc(z, f_c), xl, vl)[1]

        pull = nova.vjp(lambda y: tangent_solve(linearized, y), x)[1]
        (u,) = pull(solution(ct))
        (c_bar,) = nova.vjp(lambda c: fc(xl, c), f_c)[1](u)
        return None, [-c for c in c_bar], None

    root.defvjp(fwd, bwd)
    return root(g_leaves, f_consts, sv_consts)
