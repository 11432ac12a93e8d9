"""Bad input gets a clear error of a precise type naming shapes, dtypes, arguments and the line."""

import numpy as np
import pytest

import nova
import nova.numpy as jnp


def test_broadcast_mismatch_names_shapes_and_line():
    with pytest.raises(nova.ShapeError, match=r"\(3,\) \(4,\).*test_errors.py:\d+"):
        jnp.ones(3) + jnp.ones(4)
    with pytest.raises(ValueError):  # ShapeError is a ValueError, as NumPy raises
        jnp.add(jnp.ones((2, 3)), jnp.ones((3, 2)))


def test_broadcast_mismatch_inside_jit_names_line():
    f = nova.jit(lambda x, y: x * y)
    with pytest.raises(nova.ShapeError, match=r"\(2,\) \(5,\)"):
        f(np.ones(2), np.ones(5))


def test_matmul_inner_dimension_mismatch():
    with pytest.raises(nova.ShapeError, match=r"\(3, 4\) and \(5, 2\).*test_errors.py"):
        jnp.ones((3, 4)) @ jnp.ones((5, 2))
    with pytest.raises(ValueError, match="at least 1-D"):
        jnp.matmul(jnp.ones(()), jnp.ones(3))


def test_reshape_size_mismatch():
    with pytest.raises(nova.ShapeError, match=r"shape \(2, 3\).*into \(4, 2\)"):
        jnp.ones((2, 3)).reshape(4, 2)
    with pytest.raises(nova.ShapeError):
        jnp.reshape(jnp.ones(7), (-1, 2))


def test_escaped_tracer_names_creation_line():
    leaked = []

    @nova.jit
    def f(x):
        y = jnp.sin(x)
        leaked.append(y)
        return y

    f(np.ones(3))
    with pytest.raises(nova.UnexpectedTracerError, match=r"created at .*test_errors.py:\d+ escaped"):
        leaked[0] + 1.0
    with pytest.raises(nova.UnexpectedTracerError):
        nova.jit(lambda x: x + leaked[0])(np.ones(3))


def test_escaped_tracer_from_grad():
    leaked = []

    def loss(x):
        leaked.append(x * 2.0)
        return jnp.sum(x)

    nova.grad(loss)(np.ones(2))
    with pytest.raises(nova.UnexpectedTracerError):
        jnp.exp(leaked[0])


@pytest.mark.parametrize("conv", [bool, int, float])
def test_python_conversion_of_traced_value(conv):
    @nova.jit
    def f(x, flag):
        if conv(flag):
            return x
        return -x

    err = nova.TracerBoolConversionError if conv is bool else nova.ConcretizationTypeError
    with pytest.raises(err, match=r"argument 'flag'.*static_argnums"):
        f(np.ones(2), 1.0)


def test_if_on_traced_comparison_names_argument():
    @nova.jit
    def relu_branchy(x):
        return x if x > 0 else 0 * x

    with pytest.raises(nova.TracerBoolConversionError, match="argument 'x'"):
        relu_branchy(1.0)
    # the suggested fix works
    g = nova.jit(lambda x, s: x * 2 if s > 0 else x, static_argnums=1)
    assert float(g(np.float32(3), 1)) == 6.0


def test_numpy_conversion_of_traced_value():
    with pytest.raises(nova.ConcretizationTypeError, match="np.asarray"):
        nova.jit(lambda x: np.asarray(x))(np.ones(2))


def test_bad_axis():
    with pytest.raises(ValueError, match="axis 2 is out of bounds for an array of dimension 2"):
        jnp.sum(jnp.ones((2, 3)), axis=2)
    with pytest.raises(ValueError, match="repeated axis"):
        jnp.sum(jnp.ones((2, 3)), axis=(0, -2))
    with pytest.raises(TypeError, match="axis must be an integer"):
        jnp.sum(jnp.ones((2, 3)), axis=1.5)


def test_unknown_dtype_and_bad_argument_types():
    with pytest.raises(TypeError, match="unknown dtype 'float128x'"):
        jnp.zeros(3, dtype="float128x")
    with pytest.raises(TypeError, match="uint64 is not supported"):
        jnp.zeros(3, dtype=np.uint64)
    with pytest.raises(TypeError, match="str"):
        jnp.exp("hello")
    with pytest.raises(TypeError, match="shape must be an int or a sequence of ints"):
        jnp.zeros("abc")
    with pytest.raises(ValueError, match="negative dimensions"):
        jnp.ones((2, -1))
    with pytest.raises(TypeError, match="argument 'x' of type object"):
        nova.jit(lambda x: x)(object())


def test_arrays_are_immutable():
    x = jnp.ones(3)
    with pytest.raises(TypeError, match=r"x.at\[idx\].set"):
        x[0] = 2.0


def test_config_errors():
    with pytest.raises(KeyError, match="unknown config flag"):
        nova.config.update("no_such_flag", 1)
    with pytest.raises(ValueError, match="matmul_precision"):
        nova.config.update("matmul_precision", "fast")


def test_grad_of_tuple_output_and_has_aux_misuse():
    x = np.ones(3)
    with pytest.raises(TypeError, match=r"return a scalar array, got a tuple.*has_aux.*test_errors.py"):
        nova.grad(lambda x: (jnp.sum(x), x))(x)
    with pytest.raises(TypeError, match=r"has_aux=True.*pair.*test_errors.py"):
        nova.grad(lambda x: jnp.sum(x), has_aux=True)(x)


def test_bad_static_and_donate_arguments():
    with pytest.raises(ValueError, match=r"static_argnums \[3\] out of range"):
        nova.jit(lambda x: x, static_argnums=3)
    with pytest.raises(ValueError, match=r"static_argnames \['m'\] name no parameter"):
        nova.jit(lambda x, n: x, static_argnames="m")
    with pytest.raises(ValueError, match="donate_argnums"):
        nova.jit(lambda x: x, donate_argnums=(1,))


def test_numpy_conversion_of_escaped_tracer_says_escaped():
    leaked = []
    nova.jit(lambda x: leaked.append(x * 2) or x)(np.ones(2))
    with pytest.raises(nova.UnexpectedTracerError, match="escaped"):
        np.asarray(leaked[0])


def test_boolean_subtract_is_a_type_error_on_every_backend():
    """NumPy and JAX refuse `-` on booleans; the compiled backend computed a xor (found by
    review), the interpreter raised NumPy's error: now both raise the same TypeError."""
    import nova

    a = jnp.asarray(np.array([True, False]))
    for backend in ("compiled", "interpreter"):
        nova.config.update("backend", backend)
        try:
            with pytest.raises(TypeError, match="boolean subtract.*test_errors.py"):
                a - a
            with pytest.raises(TypeError, match="boolean subtract"):
                jnp.subtract(a, True)
        finally:
            nova.config.update("backend", "compiled")


def test_python_integers_out_of_the_dtype_range_raise_overflow_error():
    """As in NumPy 2 and JAX: `int32 array + 2**40` used to wrap silently (found by review);
    NumPy arrays and explicit casts still wrap."""
    x = jnp.asarray(np.array([1, 2], np.int32))
    with pytest.raises(OverflowError, match="1099511627776 out of bounds for int32.*test_errors"):
        x + 2**40
    with pytest.raises(OverflowError, match="-1 out of bounds for uint8"):
        jnp.asarray(np.array([1], np.uint8)) + (-1)
    with pytest.raises(OverflowError, match="300 out of bounds for uint8"):
        jnp.asarray([1, 300], dtype=jnp.uint8)
    assert np.asarray(x + 5).tolist() == [6, 7]
    wrapped = jnp.asarray(np.array([300], np.int64), dtype=jnp.uint8)
    assert np.asarray(wrapped).tolist() == [44]


def test_a_users_copy_of_a_nova_module_is_the_users_code(tmp_path, monkeypatch):
    """Code objects of two files compare equal when their contents do: the source-line lookup
    must tell the user's copy of a Nova module from Nova's own (found by review), both ways."""
    import importlib
    import os
    import shutil
    import sys

    import nova.nn.layers as nova_layers

    shutil.copy(nova_layers.__file__, tmp_path / "mylayers_copy.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("mylayers_copy", None)
    mine = importlib.import_module("mylayers_copy")
    key = nova.random.PRNGKey(0)
    lin_nova, lin_mine = nova_layers.Linear.init(key, 4, 3), mine.Linear.init(key, 4, 3)
    nova.jit(lambda x: lin_nova(x))(np.ones((2, 4), np.float32))  # Nova's code seen first
    with pytest.raises(ValueError) as ei:
        lin_mine(np.ones((2, 5), np.float32))
    assert "mylayers_copy.py:" in str(ei.value)
    nova.jit(lambda x: lin_mine(x))(np.ones((3, 4), np.float32))  # the copy seen first
    with pytest.raises(ValueError) as ei:
        lin_nova(np.ones((2, 5), np.float32))
    assert os.path.basename(__file__) + ":" in str(ei.value)


def test_a_recorded_once_value_names_the_line_that_asked_for_it():
    def f(x):
        a = jnp.zeros(())
        b = jnp.zeros(())  # the same value as a, recorded once: created here all the same
        if b:
            return x
        return x + a

    with pytest.raises(nova.TracerBoolConversionError) as ei:
        nova.jit(f)(np.float32(1))
    line = f.__code__.co_firstlineno + 2
    assert f"test_errors.py:{line})" in str(ei.value)
