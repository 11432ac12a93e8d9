"""nova.numpy on complex inputs, swept against jax.numpy (dtypes and values, eager and under
nova.jit), NumPy where jax.numpy has no such function or where branch cuts and signed zeros
matter, gradients of real-valued losses against jax.grad, vmap, and the errors for what has no
complex meaning."""

import jax
import jax.numpy as jjnp
import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova.core.errors import ConcretizationTypeError
from tests.helpers import assert_close

RNG = np.random.default_rng(7)


def _z(shape, dtype=np.complex64, scale=2.0):
    return (RNG.uniform(-scale, scale, shape)
            + 1j * RNG.uniform(-scale, scale, shape)).astype(dtype)


A, B = _z((3, 4)), _z((3, 4))
M, N = _z((3, 3)), _z((3, 3))
V, U = _z(5), _z(5)
SHORT = _z(3, scale=1.0)
NAN_A = np.where(A.real > 1, np.complex64(complex(np.nan, 0)), A)
NAN_A[0, 0] = complex(0.5, np.nan)  # a NaN imaginary part counts as NaN too

# name -> (f(module, *arrays), arrays): f runs with m = jax.numpy and m = nova.numpy.
SWEEP = {
    "sum": (lambda m, a: m.sum(a, axis=0), (A,)),
    "mean": (lambda m, a: m.mean(a, axis=1), (A,)),
    "mean_all_keepdims": (lambda m, a: m.mean(a, keepdims=True), (A,)),
    "mean_real_as_complex": (lambda m, a: m.mean(m.real(a), dtype=m.complex64), (A,)),
    "var": (lambda m, a: m.var(a, axis=0), (A,)),
    "var_ddof": (lambda m, a: m.var(a, ddof=1), (A,)),
    "var_complex_dtype": (lambda m, a: m.var(a, axis=1, dtype=m.complex64), (A,)),
    "std": (lambda m, a: m.std(a, axis=1), (A,)),
    "prod": (lambda m, a: m.prod(a, axis=1), (A,)),
    "cumsum": (lambda m, a: m.cumsum(a, axis=1), (A,)),
    "cumprod": (lambda m, a: m.cumprod(a, axis=1), (A,)),
    "cumprod_axis0": (lambda m, a: m.cumprod(a, axis=0), (A,)),
    "cumprod_flat": (lambda m, a: m.cumprod(a * 0.7), (A,)),
    "cumulative_prod": (lambda m, a: m.cumulative_prod(a, axis=1), (A,)),
    "nancumprod": (lambda m, a: m.nancumprod(a, axis=1), (NAN_A,)),
    "average": (lambda m, a: m.average(a, axis=0), (A,)),
    "average_weights": (lambda m, a, b: m.average(a, axis=1, weights=m.real(b[0])), (A, B)),
    "average_complex_weights": (lambda m, a, b: m.average(a, weights=b), (A, B)),
    "dot": (lambda m, a, b: m.dot(a, b), (M, N)),
    "vdot": (lambda m, a, b: m.vdot(a, b), (V, U)),
    "vdot_2d": (lambda m, a, b: m.vdot(a, b), (A, B)),
    "vdot_real_complex": (lambda m, a, b: m.vdot(m.real(a), b), (V, U)),
    "vecdot": (lambda m, a, b: m.vecdot(a, b), (A, B)),
    "linalg_vecdot": (lambda m, a, b: m.linalg.vecdot(a, b, axis=0), (A, B)),
    "vecmat": (lambda m, a, b: m.vecmat(a[0, :3], b), (A, M)),
    "matvec": (lambda m, a, b: m.matvec(a, b[0]), (M, N)),
    "inner": (lambda m, a, b: m.inner(a, b), (A, B)),
    "outer": (lambda m, a, b: m.outer(a, b), (V, U)),
    "matmul": (lambda m, a, b: m.matmul(a, b), (M, N)),
    "einsum": (lambda m, a, b: m.einsum("ij,kj->ik", a, b), (A, B)),
    "tensordot": (lambda m, a, b: m.tensordot(a, b, axes=([1], [1])), (A, B)),
    "kron": (lambda m, a, b: m.kron(a, b), (M, N)),
    "trace": (lambda m, a: m.trace(a), (M,)),
    "diagonal": (lambda m, a: m.diagonal(a, 1), (A,)),
    "norm_vector": (lambda m, a: m.linalg.norm(a), (V,)),
    "norm_vector_1": (lambda m, a: m.linalg.norm(a, ord=1), (V,)),
    "norm_vector_inf": (lambda m, a: m.linalg.norm(a, ord=np.inf), (V,)),
    "norm_vector_-inf": (lambda m, a: m.linalg.norm(a, ord=-np.inf), (V,)),
    "norm_vector_0": (lambda m, a: m.linalg.norm(a, ord=0), (V,)),
    "norm_vector_3": (lambda m, a: m.linalg.norm(a, ord=3), (V,)),
    "norm_axis": (lambda m, a: m.linalg.norm(a, axis=1, keepdims=True), (A,)),
    "norm_matrix": (lambda m, a: m.linalg.norm(a), (A,)),
    "norm_fro": (lambda m, a: m.linalg.norm(a, "fro"), (A,)),
    "norm_matrix_1": (lambda m, a: m.linalg.norm(a, 1), (A,)),
    "norm_matrix_inf": (lambda m, a: m.linalg.norm(a, np.inf), (A,)),
    "vector_norm": (lambda m, a: m.linalg.vector_norm(a, ord=1), (A,)),
    "matrix_norm": (lambda m, a: m.linalg.matrix_norm(a), (A,)),
    "where": (lambda m, a, b: m.where(m.real(a) > 0, a, b), (A, B)),
    "where_scalar": (lambda m, a: m.where(m.real(a) > 0, a, 1j), (A,)),
    "zeros_like": (lambda m, a: m.zeros_like(a), (A,)),
    "ones_like": (lambda m, a: m.ones_like(a), (A,)),
    "ones_like_dtype": (lambda m, a: m.ones_like(m.real(a), dtype=m.complex64), (A,)),
    "full_like": (lambda m, a: m.full_like(a, 2 - 1j), (A,)),
    "full_like_dtype": (lambda m, a: m.full_like(m.real(a), 2 - 1j, dtype=m.complex64), (A,)),
    "full": (lambda m: m.full((2, 3), 1 + 2j), ()),
    "full_dtype": (lambda m: m.full((2, 3), 1.5, dtype=m.complex64), ()),
    "zeros": (lambda m: m.zeros((2,), m.complex64), ()),
    "empty": (lambda m: m.empty((2, 3), m.complex64) * 0, ()),
    "linspace": (lambda m: m.linspace(1 + 2j, 3 - 1j, 5), ()),
    "linspace_open": (lambda m: m.linspace(0, 3 - 1j, 4, endpoint=False), ()),
    "allclose": (lambda m, a: m.allclose(a, a + 1e-7j), (A,)),
    "allclose_false": (lambda m, a: m.allclose(a, a + 1e-2j), (A,)),
    "isclose": (lambda m, a, b: m.isclose(a, m.where(m.real(b) > 0, a + 1e-2j, a)), (A, B)),
    "array_equal": (lambda m, a: m.array_equal(a, a + 0j), (A,)),
    "array_equal_conj": (lambda m, a: m.array_equal(a, m.conj(a)), (A,)),
    "nansum": (lambda m, a: m.nansum(a, axis=0), (NAN_A,)),
    "nanmean": (lambda m, a: m.nanmean(a, axis=0), (NAN_A,)),
    "nanprod": (lambda m, a: m.nanprod(a, axis=1), (NAN_A,)),
    "nanvar": (lambda m, a: m.nanvar(a, axis=1), (NAN_A,)),
    "nanstd": (lambda m, a: m.nanstd(a), (NAN_A,)),
    "sort": (lambda m, a: m.sort(a), (np.round(A),)),
    "sort_axis0": (lambda m, a: m.sort(a, axis=0), (np.round(A),)),
    "argsort": (lambda m, a: m.argsort(a.ravel()), (np.round(A),)),
    "arcsin": (lambda m, a: m.arcsin(a), (A,)),
    "arccos": (lambda m, a: m.arccos(a), (A,)),
    "atan": (lambda m, a: m.atan(a), (A,)),
    "arcsinh": (lambda m, a: m.arcsinh(a), (A,)),
    "arccosh": (lambda m, a: m.arccosh(a), (A,)),
    "arctanh": (lambda m, a: m.arctanh(a), (A,)),
    "sinc": (lambda m, a: m.sinc(a * 0.5), (A,)),
    "convolve": (lambda m, a, b: m.convolve(a, b), (V, SHORT)),
    "convolve_same": (lambda m, a, b: m.convolve(a, b, mode="same"), (SHORT, V)),
    "correlate": (lambda m, a, b: m.correlate(a, b), (V, SHORT)),
    "correlate_full": (lambda m, a, b: m.correlate(a, b, mode="full"), (SHORT, V)),
    "correlate_real_complex": (lambda m, a, b: m.correlate(m.real(a), b, "same"), (V, SHORT)),
    "cov": (lambda m, a: m.cov(a), (A,)),
    "cov_rowvar_ddof": (lambda m, a: m.cov(a, rowvar=False, ddof=0), (A,)),
    "cov_aweights": (lambda m, a, b: m.cov(a, aweights=m.abs(b[0])), (A, B)),
    "corrcoef": (lambda m, a: m.corrcoef(a), (A,)),
    "polyval": (lambda m, a, b: m.polyval(a, b), (V, A)),
    "polyder": (lambda m, a: m.polyder(a), (V,)),
    "polyint": (lambda m, a: m.polyint(a), (V,)),
    "polymul": (lambda m, a, b: m.polymul(a, b), (V, SHORT)),
    "poly": (lambda m, a: m.poly(a), (SHORT,)),
    "interp": (lambda m, a: m.interp(m.linspace(-0.2, 1.2, 7), m.linspace(0, 1, 5), a,
                                     right=3j), (V,)),
    "trapezoid": (lambda m, a: m.trapezoid(a), (A,)),
    "iscomplex": (lambda m, a: m.iscomplex(m.where(m.real(a) > 0, m.real(a) + 0j, a)), (A,)),
    "isreal": (lambda m, a: m.isreal(m.where(m.real(a) > 0, m.real(a) + 0j, a)), (A,)),
}


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("name", sorted(SWEEP))
def test_sweep_against_jax(name, mode):
    f, args = SWEEP[name]
    want = np.asarray(f(jjnp, *[jjnp.asarray(a) for a in args]))
    fn = lambda *xs: f(jnp, *xs)
    if mode == "jit":
        fn = nova.jit(fn)
    got = np.asarray(fn(*[jnp.asarray(a) for a in args]))
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, jax.numpy {want.dtype}"
    assert_close(got, want, rtol=2e-5, atol=2e-5 * max(1.0, float(np.nanmax(np.abs(want)))))


def test_complex128_keeps_its_width():
    a, b = _z((3, 4), np.complex128), _z((3, 4), np.complex128)
    with jax.enable_x64(True):
        for f in (lambda m: m.mean(a, 0), lambda m: m.var(a), lambda m: m.cumprod(a, 1),
                  lambda m: m.vdot(a, b), lambda m: m.linalg.norm(a, 1),
                  lambda m: m.arcsin(a), lambda m: m.cov(a), lambda m: m.linspace(a[0, 0], a[1, 1], 3)):
            want = np.asarray(f(jjnp))
            got = np.asarray(f(jnp))
            assert got.dtype == want.dtype
            assert_close(got, want, rtol=1e-10, atol=1e-10)


# --- NumPy references: functions jax.numpy lacks, branch cuts, special values -----------------

_CUT = np.array([2 + 0j, complex(2, -0.0), -2 + 0j, complex(-2, -0.0), 0.5 + 0j, 2j,
                 complex(-0.0, 2), complex(0.0, -2), complex(-0.0, -2), 1e-6 + 1e-6j,
                 1e20 + 1e20j, -3 + 1e-30j, 0.3 - 0.2j, 0j, 1 + 0j, -1 + 0j, 1j, -1j,
                 -1e30 + 1j], np.complex64)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", ["arcsin", "arccos", "arcsinh", "arccosh", "arctanh", "atan"])
def test_inverse_functions_branch_cuts_against_numpy(name, jit):
    # Values on both sides of each cut (the sign of a zero imaginary part chooses), near 0,
    # at the branch points and far out, where a naive log(z + sqrt(z^2 - 1)) overflows.
    f = getattr(jnp, name)
    f = nova.jit(f) if jit else f
    with np.errstate(all="ignore"):
        want = getattr(np, "arctan" if name == "atan" else name)(_CUT.astype(np.complex128))
    got = np.asarray(f(jnp.asarray(_CUT)))
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=0)


def test_nan_to_num_replaces_each_part():
    x = np.array([complex(np.nan, 1), complex(1, np.nan), complex(np.inf, -np.inf),
                  complex(-np.inf, np.nan), 1 + 2j], np.complex64)
    for f in (jnp.nan_to_num, nova.jit(jnp.nan_to_num)):
        got = np.asarray(f(jnp.asarray(x)))
        assert got.dtype == np.complex64
        np.testing.assert_array_equal(got, np.nan_to_num(x))
    got = jnp.nan_to_num(jnp.asarray(x), nan=-1.0, posinf=7.0)
    np.testing.assert_array_equal(np.asarray(got), np.nan_to_num(x, nan=-1.0, posinf=7.0))


def test_real_if_close_against_numpy():
    near = (A.real + 1e-7j).astype(np.complex64)
    got = jnp.real_if_close(jnp.asarray(near))
    assert got.dtype == np.float32 and np.real_if_close(near).dtype == np.float32
    assert_close(got, np.real_if_close(near))
    assert jnp.real_if_close(jnp.asarray(A)).dtype == np.complex64  # stays complex
    assert jnp.real_if_close(jnp.asarray(near), tol=1e-8).dtype == np.complex64  # absolute tol
    assert jnp.real_if_close(jnp.arange(3.0)).dtype == np.float32
    with pytest.raises(ConcretizationTypeError, match="real_if_close.*not known inside jit"):
        nova.jit(jnp.real_if_close)(jnp.asarray(near))


def test_sort_with_nans_follows_jax():
    x = np.array([complex(1, np.nan), 2 + 0j, complex(np.nan, 0), 1 + 1j, 1 - 1j,
                  complex(np.nan, -1), -np.inf + 0j, complex(0, np.nan), 1 - 1j], np.complex64)
    assert_close(jnp.sort(jnp.asarray(x)), np.asarray(jjnp.sort(x)))
    np.testing.assert_array_equal(np.asarray(jnp.argsort(jnp.asarray(x))),
                                  np.asarray(jjnp.argsort(x)))  # stable: equal 1 - 1j in order
    finite = x[np.isfinite(x)]
    assert_close(jnp.sort(jnp.asarray(finite)), np.sort(finite))  # NumPy agrees without NaN


def test_float_power_is_complex128():
    got = jnp.float_power(jnp.asarray(A), jnp.asarray(B))
    assert got.dtype == np.complex128
    assert_close(got, np.float_power(A, B), rtol=1e-6, atol=1e-6)


def test_random_normal_complex():
    key = nova.random.PRNGKey(3)
    got = nova.random.normal(key, (4, 5), jnp.complex64)
    want = jax.random.normal(jax.random.PRNGKey(3), (4, 5), jjnp.complex64)
    assert got.dtype == np.complex64
    assert_close(got, np.asarray(want), rtol=1e-5, atol=1e-6)
    assert_close(nova.jit(lambda k: nova.random.normal(k, (4, 5), "complex64"))(key), want,
                 rtol=1e-5, atol=1e-6)
    with jax.enable_x64(True):
        want64 = jax.random.normal(jax.random.PRNGKey(3), (6,), jjnp.complex128)
    got64 = nova.random.normal(key, (6,), jnp.complex128)
    assert got64.dtype == np.complex128
    assert_close(got64, np.asarray(want64), rtol=1e-9, atol=1e-12)
    big = np.asarray(nova.random.normal(key, (200_000,), jnp.complex64))
    # E|z|^2 = 1 with parts of variance 1/2 each, uncorrelated.
    assert abs(np.var(big.real) - 0.5) < 0.01 and abs(np.var(big.imag) - 0.5) < 0.01
    assert abs(np.mean(big.real * big.imag)) < 0.01
    with pytest.raises(ValueError, match="normal: dtype must be a float dtype, got int32"):
        nova.random.normal(key, (2,), jnp.int32)


# --- gradients of real-valued losses: JAX's convention ----------------------------------------

GRADS = {
    "cumprod": lambda m: lambda z: m.abs(m.cumprod(z * 0.6, axis=1)).sum(),
    "mean": lambda m: lambda z: m.abs(m.mean(z, axis=0) ** 2).sum(),
    "var": lambda m: lambda z: m.var(z, axis=1).sum(),
    "std": lambda m: lambda z: m.std(z),
    "norm": lambda m: lambda z: m.linalg.norm(z),
    "norm_inf": lambda m: lambda z: m.linalg.norm(z, m.inf),
    "vdot": lambda m: lambda z: m.real(m.vdot(z, z * (1 + 2j))),
    "arcsin": lambda m: lambda z: m.abs(m.arcsin(z)).sum(),
    "arctanh_arccos": lambda m: lambda z: m.real(m.arccos(z) * m.arctanh(z * 0.3)).sum(),
    "sort": lambda m: lambda z: m.real(m.sort(z, axis=1) * m.arange(4.0)).sum(),
    "correlate": lambda m: lambda z: m.abs(m.correlate(z[0], z[1], "full")).sum(),
    "cov": lambda m: lambda z: m.abs(m.cov(z)).sum(),
}


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", sorted(GRADS))
def test_grad_matches_jax(name, jit):
    g = nova.grad(GRADS[name](jnp))
    g = nova.jit(g) if jit else g
    got = g(jnp.asarray(A))
    want = np.asarray(jax.grad(GRADS[name](jjnp))(A))
    assert got.dtype == np.complex64
    assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_arccosh_grad_against_central_differences():
    # jax.grad of arccosh disagrees with the derivative of jnp.arccosh's own principal branch
    # where Re z < 0 (it differentiates as 1/sqrt(z^2 - 1), which has the other sign there);
    # Nova's is 1/(sqrt(z - 1) sqrt(z + 1)), the branch's, as central differences confirm.
    def loss(z):
        return np.sum(np.real(np.arccosh(z) * np.conj(z)))

    g = np.asarray(nova.grad(lambda z: jnp.real(jnp.arccosh(z) * jnp.conj(z)).sum())(
        jnp.asarray(A)))
    z, eps = A.astype(np.complex128), 1e-6
    fd = np.zeros(A.shape, np.complex128)
    for idx in np.ndindex(A.shape):
        e = np.zeros(A.shape)
        e[idx] = eps
        fd[idx] = ((loss(z + e) - loss(z - e)) - 1j * (loss(z + 1j * e) - loss(z - 1j * e))) \
            / (2 * eps)
    assert_close(g, fd, rtol=1e-4, atol=1e-4)


def test_vmap():
    f = lambda z, w: (jnp.cumprod(z), jnp.vdot(z, w), jnp.sort(z), jnp.var(z))
    got = nova.vmap(f)(jnp.asarray(A), jnp.asarray(B))
    for g, w in zip(got, [np.cumprod(A, 1), np.einsum("ij,ij->i", A.conj(), B),
                          np.sort(A, 1), np.var(A, 1)], strict=True):
        assert_close(g, w, rtol=1e-5, atol=1e-5)


# --- what has no complex meaning ---------------------------------------------------------------

def test_errors():
    z = jnp.asarray(A)
    with pytest.raises(TypeError, match="complex fill_value 1j does not fit the real dtype"):
        jnp.full((2,), 1j, jnp.float32)
    with pytest.raises(ValueError, match="quantile: a must be real.*complex64"):
        jnp.quantile(z, 0.5)
    with pytest.raises(ValueError, match="median: a must be real"):
        jnp.median(z)
    with pytest.raises(ValueError, match="i0: x must be real"):
        jnp.i0(z)
    with pytest.raises(ValueError, match="interp: x must be real"):
        jnp.interp(z, jnp.linspace(0, 1, 5), jnp.asarray(V))
    with pytest.raises(ValueError, match="std: dtype must be a float dtype, got int32"):
        jnp.std(z, dtype=jnp.int32)


# --- round and arctan (numpy_impl/ufuncs.py) -----------------------------------------------

@pytest.mark.parametrize("name", ["round", "around", "arctan"])
def test_ufuncs_round_and_arctan(name):
    f = {"round": lambda m, a: m.round(a * 10, 1), "around": lambda m, a: m.around(a * 3),
         "arctan": lambda m, a: m.arctan(a)}[name]
    assert_close(f(jnp, jnp.asarray(A)), np.asarray(f(jjnp, A)), rtol=1e-5, atol=1e-5)
