"""The Program: printing in MLIR syntax, parse round trip, verification and structural hash."""

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova.core.ir import Eqn, IRError, IRParseError, Program, TensorType, Var, parse_program
from nova.core.primitive import lookup


def mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = jnp.tanh(x @ w1 + b1)
    out = h @ w2 + b2
    return jnp.mean((out - y) ** 2)


def _params(rng):
    return [rng.standard_normal((4, 8)).astype(np.float32), np.zeros(8, np.float32),
            rng.standard_normal((8, 2)).astype(np.float32), np.zeros(2, np.float32)]


def test_prints_mlir_syntax():
    rng = np.random.default_rng(0)
    p = nova.make_program(mlp_loss)(_params(rng), np.ones((3, 4), np.float32), np.ones((3, 2), np.float32))
    text = p.as_text()
    assert text.startswith("func.func @main(%0: tensor<4x8xf32>, %1: tensor<8xf32>")
    assert "nova.dot_general" in text and "nova.tanh" in text
    assert "-> tensor<3x8xf32>" in text
    # Each equation records the user's source line.
    assert 'loc("' in text and "test_ir.py" in text


def test_round_trip_print_parse_print():
    rng = np.random.default_rng(1)
    p = nova.make_program(nova.value_and_grad(mlp_loss))(
        _params(rng), np.ones((3, 4), np.float32), np.ones((3, 2), np.float32))
    text = p.as_text()
    q = parse_program(text)
    assert q.as_text() == text
    assert q.structural_hash() == p.structural_hash()


def test_round_trip_large_constants_use_resources():
    c = np.arange(40, dtype=np.float32).reshape(5, 8)
    p = nova.make_program(lambda x: x + jnp.asarray(c))(np.ones((5, 8), np.float32))
    text = p.as_text()
    assert "dense_resource<" in text and "dialect_resources" in text
    q = parse_program(text)
    assert q.as_text() == text
    from nova.core.interpreter import run_program

    np.testing.assert_array_equal(run_program(q, [np.ones((5, 8), np.float32)])[0], c + 1)


def test_round_trip_special_values_and_dtypes():
    def f(x, i):
        y = jnp.where(x > 0, x, -jnp.inf)
        z = jnp.maximum(y, jnp.asarray(np.array([np.nan, 1.0, -2.5], np.float32)))
        return z.astype(jnp.bfloat16), (i + 3).astype(jnp.uint8), x.astype(jnp.float16) > 0
    p = nova.make_program(f)(np.ones(3, np.float32), np.ones(3, np.int32))
    assert parse_program(p.as_text()).as_text() == p.as_text()


def test_hash_invariant_under_renaming_and_locations():
    a = nova.make_program(lambda x, y: jnp.exp(x) * y)(np.ones(3, np.float32), np.ones(3, np.float32))
    b = nova.make_program(lambda u, v: jnp.exp(u) * v)(np.ones(3, np.float32), np.ones(3, np.float32))
    assert a.structural_hash() == b.structural_hash()
    # Built by hand with different Var objects: same structure, same hash.
    t = TensorType((3,), np.float32)
    x, y, e, m = Var(t), Var(t), Var(t), Var(t)
    hand = Program([x, y], [Eqn(lookup("exp"), [x], {}, [e], "elsewhere.py:1"),
                            Eqn(lookup("mul"), [e, y], {}, [m])], [m])
    assert hand.structural_hash() == a.structural_hash()


@pytest.mark.parametrize("g", [
    lambda x, y: jnp.exp(y) * x,          # operands swapped
    lambda x, y: jnp.exp(x) + y,          # different op
    lambda x, y: jnp.exp(x) * y * 1.0,    # extra equation
])
def test_hash_differs_for_different_programs(g):
    args = (np.ones(3, np.float32), np.ones(3, np.float32))
    a = nova.make_program(lambda x, y: jnp.exp(x) * y)(*args)
    assert nova.make_program(g)(*args).structural_hash() != a.structural_hash()


def test_hash_differs_for_different_constants_and_shapes():
    f1 = nova.make_program(lambda x: x * 2.0)(np.ones(3, np.float32))
    f2 = nova.make_program(lambda x: x * 3.0)(np.ones(3, np.float32))
    f3 = nova.make_program(lambda x: x * 2.0)(np.ones(4, np.float32))
    assert len({f1.structural_hash(), f2.structural_hash(), f3.structural_hash()}) == 3


def test_verify_rejects_bad_programs():
    t = TensorType((3,), np.float32)
    x, y = Var(t), Var(TensorType((4,), np.float32))
    bad_type = Program([x], [Eqn(lookup("exp"), [x], {}, [y])], [y])
    with pytest.raises(IRError, match="shape rule"):
        bad_type.verify()
    z = Var(t)
    use_before_def = Program([x], [Eqn(lookup("exp"), [z], {}, [y])], [y])
    with pytest.raises(IRError, match="before its definition"):
        use_before_def.verify()
    undefined_out = Program([x], [], [z])
    with pytest.raises(IRError, match="never defined"):
        undefined_out.verify()


def test_parse_errors_name_the_line():
    with pytest.raises(IRParseError, match="first line"):
        parse_program("nonsense")
    text = "func.func @main(%0: tensor<3xf32>) -> (tensor<3xf32>) {\n  %1 = nova.exp %7 : (tensor<3xf32>) -> tensor<3xf32>\n  return %1 : tensor<3xf32>\n}\n"
    with pytest.raises(IRParseError, match="line 2: undefined value %7"):
        parse_program(text)
    with pytest.raises(KeyError, match="nova.frobnicate"):
        parse_program(text.replace("nova.exp %7", "nova.frobnicate %0"))


def test_program_count_helper():
    p = nova.make_program(lambda x: jnp.sum(jnp.exp(x) * jnp.exp(x)))(np.ones(3, np.float32))
    assert p.count("exp") == 2 and p.count("reduce_sum") == 1


def test_backward_equations_carry_the_forward_line():
    def loss(x):
        y = jnp.exp(x)  # the forward line of exp
        return jnp.sum(y * y)

    p = nova.make_program(nova.grad(loss))(np.ones(3, np.float32))
    import inspect

    exp_line = inspect.getsource(loss).splitlines()[1]
    assert "jnp.exp" in exp_line
    (fwd,) = [e for e in p.eqns if e.prim.name == "exp"]
    # the backward of exp multiplies by exp(x): its equations carry exp's forward line
    muls = [e for e in p.eqns if e.prim.name == "mul" and e.source == fwd.source]
    assert muls, [(e.prim.name, e.source) for e in p.eqns]


def test_tensor_types_are_interned_immutable_values():
    import pickle

    a = TensorType((2, 3), np.float32)
    assert TensorType([2, 3], "float32") is a
    assert TensorType((np.int64(2), 3), np.dtype("f4")) is a
    assert a == TensorType((2, 3), np.float32) and hash(a) == hash(TensorType((2, 3), "f4"))
    assert a != TensorType((3, 2), np.float32) and a != TensorType((2, 3), np.float64)
    assert (a.shape, a.dtype, a.size, a.nbytes, a.ndim, str(a)) == (
        (2, 3), np.dtype(np.float32), 6, 24, 2, "tensor<2x3xf32>")
    assert pickle.loads(pickle.dumps(a)) is a
    with pytest.raises(AttributeError, match="immutable"):
        a.shape = (6,)
    with pytest.raises(TypeError):
        TensorType(3, np.float32)
    with pytest.raises(TypeError):
        TensorType((2,), "not-a-dtype")


def test_tensor_type_from_a_one_shot_iterator_and_unsupported_dtypes():
    """A generator shape is read once (it used to intern an empty shape under the key of the
    real one, corrupting every later (2, 3) float32 type in the process)."""
    t = TensorType((d for d in (2, 3)), np.dtype(np.float32))
    assert t.shape == (2, 3) and TensorType((2, 3), np.dtype(np.float32)) is t
    assert TensorType(iter([4]), np.float32).shape == (4,)
    with pytest.raises(TypeError, match="not one Nova supports"):
        TensorType((2,), "U5")
