"""Complex numbers: dtypes and promotion, arithmetic and elementary functions against NumPy
(eager and under jit, where the compiler computes them as float pairs), derivatives against
JAX's convention, transforms (vmap, jvp, control flow) and the errors for what has no complex
form."""

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova.compiler.legalize_complex import has_complex, legalize_complex
from nova.core import dtypes
from nova.core.ir import parse_program
from tests.helpers import assert_close

RNG = np.random.default_rng(0)


def _z(shape, dtype=np.complex64, scale=2.0):
    return (RNG.uniform(-scale, scale, shape) + 1j * RNG.uniform(-scale, scale, shape)).astype(dtype)


Z = _z((3, 4))
W = _z((3, 4))


# --- dtypes and promotion -------------------------------------------------------------------

@pytest.mark.parametrize("args,expected", [
    ((np.float32, 1j), np.complex64),
    ((np.float64, np.complex64), np.complex128),
    ((np.float16, 1j), np.complex64),
    ((np.int32, 1j), np.complex64),
    ((np.complex64, 1.0), np.complex64),
    ((np.complex64, np.complex128), np.complex128),
    ((np.bfloat16 if hasattr(np, "bfloat16") else dtypes.bfloat16, np.complex64), np.complex64),
])
def test_promotion_matches_jax(args, expected):
    assert dtypes.result_type(*args) == np.dtype(expected)
    jax_args = [a if not isinstance(a, type) else np.dtype(a) for a in args]
    # Nova keeps float64 and complex128 (JAX only with x64), and its defaults stay 32-bit.
    wide = any(np.dtype(a).itemsize == 8 and np.dtype(a).kind == "f" or
               np.dtype(a) == np.complex128 for a in args if isinstance(a, type))
    with jax.enable_x64(wide):
        assert jjnp.result_type(*jax_args) == np.dtype(expected)


def test_array_creation_and_round_trip():
    x = jnp.array([1 + 2j, 3j])
    assert x.dtype == np.complex64 and jnp.asarray(np.complex128(1j)).dtype == np.complex128
    assert jnp.zeros(2, jnp.complex64).dtype == np.complex64
    assert jnp.ones(3, complex).dtype == np.complex64
    np.testing.assert_array_equal(np.asarray(x), np.array([1 + 2j, 3j], np.complex64))
    assert complex(jnp.array(1 + 2j)) == 1 + 2j
    assert (jnp.arange(3) * 1j).dtype == np.complex64
    assert jnp.iscomplexobj(x) and not jnp.iscomplexobj(jnp.ones(2))
    assert jnp.isdtype(np.complex64, "complex floating") and jnp.issubdtype(x.dtype,
                                                                            jnp.complexfloating)


def test_parts_and_methods():
    x = jnp.asarray(Z)
    assert_close(x.real, Z.real)
    assert_close(x.imag, Z.imag)
    assert_close(x.conj(), np.conj(Z))
    assert_close(jnp.angle(x), np.angle(Z))
    assert_close(jnp.angle(x, deg=True), np.angle(Z, deg=True), rtol=1e-5)
    assert x.real.dtype == np.float32
    assert_close(nova.lax.complex(x.real, x.imag), Z)
    np.testing.assert_array_equal(np.asarray(jnp.iscomplex(jnp.array([1 + 0j, 1j]))),
                                  [False, True])
    assert_close(x.astype(jnp.float32), Z.real)  # complex -> real takes the real part (as JAX)
    assert_close(jnp.asarray(Z.real).astype(jnp.complex64), Z.real.astype(np.complex64))


# --- arithmetic against NumPy, eager and compiled ----------------------------------------------

CASES = {
    "arith": (lambda x, y: x * y + x / y - x, None),
    "exp": (jnp.exp, np.exp), "log": (jnp.log, np.log), "sqrt": (jnp.sqrt, np.sqrt),
    "sin": (jnp.sin, np.sin), "cos": (jnp.cos, np.cos), "tan": (jnp.tan, np.tan),
    "sinh": (jnp.sinh, np.sinh), "cosh": (jnp.cosh, np.cosh), "tanh": (jnp.tanh, np.tanh),
    "expm1": (jnp.expm1, np.expm1), "log1p": (jnp.log1p, np.log1p),
    "exp2": (jnp.exp2, np.exp2), "log2": (jnp.log2, np.log2), "log10": (jnp.log10, np.log10),
    "abs": (jnp.abs, np.abs), "square": (jnp.square, np.square),
    "reciprocal": (jnp.reciprocal, np.reciprocal), "sign": (jnp.sign, np.sign),
    "power": (lambda x, y: x ** y, None), "int_power": (lambda x: x ** 3, lambda x: x ** 3),
    "negative": (jnp.negative, np.negative),
}


def _numpy_ref(name, fn, x, y):
    if name == "arith":
        return x * y + x / y - x
    if name == "power":
        return x ** y
    return fn(x)


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_elementwise_against_numpy(name, mode):
    f, ref = CASES[name]
    binary = ref is None
    fn = (lambda x, y: f(x, y)) if binary else (lambda x, y: f(x))
    if mode == "jit":
        fn = nova.jit(fn)
    got = np.asarray(fn(jnp.asarray(Z), jnp.asarray(W)))
    want = _numpy_ref(name, ref, Z.astype(np.complex128), W.astype(np.complex128))
    assert got.dtype == (np.float32 if name == "abs" else np.complex64)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())


def test_real_array_cast_to_complex_under_jit():
    # the zero imaginary part is a folded constant (a 0-d bitcast in sqrt's sign test)
    got = nova.jit(lambda x: jnp.sqrt(x.astype(jnp.complex64)))(np.array([1.0, -4.0, 0.0],
                                                                          np.float32))
    assert_close(got, np.sqrt(np.array([1.0, -4.0, 0.0], np.complex64)))


def test_complex128_precision():
    z, w = _z((5,), np.complex128), _z((5,), np.complex128)
    f = nova.jit(lambda x, y: jnp.exp(x) * jnp.sqrt(y) / (x + y) + jnp.tanh(x))
    assert_close(f(z, w), np.exp(z) * np.sqrt(w) / (z + w) + np.tanh(z), rtol=1e-12)


def test_edge_values():
    big = jnp.asarray(np.array([3e30 + 4e30j, 1e-30 + 1e-30j, 0j], np.complex64))
    # |z| without overflow of a^2 + b^2; Smith's division without overflow of c^2 + d^2.
    assert_close(jnp.abs(big), np.abs(np.array([3e30 + 4e30j, 1e-30 + 1e-30j, 0j],
                                                np.complex128)).astype(np.float32), rtol=1e-6)
    q = nova.jit(lambda a, b: a / b)(jnp.asarray(np.complex64(1 + 1j)),
                                      jnp.asarray(np.complex64(3e30 + 4e30j)))
    assert_close(q, np.complex64((1 + 1j) / (3e30 + 4e30j)), rtol=1e-5, atol=0)
    assert complex(jnp.sqrt(jnp.asarray(np.complex64(0j)))) == 0
    assert complex(jnp.sqrt(jnp.asarray(np.complex64(-4 + 0j)))) == 2j
    neg0 = jnp.asarray(np.complex64(complex(-4, -0.0)))
    assert complex(jnp.sqrt(neg0)) == -2j  # the sign of a -0.0 imaginary part, as NumPy
    assert complex(nova.jit(jnp.sqrt)(neg0)) == -2j
    t = np.asarray(jnp.tanh(jnp.asarray(np.array([100 + 1j, -100 + 2j], np.complex64))))
    assert_close(t, np.tanh(np.array([100 + 1j, -100 + 2j])).astype(np.complex64))
    inf = jnp.asarray(np.array([np.inf + 1j, np.nan + 0j, 1 + 1j], np.complex64))
    np.testing.assert_array_equal(np.asarray(jnp.isinf(inf)), [True, False, False])
    np.testing.assert_array_equal(np.asarray(jnp.isnan(inf)), [False, True, False])
    np.testing.assert_array_equal(np.asarray(jnp.isfinite(inf)), [False, False, True])
    assert float(jnp.abs(inf)[0]) == np.inf


def test_reductions_contractions_and_movement():
    x, y = jnp.asarray(Z), jnp.asarray(W)
    f = nova.jit(lambda x, y: (jnp.sum(x * y, axis=1), jnp.prod(x, axis=0), x @ y.T,
                               jnp.cumsum(y, axis=1), jnp.concatenate([x, y])[::2, 1:],
                               jnp.where(jnp.abs(x) > 1.5, x, y), x.T.reshape(2, 6),
                               jnp.pad(x, 1)))
    got = f(x, y)
    want = (np.sum(Z * W, axis=1), np.prod(Z, axis=0), Z @ W.T, np.cumsum(W, axis=1),
            np.concatenate([Z, W])[::2, 1:], np.where(np.abs(Z) > 1.5, Z, W),
            Z.T.reshape(2, 6), np.pad(Z, 1))
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, rtol=1e-5, atol=1e-5)
    assert_close(x[jnp.array([2, 0])], Z[[2, 0]])
    assert_close(x.at[1, 2].add(1j), Z + np.where(np.arange(12).reshape(3, 4) == 6, 1j, 0))


def test_real_times_complex_uses_two_matmuls():
    a = RNG.standard_normal((5, 4)).astype(np.float32)
    y = W.T.copy()
    traced = nova.jit(lambda a, y: a @ y).trace(a, y).program
    assert has_complex(traced)
    lowered = legalize_complex(traced)
    dots = [e for e in lowered.eqns if e.prim.name == "dot_general"]
    assert len(dots) == 2  # the real operand has no imaginary part: no product with zeros
    assert all(not dtypes.is_complex(o.type.dtype) for e in dots for o in e.outputs)
    assert_close(nova.jit(lambda a, y: a @ y)(a, y), a @ y, rtol=1e-5, atol=1e-5)


def test_program_text_round_trip_with_complex_constants():
    p = nova.jit(lambda x: x * (1 + 2j) + jnp.array([1j, 2, 3j, 4])).trace(Z).program
    text = p.as_text()
    assert "complex<f32>" in text
    again = parse_program(text)
    assert again.structural_hash() == p.structural_hash()


# --- derivatives: JAX's convention ------------------------------------------------------------

GRAD_CASES = {
    "abs2": (lambda m: lambda x: (m.abs(x) ** 2).sum()),
    "abs": (lambda m: lambda x: m.abs(x).sum()),
    "real_sq": (lambda m: lambda x: m.real(x * x).sum()),
    "imag_exp": (lambda m: lambda x: m.imag(m.exp(x)).sum()),
    "log_conj": (lambda m: lambda x: m.real(m.log(x) * m.conj(x)).sum()),
    "angle": (lambda m: lambda x: m.angle(x).sum()),
    "matmul": (lambda m: lambda x: m.abs(x @ x.T).sum()),
    "sqrt_div": (lambda m: lambda x: m.real(m.sqrt(x) / (x + 2)).sum()),
    "trig": (lambda m: lambda x: m.abs(m.sin(x) * m.tanh(x) + m.cosh(x)).sum()),
    "prod": (lambda m: lambda x: m.real(m.prod(x * 0.5, axis=0)).sum()),
}


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_grad_matches_jax(name, jit):
    g = nova.grad(GRAD_CASES[name](jnp))
    g = nova.jit(g) if jit else g
    got = np.asarray(g(Z))
    want = np.asarray(jax.grad(GRAD_CASES[name](jjnp))(Z))
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_holomorphic_grad_jvp_and_vjp():
    z = Z[0]
    f = lambda m: lambda x: (x ** 3 + m.sin(x) * x)[1]  # noqa: E731
    got = nova.grad(f(jnp), holomorphic=True)(z)
    assert_close(got, jax.grad(f(jjnp), holomorphic=True)(z), rtol=1e-5, atol=1e-5)
    y, t = nova.jvp(lambda x: x * jnp.exp(x), (z,), (W[0],))
    assert_close(t, np.asarray(jax.jvp(lambda x: x * jjnp.exp(x), (z,), (W[0],))[1]),
                 rtol=1e-5, atol=1e-5)
    _, pull = nova.vjp(lambda x: jnp.conj(x) * x[0], z)
    _, jpull = jax.vjp(lambda x: jjnp.conj(x) * x[0], z)
    assert_close(pull(W[0])[0], jpull(W[0])[0], rtol=1e-5, atol=1e-5)


def test_real_input_through_complex_values():
    r = RNG.uniform(-2, 2, (5,)).astype(np.float32)
    f = lambda m: lambda x: m.abs(m.exp(1j * x) * (x + 2j)).sum()  # noqa: E731
    got = nova.grad(f(jnp))(r)
    assert got.dtype == np.float32
    assert_close(got, jax.grad(f(jjnp))(r), rtol=1e-5, atol=1e-5)


def test_grad_errors():
    with pytest.raises(TypeError, match="real-valued output.*holomorphic=True"):
        nova.grad(lambda x: (x * x).sum())(Z)
    with pytest.raises(TypeError, match="holomorphic=True requires complex inputs"):
        nova.grad(lambda x: (x * 1j).sum(), holomorphic=True)(Z.real.copy())
    with pytest.raises(TypeError, match="holomorphic=True requires a complex output"):
        nova.grad(lambda x: jnp.abs(x).sum(), holomorphic=True)(Z)


# --- transforms and control flow --------------------------------------------------------------

def test_vmap_and_control_flow():
    x = jnp.asarray(Z)
    assert_close(nova.vmap(lambda r: r * jnp.conj(r[0]))(x), Z * np.conj(Z[:, :1]), rtol=1e-5)
    loop = lambda m, lax: lambda v: lax.fori_loop(0, 3, lambda i, c: c * v + 1j, v)  # noqa: E731
    want = Z.copy()
    for _ in range(3):
        want = want * Z + 1j
    assert_close(nova.jit(loop(jnp, nova.lax))(x), want, rtol=1e-5, atol=1e-4)
    g = nova.grad(lambda v: jnp.abs(loop(jnp, nova.lax)(v)).sum())(Z[0])
    jg = jax.grad(lambda v: jjnp.abs(loop(jjnp, jax.lax)(v)).sum())(Z[0])
    np.testing.assert_allclose(np.asarray(g), np.asarray(jg), rtol=1e-4)

    def step(c, xi):
        return c + xi * 1j, c * xi

    carry, ys = nova.jit(lambda v: nova.lax.scan(step, jnp.zeros((), jnp.complex64), v))(Z[0])
    jc, jys = jax.lax.scan(step, jjnp.zeros((), jjnp.complex64), Z[0])
    assert_close(carry, jc, rtol=1e-5)
    assert_close(ys, jys, rtol=1e-5, atol=1e-5)
    assert_close(nova.lax.cond(True, lambda v: v * 1j, lambda v: v, x), Z * 1j)


@pytest.mark.parametrize("jit", [False, True])
def test_lexicographic_order_matches_jax(jit):
    # ties in the real part decide by the imaginary part
    a = np.array([1 + 2j, 1 + 1j, 5j, -2 + 0j, 3 - 1j, 3 + 0j], np.complex64)
    b = np.array([1 + 1j, 2 + 0j, 5j, -2 - 1j, 3 + 0j, 3 - 1j], np.complex64)
    wrap = nova.jit if jit else (lambda f: f)
    for name in ("maximum", "minimum", "less", "less_equal", "greater", "greater_equal"):
        got = wrap(getattr(jnp, name))(a, b)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(getattr(jjnp, name)(a, b)))
    m = np.stack([a, b, a[::-1]])
    for name in ("max", "min"):
        for axis in (None, 0, 1):
            got = wrap(lambda v, name=name, axis=axis: getattr(jnp, name)(v, axis=axis))(m)
            np.testing.assert_array_equal(np.asarray(got),
                                          np.asarray(getattr(jjnp, name)(m, axis=axis)))


def test_no_complex_form_raises():
    x = jnp.asarray(Z)
    with pytest.raises(TypeError, match="not defined for complex"):
        nova.lax.rem(x, x)
    with pytest.raises(TypeError, match="floating-point operand"):
        nova.lax.erf(x)
    with pytest.raises(TypeError, match="complex_p needs two float32 or two float64"):
        nova.lax.complex(x, x)
    with pytest.raises(NotImplementedError, match="sort of complex values"):
        nova.jit(lambda v: nova.lax.sort(v))(x)


def test_optim_tree_utils_of_complex_leaves_match_optax():
    import optax

    import nova.optim as optim

    tree = {"a": Z, "b": Z.real.copy()}
    tu = optim.tree_utils
    assert_close(tu.tree_norm(tree), optax.tree_utils.tree_norm(tree), rtol=1e-6)
    assert_close(tu.tree_norm(tree, squared=True),
                 optax.tree_utils.tree_norm(tree, squared=True), rtol=1e-6)
    for ours, theirs in ((tu.tree_real, optax.tree_utils.tree_real),
                         (tu.tree_conj, optax.tree_utils.tree_conj)):
        got, want = ours(tree), theirs(tree)
        for k in tree:
            assert np.asarray(got[k]).dtype == np.asarray(want[k]).dtype
            assert_close(got[k], want[k])


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("boundary", ["fill", "wrap", "symm"])
def test_convolve2d_and_correlate2d_of_complex(mode, boundary):
    import scipy.signal

    import nova.scipy.signal as nss

    a, v = Z[:, :4].copy(), W[:2, :3].copy()
    for ours, theirs in ((nss.convolve2d, scipy.signal.convolve2d),
                         (nss.correlate2d, scipy.signal.correlate2d)):
        got = ours(a, v, mode, boundary)
        assert got.dtype == np.complex64
        assert_close(got, theirs(a, v, mode, boundary), rtol=1e-5, atol=1e-5)
