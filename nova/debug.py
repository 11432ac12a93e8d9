"""nova.debug: printing and inspecting values from inside traced code (jax.debug).

`nova.debug.print("loss {l}", l=loss)` inside `jit` prints the value each time the compiled
function runs (a plain `print` would show a tracer, once, while tracing). Both functions are
io_callbacks (nova/callbacks.py): never dropped or merged by the compiler, run in program
order, once per loop iteration inside lax.scan / while_loop bodies, no obstacle to
differentiating the values they show (a derivative does not print them again).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable

import numpy as np

from nova.callbacks import io_callback
from nova.core.array import Array
from nova.core.pytree import tree_flatten, tree_unflatten

__all__ = ["callback", "print"]


def _is_value(x) -> bool:
    return isinstance(x, Array | np.ndarray | np.generic | bool | int | float)


def _call_with_static(name: str, fn: Callable, args, kwargs):
    """(host function, array operands): leaves that are not arrays or numbers (strings,
    None, objects) are passed to fn unchanged instead of becoming operands, as in JAX."""
    leaves, tree = tree_flatten((list(args), dict(kwargs)))
    dynamic = [i for i, x in enumerate(leaves) if _is_value(x)]

    def call(*values):
        full = list(leaves)
        for i, v in zip(dynamic, values, strict=True):
            full[i] = v
        a, k = tree_unflatten(tree, full)
        fn(*a, **k)

    call.__qualname__ = getattr(fn, "__qualname__", name)
    return call, [leaves[i] for i in dynamic]


def callback(callback: Callable, *args, ordered: bool = False, **kwargs) -> None:
    """Calls `callback(*args, **kwargs)` on the host with the arguments' values as NumPy
    arrays (pytrees of them), eagerly or each time a jitted function runs; its return value
    is ignored (jax.debug.callback). Under vmap it is called once per batch element.
    Arguments that are not arrays or numbers (strings, None, other objects) reach the callback
    unchanged. Raises TypeError for a non-callable callback."""
    if not callable(callback):
        raise TypeError(f"nova.debug.callback: callback must be callable, got "
                        f"{type(callback).__name__}")
    call, values = _call_with_static("debug.callback", callback, args, kwargs)
    io_callback(call, None, *values, ordered=ordered)


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:
    """Prints `fmt.format(*args, **kwargs)` with the arguments' values (NumPy arrays), eagerly
    or each time a jitted function runs (jax.debug.print). Raises TypeError when fmt is not a
    str."""
    if not isinstance(fmt, str):
        raise TypeError(f"nova.debug.print: fmt must be a str, got {type(fmt).__name__}")

    def show(*a, **k):
        builtins.print(fmt.format(*a, **k))

    call, values = _call_with_static("debug.print", show, args, kwargs)
    io_callback(call, None, *values, ordered=ordered)
