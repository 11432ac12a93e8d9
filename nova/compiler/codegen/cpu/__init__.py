"""The CPU target: MLIR (scf/vector/arith/math/memref) -> LLVM -> a shared library per batch."""
