"""nova.scipy.cluster: vector quantization (the `vq` submodule), as jax.scipy.cluster."""

from nova.scipy.cluster import vq  # noqa: F401
