"""`pmap`, as jax.pmap, on Nova's one device: the mapped computation is vectorized (vmap with a
named axis, so the collectives in nova/collectives.py work) and compiled (jit) once per
signature, instead of being replicated over devices."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nova.batching import vmap
from nova.jit import jit

__all__ = ["pmap"]


def _as_tuple(x) -> tuple:
    if x is None:
        return ()
    return (x,) if isinstance(x, int) else tuple(x)


def pmap(fun: Callable | None = None, axis_name=None, *, in_axes=0, out_axes=0,
         static_broadcasted_argnums: int | Sequence[int] = (), devices=None, backend=None,
         axis_size: int | None = None, donate_argnums: int | Sequence[int] = ()):
    """Maps fun over a leading axis as jax.pmap does, with the collectives of its axis_name
    (`nova.lax.psum(x, axis_name)`, `all_gather`, `axis_index`, ...) over that axis.

    Nova has one device, so the members run vectorized on it (`jit(vmap(fun, in_axes,
    out_axes, axis_name=axis_name))`): the mapped axis may have any size (JAX's pmap refuses
    more members than devices), and the results are ordinary Arrays on the default device.
    in_axes / out_axes / axis_size: as `nova.vmap`. static_broadcasted_argnums: positional
    arguments passed to fun as static Python values (hashable; a new value recompiles), not
    mapped. donate_argnums: as `nova.jit`. devices and backend are accepted for JAX's
    signature and must name no more than Nova's device (ValueError otherwise).
    Shapes and errors: as vmap (a mapped leaf of shape (B, ...) is seen by fun without B).
    """
    if fun is None:  # @pmap(axis_name="i")
        return lambda f: pmap(f, axis_name, in_axes=in_axes, out_axes=out_axes,
                              static_broadcasted_argnums=static_broadcasted_argnums,
                              devices=devices, backend=backend, axis_size=axis_size,
                              donate_argnums=donate_argnums)
    if not callable(fun):
        raise TypeError(f"pmap: expected a function, got {type(fun).__name__}")
    if devices is not None and len(list(devices)) > 1:
        raise ValueError(f"pmap: Nova runs on one device, got devices={devices!r}")
    static = _as_tuple(static_broadcasted_argnums)
    donate = _as_tuple(donate_argnums)
    compiled: dict = {}  # (number of arguments, static values) -> jitted vmap

    def call(*args):
        n = len(args)
        fixed = {(i + n if i < 0 else i): args[i] for i in static}
        if any(not 0 <= i < n for i in fixed):
            raise ValueError(f"pmap: static_broadcasted_argnums {static} is out of range for "
                             f"{n} positional arguments")
        key = (n, tuple(sorted(fixed.items())))
        try:
            f = compiled.get(key)
        except TypeError:
            raise TypeError("pmap: static_broadcasted_argnums arguments must be hashable") from None
        if f is None:
            f = compiled[key] = _compile(n, fixed)
        return f(*[a for i, a in enumerate(args) if i not in fixed])

    def _compile(n, fixed):
        kept = [i for i in range(n) if i not in fixed]
        axes = in_axes
        if isinstance(in_axes, tuple | list) and len(in_axes) == n:
            axes = tuple(in_axes[i] for i in kept)

        def body(*m):
            it = iter(m)
            return fun(*[fixed[i] if i in fixed else next(it) for i in range(n)])

        body.__name__ = getattr(fun, "__name__", "f")
        batched = vmap(body, in_axes=axes, out_axes=out_axes, axis_size=axis_size,
                       axis_name=axis_name)
        return jit(batched, donate_argnums=tuple(kept.index(i) for i in donate if i in kept))

    call.__name__ = f"pmap({getattr(fun, '__name__', 'f')})"
    call.__wrapped__ = fun
    return call
