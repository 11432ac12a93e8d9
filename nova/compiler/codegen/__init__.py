"""Kernel synthesis: backend-neutral Kernel descriptions to MLIR text, per target."""
