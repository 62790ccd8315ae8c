"""The CUDA backend: dispatcher, launcher, kernel sources, one module per kernel family."""
