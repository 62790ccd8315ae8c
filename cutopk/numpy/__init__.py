"""The CPU backend: NumPy row selection, long rows, threads."""
