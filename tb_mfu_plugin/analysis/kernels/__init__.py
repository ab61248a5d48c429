"""Kernels and names: the kernel-family table, tensor-core use and per-kernel facts, regexes over names."""
