"""lax.conv_general_dilated, lax.conv, lax.reduce_window (nova/ops/convolution.py) against a
direct NumPy reference: layouts, strides, padding modes, dilations, groups; gradients against
the reference's adjoint; under jit and vmap. (Checked against jax.lax to 1e-14 while building,
bench/NOTES.md round 19.)"""

from __future__ import annotations

import itertools

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import lax
from nova.core.errors import ShapeError

RNG = np.random.default_rng(2)


def _ref_conv(x, w, strides, pads, ldil, rdil, groups):
    """Direct cross-correlation in NC... / OI... layouts (the definition, loops over offsets)."""
    n, c = x.shape[:2]
    o, i_per = w.shape[:2]
    # dilate the input, then pad (negative pads crop)
    dil_shape = [(s - 1) * d + 1 for s, d in zip(x.shape[2:], ldil, strict=True)]
    xd = np.zeros((n, c, *dil_shape))
    xd[(slice(None), slice(None), *[slice(None, None, d) for d in ldil])] = x
    for ax, (lo, hi) in enumerate(pads):
        ax += 2
        if lo < 0:
            xd = np.take(xd, range(-lo, xd.shape[ax]), axis=ax)
            lo = 0
        if hi < 0:
            xd = np.take(xd, range(xd.shape[ax] + hi), axis=ax)
            hi = 0
        widths = [(0, 0)] * xd.ndim
        widths[ax] = (lo, hi)
        xd = np.pad(xd, widths)
    kernel = w.shape[2:]
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, rdil, strict=True)]
    out_sp = [max(0, (p - e) // s + 1) for p, e, s in zip(xd.shape[2:], eff, strides,
                                                         strict=True)]
    out = np.zeros((n, o, *out_sp))
    og = o // groups
    for pos in itertools.product(*(range(m) for m in out_sp)):
        for off in itertools.product(*(range(k) for k in kernel)):
            idx = tuple(p * s + k * d for p, s, k, d in zip(pos, strides, off, rdil, strict=True))
            vals = xd[(slice(None), slice(None), *idx)]  # (n, c)
            for g in range(groups):
                xs = vals[:, g * i_per:(g + 1) * i_per]
                ws = w[(slice(g * og, (g + 1) * og), slice(None), *off)]  # (og, i_per)
                out[(slice(None), slice(g * og, (g + 1) * og), *pos)] += xs @ ws.T
    return out


def _pads(padding, in_shape, kernel, strides, rdil):
    if not isinstance(padding, str):
        return list(padding)
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, rdil, strict=True)]
    return lax.padtype_to_pads(in_shape, eff, strides, padding)


CASES = [
    # x (NC...), w (OI...), strides, padding, lhs_dilation, rhs_dilation, groups
    ((2, 3, 7, 6), (4, 3, 3, 3), (1, 1), "SAME", (1, 1), (1, 1), 1),
    ((2, 3, 7, 6), (4, 3, 3, 2), (2, 1), "VALID", (1, 1), (1, 1), 1),
    ((1, 4, 6, 5), (4, 2, 2, 3), (1, 2), ((1, 2), (0, -1)), (1, 1), (2, 1), 2),
    ((2, 4, 5, 6), (4, 1, 3, 3), (1, 1), "SAME_LOWER", (1, 1), (1, 1), 4),
    ((1, 2, 4, 3), (3, 2, 3, 3), (1, 1), ((2, 2), (2, 1)), (2, 2), (1, 1), 1),
    ((2, 3, 9), (2, 3, 4), (3,), "SAME", (1,), (2,), 1),
    ((1, 2, 3, 4, 4), (2, 2, 2, 2, 3), (1, 2, 1), "VALID", (1, 1, 1), (1, 1, 1), 1),
    # rows of whole vector chunks: the innermost axis padded to multiples of 8 inside
    ((1, 2, 4, 16), (3, 2, 3, 3), (1, 2), ((1, 1), (2, 0)), (1, 1), (1, 1), 1),
    ((2, 3, 5, 8), (2, 3, 2, 3), (1, 1), ((0, 1), (1, 3)), (1, 1), (1, 2), 1),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_conv_matches_the_definition_and_its_adjoint(case):
    xs, ws, strides, padding, ldil, rdil, groups = CASES[case]
    x, w = RNG.standard_normal(xs), RNG.standard_normal(ws)
    pads = _pads(padding, xs[2:], ws[2:], strides, rdil)
    want = _ref_conv(x, w, strides, pads, ldil, rdil, groups)
    kw = {"window_strides": strides, "padding": padding, "lhs_dilation": ldil,
          "rhs_dilation": rdil, "feature_group_count": groups}
    if isinstance(padding, str) and ldil != (1,) * len(ldil):
        kw["padding"] = pads
    f = lambda x, w: lax.conv_general_dilated(x, w, **kw)
    got = nova.jit(f)(x, w)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
    # the gradient is the adjoint: <conv(x, w), ct> differentiated, against finite differences
    ct = RNG.standard_normal(want.shape)
    gx, gw = nova.grad(lambda x, w: jnp.sum(f(x, w) * ct), argnums=(0, 1))(x, w)
    for arr, g, k in ((x, gx, 0), (w, gw, 1)):
        for _ in range(4):
            idx = tuple(RNG.integers(0, s) for s in arr.shape)
            e = np.zeros_like(arr)
            e[idx] = 1e-6
            args = [x, w]
            plus = args.copy()
            minus = args.copy()
            plus[k], minus[k] = arr + e, arr - e
            fd = ((_ref_conv(*plus, strides, pads, ldil, rdil, groups) * ct).sum()
                  - (_ref_conv(*minus, strides, pads, ldil, rdil, groups) * ct).sum()) / 2e-6
            np.testing.assert_allclose(np.asarray(g)[idx], fd, rtol=1e-6, atol=1e-8)


def test_layouts_lax_conv_and_vmap():
    x = RNG.standard_normal((2, 6, 5, 3))  # NHWC
    w = RNG.standard_normal((3, 2, 3, 4))  # HWIO
    got = lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                   dimension_numbers=("NHWC", "HWIO", "NHWC"))
    want = _ref_conv(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), (1, 1),
                     _pads("SAME", (6, 5), (3, 2), (1, 1), (1, 1)), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(np.asarray(got), want.transpose(0, 2, 3, 1), rtol=1e-12, atol=1e-12)
    dn = lax.conv_dimension_numbers(x.shape, w.shape, ("NHWC", "HWIO", "NCHW"))
    assert dn == ((0, 3, 1, 2), (3, 2, 0, 1), (0, 1, 2, 3))
    got = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
    xc, wc = x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1)
    np.testing.assert_allclose(np.asarray(lax.conv(xc, wc, (1, 1), "SAME")), want, rtol=1e-12, atol=1e-12)
    per = nova.vmap(lambda img: lax.conv(img[None], wc, (1, 1), "SAME")[0])(xc)
    np.testing.assert_allclose(np.asarray(per), want, rtol=1e-12, atol=1e-12)
    f32 = lax.conv(xc.astype(np.float32), wc.astype(np.float32), (1, 1), "VALID",
                   preferred_element_type=np.float64)
    assert f32.dtype == np.float64 and f32.shape == (2, 4, 4, 4)


def test_string_layouts_take_the_spatial_order_from_the_kernel():
    # JAX pairs window_strides, padding and dilations with the kernel's spatial axes in the
    # kernel layout's order, whatever order the input layout names them in.
    x = RNG.standard_normal((2, 7, 9, 3))  # N W H C
    w = RNG.standard_normal((3, 2, 3, 4))  # H W I O
    args = dict(window_strides=(1, 2), padding=[(1, 0), (0, 2)], lhs_dilation=(2, 1),
                rhs_dilation=(1, 2))
    got = lax.conv_general_dilated(x, w, dimension_numbers=("NWHC", "HWIO", "NHWC"), **args)
    want = lax.conv_general_dilated(x.transpose(0, 3, 2, 1), w.transpose(3, 2, 0, 1), **args)
    assert got.shape == (2, 16, 4, 4)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want).transpose(0, 2, 3, 1),
                               rtol=1e-12, atol=1e-12)
    assert lax.conv_dimension_numbers(x.shape, w.shape, ("NWHC", "HWIO", "NHWC")) == (
        (0, 3, 2, 1), (3, 2, 0, 1), (0, 3, 1, 2))


def test_reduce_window_pooling():
    x = RNG.standard_normal((2, 7, 6, 3))
    got = lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    want = x[:, :6].reshape(2, 3, 2, 3, 2, 3).max(axis=(2, 4))
    np.testing.assert_array_equal(np.asarray(got), want)
    s = lax.reduce_window(x, 0.0, jnp.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = sum(xp[:, i:i + 7, j:j + 6] for i in range(3) for j in range(3))
    np.testing.assert_allclose(np.asarray(s), want, rtol=1e-12)
    g = nova.grad(lambda x: jnp.sum(lax.reduce_window(x, -np.inf, lax.max, (2, 2), (2, 2))))(
        np.array([[1.0, 5.0], [3.0, 2.0]]))
    np.testing.assert_array_equal(np.asarray(g), [[0.0, 1.0], [0.0, 0.0]])
    m = nova.jit(lambda x: lax.reduce_window(x, 1.0, lax.mul, (2,), (1,)))(np.arange(1.0, 5.0))
    np.testing.assert_array_equal(np.asarray(m), [2.0, 6.0, 12.0])


@pytest.mark.parametrize("jit", [False, True])
def test_reduce_window_extremum_gradient_goes_to_one_element(jit):
    def grad_of(op, init, x, window=(2, 2), strides=(1, 1)):
        f = nova.grad(lambda x: jnp.sum(lax.reduce_window(x, init, op, window, strides)))
        return np.asarray((nova.jit(f) if jit else f)(x))

    # ties: the first maximum in window order takes the whole derivative (XLA, PyTorch)
    np.testing.assert_array_equal(grad_of(lax.max, -np.inf, np.array([[1.0, 1.0], [1.0, 0.0]])),
                                  [[1.0, 0.0], [0.0, 0.0]])
    np.testing.assert_array_equal(grad_of(lax.max, -np.inf, np.array([[0.0, 1.0], [1.0, 1.0]])),
                                  [[0.0, 1.0], [0.0, 0.0]])
    np.testing.assert_array_equal(grad_of(lax.min, np.inf, np.array([[1.0, 0.0], [0.0, 0.0]])),
                                  [[0.0, 1.0], [0.0, 0.0]])
    # a NaN wins (the last one, as XLA's select with >=); its value comes out NaN
    x = np.array([[1.0, np.nan], [0.0, np.nan]])
    np.testing.assert_array_equal(grad_of(lax.max, -np.inf, x), [[0.0, 0.0], [0.0, 1.0]])
    assert np.isnan(np.asarray(lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1))).item())
    # overlapping windows over an all-equal input: each window sends 1 to its first element
    np.testing.assert_array_equal(grad_of(lax.max, -np.inf, np.ones((3, 3))),
                                  [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    # a window of padding only: init is the value, no derivative reaches the input
    f = lambda x: jnp.sum(lax.reduce_window(x, 0.0, lax.max, (2,), (1,), ((1, 0),)))
    np.testing.assert_array_equal(np.asarray(nova.grad(f)(np.array([-1.0, 2.0]))), [0.0, 1.0])
    # integers fold plainly
    xi = np.array([[3, 1], [3, 2]], np.int32)
    assert int(lax.reduce_window(xi, np.int32(-100), lax.max, (2, 2), (1, 1))[0, 0]) == 3


def _np_reduce_window(x, init, fold, window, strides, pads, base):
    dil = np.full([(n - 1) * b + 1 for n, b in zip(x.shape, base)], init)
    dil[tuple(slice(None, None, b) for b in base)] = x
    xp = np.pad(dil, pads, constant_values=init)
    out = [(p - k) // s + 1 for p, k, s in zip(xp.shape, window, strides)]
    res = np.empty(out)
    for i in itertools.product(*(range(o) for o in out)):
        win = xp[tuple(slice(j * s, j * s + k) for j, s, k in zip(i, strides, window))]
        res[i] = fold(win)
    return res


@pytest.mark.parametrize("base", [(2, 1), (3, 2)])
def test_reduce_window_base_dilation(base):
    x = RNG.standard_normal((5, 7))
    pads = ((1, 2), (0, 1))
    for op, init, fold in ((lax.add, 0.0, np.sum), (lax.max, -np.inf, np.max)):
        got = nova.jit(lambda v: lax.reduce_window(v, init, op, (2, 3), (1, 2), pads,
                                                   base_dilation=base))(x)
        want = _np_reduce_window(x, init, fold, (2, 3), (1, 2), pads, base)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    # "SAME" pads the dilated shape: ceil(dilated / stride) outputs per axis
    same = lax.reduce_window(x, 0.0, lax.add, (3, 2), (2, 1), "SAME", base_dilation=base)
    assert same.shape == tuple(-(-((n - 1) * b + 1) // s) for n, b, s in
                               zip(x.shape, base, (2, 1)))
    # the gradient of a sum reaches each element once per window covering it
    g = nova.grad(lambda v: jnp.sum(lax.reduce_window(v, 0.0, lax.add, (2, 3), (1, 2), pads,
                                                      base_dilation=base)))(x)
    ones = _np_reduce_window(np.ones_like(x), 0.0, np.sum, (2, 3), (1, 2), pads, base)
    assert float(np.asarray(g).sum()) == pytest.approx(float(ones.sum()))
    with pytest.raises(ValueError, match="base_dilation must be positive"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), base_dilation=(0, 1))


def test_the_padded_input_is_stored_and_the_patches_are_vector_copies():
    """Fusion's read_through_windows (nova/compiler/fusion_rules.py): the pad that a 3x3 SAME
    convolution reads through nine windows is a kernel of its own, padded to whole vector
    chunks, so neither it nor the patch kernel tests a bound inside a vector chunk (inlined
    into the patch kernel, column 1's bound made that kernel scalar code); the compiled value
    and gradients agree with the interpreter's and the definition's."""
    from nova.compiler.backend_cpu import compile_program
    from nova.compiler.pipeline import run_passes
    from nova.core.interpreter import run_program

    x = RNG.standard_normal((2, 3, 4, 16)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    f = nova.value_and_grad(lambda x, w: jnp.sum(lax.conv(x, w, (1, 1), "SAME") ** 2),
                            argnums=(0, 1))
    program = run_passes(nova.make_program(f)(x, w))
    exe = compile_program(program)
    got = exe([x, w])
    for g, r in zip(got, run_program(program, [x, w]), strict=True):
        np.testing.assert_allclose(g, r, rtol=2e-5, atol=2e-5 * float(np.abs(r).max()))
    pads = _pads("SAME", (4, 16), (3, 3), (1, 1), (1, 1))
    want = (_ref_conv(x, w, (1, 1), pads, (1, 1), (1, 1), 1) ** 2).sum()
    np.testing.assert_allclose(got[0], want, rtol=1e-5)
    kernels = {tuple(e.prim.name for e in k.kernel.program.eqns if e.prim.name != "constant"):
               k.kernel for k in exe.launches}
    (pad,) = [k for ops, k in kernels.items() if ops == ("pad",)]
    assert pad.outputs[0].type.shape == (2, 3, 6, 32)  # 8 zeros each side of the 16 columns
    (patches,) = [k for ops, k in kernels.items() if "concatenate" in ops]
    assert "pad" not in {e.prim.name for e in patches.program.eqns}
    assert patches.schedule["vector_width"] > 1 and pad.schedule["vector_width"] > 1


def test_preferred_element_type_accumulates_in_the_wider_type():
    # 400 float16 products of ~0.1 each: float16 accumulation would lose ~2 digits
    x = np.full((1, 1, 20, 20), 0.1, np.float16)
    w = np.ones((1, 1, 20, 20), np.float16)
    y = lax.conv(x, w, (1, 1), "VALID", preferred_element_type=np.float32)
    assert y.dtype == np.float32
    want = np.float32(np.float16(0.1)) * 400
    np.testing.assert_allclose(np.asarray(y).item(), want, rtol=1e-6)


def test_errors():
    x, w = np.ones((1, 3, 5, 5)), np.ones((2, 3, 3, 3))
    with pytest.raises(TypeError, match="lhs has dtype float64, rhs float32"):
        lax.conv(x, w.astype(np.float32), (1, 1), "SAME")
    with pytest.raises(ShapeError, match="lhs has 3 features and rhs 2 per group"):
        lax.conv(x, np.ones((2, 2, 3, 3)), (1, 1), "SAME")
    with pytest.raises(ValueError, match="unknown padding 'FULL'"):
        lax.conv(x, w, (1, 1), "FULL")
    with pytest.raises(ValueError, match="string padding is not implemented for a transposed"):
        lax.conv_general_dilated(x, w, (1, 1), "SAME", lhs_dilation=(2, 2))
    with pytest.raises(ValueError, match="window_strides must be 2 positive ints"):
        lax.conv(x, w, (1,), "SAME")
    with pytest.raises(ValueError, match="computation must be lax.add"):
        lax.reduce_window(x, 0.0, lambda a, b: a - b, (1, 1, 2, 2), (1, 1, 2, 2))
    with pytest.raises(ValueError, match="window_strides must be positive"):
        lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 0, 2))
    with pytest.raises(ValueError, match="window_dimensions must be positive"):
        lax.reduce_window(x, 0.0, lax.add, (1, 1, 0, 2), (1, 1, 1, 1))
    with pytest.raises(ValueError, match="padding must be 4"):
        lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 1, 1), ((0, 0),))
    with pytest.raises(TypeError, match="operands must be floats"):
        lax.conv(x.astype(np.int32), w.astype(np.int32), (1, 1), "SAME")
