"""nova.numpy ranges (arange, linspace, eye, identity, tri, tril, triu) and contractions (vdot,
inner, outer, tensordot, einsum) against NumPy over sweeps of arguments, their gradients against
finite differences, under jit, and their error messages."""

import itertools

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova.core.errors import ConcretizationTypeError, ShapeError
from tests.helpers import assert_close, check_grads

RNG = np.random.default_rng(0)


def _r(*shape):
    return RNG.standard_normal(shape)


def _same_dtype_and_values(got, want, rtol=1e-6, atol=1e-6):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    if np.asarray(want).dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# --- arange -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [(5,), (0,), (-3,), (2, 9), (9, 2), (2, 9, 3), (9, 2, -2), (-5, 5, 4), (10, 0, -1), (1, 2, 5)],
)
def test_arange_ints(args):
    got = jnp.arange(*args)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.arange(*args))


@pytest.mark.parametrize(
    "args", [(0.0, 1.0, 0.1), (2.5,), (-1.0, 1.0, 0.25), (1, 2, 0.3), (3.0, -2.0, -0.7), (0.5, 4)]
)
def test_arange_floats(args):
    got = jnp.arange(*args)
    assert got.dtype == np.float32
    want = np.arange(*args)
    _same_dtype_and_values(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8", "float16"])
def test_arange_dtype(dtype):
    got = jnp.arange(1, 11, 2, dtype=dtype)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.arange(1, 11, 2, dtype=dtype))
    got = jnp.arange(0.5, 6.0, 1.5, dtype=dtype)
    np.testing.assert_array_equal(got, np.arange(0.5, 6.0, 1.5).astype(dtype))


def test_arange_errors():
    with pytest.raises(ValueError, match="step must not be zero"):
        jnp.arange(0, 5, 0)
    with pytest.raises(ConcretizationTypeError):
        nova.jit(lambda n: jnp.arange(n))(3)
    with pytest.raises(TypeError, match="stop must be a number.*test_ranges"):
        jnp.arange(0, "5")


# --- linspace -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "start,stop,num,endpoint",
    list(itertools.product([0.0, -2.5, 3], [1.0, 10, -7.25], [0, 1, 2, 5, 50], [True, False])),
)
def test_linspace_sweep(start, stop, num, endpoint):
    got, step = jnp.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    want, wstep = np.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    assert got.dtype == np.float32
    _same_dtype_and_values(got, want, rtol=1e-6, atol=2e-6)
    np.testing.assert_allclose(np.asarray(step), wstep, rtol=1e-6, equal_nan=True)
    if endpoint and num > 1:
        assert np.asarray(got)[-1] == np.float32(stop)


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
def test_linspace_array_endpoints_and_axis(axis):
    start = np.array([0.0, 1.0, -3.0])
    stop = np.array([[1.0], [5.0]])
    got = jnp.linspace(start, stop, 7, axis=axis)
    want = np.linspace(start, stop, 7, axis=axis)
    assert got.dtype == np.float64  # float64 inputs keep float64, as NumPy
    _same_dtype_and_values(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["int32", "float64", "float16", "uint8"])
def test_linspace_dtype(dtype):
    got = jnp.linspace(0, 9, 7, dtype=dtype)
    assert got.dtype == np.dtype(dtype)
    want = np.linspace(0, 9, 7, dtype=dtype)
    np.testing.assert_allclose(np.asarray(got, np.float64), want.astype(np.float64), rtol=1e-3)
    if dtype in ("int32", "uint8"):
        np.testing.assert_array_equal(got, want)  # integer dtypes round down, as NumPy


def test_linspace_traced_endpoints_and_gradient():
    f = nova.jit(lambda a, b: jnp.linspace(a, b, 5))
    np.testing.assert_allclose(f(np.float32(1), np.float32(3)), np.linspace(1, 3, 5), rtol=1e-6)
    check_grads(lambda a, b: jnp.linspace(a, b, 6) ** 2, [np.array(0.3), np.array(2.0)])
    check_grads(lambda a, b: jnp.linspace(a, b, 4, endpoint=False), [_r(3), _r(2, 1)])


def test_linspace_errors():
    with pytest.raises(ValueError, match="num must be non-negative"):
        jnp.linspace(0, 1, -1)
    with pytest.raises(ShapeError, match=r"\(2,\) \(3,\)"):
        jnp.linspace(np.zeros(2), np.ones(3), 4)
    with pytest.raises(ValueError, match="axis 3 is out of bounds"):
        jnp.linspace(np.zeros(2), np.ones(2), 4, axis=3)


# --- eye, identity, tri -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n,m,k", list(itertools.product([0, 1, 3, 5], [None, 1, 4], [-6, -2, -1, 0, 1, 3, 7]))
)
def test_eye_and_tri_sweep(n, m, k):
    got = jnp.eye(n, m, k)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.eye(n, m, k, dtype=np.float32))
    np.testing.assert_array_equal(jnp.tri(n, m, k), np.tri(n, m, k, dtype=np.float32))


@pytest.mark.parametrize("dtype", ["int32", "bool", "float64", "bfloat16"])
def test_eye_identity_dtypes(dtype):
    got = jnp.eye(3, 4, 1, dtype=dtype)
    assert got.dtype == nova.core.dtypes.canonicalize(dtype)
    np.testing.assert_array_equal(np.asarray(got).astype(np.float64), np.eye(3, 4, 1))
    np.testing.assert_array_equal(
        np.asarray(jnp.identity(4, dtype=dtype)).astype(float), np.identity(4)
    )


def test_eye_under_jit_is_iota_not_a_constant():
    text = nova.jit(lambda x: x + jnp.eye(128)).trace(np.zeros((128, 128), np.float32)).as_text()
    assert "nova.iota" in text
    assert not any("nova.constant" in line and "128x128" in line for line in text.splitlines())


# --- tril, triu ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,k",
    list(
        itertools.product(
            [(4, 4), (3, 5), (5, 3), (2, 3, 4), (2, 1, 3, 3), (0, 3), (4,)], [-5, -1, 0, 1, 2, 6]
        )
    ),
)
def test_tril_triu_sweep(shape, k):
    x = _r(*shape).astype(np.float32)
    for ours, theirs in ((jnp.tril, np.tril), (jnp.triu, np.triu)):
        got = ours(x, k)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, theirs(x, k))


def test_tril_triu_ints_bools_and_errors():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(jnp.tril(x, -1), np.tril(x, -1))
    b = np.ones((3, 3), bool)
    np.testing.assert_array_equal(jnp.triu(b), np.triu(b))
    with pytest.raises(ShapeError, match="at least 1-D"):
        jnp.tril(np.float32(3))


def test_tril_triu_gradients_and_jit():
    check_grads(lambda x: jnp.tril(x, 1) * x, [_r(3, 4)])
    check_grads(lambda x: jnp.triu(x, -1).sum(axis=-1), [_r(2, 3, 3)])
    f = nova.jit(lambda x: jnp.triu(x) + jnp.tril(x, -1) * 2)
    x = _r(4, 4)
    np.testing.assert_allclose(f(x), np.triu(x) + 2 * np.tril(x, -1))


# --- vdot, inner, outer, tensordot --------------------------------------------------------------


def test_vdot_inner_outer_sweep():
    for a, b in [((3,), (3,)), ((2, 3), (3, 2)), ((4,), (2, 2)), ((), ())]:
        x, y = _r(*a), _r(*b)
        assert_close(jnp.vdot(x, y), np.vdot(x, y))
        assert_close(jnp.outer(x, y), np.outer(x, y))
    for a, b in [((3,), (3,)), ((2, 3), (4, 3)), ((2, 1, 3), (3,)), ((), (2, 3)), ((4,), ())]:
        x, y = _r(*a), _r(*b)
        assert_close(jnp.inner(x, y), np.inner(x, y))


def test_contractions_promote_dtypes():
    x = np.arange(4, dtype=np.int32)
    assert jnp.vdot(x, x).dtype == np.int32 and int(jnp.vdot(x, x)) == 14
    assert jnp.inner(x, np.ones(4, np.float32)).dtype == np.float32
    assert jnp.outer(x, 2.5).dtype == np.float32
    b = np.array([True, False, True])
    np.testing.assert_array_equal(jnp.outer(b, b), np.outer(b, b))
    np.testing.assert_array_equal(jnp.inner(b, b), np.inner(b, b))


@pytest.mark.parametrize(
    "a,b,axes",
    [
        ((3, 4, 5), (4, 5, 6), 2),
        ((3, 4), (4, 5), 1),
        ((2, 3), (4, 5), 0),
        ((3, 4, 5), (5, 3), ([0, 2], [1, 0])),
        ((2, 3, 4), (4, 3), ((1, 2), (1, 0))),
        ((3, 4), (4, 3), (1, 0)),
        ((2, 3), (2, 3), ([-1, -2], [1, 0])),
    ],
)
def test_tensordot_sweep(a, b, axes):
    x, y = _r(*a), _r(*b)
    assert_close(jnp.tensordot(x, y, axes), np.tensordot(x, y, axes), rtol=1e-10)


def test_contraction_errors_name_shapes():
    with pytest.raises(ShapeError, match=r"\(3,\) and \(2, 2\).*3 != 4"):
        jnp.vdot(np.ones(3), np.ones((2, 2)))
    with pytest.raises(ShapeError, match=r"\(2, 3\) and \(4,\).*test_ranges_contractions"):
        jnp.inner(np.ones((2, 3)), np.ones(4))
    with pytest.raises(
        ShapeError, match=r"dimension 1 of \(2, 3\) has size 3.*dimension 0 of \(4, 2\)"
    ):
        jnp.tensordot(np.ones((2, 3)), np.ones((4, 2)), 1)
    with pytest.raises(ValueError, match="axes=3"):
        jnp.tensordot(np.ones((2, 3)), np.ones((3, 2)), 3)
    with pytest.raises(ValueError, match="2 axes of a but 1 axes of b"):
        jnp.tensordot(np.ones((2, 3)), np.ones((3, 2)), ([0, 1], [0]))


def test_contraction_gradients():
    check_grads(jnp.vdot, [_r(2, 3), _r(3, 2)])
    check_grads(jnp.inner, [_r(2, 3), _r(4, 3)])
    check_grads(jnp.outer, [_r(3), _r(2, 2)])
    check_grads(lambda x, y: jnp.tensordot(x, y, ([0, 2], [1, 0])), [_r(3, 4, 5), _r(5, 3)])


# --- einsum -------------------------------------------------------------------------------------

EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ij,kj->ki", [(2, 3), (4, 3)]),
    ("ii", [(3, 3)]),
    ("ii->i", [(3, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("ba", [(2, 3)]),
    ("Ba", [(2, 3)]),
    ("i,i->", [(4,), (4,)]),
    ("i,i", [(4,), (4,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("i,j", [(2,), (3,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bhqk,bhkd->bqhd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ij...,jk...->ik...", [(2, 3, 1), (3, 4, 5)]),
    ("i...,i->...", [(3, 2), (3,)]),
    ("...", [(2, 3)]),
    ("...i->...", [(2, 3)]),
    ("i...i", [(3, 2, 3)]),
    ("iij->ji", [(2, 2, 3)]),
    ("iji->j", [(3, 2, 3)]),
    ("iii->i", [(3, 3, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("ijk,ikl,lm->jm", [(2, 3, 4), (2, 4, 5), (5, 2)]),
    ("i,j,k->ijk", [(2,), (3,), (4,)]),
    ("ij,ij,ij->i", [(2, 3), (2, 3), (2, 3)]),
    ("ab,ab->", [(3, 4), (3, 4)]),
    ("abc,cd->", [(2, 3, 4), (4, 5)]),
    ("i,i->i", [(1,), (3,)]),
    ("ij,kl->ijkl", [(2, 3), (1, 2)]),
    (",i->i", [(), (3,)]),
    ("ij,jj->i", [(2, 3), (3, 3)]),
    ("ab,cd,bc->ad", [(2, 3), (4, 5), (3, 4)]),
    ("x y, y z -> x z", [(2, 3), (3, 4)]),
    ("ij,jk->ik", [(0, 3), (3, 4)]),
    ("ij,jk->ik", [(2, 0), (0, 4)]),
]


@pytest.mark.parametrize("spec,shapes", EINSUM_CASES)
def test_einsum_matches_numpy(spec, shapes):
    ops = [_r(*s) for s in shapes]
    got = jnp.einsum(spec, *ops)
    want = np.einsum(spec, *ops)
    assert got.dtype == np.float64
    assert_close(got, want, rtol=1e-10)


@pytest.mark.parametrize("spec,shapes", [c for c in EINSUM_CASES if 0 not in sum(c[1], ())])
def test_einsum_gradients(spec, shapes):
    check_grads(lambda *xs: jnp.einsum(spec, *xs), [_r(*s) for s in shapes])


def test_einsum_two_operands_is_one_dot_general():
    def f(q, k):
        return jnp.einsum("bhqd,bhkd->bhqk", q, k)

    text = nova.jit(f).trace(_r(2, 3, 4, 5), _r(2, 3, 6, 5)).as_text()
    assert text.count("nova.dot_general") == 1 and "nova.transpose" not in text
    three = nova.jit(lambda a, b, c: jnp.einsum("ij,jk,kl->il", a, b, c))
    assert three.trace(_r(2, 30), _r(30, 40), _r(40, 5)).as_text().count("nova.dot_general") == 2


def test_einsum_greedy_order_contracts_the_small_pair_first():
    # (1000 x 2)(2 x 1000)(1000 x 3): contracting the last two first never builds 1000 x 1000.
    a, b, c = _r(100, 2), _r(2, 100), _r(100, 3)
    text = nova.jit(lambda a, b, c: jnp.einsum("ij,jk,kl->il", a, b, c)).trace(a, b, c).as_text()
    assert "tensor<100x100xf64>" not in text
    assert_close(jnp.einsum("ij,jk,kl->il", a, b, c), a @ b @ c, rtol=1e-10)


def test_einsum_dtypes_and_forms():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    got = jnp.einsum("ij,kj->ik", x, x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.einsum("ij,kj->ik", x, x))
    assert jnp.einsum("ij,j->i", x, np.ones(3, np.float32)).dtype == np.float32
    a, b = RNG.random((3, 4)) > 0.5, RNG.random((4, 2)) > 0.5
    np.testing.assert_array_equal(jnp.einsum("ij,jk->ik", a, b), np.einsum("ij,jk->ik", a, b))
    p, q = _r(2, 3), _r(3, 4)
    assert_close(jnp.einsum(p, [0, 1], q, [1, 2], [0, 2]), np.einsum(p, [0, 1], q, [1, 2], [0, 2]))
    assert_close(jnp.einsum(p, [Ellipsis, 1], q, [1, 2]), np.einsum(p, [Ellipsis, 1], q, [1, 2]))
    f = nova.jit(lambda p, q: jnp.einsum("ij,jk->ki", p, q))
    assert_close(f(p, q), np.einsum("ij,jk->ki", p, q))


@pytest.mark.parametrize(
    "spec,shapes,exc,pattern",
    [
        ("ij,jk->ik", [(2, 3), (4, 5)], ShapeError, r"'j' has sizes 3 and 4.*\(2, 3\), \(4, 5\)"),
        ("ij,jk->ik", [(2, 3)], ValueError, "names 2 operands, got 1"),
        ("ijk", [(2, 3)], ShapeError, r"shape \(2, 3\) \(2 dimensions\).*'ijk' name 3"),
        ("ij->ik", [(2, 3)], ValueError, "'k' does not occur"),
        ("ij->ii", [(2, 3)], ValueError, "'i' repeated"),
        ("i2->i", [(2, 3)], ValueError, "invalid subscript '2'"),
        ("ii->i", [(2, 3)], ShapeError, "'i' has sizes 2 and 3"),
        ("ii->i", [(1, 3)], ShapeError, "different sizes 1 and 3"),
        ("...i->i", [(2, 3)], ValueError, "no '...'"),
        ("...ij,...jk", [(2, 1, 3), (5, 3, 4)], ShapeError, "'...' has sizes 2 and 5"),
        ("i->j->k", [(2,)], ValueError, "more than one '->'"),
    ],
)
def test_einsum_errors(spec, shapes, exc, pattern):
    with pytest.raises(exc, match=pattern):
        jnp.einsum(spec, *[np.ones(s) for s in shapes])
    with pytest.raises(exc, match="test_ranges_contractions.py"):
        jnp.einsum(spec, *[np.ones(s) for s in shapes])


def test_compiled_backend_matches_interpreter(tmp_path, monkeypatch):
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))

    def f(x, y, z):
        return (
            jnp.einsum("ij,jk,kl->il", x, y, z),
            jnp.einsum("ii->i", y) + jnp.einsum("ij->j", x),
            jnp.tril(x @ y, -1) + jnp.triu(x, 1) + jnp.eye(3, 4, 1),
            jnp.linspace(x[0, 0], 2.0, 5) + jnp.arange(5.0),
            jnp.outer(x[:, 0], z[:, 0]) + jnp.tensordot(x, y, 1) + jnp.inner(x, x)[:, :1],
        )

    args = [_r(3, 4).astype(np.float32), _r(4, 4).astype(np.float32), _r(4, 2).astype(np.float32)]
    want = nova.jit(f)(*args)
    nova.config.update("backend", "compiled")
    try:
        got = nova.jit(f)(*args)
    finally:
        nova.config.update("backend", "interpreter")
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, rtol=1e-5, atol=1e-5)
