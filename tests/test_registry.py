"""The primitive registry: every field of the contract is present, and every primitive's VJP and
JVP match central finite differences in float64 (one helper, driven by the registry)."""

import numpy as np
import pytest

import nova  # noqa: F401  (fills the registry)
from nova.core.ir import TensorType
from nova.core.primitive import (
    Cost,
    Elementwise,
    FusionKind,
    IndexMap,
    Reduction,
    Template,
    all_primitives,
)
from nova.core.trace import _reference_eval
from tests.helpers import assert_close, check_prim
from tests.prim_examples import all_examples

PRIMS = all_primitives()
EXAMPLES = all_examples()
CASES = [(name, k) for name in sorted(PRIMS) for k in range(len(EXAMPLES.get(name, [])))]


@pytest.mark.parametrize("name", sorted(PRIMS))
def test_contract_fields(name):
    p = PRIMS[name]
    assert callable(p.shape_rule), f"{name}: no shape rule"
    assert callable(p.impl), f"{name}: no NumPy reference"
    assert callable(p.vjp), f"{name}: no VJP rule"
    assert p.jvp is None or callable(p.jvp)
    assert isinstance(p.fusion, FusionKind), f"{name}: no fusion kind"
    assert isinstance(p.kernel, Elementwise | Reduction | IndexMap | Template), f"{name}: no kernel hook"
    if p.fusion is FusionKind.REDUCTION:
        assert isinstance(p.kernel, Reduction)
    assert callable(p.cost), f"{name}: no cost"
    assert name == "constant" or callable(p.batch), f"{name}: no batching rule (nova.vmap)"
    assert name in EXAMPLES and EXAMPLES[name], f"{name}: no example in tests/prim_examples"


@pytest.mark.parametrize("name,k", CASES)
def test_cost_and_shape_rule(name, k):
    p = PRIMS[name]
    args, params = EXAMPLES[name][k](np.random.default_rng(k))
    params = p.canonical_params(params)
    in_types = [TensorType(np.shape(a), np.asarray(a).dtype) for a in args]
    outs = p.shape_rule(*in_types, **params)
    outs = list(outs) if p.multiple_results else [outs]
    vals = _reference_eval(p, [np.asarray(a) for a in args], params, outs)
    assert [TensorType(v.shape, v.dtype) for v in vals] == outs
    c = p.cost(in_types, outs, **params)
    assert isinstance(c, Cost) and c.bytes >= sum(t.nbytes for t in outs) and c.flops >= 0


class _NumpyBuilder:
    """Evaluates kernel hooks with NumPy, so each hook can be checked against the reference."""

    def const(self, v, dtype):
        # dtype None: the element type of the kernel's operands (float here).
        if dtype is None:
            return np.float64(v)
        return np.asarray(v) if dtype == "index" else np.asarray(v, dtype)

    def __getattr__(self, name):
        table = {
            "add": np.add, "sub": np.subtract, "mul": np.multiply, "neg": np.negative,
            "max": np.maximum, "min": np.minimum, "exp": np.exp, "exp2": np.exp2,
            "expm1": np.expm1, "log": np.log, "log2": np.log2, "log1p": np.log1p,
            "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh, "sin": np.sin, "cos": np.cos,
            "tan": np.tan, "atan": np.arctan, "atan2": np.arctan2, "sqrt": np.sqrt,
            "rsqrt": lambda x: 1 / np.sqrt(x), "abs": np.abs, "sign": np.sign,
            "floor": np.floor, "ceil": np.ceil, "round": np.round, "pow": np.power,
            "isnan": np.isnan, "isinf": np.isinf, "and_": np.bitwise_and, "or_": np.bitwise_or,
            "xor": np.bitwise_xor, "select": np.where,
            "logistic": lambda x: 0.5 * (np.tanh(0.5 * x) + 1),
            "erf": np.frompyfunc(__import__("math").erf, 1, 1),
            "not_": lambda x: ~x,
            "shl": lambda a, b: PRIMS["shift_left"].impl(np.asarray(a), np.asarray(b)),
            "shr": lambda a, b, arithmetic: PRIMS["shift_right_arithmetic" if arithmetic
                                                  else "shift_right_logical"].impl(
                np.asarray(a), np.asarray(b)),
            "cast": lambda x, d: x.astype(d),
            "bitcast": lambda x, d: np.ascontiguousarray(x).view(d),
            "cmp": lambda pred, a, b: getattr(np, {"eq": "equal", "ne": "not_equal", "lt": "less",
                                                   "le": "less_equal", "gt": "greater",
                                                   "ge": "greater_equal"}[pred])(a, b),
        }
        if name in ("div", "rem"):
            # The builder contract for integers: C division (toward zero), and 0 for a zero
            # divisor (what the MLIR builder emits and the reference implements).
            def intdiv(a, b):
                a, b = np.asarray(a), np.asarray(b)
                if a.dtype.kind not in "iu":
                    return a / b if name == "div" else np.fmod(a, b)
                safe = np.where(b == 0, 1, b)
                r = np.trunc(a / safe) if name == "div" else np.fmod(a, safe)
                return np.where(b == 0, 0, r).astype(a.dtype)

            return intdiv
        if name in table:
            return table[name]
        raise AttributeError(f"builder has no op {name}")


@pytest.mark.parametrize("name,k", [c for c in CASES if PRIMS[c[0]].fusion in (FusionKind.ELEMENTWISE, FusionKind.MOVEMENT)])
def test_kernel_hook_matches_reference(name, k):
    """Elementwise bodies and movement index maps, evaluated by a NumPy builder, equal impl."""
    p = PRIMS[name]
    args, params = EXAMPLES[name][k](np.random.default_rng(k))
    params = p.canonical_params(params)
    args = [np.asarray(a) for a in args]
    expected = np.asarray(p.impl(*args, **params))
    b = _NumpyBuilder()
    if isinstance(p.kernel, Elementwise):
        got = p.kernel.body(b, *args, **params)
        assert_close(np.broadcast_to(np.asarray(got, expected.dtype), expected.shape), expected)
    elif isinstance(p.kernel, IndexMap):
        in_types = [TensorType(a.shape, a.dtype) for a in args]
        idx = np.indices(expected.shape) if expected.ndim else ()
        got_idx = p.kernel.index_map(b, tuple(idx), in_types, **params)
        if not args:
            got = np.broadcast_to(np.asarray(got_idx), expected.shape)
        else:
            got = np.broadcast_to(
                args[0][tuple(np.broadcast_to(np.asarray(i), expected.shape) for i in got_idx)],
                expected.shape,
            )
        assert_close(got, expected)


def _has_float_input(name, k):
    args, _ = EXAMPLES[name][k](np.random.default_rng(k))
    return any(np.asarray(a).dtype.kind == "f" for a in args)


# Integer-only examples of differentiable primitives (e.g. integer division) check the forward
# only; every differentiable primitive must have at least one float example.
# The host callbacks' rules raise by design (a Python function has no derivative Nova can
# see); tests/test_callbacks.py checks that they do. The collectives' references see one member
# of a replicated axis, and their derivatives are collectives over the whole axis: they are
# checked against JAX's under vmap in tests/test_collectives.py.
_RAISING_RULES = {"pure_callback", "io_callback", "psum", "pmax", "pmin", "all_gather",
                  "psum_scatter", "ppermute", "all_to_all"}
# The complex primitives' derivatives follow JAX's convention for complex values (transpose
# without conjugation), which a real finite difference does not see: tests/test_complex.py
# checks them against JAX's.
_COMPLEX_RULES = {"real", "imag", "conj", "complex"}
DIFF_CASES = [c for c in CASES if PRIMS[c[0]].differentiable and _has_float_input(*c)
              and c[0] not in _RAISING_RULES | _COMPLEX_RULES]


def test_every_differentiable_primitive_has_a_float_example():
    covered = {n for n, _ in DIFF_CASES}
    missing = [n for n, p in PRIMS.items() if p.differentiable and n not in covered
               and n not in _RAISING_RULES | _COMPLEX_RULES]
    assert not missing, f"no float example to check the derivatives of: {missing}"


# Primitives with forward mode only, as in JAX: a while loop's trip count is known only when it
# runs, so it has no transpose (its VJP rule raises; tests/test_control_flow.py checks that).
FORWARD_ONLY = {"while"}


@pytest.mark.parametrize("name,k", DIFF_CASES)
def test_vjp_jvp_finite_differences(name, k):
    p = PRIMS[name]
    args, params = EXAMPLES[name][k](np.random.default_rng(k))
    modes = ("fwd",) if name in FORWARD_ONLY else ("rev", "fwd")
    check_prim(p, [np.asarray(a) for a in args], params, modes=modes)
