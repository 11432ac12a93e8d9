"""CUDA code generation: Kernel descriptions -> gpu/nvvm dialects -> PTX (see backend_cuda.py)."""
