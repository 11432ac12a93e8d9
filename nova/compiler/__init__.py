"""Nova's compiler: passes over the Program, fusion, schedules and MLIR codegen.

Only `nova.compiler.bindings` imports MLIR, and only when a kernel must be built, so importing
nova (or running from a warm kernel cache) never needs the MLIR wheels.
"""
