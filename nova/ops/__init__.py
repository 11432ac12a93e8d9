"""Primitives, one object each; importing this package fills the registry."""

from nova.ops import contraction, elementwise, reduction, structural  # noqa: F401
from nova.ops import random_bits  # noqa: F401
from nova.ops import indexing, slicing  # noqa: F401
from nova.ops import scan, sort  # noqa: F401
from nova.ops import lax  # noqa: F401
from nova.ops import attention  # noqa: F401
from nova.ops import callback  # noqa: F401
from nova.ops import complex  # noqa: F401
