"""The `sglang` backend: launch SGLang's server for a checkpoint and serve through it.

SGLang is the production engine for DeepSeek-V3 and Kimi K2 (MLA, expert parallelism,
speculative decoding), but it cannot be a dependency of this package: it pins its own CUDA
torch. So it runs as a child process, `python -m sglang.launch_server`. Three jobs, one module
each: `flags` turns a launch (a spec string and the checkpoint's config.json) into the
server's command line; `supervisor` starts that process, waits until it serves and stops its
whole process group; `engine` is the `Engine` the rest of the project talks to, which
launches the server on first use and sends requests through its OpenAI-compatible API.
"""
