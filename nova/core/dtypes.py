"""Nova's dtypes and the one type-promotion table (JAX's lattice, Python scalars weakly typed)."""

from __future__ import annotations

import builtins

import ml_dtypes
import numpy as np

bool_ = np.dtype(np.bool_)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)  # random bits and keys
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)

SUPPORTED = (bool_, uint8, uint16, uint32, int8, int16, int32, int64, float16, bfloat16, float32,
             float64, complex64, complex128)
# For membership tests on hot paths (a tuple compares a dtype with each entry: ~0.6 us).
SUPPORTED_SET = frozenset(SUPPORTED)
FLOATS = (float16, bfloat16, float32, float64)
# Complex values are pairs of floats: the compiler splits them into their parts before fusion
# (nova/compiler/legalize_complex.py), so no kernel sees a complex element type.
COMPLEX = (complex64, complex128)
INTS = (uint8, uint16, uint32, int8, int16, int32, int64)
UNSIGNED = (uint8, uint16, uint32)
# Integers narrower than the default int: sums and products accumulate in int32 (jnp.sum's rule).
SMALL_INTS = (uint8, uint16, int8, int16)

default_float = float32
default_complex = complex64
# Like JAX without x64: a Python int or a list of them becomes int32.
default_int = int32

# MLIR element-type spelling of each dtype, used by the IR printer and parser.
MLIR_NAME = {
    bool_: "i1",
    uint8: "ui8",
    uint16: "ui16",
    uint32: "ui32",
    int8: "i8",
    int16: "i16",
    int32: "i32",
    int64: "i64",
    float16: "f16",
    bfloat16: "bf16",
    float32: "f32",
    float64: "f64",
    complex64: "complex<f32>",
    complex128: "complex<f64>",
}
FROM_MLIR = {v: k for k, v in MLIR_NAME.items()}

_ALIASES = {
    "bool": bool_,
    "bool_": bool_,
    "uint8": uint8,
    "uint16": uint16,
    "uint32": uint32,
    "int8": int8,
    "int16": int16,
    "int32": int32,
    "int64": int64,
    "float16": float16,
    "half": float16,
    "bfloat16": bfloat16,
    "float32": float32,
    "float": float32,
    "float64": float64,
    "double": float64,
    "complex64": complex64,
    "complex128": complex128,
    "complex": default_complex,
    "cfloat": complex64,
    "cdouble": complex128,
    "int": default_int,
}


def canonicalize(dtype, *, arg_name: str = "dtype") -> np.dtype:
    """Returns the np.dtype for a user-given dtype spec, or raises TypeError naming it."""
    if dtype is None:
        raise TypeError(f"{arg_name} must not be None")
    if dtype is builtins.float:
        return default_float
    if dtype is builtins.int:
        return default_int
    if dtype is builtins.bool:
        return bool_
    if dtype is builtins.complex:
        return default_complex
    if isinstance(dtype, str):
        if dtype in _ALIASES:
            return _ALIASES[dtype]
        if dtype in FROM_MLIR:
            return FROM_MLIR[dtype]
    try:
        d = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{arg_name}: unknown dtype {dtype!r}") from e
    if d not in SUPPORTED:
        # Narrower signed ints and unsupported widths map to the nearest supported type only
        # when that is lossless; anything else is refused by name.
        raise TypeError(
            f"{arg_name}: dtype {d} is not supported by Nova "
            f"(supported: {', '.join(str(s) for s in SUPPORTED)})"
        )
    return d


def is_float(d) -> bool:
    return np.dtype(d) in FLOATS


def is_int(d) -> bool:
    return np.dtype(d) in INTS


def is_unsigned(d) -> bool:
    return np.dtype(d) in UNSIGNED


def is_bool(d) -> bool:
    return np.dtype(d) == bool_


def is_complex(d) -> bool:
    return np.dtype(d) in COMPLEX


def is_inexact(d) -> bool:
    """Float or complex (numpy.inexact): the dtypes that carry derivatives."""
    return np.dtype(d) in FLOATS or np.dtype(d) in COMPLEX


def real_dtype(d) -> np.dtype:
    """The dtype of a complex dtype's parts (complex64 -> float32); other dtypes are their own."""
    d = np.dtype(d)
    if d == complex64:
        return float32
    if d == complex128:
        return float64
    return d


def complex_dtype(d) -> np.dtype:
    """The complex dtype whose parts have float dtype d (float64 -> complex128; float16,
    bfloat16 and float32 -> complex64, as jax.numpy promotes them); complex dtypes are their
    own. Raises TypeError for a non-float dtype."""
    d = np.dtype(d)
    if d in COMPLEX:
        return d
    if d not in FLOATS:
        raise TypeError(f"complex_dtype: {d} is not a floating-point dtype")
    return complex128 if d == float64 else complex64


# --- the promotion lattice (JAX's, restricted to Nova's dtypes) -------------------------------
# Nodes are dtypes plus the weak kinds of Python scalars: 'i*' (int), 'f*' (float) and 'c*'
# (complex). A float meets a complex in the complex dtype that holds both (float32 + complex
# gives complex64, float64 + complex64 gives complex128), as in JAX's lattice.
# Each node lists its direct supertypes; the join of two types is the least common supertype.
_WEAK_INT = "i*"
_WEAK_FLOAT = "f*"
_WEAK_COMPLEX = "c*"
_SUPERS = {
    bool_: [_WEAK_INT],
    _WEAK_INT: [uint8, int8],
    uint8: [uint16, int16],
    int8: [int16],
    uint16: [uint32, int32],
    int16: [int32],
    uint32: [int64],
    int32: [int64],
    int64: [_WEAK_FLOAT],
    _WEAK_FLOAT: [float16, bfloat16, _WEAK_COMPLEX],
    float16: [float32],
    bfloat16: [float32],
    float32: [float64, complex64],
    float64: [complex128],
    _WEAK_COMPLEX: [complex64],
    complex64: [complex128],
    complex128: [],
}


def _upper(node) -> set:
    seen = {node}
    stack = [node]
    while stack:
        for s in _SUPERS[stack.pop()]:
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return seen


_UPPER = {n: _upper(n) for n in _SUPERS}


def _join(a, b):
    common = _UPPER[a] & _UPPER[b]
    # The least element of the common upper set is the one whose own upper set contains it all.
    for c in common:
        if _UPPER[c] >= common:
            return c
    raise AssertionError(f"promotion lattice has no join of {a} and {b}")


def _materialize(node):
    if node == _WEAK_INT:
        return default_int
    if node == _WEAK_FLOAT:
        return default_float
    if node == _WEAK_COMPLEX:
        return default_complex
    return node


def python_scalar_kind(x):
    """The weak lattice node of a Python scalar, or None if x is not one."""
    # Exact types: NumPy scalars (np.float64 subclasses float) are strongly typed, as in JAX.
    t = type(x)
    if t is builtins.bool:
        return bool_
    if t is builtins.int:
        return _WEAK_INT
    if t is builtins.float:
        return _WEAK_FLOAT
    if t is builtins.complex:
        return _WEAK_COMPLEX
    return None


def result_type(*args) -> np.dtype:
    """The promoted dtype of arrays, dtypes and Python scalars (weakly typed), JAX's lattice.

    Examples: int32 + 1.0 -> float32; float16 + 2 -> float16; uint8 + int32 -> int32;
    uint8 + int8 -> int16; int8 + 3 -> int8; float16 + bfloat16 -> float32; bool + bool -> bool.
    """
    node = None
    for a in args:
        k = python_scalar_kind(a)
        if k is None:
            d = None if isinstance(a, type) else getattr(a, "dtype", None)  # np.float32 itself
            k = canonicalize(d if d is not None else a)
        node = k if node is None else _join(node, k)
    if node is None:
        raise TypeError("result_type() needs at least one argument")
    return _materialize(node)


def dtype_of_value(x) -> np.dtype:
    """The dtype Nova gives a Python scalar, list or NumPy value when it becomes an array."""
    k = python_scalar_kind(x)
    if k is not None:
        return _materialize(k)
    if isinstance(x, np.ndarray | np.generic):
        d = x.dtype
        if d in SUPPORTED:
            return d
        if d.kind == "f":
            return float32 if d.itemsize <= 4 else float64
        if d.kind == "c":
            return complex64 if d.itemsize <= 8 else complex128
        if d.kind in "iu":
            return int64 if d.itemsize == 8 else int32
        return canonicalize(d, arg_name="value")
    arr = np.asarray(x)
    if arr.dtype.kind == "f":
        return default_float
    if arr.dtype.kind == "c":
        return default_complex
    if arr.dtype.kind in "iu":
        return default_int
    return canonicalize(arr.dtype, arg_name="value")


def finfo(d):
    return ml_dtypes.finfo(np.dtype(d))


def iinfo(d):
    return np.iinfo(np.dtype(d))
