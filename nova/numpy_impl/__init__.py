"""The implementation of nova.numpy, one module per family; nova/numpy_api.py re-exports it."""
