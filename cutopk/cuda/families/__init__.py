"""The CUDA kernel families, one module each: its limits (why a request is refused), its
geometry (grid, block, shared memory, parameters), its named scratch table (from which both the
launcher's allocations and ``plan().scratch_bytes`` are computed) and its kernel parameters.
``registry.FAMILIES`` maps each family's name to its module.

These modules are pure (NumPy and ``kernel_constants`` only): the dispatcher plans with them,
the launcher allocates and launches with them, so the two cannot disagree."""
