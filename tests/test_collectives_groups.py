"""Collectives with axis_index_groups and over tuples of axis names (nova/collectives.py,
nova/collectives_groups.py) against JAX.

jax.vmap refuses both (NotImplementedError, or an assertion, for all_gather, psum_scatter and
ppermute over a tuple), so the references come from jax.pmap (one axis of 8 members) and
jax.shard_map (a 2 x 4 mesh named ("i", "j")) on 8 CPU devices. JAX fixes its device count
when it starts, so they are computed once, in a subprocess that imports this file
(`_write_jax_references`), and compared with nova.vmap, nova.jit, nova.pmap and nova.grad in
both orders. all_to_all over a tuple, which jax.vmap takes, is also compared in process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jjnp
import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova.collectives_groups import GroupSizeError

RNG = np.random.default_rng(7)
X8 = RNG.standard_normal((8, 4)).astype(np.float32)  # 8 members of shape (4,)
XM = RNG.standard_normal((2, 4, 8)).astype(np.float32)  # a 2 x 4 mesh, members of shape (8,)

G = ((0, 2, 4, 6), (3, 1, 5, 7))
Q = ((7, 2, 4, 6), (1, 3, 5, 0))
PAIRS = ((1, 0), (2, 3), (5, 4), (6, 7))
FG = ((0, 5), (1, 4), (2, 7), (3, 6))  # groups of the flattened mesh
FG4 = ((0, 3, 5, 6), (7, 1, 2, 4))
PERM = ((0, 5), (5, 3), (3, 0), (7, 1), (2, 6))
IJ, JI = ("i", "j"), ("j", "i")


def _np(lib):
    return jnp if lib is nova else jjnp


# (name, f(lib) -> the function of one member v of shape (4,)) over one axis "i" of size 8
GROUPED = [
    ("psum", lambda lib: lambda v: lib.lax.psum(v, "i", axis_index_groups=PAIRS)),
    ("pmean", lambda lib: lambda v: lib.lax.pmean(v * v, "i", axis_index_groups=G)),
    ("pmax", lambda lib: lambda v: lib.lax.pmax(v, "i", axis_index_groups=Q) - v),
    ("pmin", lambda lib: lambda v: lib.lax.pmin(v, "i", axis_index_groups=G)),
    ("psum_of_one", lambda lib: lambda v: lib.lax.psum(1, "i", axis_index_groups=G) * v),
    ("psum_of_bools", lambda lib: lambda v: lib.lax.psum(v > 0, "i", axis_index_groups=Q)),
    ("psum_constant", lambda lib: lambda v: lib.lax.psum(
        _np(lib).arange(3.0), "i", axis_index_groups=PAIRS) + v[0]),
    ("all_gather", lambda lib: lambda v: lib.lax.all_gather(v, "i", axis_index_groups=G)),
    ("all_gather_axis1", lambda lib: lambda v: lib.lax.all_gather(
        _np(lib).outer(v, _np(lib).arange(3.0)), "i", axis_index_groups=G, axis=1)),
    ("all_gather_tiled", lambda lib: lambda v: lib.lax.all_gather(
        v, "i", axis_index_groups=Q, tiled=True)),
    ("all_gather_constant", lambda lib: lambda v: lib.lax.all_gather(
        _np(lib).arange(2.0), "i", axis_index_groups=PAIRS) * v[0]),
    ("psum_scatter", lambda lib: lambda v: lib.lax.psum_scatter(v, "i", axis_index_groups=G)),
    ("psum_scatter_tiled", lambda lib: lambda v: lib.lax.psum_scatter(
        _np(lib).outer(_np(lib).arange(3.0), _np(lib).concatenate([v, v * v])), "i",
        scatter_dimension=1, axis_index_groups=PAIRS, tiled=True)),
    ("all_to_all", lambda lib: lambda v: lib.lax.all_to_all(v, "i", 0, 0, axis_index_groups=G)),
    ("all_to_all_axes", lambda lib: lambda v: lib.lax.all_to_all(
        _np(lib).outer(v, _np(lib).arange(3.0)), "i", 0, 1, axis_index_groups=Q)),
    ("all_to_all_tiled", lambda lib: lambda v: lib.lax.all_to_all(
        _np(lib).outer(_np(lib).concatenate([v, -v]), _np(lib).arange(1.0, 3.0)), "i", 0, 1,
        axis_index_groups=PAIRS, tiled=True)),
    ("composed", lambda lib: lambda v: lib.lax.all_gather(
        lib.lax.psum(v, "i", axis_index_groups=PAIRS), "i", axis_index_groups=G)),
]

# (name, f(lib) -> the function of one member v of shape (8,)) over the mesh i (2) x j (4)
MESH = [
    ("all_gather_ij", lambda lib: lambda v: lib.lax.all_gather(v, IJ)),
    ("all_gather_ji_axis1", lambda lib: lambda v: lib.lax.all_gather(v, JI, axis=1)),
    ("all_gather_ji_tiled", lambda lib: lambda v: lib.lax.all_gather(v, JI, tiled=True)),
    ("psum_scatter_ij", lambda lib: lambda v: lib.lax.psum_scatter(v, IJ)),
    ("psum_scatter_ji_tiled", lambda lib: lambda v: lib.lax.psum_scatter(
        _np(lib).concatenate([v, v * v]), JI, tiled=True)),
    ("ppermute_ij", lambda lib: lambda v: lib.lax.ppermute(v, IJ, PERM)),
    # shard_map's ppermute numbers the members in mesh order (i major) whatever the tuple's
    # order, unlike its all_gather and axis_index: ("j", "i") here is the same as ("i", "j")
    ("ppermute_ji", lambda lib: lambda v: lib.lax.ppermute(v, JI, PERM)),
    ("pshuffle_ji", lambda lib: lambda v: lib.lax.pshuffle(v, JI, [3, 0, 1, 2, 7, 4, 5, 6])),
    ("all_to_all_ij", lambda lib: lambda v: lib.lax.all_to_all(v, IJ, 0, 0)),
    ("all_to_all_ji_axes", lambda lib: lambda v: lib.lax.all_to_all(
        _np(lib).outer(v, _np(lib).arange(3.0)), JI, 0, 1)),
    ("all_to_all_ij_tiled", lambda lib: lambda v: lib.lax.all_to_all(
        _np(lib).outer(_np(lib).arange(1.0, 3.0), _np(lib).concatenate([v, -v])), IJ, 1, 0,
        tiled=True)),
    ("psum_groups_ij", lambda lib: lambda v: lib.lax.psum(v, IJ, axis_index_groups=FG)),
    ("pmean_groups_ji", lambda lib: lambda v: lib.lax.pmean(v, JI, axis_index_groups=FG4)),
    ("pmax_groups_ji", lambda lib: lambda v: lib.lax.pmax(v, JI, axis_index_groups=FG)),
    ("all_gather_groups_ji", lambda lib: lambda v: lib.lax.all_gather(
        v, JI, axis_index_groups=FG4)),
    ("psum_scatter_groups_ij", lambda lib: lambda v: lib.lax.psum_scatter(
        v[:4], IJ, axis_index_groups=FG4)),
    ("all_to_all_groups_ji", lambda lib: lambda v: lib.lax.all_to_all(
        _np(lib).outer(v[:2], v[2:5]), JI, 0, 1, axis_index_groups=FG)),
    ("inner_axis_groups", lambda lib: lambda v: lib.lax.psum(
        v, "j", axis_index_groups=((0, 3), (1, 2)))),
    ("outer_axis_groups", lambda lib: lambda v: lib.lax.all_gather(
        v[:3], "i", axis_index_groups=((1, 0),))),
]

# differentiated: each member's loss sum(sin(f(v)))
# (JAX's transpose of an untiled all_to_all with split_axis != concat_axis fails in jax.pmap:
# "Expected cotangent type float32[4,3,1] but got float32[4,1,3]")
GRADS = ["psum", "pmean", "all_gather", "all_gather_tiled", "psum_scatter", "all_to_all",
         "all_to_all_tiled", "composed"]
MESH_GRADS = ["all_gather_ji_axis1", "psum_scatter_ij", "ppermute_ji", "all_to_all_ij",
              "all_to_all_ij_tiled", "psum_groups_ij", "all_gather_groups_ji"]


def _loss(lib, f):
    return lambda v: _np(lib).sum(_np(lib).sin(f(lib)(v)))


# --- the JAX references (run in a subprocess with 8 CPU devices) ---------------------------------


def _write_jax_references(path):
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((2, 4), IJ, devices=jax.devices()[:8],
                         axis_types=(jax.sharding.AxisType.Auto,) * 2)

    def smap(g, loss=False):
        body = jax.shard_map(lambda v: g(v[0, 0])[None, None], mesh=mesh, in_specs=P(*IJ),
                             out_specs=P(*IJ), check_vma=False)
        run = jax.grad(lambda x: jjnp.sum(body(x))) if loss else body
        return lambda x: jax.jit(run)(jax.device_put(x, NamedSharding(mesh, P(*IJ))))

    out = {}
    for name, f in GROUPED:
        out[f"one/{name}"] = jax.pmap(f(jax), axis_name="i")(X8)
    for name, f in MESH:
        out[f"mesh/{name}"] = smap(f(jax))(XM)
    cases = dict(GROUPED)
    for name in GRADS:
        loss = _loss(jax, cases[name])
        out[f"grad_in/{name}"] = jax.pmap(jax.grad(loss), axis_name="i")(X8)
        out[f"grad_out/{name}"] = jax.grad(
            lambda x, loss=loss: jjnp.sum(jax.pmap(loss, axis_name="i")(x)))(X8)
    cases = dict(MESH)
    for name in MESH_GRADS:
        loss = _loss(jax, cases[name])
        out[f"mesh_grad_in/{name}"] = smap(jax.grad(loss))(XM)
        out[f"mesh_grad_out/{name}"] = smap(loss, True)(XM)
    np.savez(path, **{k: np.asarray(v) for k, v in out.items()})


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    path = tmp_path_factory.mktemp("jax_refs") / "refs.npz"
    here = Path(__file__).resolve().parent
    code = (f"import sys; sys.path.insert(0, {str(here)!r}); import {Path(__file__).stem} as t; "
            f"t._write_jax_references({str(path)!r})")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-4000:]
    with np.load(path) as refs:
        return dict(refs)


def _same(got, want, tol=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _nest(f):
    return nova.vmap(nova.vmap(f, axis_name="j"), axis_name="i")


@pytest.mark.parametrize("name,f", GROUPED, ids=[c[0] for c in GROUPED])
@pytest.mark.parametrize("where", ["eager", "jit", "jit_inside", "pmap"])
def test_groups_match_jax_pmap(ref, name, f, where):
    g = f(nova)
    run = {"eager": lambda: nova.vmap(g, axis_name="i")(X8),
           "jit": lambda: nova.jit(nova.vmap(g, axis_name="i"))(X8),
           "jit_inside": lambda: nova.vmap(nova.jit(g), axis_name="i")(X8),
           "pmap": lambda: nova.pmap(g, axis_name="i")(X8)}[where]
    _same(run(), ref[f"one/{name}"])


@pytest.mark.parametrize("name,f", MESH, ids=[c[0] for c in MESH])
@pytest.mark.parametrize("where", ["eager", "jit", "jit_inside"])
def test_axis_tuples_match_jax_shard_map(ref, name, f, where):
    g = f(nova)
    run = {"eager": lambda: _nest(g)(XM), "jit": lambda: nova.jit(_nest(g))(XM),
           "jit_inside": lambda: _nest(nova.jit(g))(XM)}[where]
    _same(run(), ref[f"mesh/{name}"])


@pytest.mark.parametrize("name", GRADS)
def test_grouped_gradients_match_jax_in_both_orders(ref, name):
    loss = _loss(nova, dict(GROUPED)[name])
    _same(nova.vmap(nova.grad(loss), axis_name="i")(X8), ref[f"grad_in/{name}"])
    total = nova.grad(lambda x: jnp.sum(nova.vmap(loss, axis_name="i")(x)))
    _same(total(X8), ref[f"grad_out/{name}"])
    _same(nova.jit(total)(X8), ref[f"grad_out/{name}"])


@pytest.mark.parametrize("name", MESH_GRADS)
def test_axis_tuple_gradients_match_jax_in_both_orders(ref, name):
    loss = _loss(nova, dict(MESH)[name])
    _same(_nest(nova.grad(loss))(XM), ref[f"mesh_grad_in/{name}"])
    total = nova.grad(lambda x: jnp.sum(_nest(loss)(x)))
    _same(total(XM), ref[f"mesh_grad_out/{name}"])
    _same(nova.jit(total)(XM), ref[f"mesh_grad_out/{name}"])


A2A = [
    ("ij", lambda lib: lambda v: lib.lax.all_to_all(v, IJ, 0, 0)),
    ("ji_tiled", lambda lib: lambda v: lib.lax.all_to_all(
        _np(lib).outer(v, _np(lib).arange(1.0, 3.0)), JI, 0, 1, tiled=True)),
]


@pytest.mark.parametrize("name,f", A2A, ids=[c[0] for c in A2A])
def test_all_to_all_over_a_tuple_matches_jax_vmap(name, f):
    want = jax.vmap(jax.vmap(f(jax), axis_name="j"), axis_name="i")(XM)
    _same(_nest(f(nova))(XM), want)
    _same(nova.jit(_nest(f(nova)))(XM), want)

    def total(lib, vmap, grad):
        loss = _loss(lib, f)
        return grad(lambda x: _np(lib).sum(vmap(vmap(loss, axis_name="j"), axis_name="i")(x)))

    _same(total(nova, nova.vmap, nova.grad)(XM), total(jax, jax.vmap, jax.grad)(XM))


def test_grouped_and_tuple_collectives_leave_no_collective_in_the_program():
    from nova.collectives import COLLECTIVES

    for f in (lambda v: nova.lax.psum_scatter(v[:4], IJ, axis_index_groups=FG4),
              lambda v: nova.lax.ppermute(v, JI, PERM) * nova.lax.pmean(v, "j")):
        prog = nova.make_program(_nest(f))(XM)
        assert not [e for e in prog.eqns if e.prim.name in COLLECTIVES]


def test_a_group_of_the_whole_axis_is_the_plain_collective():
    whole = (tuple(range(8)),)
    for f in (lambda v, **k: nova.lax.psum(v, "i", **k),
              lambda v, **k: nova.lax.all_to_all(v * jnp.ones((8, 1)), "i", 0, 1, **k)):
        _same(nova.vmap(lambda v, f=f: f(v, axis_index_groups=whole), axis_name="i")(X8),
              nova.vmap(f, axis_name="i")(X8))


def test_pmax_with_groups_has_no_derivative_as_in_jax():
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'pmax'"):
        nova.vmap(nova.grad(lambda v: nova.lax.pmax(v, "i", axis_index_groups=G).sum()),
                  axis_name="i")(X8)


def _bad(f, x=X8, nest=False):
    return (_nest(f) if nest else nova.vmap(f, axis_name="i"))(x)


def test_bad_groups_raise_errors_that_name_them():
    def psum(groups):
        return lambda v: nova.lax.psum(v, "i", axis_index_groups=groups)

    with pytest.raises(ValueError, match=r"psum: axis_index_groups \(\(0, 1, 2, 3\), "
                                         r"\(3, 4, 5, 6\)\) repeat the indices \[3\]"):
        _bad(psum([[0, 1, 2, 3], [3, 4, 5, 6]]))
    with pytest.raises(ValueError, match=r"do not cover the indices \[4, 5, 6, 7\] of an axis "
                                         r"of size 8"):
        _bad(psum([[0, 1], [2, 3]]))
    with pytest.raises(ValueError, match=r"hold the indices \[8\], out of range for an axis of "
                                         r"size 8"):
        _bad(psum([[0, 1, 2, 8], [3, 4, 5, 6]]))
    with pytest.raises(GroupSizeError, match=r"\(3, 4, 5, 6, 7\)\) have sizes \[3, 5\]") as e:
        _bad(psum([[0, 1, 2], [3, 4, 5, 6, 7]]))
    assert isinstance(e.value, ValueError) and isinstance(e.value, NotImplementedError)
    with pytest.raises(ValueError, match="must be non-empty groups"):
        _bad(psum([]))
    with pytest.raises(TypeError, match="sequence of sequences of ints, got"):
        _bad(psum([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]))
    with pytest.raises(ValueError, match=r"pmean: axis_index_groups .* repeat"):
        _bad(lambda v: nova.lax.pmean(v, "i", axis_index_groups=[[0, 0, 1, 2], [3, 4, 5, 6]]))
    with pytest.raises(ValueError, match=r"all_gather: .* do not cover the indices \[7\]"):
        _bad(lambda v: nova.lax.all_gather(v, "i", axis_index_groups=[[0, 1, 2, 3], [4, 5, 6]]))
    # over a tuple, the groups partition the flattened axis
    with pytest.raises(ValueError, match=r"do not cover the indices \[4, 5, 6, 7\] of an axis "
                                         r"of size 8"):
        _bad(lambda v: nova.lax.psum(v, IJ, axis_index_groups=[[0, 1], [2, 3]]), XM, True)


def test_shapes_must_fit_the_group_size():
    with pytest.raises(ValueError, match=r"psum_scatter: dimension 0 of the operand of shape "
                                         r"\(4,\) must be equal to the group size 2"):
        _bad(lambda v: nova.lax.psum_scatter(v, "i", axis_index_groups=PAIRS))
    with pytest.raises(ValueError, match=r"all_to_all: split axis 0 .* shape \(3,\) must be a "
                                         r"multiple of the group size 2"):
        _bad(lambda v: nova.lax.all_to_all(v[:3], "i", 0, 0, axis_index_groups=PAIRS,
                                           tiled=True))
    with pytest.raises(ValueError, match=r"psum_scatter: dimension 0 of the operand of shape "
                                         r"\(3,\) must be equal to the axis size 8"):
        _bad(lambda v: nova.lax.psum_scatter(v[:3], IJ), XM, True)


def test_bad_axis_tuples():
    with pytest.raises(ValueError, match=r"all_gather: axis_name \('i', 'i'\) repeats a name"):
        _bad(lambda v: nova.lax.all_gather(v, ("i", "i")))
    with pytest.raises(NameError, match=r"ppermute: unbound axis name: 'k'"):
        _bad(lambda v: nova.lax.ppermute(v, ("i", "k"), [(0, 1)]), XM, True)
    with pytest.raises(ValueError, match=r"ppermute: perm \(\(0, 8\),\) must pair .* "
                                         r"range\(8\)"):
        _bad(lambda v: nova.lax.ppermute(v, JI, [(0, 8)]), XM, True)
    with pytest.raises(ValueError, match=r"pshuffle: perm .* is not a permutation of range\(8\)"):
        _bad(lambda v: nova.lax.pshuffle(v, IJ, [0, 1, 2, 3]), XM, True)
