"""`EmbeddedEngine`: the embedded engine behind the Engine protocol.

A request's messages are rendered in the model's own chat format, tokenized, and run by the
engine worker with every other request in flight; new tokens are detokenized incrementally,
tool calls the model prints in its format's syntax are parsed out of the text as they stream,
and the result carries what training needs, taken at sampling time: prompt and completion
token ids, logprobs, routed experts and speculative-decoding statistics. The model loads on
first use, off the event loop.
"""

import asyncio
import json
import uuid
from collections.abc import AsyncGenerator, Callable, Collection, Iterable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jinja2.exceptions import TemplateError
from safetensors import SafetensorError
from safetensors.torch import load_file
from tokenizers import Tokenizer

from opencomposer.config import EngineSettings
from opencomposer.kernels.implementation import set_implementation
from opencomposer.serving import model_store as registry
from opencomposer.serving.engines.base import (
    EngineEvent,
    Finished,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    SpecDecodeStats,
    TextDelta,
    TokensSampled,
    TokenTrace,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    Usage,
    Weights,
)
from opencomposer.serving.engines.embedded.chat_format import ChatFormat, chat_format_for
from opencomposer.serving.engines.embedded.constrained import (
    Grammar,
    GrammarError,
    Grammars,
    constrains,
    request_grammar,
)
from opencomposer.serving.engines.embedded.engine import EngineConfig, LLMEngine
from opencomposer.serving.engines.embedded.fim import TextPrompts, find_fim
from opencomposer.serving.engines.embedded.loader import (
    ModelLoadError,
    draft_tokens_to_use,
    load_model,
    model_draft_tokens,
)
from opencomposer.serving.engines.embedded.packed_linear import pack_linears
from opencomposer.serving.engines.embedded.sequence import SamplingOptions
from opencomposer.serving.engines.embedded.token_text import TokenTexts
from opencomposer.serving.engines.embedded.worker import EngineWorker, Progress, WorkerClosed
from opencomposer.serving.engines.errors import (
    ContextLengthExceeded,
    EngineError,
    EngineRequestError,
    EngineServerError,
    EngineUnavailable,
)
from opencomposer.serving.engines.tool_text import (
    ParsedToolCall,
    ToolTextFormat,
    ToolTextParser,
)

DEFAULT_MAX_TOKENS = 1024
INITIAL_WEIGHTS = "initial"
"""The policy version of the weights as loaded from the model folder."""
_FINISH: dict[str | None, FinishReason] = {"length": "length", "stop": "stop", "abort": "stop"}


def resolve_model(settings: EngineSettings, models_dir: Path) -> tuple[str, Path]:
    """(name, folder) of the model to serve: a registry name pulled into `models_dir`, or a
    folder in Hugging Face layout."""
    name = settings.model or registry.DEFAULT_CHAT_MODEL
    folder = registry.model_dir(models_dir, name)
    if (folder / "config.json").is_file():
        return name, folder
    path = Path(name).expanduser()
    if (path / "config.json").is_file():
        return path.name, path
    known = registry.MODELS.get(name)
    if isinstance(known, registry.LocalModel):
        hint = f"create it with `opencomposer models init {name}`"
    elif known is not None:
        hint = f"fetch it with `opencomposer models pull {name}`"
    else:
        hint = f"known models: {', '.join(registry.MODELS)}; or give a folder with config.json"
    raise EngineUnavailable(f"model {name!r} is not available here: {hint}")


def context_window(max_positions: int, settings: EngineSettings) -> int:
    """Prompt plus completion tokens one request can hold: the model's positions, or the KV
    cache when it is smaller (a request must fit in the cache alone)."""
    block = EngineConfig.block_size
    return min(max_positions, settings.kv_cache_tokens // block * block)


def choose_device(setting: str) -> torch.device:
    if setting == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(setting)


def choose_dtype(setting: str, device: torch.device) -> torch.dtype:
    if setting == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, setting)


class _Loaded:
    def __init__(self, name: str, folder: Path, settings: EngineSettings) -> None:
        if settings.threads:
            torch.set_num_threads(settings.threads)
        set_implementation(settings.kernels)
        device = choose_device(settings.device)
        self.name = name
        self.model = load_model(
            folder,
            device=device,
            dtype=choose_dtype(settings.dtype, device),
            mtp=settings.speculative != "none",
        )
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.format: ChatFormat = chat_format_for(folder)
        self.stop_ids = frozenset(
            token
            for text in self.format.stop
            if (token := self.tokenizer.token_to_id(text)) is not None
        )
        self.text_prompts = TextPrompts(self.tokenizer, self.stop_ids)
        self.grammars = Grammars(self.tokenizer, self.model.vocab_size, sorted(self.stop_ids))
        self.token_texts = TokenTexts(self.tokenizer)
        self.worker = EngineWorker(
            LLMEngine(
                self.model,
                EngineConfig(
                    kv_cache_tokens=settings.kv_cache_tokens,
                    max_batch_tokens=settings.max_batch_tokens,
                ),
            )
        )
        self.context = context_window(self.model.max_positions, settings)
        self.weights_version = INITIAL_WEIGHTS
        """What results report as their policy version: set by each `update_weights`."""
        self.draft_tokens = (
            draft_tokens_to_use(
                settings.speculative, settings.draft_tokens, model_draft_tokens(folder)
            )
            if self.model.num_mtp_layers
            else 0
        )
        if device.type == "cpu" and self.draft_tokens:
            pack_linears(self.model, self.draft_tokens + 1)  # a verify's rows (see the module)


class EmbeddedEngine:
    name = "embedded"

    def __init__(self, settings: EngineSettings, models_dir: Path) -> None:
        self.settings = settings
        self.models_dir = models_dir
        self._loaded: _Loaded | None = None
        self._loading = asyncio.Lock()
        self._fim_by_folder: dict[Path, bool] = {}

    async def models(self) -> list[ModelInfo]:
        """The served model, from its config alone (its weights load on first generation)."""
        name, folder = resolve_model(self.settings, self.models_dir)
        config = json.loads((folder / "config.json").read_text())
        positions = config.get("max_position_embeddings")
        return [
            ModelInfo(
                id=name,
                owned_by="opencomposer",
                context_window=context_window(positions, self.settings)
                if isinstance(positions, int)
                else None,
                fills_middle=self._fills_middle(folder),
            )
        ]

    def _fills_middle(self, folder: Path) -> bool:
        """Read from the tokenizer once per model folder (the weights need not be loaded)."""
        if folder not in self._fim_by_folder:
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            self._fim_by_folder[folder] = find_fim(tokenizer) is not None
        return self._fim_by_folder[folder]

    async def _load(self) -> _Loaded:
        async with self._loading:
            if self._loaded is None:
                name, folder = resolve_model(self.settings, self.models_dir)
                try:
                    self._loaded = await asyncio.to_thread(_Loaded, name, folder, self.settings)
                except (ModelLoadError, OSError, ValueError) as exc:
                    raise EngineUnavailable(f"cannot load model {name!r}: {exc}") from exc
            return self._loaded

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        loaded = await self._load()
        prompt, stop_ids = self._encode(loaded, request)
        sampling = request.sampling
        budget = min(sampling.max_tokens or DEFAULT_MAX_TOKENS, loaded.context - len(prompt))
        if budget <= 0:
            limit = (
                f"the model's context is {loaded.context}"
                if loaded.context == loaded.model.max_positions
                else f"the KV cache holds {loaded.context} (engine.kv_cache_tokens)"
            )
            raise ContextLengthExceeded(f"the prompt has {len(prompt)} tokens and {limit}")
        grammar = await self._grammar(loaded, request) if constrains(request) else None
        options = SamplingOptions(
            temperature=sampling.temperature or 0.0,
            top_p=sampling.top_p or 1.0,
            top_k=sampling.top_k or 0,
            max_tokens=budget,
            seed=sampling.seed,
            stop_token_ids=stop_ids,
            logprobs=request.capture.logprobs,
            top_logprobs=request.capture.top_logprobs,
            capture_experts=request.capture.routed_experts,
            draft_tokens=loaded.draft_tokens,
            grammar=grammar,
            # `none` keeps the tools in the prompt (a summary shares the turn's cached prefix)
            # and takes away the tokens that would open a call.
            banned_token_ids=loaded.grammars.call_openers(loaded.format.tool_format)
            if request.tool_choice == "none" and request.tools
            else frozenset(),
        )
        tools = request.prompt is None and request.tool_choice != "none"
        text = TextAssembler(
            loaded.tokenizer,
            loaded.format.tool_format if tools else None,
            stop=sampling.stop,
            skip_ids=stop_ids,
            one_call=request.parallel_tool_calls is False,
        )
        last: Progress | None = None
        try:
            async with aclosing(loaded.worker.run(prompt, options)) as progress:
                async for last in progress:
                    if request.capture.logprobs and len(last.output_ids) > text.tokens:
                        yield self._sampled_since(loaded, last, text.tokens, stop_ids)
                    for event in text.feed(last.output_ids[text.tokens :]):
                        yield event
                    if text.stopped:
                        break  # a stop string or the one call allowed: closing `progress`
                        # aborts the request
        except WorkerClosed as exc:
            raise EngineUnavailable(
                "the embedded engine was shut down before the request finished"
            ) from exc
        except ValueError as exc:
            raise EngineRequestError(f"the embedded engine refused the request: {exc}") from exc
        except EngineError:
            raise
        except Exception as exc:
            raise EngineServerError(f"the embedded engine failed: {exc!r}") from exc
        if last is None:
            raise EngineServerError("the embedded engine produced nothing for this request")
        for event in text.finish():
            yield event
        yield Finished(self._result(loaded, prompt, stop_ids, last, text, request))

    @staticmethod
    def _sampled_since(
        loaded: _Loaded, last: Progress, start: int, stop_ids: frozenset[int]
    ) -> TokensSampled:
        """The output tokens from `start` on, with their logprobs and alternatives."""
        return TokensSampled(
            tuple(
                loaded.token_texts.sampled(
                    last.output_ids[start:],
                    last.logprobs[start:],
                    last.top_logprobs[start:],
                    skip=stop_ids,
                )
            )
        )

    @staticmethod
    async def _grammar(loaded: _Loaded, request: GenerationRequest) -> Grammar | None:
        """The request's constraint, compiled off the event loop (the first one also maps the
        vocabulary for the grammar engine)."""
        try:
            return await asyncio.to_thread(
                request_grammar, loaded.grammars, loaded.format.tool_format, request
            )
        except GrammarError as exc:
            raise EngineRequestError(f"cannot constrain the output: {exc}") from exc

    @staticmethod
    def _encode(loaded: _Loaded, request: GenerationRequest) -> tuple[list[int], frozenset[int]]:
        """The prompt's token ids and the tokens that end its completion."""
        if request.prompt is not None:
            encoded = loaded.text_prompts.encode(request.prompt)
            return encoded.token_ids, encoded.stop_ids
        try:
            prompt_text = loaded.format.render(request.messages, request.tools)
        except TemplateError as exc:
            raise EngineRequestError(
                f"the chat template of {loaded.name!r} refused the conversation: {exc}"
            ) from exc
        return (loaded.tokenizer.encode(prompt_text, add_special_tokens=False).ids, loaded.stop_ids)

    def _result(
        self,
        loaded: _Loaded,
        prompt: list[int],
        stop_ids: frozenset[int],
        last: Progress,
        text: "TextAssembler",
        request: GenerationRequest,
    ) -> GenerationResult:
        capture = request.capture
        experts = (
            np.concatenate([e.numpy() for e in last.routed_experts])
            if last.routed_experts
            else None
        )
        tokens = TokenTrace(
            prompt_token_ids=list(prompt) if capture.token_ids else None,
            completion_token_ids=list(last.output_ids) if capture.token_ids else None,
            logprobs=last.logprobs or None,
            sampled=loaded.token_texts.sampled(
                last.output_ids, last.logprobs, last.top_logprobs, skip=stop_ids
            )
            if capture.logprobs
            else None,
            routed_experts=experts,
            weights_version=loaded.weights_version,
        )
        spec = last.spec
        return GenerationResult(
            text=text.text,
            tool_calls=text.calls,
            finish_reason=text.finish_reason(last.finish_reason),
            usage=Usage(len(prompt), len(last.output_ids), last.cached_prompt_tokens),
            model=loaded.name,
            tokens=tokens,
            spec=SpecDecodeStats(
                spec.verify_steps, spec.accept_length, spec.accept_rate, spec.drafted
            )
            if spec.verify_steps
            else None,
        )

    async def update_weights(self, weights: Weights, version: str, *, delta: bool = False) -> None:
        loaded = await self._load()
        if isinstance(weights, Path):
            try:
                tensors = await asyncio.to_thread(load_file, str(weights))
            except (OSError, SafetensorError) as exc:
                raise EngineRequestError(f"cannot read weights from {weights}: {exc}") from exc
        else:
            tensors = dict(weights)

        def apply() -> None:
            loaded.worker.engine.update_weights(tensors, delta=delta)
            loaded.weights_version = version  # on the worker thread: before any next request

        try:
            await loaded.worker.between_requests(apply)
        except ValueError as exc:
            raise EngineRequestError(f"the update does not fit {loaded.name!r}: {exc}") from exc
        except WorkerClosed as exc:
            raise EngineUnavailable("the embedded engine was shut down") from exc

    async def aclose(self) -> None:
        """Stop the worker and drop the model: requests in flight fail with
        `EngineUnavailable`, and a later generation loads the model again."""
        async with self._loading:
            loaded, self._loaded = self._loaded, None
        if loaded is not None:
            await asyncio.to_thread(loaded.worker.close)


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class TextAssembler:
    """One request's output tokens -> stream events: incremental detokenization (a character
    whose bytes span tokens comes out whole), stop strings (the text ends before the first
    one, which is never emitted, even in part) and tool calls printed in `tool_format`
    (None: all output is text). `one_call`: the output ends with its first tool call
    (`parallel_tool_calls: false`); what the model printed after it is left out."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        tool_format: ToolTextFormat | None,
        *,
        stop: Iterable[str] = (),
        skip_ids: Collection[int] = (),
        new_call_id: Callable[[], str] = new_call_id,
        one_call: bool = False,
    ) -> None:
        self._tokenizer = tokenizer
        self._parser = ToolTextParser((tool_format,)) if tool_format else None
        self._stop = tuple(s for s in stop if s)
        self._skip = skip_ids
        self._new_call_id = new_call_id
        self._ids: list[int] = []
        self._prefix = 0
        """Start of the tokens decoded for context only (their text is already out)."""
        self._read = 0
        """Start of the tokens whose text is not out yet."""
        self._pending = ""
        """Decoded text held back: it may be the start of a stop string."""
        self.tokens = 0
        """Tokens fed so far, skipped ones included."""
        self.text = ""
        self.calls: list[ToolCall] = []
        self.stopped = False
        self._one_call = one_call
        self._called_once = False

    def feed(self, token_ids: Iterable[int]) -> list[EngineEvent]:
        """Events for the next tokens of the output."""
        for token in token_ids:
            self.tokens += 1
            if token not in self._skip:
                self._ids.append(token)
        if self.stopped:
            return []
        return self._text(self._decode(final=False), final=False)

    def finish(self) -> list[EngineEvent]:
        """Events for what is still held back, at the end of the output."""
        events = [] if self.stopped else self._text(self._decode(final=True), final=True)
        if self._parser:
            events += self._emit(self._parser.finish())
        return events

    def finish_reason(self, engine_reason: str | None) -> FinishReason:
        """The request's finish reason, given the engine's (`stop`, `length`, `abort`). A cap
        reached is `length` even with calls, as at OpenAI: the last of them may be cut."""
        if engine_reason == "length" and not self.stopped:
            return "length"
        if self.calls:
            return "tool_calls"
        return "stop" if self.stopped else _FINISH.get(engine_reason, "stop")

    def _decode(self, *, final: bool) -> str:
        """Text of the tokens not decoded yet, once it does not end inside a character."""
        if self._read == len(self._ids):
            return ""
        decode = self._tokenizer.decode
        known = decode(self._ids[self._prefix : self._read], skip_special_tokens=False)
        full = decode(self._ids[self._prefix :], skip_special_tokens=False)
        if not final and (full.endswith("\ufffd") or len(full) <= len(known)):
            return ""  # bytes of a character still to come
        self._prefix, self._read = self._read, len(self._ids)
        return full[len(known) :]

    def _text(self, new: str, *, final: bool) -> list[EngineEvent]:
        text = self._pending + new
        self._pending = ""
        cut = min((pos for s in self._stop if (pos := text.find(s)) >= 0), default=-1)
        if cut >= 0:
            text, self.stopped = text[:cut], True
        elif not final and self._stop:
            held = _stop_prefix(text, self._stop)
            text, self._pending = text[: len(text) - held], text[len(text) - held :]
        return self._emit(self._parser.feed(text) if self._parser else [text])

    def _emit(self, parsed: list[Any]) -> list[EngineEvent]:
        events: list[EngineEvent] = []
        for piece in parsed:
            if self._called_once:
                break
            if isinstance(piece, ParsedToolCall):
                index = len(self.calls)
                call = ToolCall(
                    id=piece.id or self._new_call_id(), name=piece.name, arguments=piece.arguments
                )
                self.calls.append(call)
                events += [
                    ToolCallStarted(index, call.id, call.name),
                    ToolCallArgumentsDelta(index, call.arguments),
                ]
                if self._one_call:
                    self._called_once = self.stopped = True
            else:
                text = piece if isinstance(piece, str) else piece.text
                if text:
                    self.text += text
                    events.append(TextDelta(text))
        return events


def _stop_prefix(text: str, stops: tuple[str, ...]) -> int:
    """Length of the longest end of `text` that could begin a stop string."""
    for size in range(min(len(text), max(map(len, stops)) - 1), 0, -1):
        if any(stop.startswith(text[-size:]) for stop in stops):
            return size
    return 0
