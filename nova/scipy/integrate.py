"""nova.scipy.integrate: the composite trapezoidal rule, as jax.scipy.integrate.trapezoid
(scipy.integrate.trapezoid's signature and semantics: y, x=None, dx=1.0, axis=-1); it is
nova.numpy.trapezoid, differentiable in y, x and dx."""

from __future__ import annotations

from nova.numpy import trapezoid

__all__ = ["trapezoid"]
