"""Kernels and names: the kernel-family table, tensor-core use, name patterns, evidence patterns."""
