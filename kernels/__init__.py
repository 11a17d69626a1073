"""Compute kernels (MoE routing and grouped GEMM, MXFP8/NVFP4, attention helpers): a named
pure-PyTorch reference beside every fast version. Imports nothing of the project.
"""
