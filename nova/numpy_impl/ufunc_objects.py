"""`nova.numpy.ufunc`: NumPy's ufunc objects over Nova's binary functions (jnp.ufunc).

`nova.numpy.add` and the other binary elementwise functions are ufunc objects: calling one is
calling the function, and each has NumPy's methods `outer`, `reduce`, `accumulate`, `at` and
`reduceat`, and the attributes `nin`, `nout`, `identity`. Reductions of the associative
ufuncs use Nova's reductions and scans (add.reduce is sum, maximum.accumulate is cummax, ...);
the others fold sequentially along the axis (lax.scan), as NumPy defines them (subtract.reduce
is a0 - a1 - a2 ..., with initial= it is ((initial - a0) - a1) - ...; subtract.reduceat folds
each segment so). `at` is a scatter for add, subtract, multiply, maximum and minimum and one
scan step per indexed entry for the others (numpy_impl/ufunc_folds.py; frompyfunc makes
ufuncs of user functions, numpy_impl/frompyfunc.py). Arrays are immutable, so `at` returns
the updated array (inplace=False, as jnp's) and `out=` is refused.

Result dtypes are jnp.ufunc's: reduce and accumulate use the dedicated reduction's rule when
there is one (add.reduce is sum: uint8 gives uint32; add.accumulate is cumsum: int8 stays
int8), else the dtype func gives for two operands of a's dtype (divide.reduce of ints is
float32, logical_and.accumulate of uint8 is bool); reduceat keeps a's dtype for the ufuncs
with a reduction and takes func's otherwise (subtract.reduceat of int8 is int8, logaddexp's of
int32 float32). An explicit dtype= is honoured everywhere (jnp ignores it in reduceat and
logaddexp.reduce).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ShapeError
from nova.numpy_impl.util import asarray

__all__ = ["ufunc"]


def cast_identity(value, dtype) -> np.ndarray:
    """A host scalar as a 0-d NumPy array of `dtype`, cast as NumPy casts a ufunc's identity: a
    negative int is its two's-complement value in an unsigned dtype (bitwise_and's -1 is all
    ones, 255 in uint8) and any value is bool(value) in bool."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray(bool(value))
    if dtypes.is_unsigned(dtype) and isinstance(value, int | np.integer) and value < 0:
        return np.asarray(int(value) % 2 ** (8 * dtype.itemsize), dtype)
    return np.asarray(value, dtype)


def fold_dtype(func, cache: dict, dtype) -> np.dtype:
    """The dtype of func(x, y) for x, y of `dtype` (found by tracing func abstractly, kept in
    `cache`, the ufunc's own: two frompyfunc ufuncs may share a name): the dtype of a fold of
    func, as jnp.ufunc's reduce and accumulate take it. Raises what func raises for that dtype
    (TypeError for a bitwise function of floats, ...)."""
    key = np.dtype(dtype)
    if key not in cache:
        from nova.control_flow import trace_region
        from nova.core.ir import TensorType

        program = trace_region(func, [TensorType((), key)] * 2)[0]
        cache[key] = np.dtype(program.outputs[0].type.dtype)
    return cache[key]


def _scalar(value, dtype) -> Array:
    # initial= may be a (traced) Array as in jnp; host scalars are cast as identities are.
    if isinstance(value, Array):
        return value.astype(dtype)
    return asarray(cast_identity(value, dtype))


class ufunc:  # noqa: N801 (NumPy's name)
    """A binary elementwise function with NumPy's ufunc methods (numpy.ufunc, jnp.ufunc).

    ufunc(func, name, identity=None, reducer=None, accumulator=None, at=None,
    associative=False, idempotent=False, nin=2, nout=1): func(x, y) is the elementwise
    function (func(x1, ..., x_nin) for the ufuncs nova.numpy.frompyfunc makes);
    reducer(a, axis=..., dtype=..., keepdims=...) and accumulator(a, axis=..., dtype=...) the
    dedicated reduction and scan when there are (e.g. sum, cumsum; dtype None: their own
    dtype rule), at the name of the `Array.at[...]` update (add,
    multiply, min, max); associative ufuncs reduce over several axes at once; idempotent ones
    (x op x == x: maximum, minimum, fmax, fmin) may repeat an operand, which lets masked
    reductions without an identity use the reducer. Raises as documented per method.
    """

    def __init__(self, func: Callable, name: str, *, identity=None, reducer=None,
                 accumulator=None, at: str | None = None, associative: bool = False,
                 idempotent: bool = False, nin: int = 2, nout: int = 1):
        self.nin, self.nout, self.nargs = nin, nout, nin + nout  # (nargs: NumPy's count)
        self._fold_dtypes: dict = {}
        self._func = func
        self.__name__ = name
        self.__doc__ = func.__doc__
        self.identity = identity
        self._reducer = reducer
        self._accumulator = accumulator
        self._at = at
        self._associative = associative
        self._idempotent = idempotent

    def __repr__(self):
        return f"<nova.numpy.ufunc '{self.__name__}'>"

    def __call__(self, *args, **kwargs):
        return self._func(*args, **kwargs)

    # --- helpers -------------------------------------------------------------------------------
    def _binary_only(self, method: str) -> None:
        if self.nin != 2:
            raise ValueError(f"{self.__name__}.{method} is only supported for binary ufuncs "
                             f"(nin=2); this one has nin={self.nin}")
        if self.nout != 1:
            raise ValueError(f"{self.__name__}.{method} is only supported for ufuncs with one "
                             f"output; this one has nout={self.nout}")

    def _no_out(self, method: str, out) -> None:
        if out is not None:
            raise ValueError(f"{self.__name__}.{method}: out= is not supported (Nova arrays "
                             "are immutable; use the returned array)")

    def _axis(self, method: str, a, axis) -> int:
        if not isinstance(axis, int | np.integer):
            raise TypeError(f"{self.__name__}.{method}: axis must be an int, got {axis!r}")
        if not -a.ndim <= axis < a.ndim:
            raise ShapeError(f"{self.__name__}.{method}: axis {axis} is out of bounds for an "
                             f"array of shape {a.shape}")
        return int(axis) % a.ndim

    def _dtype(self, method: str, a, dtype, check: bool = False):
        """The canonical dtype= (None stays None); with `check`, after checking that func
        takes a's dtype (as jnp's dedicated reductions do: bitwise_and of floats raises
        even with an integer dtype)."""
        if dtype is None:
            return None
        dtype = dtypes.canonicalize(dtype, arg_name=f"{self.__name__}.{method} dtype")
        if check:
            fold_dtype(self._func, self._fold_dtypes, a.dtype)
        return dtype

    def _fold_input(self, method: str, a, dtype):
        """a cast to the dtype of a fold of func: `dtype`, else func's result dtype. Raises
        TypeError when func's results do not promote to `dtype` (divide.reduce with
        dtype=int32); they are cast to it (logical_and.accumulate with dtype=uint8)."""
        dt = fold_dtype(self._func, self._fold_dtypes, a.dtype) if dtype is None else dtype
        got = fold_dtype(self._func, self._fold_dtypes, dt)
        if dtypes.result_type(got, dt) != dt:
            raise TypeError(f"{self.__name__}.{method}: dtype {dt} cannot hold the results of "
                            f"{self.__name__}, which are {got} for {dt} operands")
        return a.astype(dt)

    def _reduced_dtype(self, a, dtype, tree: bool) -> np.dtype:
        """The dtype reduce gives `a` (an empty one's too): the reducer's (add.reduce of uint8
        is uint32), found by tracing it on one element, or a's (cast for a fold)."""
        if not tree or self.identity is None:
            return a.dtype
        from nova.control_flow import trace_region
        from nova.core.ir import TensorType

        def one(x):
            return self._reducer(x, axis=(0,), dtype=dtype, keepdims=False)

        return np.dtype(trace_region(one, [TensorType((1,), a.dtype)])[0].outputs[0].type.dtype)

    def _reduce_axes(self, a, axis) -> tuple[int, ...]:
        axes = tuple(range(a.ndim)) if axis is None else \
            (axis if isinstance(axis, tuple) else (axis,))
        norm = [self._axis("reduce", a, ax) for ax in axes]
        if len(set(norm)) != len(norm):
            raise ValueError(f"{self.__name__}.reduce: duplicate value in axis={axis!r}")
        if len(norm) > 1 and not self._associative:
            # NumPy's rule: a non-reorderable ufunc reduces at most one axis (axis=None too).
            raise ValueError(f"{self.__name__}.reduce: the ufunc is not associative and "
                             "commutative (not reorderable), so at most one axis may be "
                             f"reduced; got axis={axis!r} for an array of shape {a.shape}")
        return tuple(sorted(norm))

    def _mask(self, a, where, initial):
        if where is None:
            return None
        if initial is None and self.identity is None:
            raise ValueError(f"{self.__name__}.reduce: where= needs an identity or an initial "
                             "value for the masked entries; pass initial=")
        from nova.numpy_impl.shape import broadcast_to

        mask = asarray(where)
        if not dtypes.is_bool(mask.dtype):
            raise TypeError(f"{self.__name__}.reduce: where must be a boolean array, got dtype "
                            f"{mask.dtype}")
        return broadcast_to(mask, a.shape)

    def _fold(self, a, axes, initial=None, mask=None):
        """func folded left to right over `axes` (merged in C order): ((s op a0) op a1) ...,
        s = initial, else the identity under a mask, else the fold starts at a0. Entries where
        `mask` is False leave the carry as it is (NumPy's where=)."""
        from nova.control_flow import scan
        from nova.numpy_impl.shape import broadcast_to, moveaxis
        from nova.numpy_impl.ufuncs import where as select

        def merged(x):
            x = moveaxis(x, axes, tuple(range(len(axes))))
            return x.reshape((-1,) + x.shape[len(axes):])

        xs = merged(a)
        start = initial if initial is not None else (None if mask is None else self.identity)
        if start is None:
            carry, xs = xs[0], xs[1:]
        else:
            carry = broadcast_to(_scalar(start, a.dtype), xs.shape[1:])

        def step(c, x):
            return self._func(c, x).astype(c.dtype), None

        def masked_step(c, xm):
            return select(xm[1], self._func(c, xm[0]).astype(c.dtype), c), None

        if mask is None:
            return scan(step, carry, xs)[0]
        return scan(masked_step, carry, (xs, merged(mask)))[0]

    def _tree_reduce(self, a, axes, initial, mask, dtype=None):
        # An associative reduction; masked entries become the identity (or, for an idempotent
        # ufunc, initial), and initial is then combined exactly once.
        if mask is not None:
            from nova.numpy_impl.ufuncs import where as select

            fill = self.identity if self.identity is not None else initial
            a = select(mask, a, _scalar(fill, a.dtype))
        res = self._reducer(a, axis=axes, dtype=dtype, keepdims=False)
        if initial is not None:
            res = self._func(_scalar(initial, res.dtype), res).astype(res.dtype)
        return res

    # --- methods -------------------------------------------------------------------------------
    def outer(self, a, b, **kwargs):
        """func(a[i, j, ...], b[k, l, ...]) for every pair: shape a.shape + b.shape. Raises
        ValueError for a ufunc that is not binary with one output."""
        self._binary_only("outer")
        a, b = asarray(a), asarray(b)
        return self._func(a.reshape(a.shape + (1,) * b.ndim), b, **kwargs)

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims: bool = False, initial=None,
               where=None):
        """a reduced along `axis` with func (numpy.ufunc.reduce): axis an int, a tuple (several
        axes only for associative ufuncs) or None (all axes). initial: the fold's first operand,
        ((initial op a0) op a1) ..., combined exactly once (needed for an empty axis without
        identity). where: a boolean mask broadcast to a's shape; masked entries are skipped
        (they count as the identity; without one initial= is required). dtype: the
        result dtype; otherwise the reducer's (add.reduce of int8 is int32 and of uint8
        uint32, as sum; maximum.reduce keeps a's), else func's for two operands of a's dtype
        (divide.reduce of int32 is float32), as jnp.ufunc.reduce. Raises TypeError for a
        dtype func does not map to itself (divide with dtype=int32) or an `a` func does not
        take (bitwise_and of floats). Raises ValueError for out=, an empty reduction or a
        where= without identity or initial, a duplicate axis, or more than one axis
        (axis=None of a >1-d array included) for a non-associative ufunc, as NumPy, or a
        ufunc that is not binary with one output; TypeError for a non-bool where."""
        self._no_out("reduce", out)
        self._binary_only("reduce")
        a = asarray(a)
        dtype = self._dtype("reduce", a, dtype, check=self._reducer is not None)
        axes = self._reduce_axes(a, axis)
        mask = self._mask(a, where, initial)
        red = axes
        if not axes:  # axis=(): every entry reduced on its own, a fold over a new unit axis
            a, red = a[None], (0,)
            mask = None if mask is None else mask[None]
        tree = self._associative and (mask is None or self.identity is not None
                                      or self._idempotent)
        if not tree:
            a = self._fold_input("reduce", a, dtype)
        elif self.identity is None and dtype is not None:  # max/min: a's dtype is theirs
            a = a.astype(dtype)
        if any(a.shape[ax] == 0 for ax in red):
            fill = initial if initial is not None else self.identity
            if fill is None:
                raise ValueError(f"{self.__name__}.reduce of an empty axis needs an identity "
                                 "or an initial value")
            from nova.numpy_impl.shape import broadcast_to

            shape = tuple(d for i, d in enumerate(a.shape) if i not in red)
            res = broadcast_to(_scalar(fill, self._reduced_dtype(a, dtype, tree)), shape)
        elif tree:
            res = self._tree_reduce(a, red, initial, mask, dtype)
        else:
            res = self._fold(a, red, initial, mask)
        if keepdims:
            from nova.numpy_impl.shape import expand_dims

            res = expand_dims(res, axes)
        return res

    def accumulate(self, a, axis: int = 0, dtype=None, out=None):
        """The running fold along `axis` (numpy.ufunc.accumulate): result[..., i, ...] is
        a[0] op ... op a[i]; same shape as a. The dtype is jnp.ufunc.accumulate's: `dtype`
        when given, else the accumulator's (add/multiply keep an integer dtype, int8 stays
        int8 and wraps, as jnp.cumsum; bool becomes int32), else func's for two operands of
        a's dtype (divide.accumulate of ints is float32, logical_or.accumulate is bool).
        Raises ValueError for out=, a 0-d a or a ufunc that is not binary with one output,
        ShapeError for an axis out of bounds, TypeError as reduce for a dtype or an `a` func
        does not take."""
        self._no_out("accumulate", out)
        self._binary_only("accumulate")
        a = asarray(a)
        dtype = self._dtype("accumulate", a, dtype)
        if a.ndim == 0:
            raise ValueError(f"{self.__name__}.accumulate: a 0-d array has no axis")
        axis = self._axis("accumulate", a, axis)
        if self._accumulator is not None:  # (an empty axis too: its dtype rule still holds)
            return self._accumulator(a, axis=axis, dtype=dtype)
        a = self._fold_input("accumulate", a, dtype)
        if a.shape[axis] == 0:
            return a
        if self._associative:
            from nova.ops.composite import associative_scan

            return associative_scan(lambda x, y: self._func(x, y).astype(a.dtype), a, axis=axis)
        from nova.control_flow import scan
        from nova.numpy_impl.shape import moveaxis

        xs = moveaxis(a, axis, 0)
        first = xs[0]

        def step(c, x):
            c = self._func(c, x).astype(a.dtype)
            return c, c

        _, rest = scan(step, first, xs[1:])
        from nova.numpy_impl.joining import concatenate

        return moveaxis(concatenate([first[None], rest]), 0, axis)

    def at(self, a, indices, b=None, *, inplace: bool = True):
        """a with func applied at `indices` (numpy.ufunc.at, unbuffered: repeated indices
        apply repeatedly): a[indices] = func(a[indices], b), or func(a[indices]) for a unary
        ufunc (b None); b broadcasts to a[indices].shape. Nova's arrays are immutable: pass
        inplace=False (as jnp.ufunc.at requires) and use the result. add, subtract,
        multiply, maximum and minimum are one scatter and keep a's dtype; the other ufuncs
        apply func one indexed entry at a time (a scan; one gather and scatter for concrete
        indices that never repeat) and give func's dtype, as jnp (divide.at of ints is
        float32). Raises ValueError for inplace=True, a missing b for a binary ufunc or a b
        for a unary one, or a ufunc with nin > 2 or nout > 1; ShapeError for a b that does
        not broadcast; what indexing raises for bad indices."""
        if inplace:
            raise ValueError(f"{self.__name__}.at: Nova arrays are immutable; call it with "
                             "inplace=False and use the returned array")
        if self.nout != 1 or self.nin > 2:
            raise ValueError(f"{self.__name__}.at is only supported for unary and binary "
                             f"ufuncs with one output; this one has nin={self.nin}, "
                             f"nout={self.nout}")
        if b is None and self.nin == 2:
            raise ValueError(f"{self.__name__}.at: b is required for a binary ufunc")
        if b is not None and self.nin == 1:
            raise ValueError(f"{self.__name__}.at: a unary ufunc takes no b")
        a = asarray(a)
        if self._at is None:
            from nova.numpy_impl.ufunc_folds import sequential_at

            return sequential_at(self, a, indices, b)
        ref = a.at[indices]
        if self._at == "subtract":
            return ref.add(-asarray(b))
        return getattr(ref, self._at)(b)

    def reduceat(self, a, indices, axis: int = 0, dtype=None, out=None):
        """Reductions over the slices a[indices[i]:indices[i+1]] along `axis`
        (numpy.ufunc.reduceat): the last slice runs to the end; where indices[i] >=
        indices[i+1] the result is a[indices[i]]. indices: a 1-d integer array of positions
        in [0, len), in any order. Concrete indices are checked; traced ones (an argument
        of nova.jit, mapped by vmap) cannot be, and out-of-range ones are clipped into
        [0, len - 1]. The ufuncs with an associative reduction and an identity, or idempotent
        (add, multiply, maximum, minimum, fmax, fmin, logical and bitwise and/or/xor), reduce
        each slice as a masked reduction over the whole axis; the others (subtract,
        logaddexp, divide, power, frompyfunc's, ...) fold each slice left to right,
        ((a[i] op a[i+1]) op ...), all slices in one scan along the axis. Both take
        len(indices) x len work. The dtype is a's for the first kind (add.reduceat of int8
        stays int8 and wraps, as jnp's) and func's for two operands of a's dtype for the
        second (subtract.reduceat of int8 is int8, logaddexp.reduceat of int32 float32), or
        `dtype` (a is cast to it first, as NumPy; jnp ignores it). Raises ValueError for
        out= or a ufunc that is not binary with one output, TypeError for non-integer or
        not 1-d indices or a dtype func does not take (subtract of bools), IndexError for
        concrete indices out of [0, len) (any index when len is 0), ShapeError for a bad
        axis."""
        self._no_out("reduceat", out)
        self._binary_only("reduceat")
        from nova.numpy_impl.joining import concatenate
        from nova.numpy_impl.shape import moveaxis

        a = asarray(a)
        masked = self._reducer is not None and (self.identity is not None or self._idempotent)
        dtype = self._dtype("reduceat", a, dtype, check=masked)
        if masked:
            a = a if dtype is None else a.astype(dtype)
        else:
            a = self._fold_input("reduceat", a, dtype)
        axis = self._axis("reduceat", a, axis)
        idx = asarray(indices)
        if idx.ndim != 1 or not dtypes.is_int(idx.dtype):
            raise TypeError(f"{self.__name__}.reduceat: indices must be a 1-d integer array, "
                            f"got shape {idx.shape} dtype {idx.dtype}")
        xs = moveaxis(a, axis, 0)
        n = xs.shape[0]
        if n == 0 and idx.shape[0]:
            raise IndexError(f"{self.__name__}.reduceat: axis {axis} of the array of shape "
                             f"{a.shape} is empty, so every index is out of bounds")
        from nova.numpy_impl import ufunc_folds

        idx = ufunc_folds.checked_indices(self.__name__, idx, n, axis, a.shape)
        if idx.shape[0] == 0:
            return moveaxis(xs[:0], 0, axis)
        end = concatenate([idx[1:], asarray([n], dtype=idx.dtype)])
        if masked:
            res = ufunc_folds.masked_reduceat(self, xs, idx, end)
        else:
            res = ufunc_folds.fold_reduceat(self._func, xs, idx, end)
        return moveaxis(res, 0, axis)
