"""The one helper for checking an op: forward against NumPy, derivatives against finite differences.

`check_grads(f, args)` compares nova.vjp and nova.jvp of f (a function of arrays) with central
finite differences in float64 along random directions; `check_prim(prim, args, params)` does it
for one primitive. `assert_close` compares values with dtype-aware tolerances.
"""

from __future__ import annotations

import numpy as np

import nova
from nova.core import dtypes
from nova.core.pytree import tree_flatten, tree_unflatten

RTOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-5, np.dtype(np.float16): 2e-3,
        dtypes.bfloat16: 2e-2, np.dtype(np.complex128): 1e-10, np.dtype(np.complex64): 1e-5}


def assert_close(actual, expected, rtol=None, atol=None, err_msg=""):
    a = np.asarray(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}. {err_msg}"
    if a.dtype.kind in "biu" or e.dtype.kind in "biu":
        np.testing.assert_array_equal(a, e, err_msg=err_msg)
        return
    r = rtol if rtol is not None else RTOL.get(a.dtype, 1e-5)
    at = atol if atol is not None else r
    wide = np.complex128 if "c" in (a.dtype.kind, e.dtype.kind) else np.float64
    np.testing.assert_allclose(a.astype(wide), e.astype(wide), rtol=r, atol=at,
                               err_msg=err_msg, equal_nan=True)


def _inner(a, b):
    return float(sum(np.vdot(np.asarray(x, np.float64), np.asarray(y, np.float64))
                     for x, y in zip(a, b, strict=True)))


def check_grads(f, args, *, eps=1e-6, rtol=1e-5, atol=1e-7, modes=("rev", "fwd"), seed=0):
    """Checks nova.vjp / nova.jvp of f at `args` (float64 arrays) against central differences.

    f maps arrays to an array or a pytree of arrays. Non-float arguments are held fixed.
    """
    rng = np.random.default_rng(seed)
    args = [np.asarray(a) for a in args]
    diff = [i for i, a in enumerate(args) if a.dtype.kind == "f"]
    assert diff, "check_grads needs at least one float argument"

    def fd(*xs):
        full = list(args)
        for i, x in zip(diff, xs, strict=True):
            full[i] = x
        return f(*full)

    xs = [args[i] for i in diff]
    out = fd(*xs)
    out_leaves, out_tree = tree_flatten(out)
    out_np = [np.asarray(o) for o in out_leaves]
    float_outs = [k for k, o in enumerate(out_np) if o.dtype.kind == "f"]
    vs = [np.asarray(rng.standard_normal(x.shape)) for x in xs]

    def perturbed(sign):
        o = fd(*[x + sign * eps * v for x, v in zip(xs, vs, strict=True)])
        return [np.asarray(leaf, np.float64) for leaf in tree_flatten(o)[0]]

    plus, minus = perturbed(+1), perturbed(-1)
    fd_dir = [(p - m) / (2 * eps) for p, m in zip(plus, minus, strict=True)]
    if "fwd" in modes:
        _, t_out = nova.jvp(fd, tuple(nova.numpy.asarray(x) for x in xs),
                            tuple(nova.numpy.asarray(v) for v in vs))
        t_leaves = [np.asarray(t, np.float64) for t in tree_flatten(t_out)[0]]
        for k in float_outs:
            assert_close(t_leaves[k], fd_dir[k], rtol=rtol, atol=atol,
                         err_msg=f"JVP of output {k} differs from finite differences")
    if "rev" in modes:
        cts = [np.asarray(rng.standard_normal(o.shape)).astype(o.dtype) if o.dtype.kind == "f"
               else np.zeros(o.shape, o.dtype) for o in out_np]
        _, vjp_fn = nova.vjp(fd, *[nova.numpy.asarray(x) for x in xs])
        ct_tree = tree_unflatten(out_tree, [nova.numpy.asarray(c) for c in cts])
        grads = vjp_fn(ct_tree)
        lhs = _inner([np.asarray(g) for g in grads], vs)
        rhs = _inner([cts[k] for k in float_outs], [fd_dir[k] for k in float_outs])
        assert abs(lhs - rhs) <= atol + rtol * max(abs(lhs), abs(rhs)) * 10, (
            f"VJP <g, v> = {lhs} differs from finite-difference <ct, Jv> = {rhs}"
        )


def check_prim(prim, args, params, **kw):
    """check_grads for one primitive applied eagerly to `args` with `params`."""
    def f(*xs):
        return prim.bind(*xs, **params)

    check_grads(f, args, **kw)


def loop_vector_width(cols: int, wide: bool = False, first: int | None = None) -> int:
    """The float32 vector width a CPU loop kernel over rows of `cols` elements takes on this
    host (codegen/cpu/loops.py emit_loop_kernel): the preferred width (two SIMD registers when
    `wide`, `first` when given), else one register, half or a quarter of one (at least 4
    lanes) -- the first that divides the row -- else 1 (scalar code)."""
    from nova.compiler.codegen.cpu.matmul import host_device

    native = host_device().vector_bits // 32
    widths = [first] if first else ([2 * native] if wide else [])
    widths += [w for w in (native, native // 2, native // 4) if w >= 4 and w not in widths]
    return next((w for w in widths if cols % w == 0), 1)


class Jitted:
    """module.fn(*args, **kw) run as one nova.jit program (array arguments traced, the rest
    static): far fewer compilations than running each op eagerly."""

    def __init__(self, module):
        self.module = module

    def __getattr__(self, name):
        fn = getattr(self.module, name)

        def call(*args, **kw):
            traced = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

            def inner(*arrays):
                full = list(args)
                for i, a in zip(traced, arrays, strict=True):
                    full[i] = a
                return fn(*full, **kw)

            return nova.jit(inner)(*[args[i] for i in traced])

        return call
