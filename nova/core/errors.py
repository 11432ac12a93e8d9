"""Nova's exception types: each names shapes, dtypes, the argument and the user's source line."""


class NovaError(Exception):
    """Base of Nova's own errors."""


class ShapeError(NovaError, ValueError):
    """Operand shapes are incompatible (broadcasting, contraction dims, concatenate, reshape)."""


class ConcretizationTypeError(NovaError, TypeError):
    """A traced value was used where a concrete Python value is needed (bool, int, float, numpy)."""


class TracerBoolConversionError(ConcretizationTypeError):
    """`if x:` / `bool(x)` on a traced value inside `jit`."""


class UnexpectedTracerError(NovaError):
    """A traced value escaped the trace that created it and was used afterwards."""


class CompilerError(NovaError):
    """A kernel could not be compiled; names the kernel, the failing pass and a dump path."""


class OutOfMemoryError(NovaError, MemoryError):
    """A device allocation failed; names the request and the allocator's statistics."""


class DeletedArrayError(NovaError, RuntimeError):
    """The Array's buffer was donated to a jitted call and may no longer be used."""
