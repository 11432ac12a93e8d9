"""nova.experimental: APIs that JAX keeps under jax.experimental (io_callback)."""

from nova.callbacks import io_callback

__all__ = ["io_callback"]
