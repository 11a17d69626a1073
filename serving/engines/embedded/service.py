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
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from opencomposer.config import EngineSettings
from opencomposer.serving import models as registry
from opencomposer.serving.engines.base import (
    EngineEvent,
    Finished,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    SpecDecodeStats,
    TextDelta,
    TokenTrace,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    Usage,
)
from opencomposer.serving.engines.embedded.chat_format import ChatFormat, chat_format_for
from opencomposer.serving.engines.embedded.engine import EngineConfig, LLMEngine
from opencomposer.serving.engines.embedded.loader import ModelLoadError, load_model
from opencomposer.serving.engines.embedded.sequence import SamplingOptions, Sequence
from opencomposer.serving.engines.embedded.worker import EngineWorker
from opencomposer.serving.engines.errors import (
    ContextLengthExceeded,
    EngineRequestError,
    EngineUnavailable,
)
from opencomposer.serving.engines.tool_text import ParsedToolCall, ToolTextParser

DEFAULT_MODEL = "smollm2-135m"
DEFAULT_MAX_TOKENS = 1024
_FINISH: dict[str | None, FinishReason] = {"length": "length", "stop": "stop", "abort": "stop"}


def resolve_model(settings: EngineSettings, models_dir: Path) -> tuple[str, Path]:
    """(name, folder) of the model to serve: a registry name pulled into `models_dir`, or a
    folder in Hugging Face layout."""
    name = settings.model or DEFAULT_MODEL
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
        device = choose_device(settings.device)
        self.name = name
        self.model = load_model(folder, device=device,
                                dtype=choose_dtype(settings.dtype, device),
                                mtp=settings.speculative != "none")
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.format: ChatFormat = chat_format_for(folder)
        self.stop_ids = frozenset(
            token for text in self.format.stop
            if (token := self.tokenizer.token_to_id(text)) is not None)
        self.worker = EngineWorker(LLMEngine(self.model, EngineConfig(
            kv_cache_tokens=settings.kv_cache_tokens,
            max_batch_tokens=settings.max_batch_tokens)))
        wanted = settings.speculative != "none" and self.model.num_mtp_layers > 0
        self.draft_tokens = settings.draft_tokens if wanted else 0


class EmbeddedEngine:
    name = "embedded"

    def __init__(self, settings: EngineSettings, models_dir: Path) -> None:
        self.settings = settings
        self.models_dir = models_dir
        self._loaded: _Loaded | None = None
        self._loading = asyncio.Lock()

    async def models(self) -> list[ModelInfo]:
        """The served model, from its config alone (its weights load on first generation)."""
        name, folder = resolve_model(self.settings, self.models_dir)
        config = json.loads((folder / "config.json").read_text())
        return [ModelInfo(id=name, context_window=config.get("max_position_embeddings"),
                          owned_by="opencomposer")]

    async def _load(self) -> _Loaded:
        async with self._loading:
            if self._loaded is None:
                name, folder = resolve_model(self.settings, self.models_dir)
                try:
                    self._loaded = await asyncio.to_thread(_Loaded, name, folder, self.settings)
                except (ModelLoadError, OSError, ValueError) as exc:
                    raise EngineUnavailable(f"cannot load model {name!r}: {exc}") from exc
            return self._loaded

    async def generate(self, request: GenerationRequest) -> AsyncIterator[EngineEvent]:
        loaded = await self._load()
        prompt_text = loaded.format.render(request.messages, request.tools)
        prompt = loaded.tokenizer.encode(prompt_text, add_special_tokens=False).ids
        context = loaded.model.max_positions
        sampling = request.sampling
        budget = min(sampling.max_tokens or DEFAULT_MAX_TOKENS, context - len(prompt))
        if budget <= 0:
            raise ContextLengthExceeded(f"the prompt has {len(prompt)} tokens; the model's "
                                        f"context is {context}")
        options = SamplingOptions(
            temperature=sampling.temperature or 0.0, top_p=sampling.top_p or 1.0,
            top_k=sampling.top_k or 0, max_tokens=budget, seed=sampling.seed,
            stop_token_ids=loaded.stop_ids, logprobs=request.capture.logprobs,
            capture_experts=request.capture.routed_experts, draft_tokens=loaded.draft_tokens)
        stream = _TextStream(loaded, sampling.stop, request.tool_choice != "none")
        seq: Sequence | None = None
        async for seq in loaded.worker.run(prompt, options):
            for event in stream.feed(seq):
                yield event
            if stream.stopped:
                break
        if seq is None:
            raise EngineRequestError("the engine produced nothing for this request")
        for event in stream.finish():
            yield event
        yield Finished(self._result(loaded, seq, stream, request))

    def _result(self, loaded: _Loaded, seq: Sequence, stream: "_TextStream",
                request: GenerationRequest) -> GenerationResult:
        reason: FinishReason = "stop" if stream.stopped else _FINISH.get(seq.finish_reason, "stop")
        if stream.calls:
            reason = "tool_calls"
        experts = (np.concatenate([e.numpy() for e in seq.routed_experts])
                   if seq.routed_experts else None)
        tokens = TokenTrace(
            prompt_token_ids=seq.token_ids[:seq.prompt_len] if request.capture.token_ids
            else None,
            completion_token_ids=seq.output_ids if request.capture.token_ids else None,
            logprobs=seq.logprobs or None, routed_experts=experts,
            weights_version=getattr(loaded.model, "weights_version", None))
        spec = seq.spec
        return GenerationResult(
            text=stream.text, tool_calls=stream.calls, finish_reason=reason,
            usage=Usage(seq.prompt_len, len(seq.output_ids), 0), model=loaded.name,
            tokens=tokens,
            spec=SpecDecodeStats(spec.verify_steps, spec.accept_length, spec.accept_rate)
            if spec.verify_steps else None)

    async def aclose(self) -> None:
        if self._loaded is not None:
            await asyncio.to_thread(self._loaded.worker.close)
            self._loaded = None


class _TextStream:
    """Incremental detokenization, stop strings and tool-call parsing for one request."""

    def __init__(self, loaded: _Loaded, stop: list[str], tools: bool) -> None:
        self._tokenizer = loaded.tokenizer
        self._parser = ToolTextParser((loaded.format.tool_format,)) if tools else None
        self._stop = stop
        self._decoded = ""
        self._seen = 0
        self.text = ""
        self.calls: list[ToolCall] = []
        self.stopped = False

    def feed(self, seq: Sequence) -> list[EngineEvent]:
        ids = [t for t in seq.output_ids if t not in seq.options.stop_token_ids]
        decoded = self._tokenizer.decode(ids, skip_special_tokens=False)
        if not seq.finished and decoded.endswith("\ufffd"):
            return []  # a character split across tokens: wait for the rest of its bytes
        new, self._decoded = decoded[len(self._decoded):], decoded
        for stop in self._stop:
            cut = (self.text + new).find(stop)
            if cut >= 0:
                new = (self.text + new)[len(self.text):cut]
                self.stopped = True
                break
        return self._emit(self._parser.feed(new) if self._parser else [new])

    def finish(self) -> list[EngineEvent]:
        return self._emit(self._parser.finish()) if self._parser else []

    def _emit(self, parsed: list[Any]) -> list[EngineEvent]:
        events: list[EngineEvent] = []
        for piece in parsed:
            if isinstance(piece, ParsedToolCall):
                index = len(self.calls)
                call = ToolCall(id=piece.id or f"call_{uuid.uuid4().hex[:12]}", name=piece.name,
                                arguments=piece.arguments)
                self.calls.append(call)
                events += [ToolCallStarted(index, call.id, call.name),
                           ToolCallArgumentsDelta(index, call.arguments)]
            else:
                text = piece if isinstance(piece, str) else piece.text
                if text:
                    self.text += text
                    events.append(TextDelta(text))
        return events
