"""Runtime: executables that run a launch list of compiled kernels over host buffers."""
