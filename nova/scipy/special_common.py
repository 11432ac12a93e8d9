"""Private helpers shared by the nova.scipy.special modules (promotion, safe inputs, loops)."""

from __future__ import annotations

import sys

import nova.numpy as jnp
from nova.core import dtypes
from nova.numpy_impl.util import promote, where_am_i


def _float(*args):
    """The arguments of a real-only function promoted to one float dtype and broadcast; a
    complex argument raises TypeError naming the calling function (as jax.scipy.special)."""
    out = promote("special", *args, to_inexact=True)
    if out and dtypes.is_complex(out[0].dtype):
        frame = sys._getframe(1)
        while frame.f_code.co_name.startswith("_") and frame.f_back is not None:
            frame = frame.f_back  # name the public function, not its private helper
        name = frame.f_code.co_name
        raise TypeError(f"{name}: got an argument of dtype {out[0].dtype.name}; this function "
                        f"takes real arguments only{where_am_i()}")
    return out


def _inexact(*args):
    """As _float, but complex arguments are kept (for the functions defined at complex z)."""
    return promote("special", *args, to_inexact=True)


def _lax():
    from nova import lax

    return lax


def _safe(cond, x, fill):
    """x where cond, else `fill`: the input of a branch that select() later discards, kept in
    that branch's domain so its value and derivative stay finite."""
    return jnp.where(cond, x, jnp.full_like(x, fill))


def _fori(n, body, init):
    return _lax().fori_loop(0, n, body, init)


def _tiny(x):
    return float(jnp.finfo(x.dtype).tiny) * 1e3


def _is_int(x):
    return x == jnp.floor(x)


_EULER = 0.5772156649015329
