"""The embedded engine: a PyTorch inference engine for the model families opencomposer serves
(DeepSeek-V3 / Kimi K2 MoE with MLA and MTP, Llama-style dense models), on CPU anywhere and
CUDA when present: paged KV cache with prefix reuse, continuous batching, sampling, and MTP
speculative decoding."""
