"""Program passes: each preserves values; specific rewrites happen; verification between passes."""

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova.compiler.canonicalize import canonicalize
from nova.compiler.cse import cse
from nova.compiler.dce import dce
from nova.compiler.pipeline import PASSES, run_passes
from nova.compiler.simplify import simplify
from nova.core.interpreter import run_program
from tests.helpers import assert_close


def _same_values(p, q, args):
    for a, b in zip(run_program(p, args), run_program(q, args), strict=True):
        assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_dce_removes_unused():
    def f(x):
        _ = jnp.exp(x) * 3.0
        return jnp.sin(x)
    p = nova.make_program(f)(np.ones(3, np.float32))
    q = dce(p)
    assert q.count("exp") == 0 and q.count("sin") == 1
    _same_values(p, q, [np.arange(3, dtype=np.float32)])


def test_cse_merges_duplicates_including_constants():
    def f(x):
        return jnp.exp(x) * 2.0 + jnp.exp(x) * 2.0
    p = nova.make_program(f)(np.ones(3, np.float32))
    q = dce(cse(p))
    assert p.count("exp") == 2 and q.count("exp") == 1 and q.count("mul") == 1
    _same_values(p, q, [np.arange(3, dtype=np.float32)])


def test_canonicalize_identities_and_folding():
    def f(x):
        y = jnp.reshape(jnp.reshape(x, (6,)), (3, 2))
        z = jnp.transpose(jnp.transpose(x))
        c = jnp.asarray(2.0) * jnp.asarray(3.0)
        return y, z * c, x.astype(jnp.float32)
    p = nova.make_program(f)(np.ones((2, 3), np.float32))
    q = dce(canonicalize(p))
    assert q.count("transpose") == 0 and q.count("reshape") == 1 and q.count("convert_element_type") == 0
    consts = [e.params["value"] for e in q.eqns if e.prim.name == "constant"]
    assert any(np.asarray(c).item() == 6.0 for c in consts if np.asarray(c).size == 1)
    _same_values(p, q, [np.arange(6, dtype=np.float32).reshape(2, 3)])


def test_simplify_identities_and_broadcast_reduce():
    def f(x):
        a = x * 1.0 + (-0.0) - 0.0
        b = jnp.sum(jnp.broadcast_to(x, (4, 2, 3)), axis=0)
        return a / 1.0, b
    p = nova.make_program(f)(np.ones((2, 3), np.float32))
    q = run_passes(p)
    assert q.count("reduce_sum") == 0 and q.count("add") == 0 and q.count("div") == 0
    _same_values(p, q, [np.arange(6, dtype=np.float32).reshape(2, 3)])


def test_adding_positive_zero_is_kept_for_negative_zero():
    """x + 0.0 is not x in IEEE arithmetic (-0.0 + 0.0 is +0.0): kept in user code (found by
    review: 1 / (x + 0.0) at -0.0 gave -inf under jit); integer + 0 and x - 0.0 go."""
    p = nova.make_program(lambda x, i: (1.0 / (x + 0.0), 1.0 / (0.0 + x), 1.0 / (x - 0.0),
                                        i + 0))(np.ones(2, np.float32), np.ones(2, np.int32))
    q = run_passes(p)
    assert q.count("add") == 2 and q.count("sub") == 0
    outs = run_program(q, [np.array([-0.0, 2.0], np.float32), np.array([3, 4], np.int32)])
    assert outs[0].tolist() == [np.inf, 0.5] and outs[1].tolist() == [np.inf, 0.5]
    assert outs[2].tolist() == [-np.inf, 0.5] and outs[3].tolist() == [3, 4]
    got = nova.jit(lambda x: 1.0 / (x + 0.0))(np.array([-0.0], np.float32))
    assert np.asarray(got).tolist() == [np.inf]


def test_simplify_keeps_ieee_meaning_of_user_arithmetic():
    p = nova.make_program(lambda x: x * 0.0)(np.ones(3, np.float32))
    q = run_passes(p)
    out = run_program(q, [np.array([1.0, np.inf, np.nan], np.float32)])[0]
    assert np.isnan(out[1]) and np.isnan(out[2]) and out[0] == 0


def test_reverse_mode_program_shrinks():
    def loss(w, x):
        return jnp.mean((jnp.tanh(x @ w) - 1.0) ** 2)
    args = [np.full((4, 3), 0.1, np.float32), np.ones((2, 4), np.float32)]
    p = nova.make_program(nova.value_and_grad(loss))(*args)
    q = run_passes(p)
    assert len(q.eqns) < 0.6 * len(p.eqns)
    _same_values(p, q, args)


def test_pipeline_is_a_literal_list_and_dumps(tmp_path, monkeypatch):
    # remat last: a cse after it would merge its recomputations back; the barriers go after
    # the last cse (what they kept apart stays apart)
    names = [n for n, _ in PASSES]
    assert names[-3:] == ["dce", "barriers", "remat"]
    assert names.index("barriers") > max(i for i, n in enumerate(names) if n == "cse")
    monkeypatch.setenv("NOVA_DUMP_DIR", str(tmp_path))
    p = nova.make_program(lambda x: jnp.exp(x) + 0.0)(np.ones(3, np.float32))
    run_passes(p, tag="t")
    files = sorted(f.name for f in tmp_path.iterdir())
    assert files[0] == "t.00.input.mlir" and len(files) == len(PASSES) + 1
    assert "nova.exp" in (tmp_path / files[-1]).read_text()


@pytest.mark.parametrize("seed", range(5))
def test_passes_preserve_random_programs(seed):
    rng = np.random.default_rng(seed)
    ops = [jnp.exp, jnp.tanh, lambda v: v * 2.0, lambda v: v + 0.0, lambda v: v.T.T,
           lambda v: jnp.sum(v, axis=0, keepdims=True) + v, lambda v: jnp.maximum(v, 0.0)]
    chain = [ops[i] for i in rng.integers(0, len(ops), 6)]

    def f(x):
        for op in chain:
            x = op(x) * 0.5
        return jnp.sum(x * x)
    x = rng.standard_normal((3, 3)).astype(np.float32)
    p = nova.make_program(nova.value_and_grad(f))(x)
    _same_values(p, run_passes(p), [x])


def test_splat_checks_look_at_stored_elements_only():
    """A broadcast constant (a zero-stride view) is checked without materializing it: a
    (100000, 100000) float32 broadcast would be 40 GB."""
    from nova.compiler.rewrite import distinct_part, is_splat

    huge = np.broadcast_to(np.float32(2.5), (100_000, 100_000))
    assert is_splat(huge) and distinct_part(huge).size == 1
    row = np.broadcast_to(np.array([1.0, 2.0, 3.0], np.float32), (100_000, 3))
    assert not is_splat(row) and distinct_part(row).shape == (3,)
    assert is_splat(np.full((4, 5), 7, np.int32)) and not is_splat(np.arange(3))
    assert is_splat(np.array(1.0)) and not is_splat(np.zeros((0,)))


def test_zero_clean_ups_keep_the_sign_of_zero():
    """Found by review: simplify replaced a broadcast of -0.0 by +0.0 zeros (w / -0.0 gave +inf)
    and neg of zeros by +0.0; the clean-ups keep the zero's sign (neg flips it)."""
    x = np.ones(3, np.float32)
    cases = [(lambda w: w / -0.0, -np.inf), (lambda w: w / 0.0, np.inf),
             (lambda w: w / -jnp.zeros(3, jnp.float32), -np.inf),
             (lambda w: w / jnp.reshape(jnp.zeros((1, 3), jnp.float32) * -1.0, (3,)), -np.inf)]
    for f, want in cases:
        np.testing.assert_array_equal(np.asarray(nova.jit(f)(x)), np.full(3, want, np.float32))


# --- contractions over size-1 axes are products ------------------------------------------------

_OUTER_CASES = [
    # (x shape, y shape, dimension numbers)
    ((5, 1), (1, 7), (((1,), (0,)), ((), ()))),  # column times row
    ((4, 1, 3), (4, 1, 6), (((1,), (1,)), ((0,), (0,)))),  # batched outer product (vmap's)
    ((3, 4), (3, 6), (((), ()), ((0,), (0,)))),  # no contracting axis at all
    ((1, 2, 3), (3, 1, 2), (((0,), (1,)), ((2, 1), (0, 2)))),  # batch axes out of order
    ((2, 1, 1, 3), (1, 5, 1), (((1, 2), (0, 2)), ((), ()))),  # two size-1 contracting axes
]


@pytest.mark.parametrize("xs,ys,dn", _OUTER_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_size_one_contraction_becomes_a_product(xs, ys, dn, dtype):
    from nova.compiler.fuse import fuse
    from nova.jit import ShapeDtypeStruct as S

    rng = np.random.default_rng(0)
    x = (rng.standard_normal(xs) * 3).astype(dtype)
    y = (rng.standard_normal(ys) * 3).astype(dtype)

    def f(a, b):
        return nova.lax.dot_general(a, b, dn)

    program = run_passes(nova.make_program(f)(S(xs, dtype), S(ys, dtype)))
    assert not any(e.prim.name == "dot_general" for e in program.eqns)
    assert not [k for k in fuse(program).kernels if k.kind == "contraction"]
    ref = nova.core.primitive.lookup("dot_general").impl(x, y, dimension_numbers=dn)
    got = nova.jit(f)(x, y)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_array_equal(np.asarray(got), ref)  # one product per element: exact


def test_size_one_contraction_keeps_ieee_products():
    x = np.array([[np.inf], [0.0], [np.nan], [-2.0]], np.float32)
    y = np.array([[0.0, 1.0, -np.inf]], np.float32)
    got = np.asarray(nova.jit(lambda a, b: a @ b)(x, y))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got, x * y)
