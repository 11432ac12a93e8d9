"""nova.numpy.vectorize, as jax.numpy.vectorize: a function of scalars (or of core
dimensions, by a signature such as "(n),(n)->()") mapped over the broadcast loop dimensions
with nova.vmap.
"""

from __future__ import annotations

import functools
import re

# nova.numpy is only partly initialized while it imports this module; it is complete by the time
# any function here runs.
from nova.numpy_impl.util import (
    asarray,
    broadcast_shapes,
    broadcast_to,
    where_am_i,
)

__all__ = [
    "vectorize",
]


# --- vectorize ------------------------------------------------------------------------------

_ARG = r"\((?:\w+(?:,\w+)*)?\)"
_SIGNATURE = re.compile(rf"^{_ARG}(?:,{_ARG})*->{_ARG}(?:,{_ARG})*$")


def _parse_signature(signature):
    sig = re.sub(r"\s", "", signature)
    if not _SIGNATURE.match(sig):
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r}{where_am_i()}")
    ins, outs = sig.split("->")
    parse = lambda s: [tuple(re.findall(r"\w+", g)) for g in re.findall(_ARG, s)]
    return parse(ins), parse(outs)


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """pyfunc mapped over the leading (loop) dimensions of its arguments with nova.vmap
    (numpy.vectorize's semantics, jax.numpy.vectorize's implementation).

    excluded: positions (ints) or keyword names of arguments passed through unchanged. signature:
    a gufunc signature such as "(n),(n)->()" giving each argument's core dimensions (its last
    ones); without it every argument is mapped elementwise. The other arguments (keyword ones
    included, after the positional ones in the signature) broadcast over their loop
    dimensions; pyfunc is traced once, on one element of the loop, so it must be traceable.
    Outputs get the broadcast loop shape in front. Raises TypeError for a non-callable pyfunc,
    bad `excluded` entries or the wrong number of arguments, ValueError for a malformed
    signature, an argument with fewer dimensions than its core dimensions, core dimensions of
    inconsistent sizes, or outputs that do not match the signature.
    """
    if not callable(pyfunc):
        raise TypeError(f"vectorize: pyfunc must be callable, got {type(pyfunc).__name__}")
    for e in excluded:
        if isinstance(e, bool) or not isinstance(e, int | str) or isinstance(e, int) and e < 0:
            raise TypeError(f"vectorize: excluded must hold non-negative ints or str names, got "
                            f"{e!r}")
    in_sig, out_sig = _parse_signature(signature) if signature is not None else (None, None)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        pos = [i for i in range(len(args)) if i not in excluded]
        names = [k for k in kwargs if k not in excluded]
        vals = [asarray(args[i]) for i in pos] + [asarray(kwargs[k]) for k in names]
        if in_sig is not None and len(in_sig) != len(vals):
            raise TypeError(f"vectorize: the signature {signature!r} has {len(in_sig)} inputs, "
                            f"got {len(vals)} non-excluded arguments{where_am_i()}")
        cores = in_sig if in_sig is not None else [()] * len(vals)
        sizes = {}
        loops = []
        for j, (v, core) in enumerate(zip(vals, cores, strict=True)):
            if v.ndim < len(core):
                raise ValueError(f"vectorize: argument {j} of shape {v.shape} has fewer "
                                 f"dimensions than its core dimensions {core}{where_am_i()}")
            loops.append(v.shape[:v.ndim - len(core)])
            _check_core(sizes, core, v.shape[v.ndim - len(core):], f"argument {j}")
        loop = broadcast_shapes(*loops, name="vectorize")
        vals = [broadcast_to(v, loop + v.shape[len(lp):]) for v, lp in zip(vals, loops,
                                                                            strict=True)]

        def core_fn(*vs):
            full = list(args)
            for i, v in zip(pos, vs, strict=False):
                full[i] = v
            kw = dict(kwargs)
            kw.update(zip(names, vs[len(pos):], strict=True))
            out = pyfunc(*full, **kw)
            if out_sig is None:
                return out
            outs = out if len(out_sig) > 1 else (out,)
            if not isinstance(outs, tuple) or len(outs) != len(out_sig):
                raise ValueError(f"vectorize: pyfunc must return {len(out_sig)} outputs for "
                                 f"the signature {signature!r}{where_am_i()}")
            outs = tuple(asarray(o) for o in outs)
            for j, (o, core) in enumerate(zip(outs, out_sig, strict=True)):
                if o.ndim != len(core):
                    raise ValueError(f"vectorize: output {j} has shape {o.shape}, the "
                                     f"signature {signature!r} gives core dimensions {core}"
                                     f"{where_am_i()}")
                _check_core(sizes, core, o.shape, f"output {j}")
            return outs if len(out_sig) > 1 else outs[0]

        f = core_fn
        for _ in loop:
            f = _vmap(f)
        return f(*vals)

    return wrapped


def _vmap(f):
    import nova

    return nova.vmap(f)


def _check_core(sizes, core, shape, what):
    for name, d in zip(core, shape, strict=True):
        if sizes.setdefault(name, d) != d:
            raise ValueError(f"vectorize: inconsistent size for core dimension {name!r}: "
                             f"{sizes[name]} and {d} ({what}, shape {tuple(shape)})"
                             f"{where_am_i()}")
