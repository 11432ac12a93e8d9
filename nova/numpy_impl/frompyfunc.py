"""nova.numpy.frompyfunc (jnp.frompyfunc): a `nova.numpy.ufunc` of a user's function of
scalars, mapped elementwise with nova.numpy.vectorize."""

from __future__ import annotations

import operator

from nova.numpy_impl.util import where_am_i

__all__ = ["frompyfunc"]


def _count(name: str, value) -> int:
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"frompyfunc: {name} must be an integer, got {type(value).__name__} "
                        f"{value!r}") from None
    if n < 1:
        raise ValueError(f"frompyfunc: {name} must be at least 1, got {n}")
    return int(n)


def frompyfunc(func, /, nin, nout, *, identity=None):
    """A `nova.numpy.ufunc` from a function of scalars written with Nova ops (numpy.frompyfunc,
    jax.numpy.frompyfunc).

    func(x1, ..., x_nin) is called with 0-d Arrays, never with Python scalars (under
    nova.vmap, jit and the scans of the methods they are tracers), so it is written with
    nova.numpy / nova.lax ops, without Python control flow on values; it returns one 0-d
    Array, or a tuple of `nout` of them. Calling the ufunc
    with `nin` arrays maps func over their broadcast shape with nova.vmap (nova.numpy.vectorize),
    so results have the broadcast shape, and the dtype func gives. The ufunc has nin, nout,
    nargs (nin + nout, NumPy's count) and identity (used by reduce of an empty axis and by
    where=). For nin == 2 and nout == 1 it has outer, reduce, accumulate and reduceat (folds of
    func along an axis, lax.scan: func need not be associative), and for nin <= 2, nout == 1,
    `at` (unbuffered, as numpy.ufunc.at: repeated indices apply repeatedly).

    Raises TypeError for a non-callable func or a non-integer nin or nout, ValueError for nin
    or nout below 1. Calls raise TypeError for a number of arguments other than nin or for
    keyword arguments, ValueError when func's results do not number nout; the methods raise
    ValueError for a ufunc of the wrong arity (outer, reduce, accumulate and reduceat need
    nin == 2, nout == 1), as jnp.
    """
    if not callable(func):
        raise TypeError(f"frompyfunc: func must be callable, got {type(func).__name__}")
    nin, nout = _count("nin", nin), _count("nout", nout)
    from nova.numpy_impl.ufunc_objects import ufunc
    from nova.numpy_impl.vectorize import vectorize

    name = getattr(func, "__name__", type(func).__name__)
    mapped = vectorize(func)

    def call(*args, **kwargs):
        if kwargs:
            raise TypeError(f"{name}: a ufunc made by frompyfunc takes its {nin} operands "
                            f"positionally, got keyword arguments {sorted(kwargs)}"
                            f"{where_am_i()}")
        if len(args) != nin:
            raise TypeError(f"{name}: the ufunc takes {nin} operand(s) (nin={nin}), got "
                            f"{len(args)}{where_am_i()}")
        out = mapped(*args)
        got = len(out) if isinstance(out, tuple | list) else 1
        if got != nout:
            raise ValueError(f"{name}: func returned {got} value(s), frompyfunc was told "
                             f"nout={nout}{where_am_i()}")
        return tuple(out) if nout > 1 else out

    call.__name__, call.__doc__ = name, func.__doc__
    return ufunc(call, name, identity=identity, nin=nin, nout=nout)
