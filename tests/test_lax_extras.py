"""The rest of jax.lax in nova.lax (nova/ops/lax_extras.py and composite.py's special-function
aliases) against jax.lax, scipy.special and exact integer arithmetic. The JAX references of a
test are computed in one jax.jit (one XLA compile instead of one per op)."""

import jax
import jax.lax as jl
import jax.numpy as jjnp
import nova.numpy as jnp
import numpy as np
import pytest
import scipy.special as sp

import nova
from nova import lax
from tests.helpers import assert_close, check_grads

RNG = np.random.default_rng(0)
F32 = np.float32


def assert_bits(actual, expected):
    """Equal values, dtypes and bit patterns (so -0.0 differs from 0.0; NaN equals NaN)."""
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        a, e = a.view(f"u{a.itemsize}"), e.view(f"u{e.itemsize}")
    np.testing.assert_array_equal(a, e)


# --- special functions ---------------------------------------------------------------------------

A = np.array([0.5, 2.0, 10.0, 3.0, 1.5], F32)
X = np.array([0.3, 2.5, 8.0, 1.0, 4.0], F32)


def test_special_functions_match_scipy():
    m = np.array([0.0, 1.0, 2.0, 1.5, -1.0], F32)  # JAX's lax: NaN off the non-negative ints
    poly = np.where(m == np.floor(m), sp.polygamma(np.maximum(m, 0).astype(int), X + 1), np.nan)
    poly[m < 0] = np.nan
    dens = X ** (A - 1) * np.exp(-X) / sp.gamma(A)  # dP/dx is the Gamma density

    def all_of(a, x, m):
        return [lax.igamma(a, x), lax.igammac(a, x), lax.betainc(a, x, F32(0.4)),
                lax.bessel_i0e(x - 3), lax.bessel_i1e(x - 3), lax.zeta(a + 1, x),
                lax.polygamma(m, x + 1), nova.grad(lambda x: lax.igamma(a, x).sum())(x)]

    want = [sp.gammainc(A, X), sp.gammaincc(A, X), sp.betainc(A, X, 0.4), sp.i0e(X - 3),
            sp.i1e(X - 3), sp.zeta(A + 1, X), poly, dens]
    for g, w in zip(nova.jit(all_of)(A, X, m), want, strict=True):
        assert g.dtype == np.float32
        assert_close(g, w, rtol=1e-4)
    assert_close(lax.zeta(A + 1, X), sp.zeta(A + 1, X), rtol=2e-5)  # and eagerly
    with pytest.raises(TypeError, match="igamma: argument 0 must be a float array"):
        lax.igamma(np.ones(2, np.int32), 1.0)
    with pytest.raises(TypeError, match="bessel_i0e"):
        lax.bessel_i0e(np.arange(3))


def test_gamma_derivatives_match_jax():
    want = jax.jit(lambda a, x: (jl.igamma_grad_a(a, x), jl.random_gamma_grad(a, x)))(A, X)
    got = nova.jit(lambda a, x: (lax.igamma_grad_a(a, x), lax.random_gamma_grad(a, x)))(A, X)
    assert_close(got[0], want[0], rtol=1e-4, atol=1e-6)
    assert_close(got[1], want[1], rtol=1e-4, atol=1e-6)
    # random_gamma_grad is d sample / d alpha at fixed CDF level: P(a, x(a)) stays put
    h = 1e-3
    a64, x64 = A.astype(np.float64), X.astype(np.float64)
    x_next = x64 + h * np.asarray(got[1], np.float64)
    np.testing.assert_allclose(sp.gammainc(a64 + h, x_next), sp.gammainc(a64, x64), atol=2e-5)


# --- scatter -------------------------------------------------------------------------------------

OP = RNG.standard_normal((5, 4)).astype(F32)
# point updates: a repeated row and an out-of-range one (dropped)
IDX = np.array([[1], [3], [1], [7]], np.int32)
UPD = RNG.standard_normal((4, 4)).astype(F32)
DN = jl.ScatterDimensionNumbers((1,), (0,), (0,))
# 2 x 3 windows: in range, past the end (dropped unless clipped), and negative
IDX_W = np.array([[0, 1], [3, 2], [4, 0], [-1, 0]], np.int32)
UPD_W = RNG.standard_normal((4, 2, 3)).astype(F32)
DN_W = lax.ScatterDimensionNumbers((1, 2), (), (0, 1))
# batch axes: the operand's axis 0 pairs with the indices' axis 0
OP_B = RNG.standard_normal((2, 5)).astype(F32)
IDX_B = np.array([[[1], [4], [1]], [[0], [2], [9]]], np.int32)
UPD_B = RNG.standard_normal((2, 3)).astype(F32)
DN_B = lax.ScatterDimensionNumbers((), (1,), (1,), (0,), (0,))
KINDS = ("scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max")


def _scatter_cases(ns, dn_w, dn_b, opi, updi):
    out = {}
    for k in KINDS:
        f = getattr(ns, k)
        out[k] = f(OP, IDX, UPD, DN)
        out[k + " window"] = f(OP, IDX_W, UPD_W, dn_w)
        out[k + " clip"] = f(OP, IDX_W, UPD_W, dn_w, mode="clip")
        out[k + " batch"] = f(OP_B, IDX_B, UPD_B, dn_b)
        if k != "scatter_add":
            out[k + " int32"] = f(opi, IDX, updi, DN)
    out["scatter"] = ns.scatter(OP, IDX[:2], UPD[:2], DN)
    out["apply"] = ns.scatter_apply(OP, IDX, lambda v: v * 2 + 1, DN, update_shape=(4, 4))
    out["apply window"] = ns.scatter_apply(OP, IDX_W, lambda v: v - 1, dn_w,
                                           update_shape=(4, 2, 3), mode="clip")
    return out


def test_scatter_family_matches_jax():
    opi = RNG.integers(-9, 9, (5, 4)).astype(np.int32)
    updi = RNG.integers(-9, 9, (4, 4)).astype(np.int32)
    jdn_w = jl.ScatterDimensionNumbers(*DN_W)
    jdn_b = jl.ScatterDimensionNumbers(*DN_B)
    want = jax.jit(lambda a, b: _scatter_cases(jl, jdn_w, jdn_b, a, b))(opi, updi)
    got = nova.jit(lambda a, b: _scatter_cases(lax, DN_W, DN_B, a, b))(opi, updi)
    for key, w in want.items():
        assert_close(got[key], w, err_msg=key)
        assert got[key].dtype == w.dtype, key
    # eagerly, and Nova's point form (a sequence of axes) agrees with JAX's numbers
    assert_close(lax.scatter_max(OP, IDX, UPD, DN), want["scatter_max"])
    points = nova.jit(lambda o, u: [getattr(lax, k)(o, IDX, u, (0,)) for k in KINDS])(OP, UPD)
    for k, g in zip(KINDS, points, strict=True):
        assert_close(g, want[k], err_msg=k)
    batched = nova.vmap(lambda o, u: lax.scatter_mul(o, IDX, u, DN))(np.stack([OP, 2 * OP]),
                                                                        np.stack([UPD, -UPD]))
    assert_close(batched[0], want["scatter_mul"])
    assert_close(batched[1], lax.scatter_mul(2 * OP, IDX, -UPD, DN))


def test_scatter_gradients_match_jax():
    unique = np.array([[1], [3], [0], [7]], np.int32)  # JAX differentiates mul only without repeats
    w = RNG.standard_normal((5, 4)).astype(F32)

    def loss(ns, kind):
        return lambda o, u: (getattr(ns, kind)(o, unique, u, DN, unique_indices=True) * w).sum()

    kinds = ("scatter_sub", "scatter_mul", "scatter_min", "scatter_max")
    want = jax.jit(lambda o, u: [jax.grad(loss(jl, k), argnums=(0, 1))(o, u)
                                 for k in kinds])(OP, UPD)
    got = nova.jit(lambda o, u: [nova.grad(loss(lax, k), argnums=(0, 1))(o, u)
                                 for k in kinds])(OP, UPD)
    for k, (wo, wu), (go, gu) in zip(kinds, want, got, strict=True):
        assert_close(go, wo, err_msg=k)
        assert_close(gu, wu, err_msg=k)
    # repeated indices and a zero update (which JAX cannot differentiate) against differences
    u = RNG.standard_normal((4, 4))
    u[0, 1] = 0.0
    check_grads(lambda o, u: lax.scatter_mul(o, IDX, u, DN), [OP.astype(np.float64), u])
    check_grads(lambda o, u: lax.scatter_sub(o, IDX_W, u, DN_W, mode="clip"),
                [OP.astype(np.float64), UPD_W.astype(np.float64)])


def test_scatter_bad_inputs():
    with pytest.raises(TypeError, match="scatter_mul: updates have dtype int32"):
        lax.scatter_mul(OP, IDX, UPD.astype(np.int32), DN)
    with pytest.raises(TypeError, match="scatter_indices must be integers"):
        lax.scatter_max(OP, IDX.astype(F32), UPD, DN)
    with pytest.raises(nova.ShapeError, match="do not match scatter_indices"):
        lax.scatter_min(OP, IDX, UPD[:3], DN)
    with pytest.raises(nova.ShapeError, match="do not make the operand's rank 2"):
        lax.scatter_mul(OP, IDX, UPD, lax.ScatterDimensionNumbers((1,), (0, 1), (0,)))
    with pytest.raises(ValueError, match="update_window_dims = \\(2, 1\\) must be sorted"):
        lax.scatter_add(OP, IDX_W, UPD_W, lax.ScatterDimensionNumbers((2, 1), (), (0, 1)))
    with pytest.raises(nova.ShapeError, match="window axis 1 of size 6 exceeds operand axis 1"):
        lax.scatter_add(OP, IDX, np.zeros((4, 6), F32), DN)
    with pytest.raises(ValueError, match="unknown gather/scatter mode 'wrap'"):
        lax.scatter_mul(OP, IDX, UPD, DN, mode="wrap")
    with pytest.raises(TypeError, match="scatter_sub: a bool operand"):
        lax.scatter_sub(OP > 0, IDX, UPD > 0, DN)
    with pytest.raises(TypeError, match="scatter_apply: func must map a float32 scalar"):
        lax.scatter_apply(OP, IDX, lambda v: v > 0, DN, update_shape=(4, 4))


# --- convolutions --------------------------------------------------------------------------------

XC = RNG.standard_normal((2, 7, 6, 3)).astype(F32)  # NHWC
KC = RNG.standard_normal((3, 2, 3, 4)).astype(F32)  # HWIO
KT = RNG.standard_normal((3, 2, 4, 3)).astype(F32)  # HWIO with I, O swapped (transpose_kernel)
XL = RNG.standard_normal((2, 3, 6, 5)).astype(F32)  # NCHW
RL = RNG.standard_normal((4, 18, 2, 4)).astype(F32)  # (O, C * 3 * 2, out H, out W)
RLW = RNG.standard_normal((3, 6, 18, 4)).astype(F32)  # WHIO, per output position


def _conv_cases(ns, x, k, kt, xl, rl, rlw):
    out = {}
    for pad in ("SAME", "VALID", [(1, 2), (0, 1)]):
        out[f"T {pad}"] = ns.conv_transpose(x, k, (2, 3), pad)
        out[f"T {pad} flip"] = ns.conv_transpose(x, kt, (2, 3), pad, transpose_kernel=True)
    out["T consistent"] = ns.conv_transpose(x, k, (2, 2), [(1, 0), (2, 1)], rhs_dilation=(2, 1),
                                            use_consistent_padding=True)
    out["T 1d"] = ns.conv_transpose(x[:, 0], k[0], (3,), "SAME")
    for dn in (None, ("NHWC", "HWIO", "NHWC"), ("NHWC", "WHIO", "NCHW")):
        img = x if dn else x.transpose(0, 3, 1, 2)
        out[f"patches {dn}"] = ns.conv_general_dilated_patches(
            img, (2, 3), (1, 2), "SAME", rhs_dilation=(2, 1), dimension_numbers=dn)
    out["patches ldil"] = ns.conv_general_dilated_patches(xl, (2, 2), (1, 1), [(1, 0), (0, 2)],
                                                          lhs_dilation=(2, 1))
    out["local"] = ns.conv_general_dilated_local(xl, rl, (2, 1), "VALID", (3, 2))
    out["local WHIO"] = ns.conv_general_dilated_local(
        xl.transpose(0, 2, 3, 1), rlw, (2, 1), "SAME", (2, 3),
        dimension_numbers=("NHWC", "WHIO", "NHWC"))
    out["general padding"] = ns.conv_with_general_padding(xl, rl[:, :3, :2, :2], (1, 1),
                                                          [(1, 1), (0, 0)], (2, 1), (1, 2))
    return out


def test_convolutions_match_jax():
    args = (XC, KC, KT, XL, RL, RLW)
    want = jax.jit(lambda *a: _conv_cases(jl, *a))(*args)
    got = nova.jit(lambda *a: _conv_cases(lax, *a))(*args)
    for key, w in want.items():
        assert_close(got[key], w, rtol=1e-4, atol=1e-4, err_msg=key)
    assert_close(lax.conv_transpose(XC, KC, (2, 3), "SAME"), want["T SAME"], rtol=1e-4,
                 atol=1e-4)  # and eagerly


def test_convolution_gradients_match_jax():
    def loss(ns):
        def f(x, k, r):
            t = ns.conv_transpose(x, k, (2, 1), "SAME")
            loc = ns.conv_general_dilated_local(x.transpose(0, 3, 1, 2), r, (2, 1), "VALID",
                                                (3, 2))
            return (t ** 2).sum() + (loc * loc[..., ::-1]).sum()
        return f

    r = RNG.standard_normal((4, 18, 3, 5)).astype(F32)
    want = jax.jit(jax.grad(loss(jl), argnums=(0, 1, 2)))(XC, KC, r)
    got = nova.jit(nova.grad(loss(lax), argnums=(0, 1, 2)))(XC, KC, r)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, rtol=1e-4, atol=1e-3)


def test_patches_are_exact_slices():
    x = np.arange(24, dtype=F32).reshape(1, 2, 3, 4)
    x[0, 1, 1, 2] = np.inf  # a convolution with a one-hot kernel would make NaN of 0 * inf
    p = np.asarray(lax.conv_general_dilated_patches(x, (2, 2), (1, 1), "VALID"))
    assert p.shape == (1, 8, 2, 3) and not np.isnan(p).any()
    # feature (c, i, j) at position (h, w) is x[c, h + i, w + j]
    for c, i, j in np.ndindex(2, 2, 2):
        np.testing.assert_array_equal(p[0, 4 * c + 2 * i + j], x[0, c, i:i + 2, j:j + 3])


def test_conv_shape_helpers_match_jax():
    for k in range(1, 6):  # conv_transpose's padding rule over kernel sizes and strides
        for s in range(1, 4):
            for pad in ("SAME", "VALID"):
                args = ((1, 5, 2), (k, 2, 3), (s,), pad, ("NHC", "HIO", "NHC"))
                assert lax.conv_transpose_shape_tuple(*args) == \
                    jl.conv_transpose_shape_tuple(*args), (k, s, pad)
    specs = ("NHWC", "WHIO", "NCHW")
    assert lax.conv_general_permutations(specs) == jl.conv_general_permutations(specs)
    dn = lax.conv_dimension_numbers(XC.shape, KC.shape, specs)
    assert isinstance(dn, lax.ConvDimensionNumbers)
    assert dn == tuple(jl.conv_dimension_numbers(XC.shape, KC.shape, specs))
    assert lax.conv_dimension_numbers(XC.shape, KC.shape, dn) is dn
    for pads in ("SAME", "VALID", [(1, 1), (0, 2)]):
        assert lax.conv_shape_tuple((2, 3, 9, 8), (4, 3, 3, 2), (2, 3), pads) == \
            jl.conv_shape_tuple((2, 3, 9, 8), (4, 3, 3, 2), (2, 3), pads)
        args = ((2, 9, 8, 3), (3, 2, 3, 4), (2, 1), pads, ("NHWC", "HWIO", "NCHW"))
        assert lax.conv_general_shape_tuple(*args) == jl.conv_general_shape_tuple(*args)
        assert lax.conv_transpose_shape_tuple(*args) == jl.conv_transpose_shape_tuple(*args)
    assert lax.conv_shape_tuple((2, 3, 2, 2), (4, 3, 3, 3), (1, 1), "VALID") == (2, 4, 0, 0)
    args = ((4, 6), (2, 3), (2, 1), [(0, 0), (1, 0)], (2, 1), (1, 2))
    assert lax.reduce_window_shape_tuple(*args) == jl.reduce_window_shape_tuple(*args)
    assert lax.reduce_window_shape_tuple((2, 2), (3, 3), (1, 1), [(0, 0), (0, 0)]) == (0, 0)


def test_convolution_bad_inputs():
    with pytest.raises(ValueError, match="no default layout for rank 6"):
        lax.conv_transpose(np.ones((1,) * 6, F32), np.ones((1,) * 6, F32), (1,) * 4, "SAME")
    with pytest.raises(ValueError, match="conv_transpose: padding must be 'SAME', 'VALID'"):
        lax.conv_transpose(XC, KC, (1, 1), "FULL")
    with pytest.raises(ValueError, match="layout 'NHW' must name distinct axes, N and C"):
        lax.conv_general_permutations(("NHWC", "HWIO", "NHW"))
    with pytest.raises(ValueError, match="do not name the same spatial axes"):
        lax.conv_general_permutations(("NHWC", "HDIO", "NHWC"))
    with pytest.raises(nova.ShapeError, match="patches of filter_shape \\(2, 2\\) need"):
        lax.conv_general_dilated_local(XL, RL, (1, 1), "VALID", (2, 2))
    with pytest.raises(ValueError, match="filter_shape must be 2 positive ints"):
        lax.conv_general_dilated_patches(XL, (2,), (1, 1), "VALID")


# --- bit-level functions -------------------------------------------------------------------------

INT_TYPES = (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32)


def _int_inputs(dt):
    info = np.iinfo(dt)
    x = np.concatenate([np.array([0, 1, info.max, info.min, info.max // 3, 2], dt),
                        RNG.integers(info.min, info.max, 18, dtype=dt, endpoint=True)])
    y = RNG.integers(info.min, info.max, x.size, dtype=dt, endpoint=True)
    y[:4] = [info.max, info.min, info.max, info.min]
    return x, y


def test_clz_and_mulhi_match_jax():
    inputs = {np.dtype(dt).name: _int_inputs(dt) for dt in INT_TYPES}
    want = jax.jit(lambda d: {k: (jl.clz(x), jl.mulhi(x, y)) for k, (x, y) in d.items()})(inputs)
    got = nova.jit(lambda d: {k: (lax.clz(x), lax.mulhi(x, y)) for k, (x, y) in d.items()})(
        inputs)
    for name in inputs:
        assert_bits(got[name][0], want[name][0])
        assert_bits(got[name][1], want[name][1])
    assert_bits(lax.mulhi(*inputs["uint32"]), want["uint32"][1])  # and eagerly
    # int64 (JAX without x64 has none) against Python's integers
    x = np.array([0, 1, -1, 2**62, -2**63, 2**63 - 1, 12345678901234, -987654321987], np.int64)
    y = np.array([5, -1, -1, 2**62, -2**63, 2**63 - 1, -98765432109, 1234567], np.int64)
    assert_bits(lax.mulhi(x, y), np.array([int(a) * int(b) >> 64 for a, b in zip(x, y)], np.int64))
    assert_bits(lax.clz(x), np.array([64 - int(a).bit_length() if a >= 0 else 0 for a in x],
                                     np.int64))
    with pytest.raises(TypeError, match="clz: x must be an integer array"):
        lax.clz(np.ones(2, F32))
    with pytest.raises(TypeError, match="mulhi: x and y must be integers of one dtype"):
        lax.mulhi(np.ones(2, np.int32), np.ones(2, np.int16))


def test_nextafter_matches_jax_bit_for_bit():
    x1 = np.array([0, -0.0, 1e-45, -1e-45, 1, 1, -1, 2, 3.4028235e38, np.inf, -np.inf, np.nan,
                   1.1754944e-38, 5, 0], F32)
    x2 = np.array([-0.0, 1, 0, 1, 2, 0, -2, 1, np.inf, 0, 0, 0, 0, np.nan, 0], F32)
    want = jax.jit(jl.nextafter)(x1, x2)
    assert_bits(lax.nextafter(x1, x2), want)
    assert_bits(nova.jit(lax.nextafter)(x1, x2), want)
    with pytest.raises(TypeError, match="nextafter: argument 0 must be a float array"):
        lax.nextafter(np.ones(2, np.int32), np.ones(2, np.int32))


RP_FORMATS = ((5, 10), (8, 7), (5, 0), (8, 0), (3, 2), (8, 3), (4, 1), (6, 22), (11, 30))


def test_reduce_precision_matches_jax_bit_for_bit():
    v = np.concatenate([RNG.standard_normal(30) * 10.0 ** RNG.integers(-40, 38, 30),
                        [0, -0.0, np.inf, -np.inf, np.nan, 65519, 65520, 1.5, 3, 2.5, -3e-5,
                         1e-45, 3e-39, 1.2e-38, 3.4028235e38, 6.1e-5, 6.0e-5]]).astype(F32)
    bf = jjnp.asarray(v[:24]).astype(jjnp.bfloat16)
    g = (RNG.standard_normal(8) * 1.7).astype(F32)

    def cases(ns, grad, v, bf, g):
        out = [ns.reduce_precision(v, e, m) for e, m in RP_FORMATS]
        out.append(ns.reduce_precision(bf, 5, 2))
        out.append(grad(lambda u: (ns.reduce_precision(u, 5, 3) * g).sum())(g))
        return out

    want = jax.jit(lambda *a: cases(jl, jax.grad, *a))(v, bf, g)
    got = nova.jit(lambda *a: cases(lax, nova.grad, *a))(v, np.asarray(bf), g)
    for w, o in zip(want, got, strict=True):
        assert_bits(o, w)
    assert_bits(lax.reduce_precision(v, 5, 10), want[0])  # and eagerly
    with pytest.raises(TypeError, match="reduce_precision: operand must be a float array"):
        lax.reduce_precision(np.ones(2, np.int32), 5, 3)
    with pytest.raises(ValueError, match="exponent_bits must be >= 1"):
        lax.reduce_precision(v, 0, 3)


# --- selection, products, small helpers ---------------------------------------------------------


def test_top_k_ragged_dot_and_helpers_match_jax():
    y = RNG.standard_normal((3, 7)).astype(F32)
    y[0, 2] = y[0, 5]  # a tie: the lower index first
    lhs = RNG.standard_normal((7, 3)).astype(F32)
    rhs = RNG.standard_normal((4, 3, 2)).astype(F32)
    gs = np.array([2, 0, 3, 1], np.int32)  # an empty group; the last row is past them all
    src = RNG.standard_normal((5, 3, 4)).astype(F32)
    i0, i1 = np.array([7, 1, -1, -6], np.int32), np.array([0, 5, 2, -2], np.int32)

    def cases(ns, grad, y, lhs, rhs, src):
        loss = lambda a, b: (ns.ragged_dot(a, b, gs) ** 2).sum()
        return {"max": ns.approx_max_k(y, 2), "max0": ns.approx_max_k(y, 2, 0),
                "min": ns.approx_min_k(y, 3), "min0": ns.approx_min_k(y, 1, 0),
                "ragged": ns.ragged_dot(lhs, rhs, gs),
                "ragged grad": grad(loss, argnums=(0, 1))(lhs, rhs),
                "take": ns.index_take(src, (i0, i1), (0, 2)), "tile": ns.tile(src, (1, 2, 1)),
                "stack": ns.stack([src, 2 * src], axis=-1), "unstack": ns.unstack(src, 1),
                "rank": ns.broadcast_to_rank(src[0, 0], 3),
                "like": ns.broadcast_like(src[0, 0], src), "empty": ns.empty((2, 3), F32)}

    want = jax.jit(lambda *a: cases(jl, jax.grad, *a))(y, lhs, rhs, src)
    got = nova.jit(lambda *a: cases(lax, nova.grad, *a))(y, lhs, rhs, src)
    for key in want:
        for g, w in zip(jax.tree.leaves(got[key]), jax.tree.leaves(want[key]), strict=True):
            assert_close(g, w, err_msg=key)
            assert np.asarray(g).dtype == w.dtype, key
    assert_close(lax.ragged_dot(lhs, rhs, gs), want["ragged"])  # and eagerly
    with pytest.raises(ValueError, match="approx_max_k: k=8 is outside \\[0, 7\\]"):
        lax.approx_max_k(y, 8)
    with pytest.raises(TypeError, match="approx_min_k: operand must be a float array"):
        lax.approx_min_k(np.ones(3, np.int32), 1)
    with pytest.raises(nova.ShapeError, match="ragged_dot: need lhs"):
        lax.ragged_dot(lhs, rhs[:3], gs)
    with pytest.raises(NotImplementedError, match="group_offset"):
        lax.ragged_dot(lhs, rhs, gs, group_offset=np.zeros(1, np.int32))
    with pytest.raises(TypeError, match="tile: len\\(reps\\) = 2"):
        lax.tile(np.ones(3), (2, 2))
    with pytest.raises(TypeError, match="stack: the operands must share one dtype"):
        lax.stack([np.ones(2, F32), np.ones(2, np.int32)])
    with pytest.raises(ValueError, match="index_take: 1 index arrays for 2 axes"):
        lax.index_take(src, (i0,), (0, 1))


def test_platform_dependent_and_composite():
    here = nova.default_backend()
    assert lax.platform_dependent(2.0, **{here: lambda x: x + 1}, default=lambda x: x) == 3.0
    assert lax.platform_dependent(2.0, tpu=lambda x: x + 1, default=lambda x: x * 5) == 10.0
    with pytest.raises(NotImplementedError, match="no branch for platform"):
        lax.platform_dependent(1.0, tpu=lambda x: x)
    with pytest.raises(ValueError, match="unknown platform 'gpu'"):
        lax.platform_dependent(1.0, gpu=lambda x: x)

    power = lax.composite(lambda x, *, p=2: x ** p, name="my.power")
    assert float(power(3.0, p=3)) == 27.0
    assert_close(nova.grad(lambda x: power(x, p=3))(2.0), 12.0)
    with pytest.raises(TypeError, match="decomposition must be callable"):
        lax.composite(3, "x")
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        lax.composite(abs, "")


# --- implicit derivatives ------------------------------------------------------------------------

MAT = (RNG.standard_normal((3, 3)) + 3 * np.eye(3)).astype(F32)
VEC = RNG.standard_normal(3).astype(F32)


def _solve_loss(a, b):
    x = lax.custom_linear_solve(lambda v: a @ v, b, solve=lambda mv, r: jnp.linalg.solve(a, r),
                                transpose_solve=lambda vm, r: jnp.linalg.solve(a.T, r))
    return (x ** 2).sum()


def test_custom_linear_solve_gradients():
    a, b = MAT.astype(np.float64), VEC.astype(np.float64)
    x = np.linalg.solve(a, b)
    db = np.linalg.solve(a.T, 2 * x)  # loss = |x|^2: dL/db = A^-T 2x, dL/dA = -dL/db x^T
    for grad in (nova.grad(_solve_loss, argnums=(0, 1)),
                 nova.jit(nova.grad(_solve_loss, argnums=(0, 1)))):
        ga, gb = grad(MAT, VEC)
        assert_close(ga, -np.outer(db, x), rtol=1e-4, atol=1e-5)
        assert_close(gb, db, rtol=1e-4, atol=1e-5)
    assert_close(_solve_loss(MAT, VEC), (x ** 2).sum(), rtol=1e-5)

    # an iterative solve (conjugate gradients in a while_loop: no reverse mode of its own) of a
    # symmetric system, with the iteration count as aux
    s = (MAT @ MAT.T).astype(F32)

    def cg(mv, r):
        def body(c):
            x, res, p, rs, i = c
            ap = mv(p)
            alpha = rs / jnp.dot(p, ap)
            x, res = x + alpha * p, res - alpha * ap
            rs2 = jnp.dot(res, res)
            return x, res, res + (rs2 / rs) * p, rs2, i + 1

        out = lax.while_loop(lambda c: (c[4] < 10) & (c[3] > 1e-12), body,
                             (r * 0, r, r, jnp.dot(r, r), 0))
        return out[0], out[4]

    def loss(s, b):
        x, iters = lax.custom_linear_solve(lambda v: s @ v, b, solve=cg, symmetric=True,
                                           has_aux=True)
        return (x * jnp.arange(3.0)).sum(), iters

    s64 = s.astype(np.float64)
    u = np.linalg.solve(s64, np.arange(3.0))
    (gs, gb), iters = nova.grad(loss, argnums=(0, 1), has_aux=True)(s, VEC)
    assert 1 <= int(iters) <= 10
    assert_close(gb, u, rtol=1e-3, atol=1e-4)
    assert_close(gs, -np.outer(u, np.linalg.solve(s64, b)), rtol=1e-3, atol=1e-4)
    with pytest.raises(NotImplementedError, match="reverse mode needs transpose_solve"):
        nova.grad(lambda a: lax.custom_linear_solve(
            lambda v: a @ v, VEC, lambda mv, r: jnp.linalg.solve(a, r)).sum())(MAT)


def _newton(f, x0):
    def body(c):
        x, i = c
        return x - f(x) / nova.grad(f)(x), i + 1

    return lax.while_loop(lambda c: c[1] < 20, body, (x0, 0))[0]


def _sqrt_root(a):
    return lax.custom_root(lambda x: x * x - a, jnp.asarray(1.0), _newton,
                           lambda g, y: y / g(1.0))


def test_custom_root_derivatives():
    assert_close(_sqrt_root(2.0), np.sqrt(2.0))
    want = 0.5 / np.sqrt(2.0)  # d sqrt(a) / da
    assert_close(nova.grad(_sqrt_root)(2.0), want, rtol=1e-5)
    assert_close(nova.jit(nova.grad(_sqrt_root))(2.0), want, rtol=1e-5)
    assert_close(nova.jvp(_sqrt_root, (jnp.asarray(2.0),), (jnp.asarray(1.0),))[1], want,
                 rtol=1e-5)

    # a vector root of x^3 + x = theta (elementwise), tangent system solved by its Jacobian
    theta = RNG.standard_normal(3).astype(F32)

    def loss(t):
        def solve(f, x):
            for _ in range(30):
                x = x - f(x) / (3 * x ** 2 + 1)
            return x

        x = lax.custom_root(lambda x: x ** 3 + x - t, jnp.zeros(3), solve,
                            lambda g, y: jnp.linalg.solve(nova.jacobian(g)(y), y))
        return (x * jnp.arange(1.0, 4.0)).sum(), x

    g, x = nova.grad(loss, has_aux=True)(theta)
    x = np.asarray(x, np.float64)
    assert_close(x ** 3 + x, theta, rtol=1e-5, atol=1e-6)
    assert_close(g, np.arange(1.0, 4.0) / (3 * x ** 2 + 1), rtol=1e-5)
    with pytest.raises(TypeError, match="custom_root: f returns the structure"):
        nova.grad(lambda a: lax.custom_root(lambda x: (x, x), jnp.asarray(1.0), _newton,
                                            lambda g, y: y))(2.0)
