"""The context window of an OpenAI-compatible server that does not list it with its models.

vLLM and SGLang put `max_model_len` in each `/v1/models` entry. llama.cpp's server lists no
window there (its `meta.n_ctx_train` is the training length, not what it runs with) but says
it in `/props`, at the server's root: `default_generation_settings.n_ctx`, the per-slot
window (`-c` divided among `--parallel` slots), or `n_ctx` at the top level in some versions.
SGLang's `/get_model_info` has no window (model_path, tokenizer_path, is_generation, ...), so
it is not asked. llama-cpp-python and hosted APIs say nothing: the configured
`engine.context_window` is all there is.
"""

from typing import Any

import openai


def props_url(base_url: str) -> str:
    """`/props` beside `/v1`: llama.cpp serves it at the root."""
    root = base_url.rstrip("/").removesuffix("/v1")
    return f"{root}/props"


def window_from_props(props: Any) -> int | None:
    """The per-slot window in a `/props` answer, or None where it says none."""
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    for source in (settings, props):
        if isinstance(source, dict):
            n_ctx = source.get("n_ctx")
            if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
                return n_ctx
    return None


class PropsWindow:
    """llama.cpp's window, asked of `/props` once: it changes only when the server restarts
    with another `-c`, and a server without `/props` would answer every ask with a 404."""

    def __init__(self, client: openai.AsyncOpenAI, base_url: str) -> None:
        self._client = client
        self._url = props_url(base_url)
        self._window: int | None = None
        self._asked = False

    async def get(self) -> int | None:
        """The window, or None from a server without `/props` (or that fails to say)."""
        if not self._asked:
            self._window = await self._ask()
            self._asked = True
        return self._window

    async def _ask(self) -> int | None:
        try:
            props = await self._client.get(self._url, cast_to=object)
        except (openai.APIError, ValueError):  # no such route, or not JSON
            return None
        return window_from_props(props)
