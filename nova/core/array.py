"""nova.Array: an immutable n-dimensional array (a host buffer) and the base class of tracers.

Operators and methods (`+`, `@`, `.sum()`, `.at[...]`, ...) are attached by `nova.numpy` when it is
imported, as JAX does, so this layer never imports the layers above it.
"""

from __future__ import annotations

import numpy as np

from nova.core import dtypes
from nova.core.errors import DeletedArrayError
from nova.core.ir import TensorType


class Array:
    """An immutable array. `shape`, `dtype`, `ndim`, `size`; `np.asarray(x)` gives its values.

    Concrete arrays hold a host buffer (`numpy.ndarray`). Tracers (nova.core.trace.Tracer) are
    Arrays too, so `isinstance(x, nova.Array)` holds inside `jit` and `grad` as well.
    """

    __slots__ = ("_value", "_deleted", "_aval", "_owned", "__weakref__")
    _on_device = False  # True for Arrays whose buffer is a device's (nova.runtime.devices)
    __array_priority__ = 100

    def __init__(self, value: np.ndarray, owned: bool = False):
        """owned: the buffer is Nova's alone (a fresh result no NumPy view was handed out of), so
        a jitted call it is donated to may write into it in place; otherwise donation copies it
        first (an Array made by `asarray` may share memory with the caller's NumPy array)."""
        if value.dtype not in dtypes.SUPPORTED_SET:
            value = value.astype(dtypes.dtype_of_value(value))
            owned = True
        self._value = value
        self._deleted = False
        self._aval = None
        self._owned = owned

    # --- abstract value ---------------------------------------------------------------------
    @property
    def aval(self) -> TensorType:
        if self._aval is None:  # shape and dtype never change (delete() keeps both)
            self._aval = TensorType(self._value.shape, self._value.dtype)
        return self._aval

    @property
    def shape(self) -> tuple:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self.aval.size

    @property
    def nbytes(self) -> int:
        return self.aval.nbytes

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    # --- concrete values --------------------------------------------------------------------
    def _concrete(self, what: str) -> np.ndarray:
        if self._deleted:
            raise DeletedArrayError(
                f"{what}: this Array of {self.aval} was donated to a jitted call "
                "(donate_argnums) and its buffer may have been reused"
            )
        return self._value

    def __array__(self, dtype=None, copy=None):
        v = self._concrete("np.asarray")
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        if copy:
            return v.copy()
        self._owned = False  # the caller now holds a view of the buffer
        return v

    def __repr__(self):
        if self._deleted:
            return f"Array(<deleted>, shape={self.shape}, dtype={self.dtype})"
        body = np.array2string(
            self._value, separator=", ", prefix="Array(", threshold=1000, max_line_width=100
        )
        return f"Array({body}, dtype={self.dtype})"

    def __str__(self):
        return str(self._concrete("str"))

    def item(self):
        return self._concrete("item").item()

    def tolist(self):
        return self._concrete("tolist").tolist()

    def __bool__(self):
        return bool(self._concrete("bool"))

    def __int__(self):
        return int(self._concrete("int"))

    def __float__(self):
        return float(self._concrete("float"))

    def __complex__(self):
        return complex(self._concrete("complex"))

    def __index__(self):
        if not dtypes.is_int(self.dtype):
            raise TypeError(f"only integer arrays can be used as an index, got {self.dtype}")
        return int(self._concrete("index"))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object (a 0-d Array)")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d Array")
        for i in range(self.shape[0]):
            yield self[i]

    def __hash__(self):
        raise TypeError("unhashable type: nova.Array (arrays are mutable-looking values)")

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self.item(), spec)
        return format(str(self), spec)

    def block_until_ready(self):
        return self

    def delete(self) -> None:
        """Frees the buffer; any later use raises DeletedArrayError (shape and dtype remain)."""
        # The abstract value keeps shape and dtype answerable without the buffer (a training
        # step deletes every donated parameter and optimizer state: this stays cheap).
        self._aval = self.aval
        self._deleted = True
        self._value = None

    def is_deleted(self) -> bool:
        return self._deleted

    def __copy__(self):
        # A shallow copy shares the buffer: neither Array is Nova's alone any more (donating
        # one must not write what the other shows; found by review). deepcopy copies the data.
        self._owned = False
        if type(self) is not Array:  # subclasses (tracers, device arrays): their state round trip
            out = type(self).__new__(type(self))
            out.__setstate__(self.__getstate__())
            return out
        out = Array.__new__(Array)
        out._value, out._deleted, out._aval, out._owned = self._value, self._deleted, \
            self._aval, False
        return out

    def __getstate__(self):
        return {"value": self._concrete("pickle")}

    def __setstate__(self, state):
        self._value = state["value"]
        self._deleted = False
        self._aval = None
        # Not Nova's alone: pickle and deepcopy keep one ndarray for a buffer met twice (tied
        # weights, an Array and its NumPy view), so unpickled Arrays may share it (found by
        # review); a donated call copies it once.
        self._owned = False


def from_numpy(value) -> Array:
    """Wraps a NumPy value (no copy when it is already a supported dtype)."""
    return Array(np.asarray(value))


_new_array = object.__new__


def _adopt(value: np.ndarray, aval: TensorType | None = None) -> Array:
    """`Array(value, owned=True)` for a buffer an executable just allocated (a supported dtype,
    no other reference to it: the dispatch paths of nova.jit and eager ops), without the
    constructor's dtype check; `aval`, when given, is value's TensorType (the shape rule's)."""
    a = _new_array(Array)
    a._value = value
    a._deleted = False
    a._aval = aval
    a._owned = True
    return a
