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

from nova.callbacks import io_callback

__all__ = ["callback", "print"]


def callback(callback: Callable, *args, ordered: bool = False, **kwargs) -> None:
    """Calls `callback(*args, **kwargs)` on the host with the arguments' values as NumPy
    arrays (pytrees of them), eagerly or each time a jitted function runs; its return value
    is ignored (jax.debug.callback). Under vmap it is called once per batch element.
    Raises TypeError for a non-callable callback or non-array arguments."""
    io_callback(callback, None, *args, ordered=ordered, **kwargs)


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:
    """Prints `fmt.format(*args, **kwargs)` with the arguments' values (NumPy arrays), eagerly
    or each time a jitted function runs (jax.debug.print). Raises TypeError when fmt is not a
    str."""
    if not isinstance(fmt, str):
        raise TypeError(f"nova.debug.print: fmt must be a str, got {type(fmt).__name__}")

    def show(*a, **k):
        builtins.print(fmt.format(*a, **k))

    io_callback(show, None, *args, ordered=ordered, **kwargs)
