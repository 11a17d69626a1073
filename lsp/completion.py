"""Inline completion: a fill-in-the-middle request at the cursor, shaped and trimmed for the
editor, with Copilot-style telemetry of what the user did with it.

One `complete()` per editor request. The prompt is the text around the cursor (and other open
documents of the same language before it), taken when the request arrives. After a debounce
the engine is asked; a newer request for the same document cancels the older one's work, so
typing never queues generations. The completion is one line when the cursor has code after
it on its line, else a block (see `_block_end`); it is cut while streaming, which closes the
stream so the engine stops. Offsets always come from the document's position codec (utf-16,
utf-8 or utf-32, whatever was negotiated).
"""

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.workspace import TextDocument

from opencomposer.agent.traces.base import CompletionRecord, TraceStore
from opencomposer.config import CompletionSettings
from opencomposer.serving.engines.base import (
    Engine,
    Finished,
    GenerationRequest,
    SamplingParams,
    TextDelta,
    TextPrompt,
)

log = logging.getLogger(__name__)

ACCEPTED_COMMAND = "opencomposer.completion.accepted"
"""The command an accepted item runs; the server records acceptance when it executes."""

# Comment delimiters of languages (VS Code language ids) that do not comment with `#`.
_COMMENTS: dict[str, tuple[str, str]] = {
    **dict.fromkeys(
        (
            "c",
            "cpp",
            "csharp",
            "cuda-cpp",
            "dart",
            "go",
            "java",
            "javascript",
            "javascriptreact",
            "jsonc",
            "kotlin",
            "objective-c",
            "objective-cpp",
            "php",
            "proto",
            "rust",
            "scala",
            "swift",
            "typescript",
            "typescriptreact",
            "zig",
        ),
        ("//", ""),
    ),
    **dict.fromkeys(("haskell", "lua", "sql"), ("--", "")),
    **dict.fromkeys(("clojure", "lisp", "scheme"), (";", "")),
    **dict.fromkeys(("erlang", "latex", "matlab", "tex"), ("%", "")),
    **dict.fromkeys(("css", "less", "scss"), ("/*", " */")),
    **dict.fromkeys(("html", "markdown", "svelte", "vue", "xml"), ("<!--", " -->")),
}


@dataclass(frozen=True)
class Proposal:
    """A completion to show: `text` replaces `range` (an empty range at the cursor)."""

    id: str
    text: str
    range: types.Range
    uri: str
    model: str | None
    """As the engine last reported it (a stream cut early carries no model name)."""

    multiline: bool


@dataclass(frozen=True)
class _Prompt:
    prefix: str
    suffix: str
    multiline: bool
    indent: int
    """Leading whitespace of the cursor's line: a block completion ends where code leaves it."""


class InlineCompleter:
    """Completions for one engine. Telemetry goes to `store` when one is given."""

    def __init__(
        self, engine: Engine, settings: CompletionSettings, store: TraceStore | None = None
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.store = store
        self._pending: dict[str, asyncio.Task[Proposal | None]] = {}
        self._model: str | None = None

    async def complete(
        self,
        document: TextDocument,
        position: types.Position,
        *,
        related: Sequence[TextDocument] = (),
        workspace_root: Path | None = None,
    ) -> Proposal | None:
        """A completion at `position`, or None when the model offers nothing (or completion
        is disabled). Raises `asyncio.CancelledError` when a newer call for the same document
        replaces this one (pygls answers a cancelled handler with RequestCancelled); engine
        errors propagate."""
        if not self.settings.enabled:
            return None
        offset = document.offset_at_position(position)
        # pygls clamps a position past the line's end in place; the range uses the clamped one.
        cursor = types.Position(line=position.line, character=position.character)
        prompt = self._prompt(document, offset, related, workspace_root)
        work = asyncio.create_task(self._run(document, cursor, prompt, workspace_root))
        previous = self._pending.get(document.uri)
        if previous is not None:
            previous.cancel()
        self._pending[document.uri] = work
        try:
            return await work
        finally:
            # Cancelling the caller cancels the work too, which closes the engine's stream.
            work.cancel()
            if self._pending.get(document.uri) is work:
                del self._pending[document.uri]

    async def _run(
        self,
        document: TextDocument,
        cursor: types.Position,
        prompt: _Prompt,
        workspace_root: Path | None,
    ) -> Proposal | None:
        await asyncio.sleep(self.settings.debounce_ms / 1000)
        request = GenerationRequest(
            prompt=TextPrompt(prefix=prompt.prefix, suffix=prompt.suffix),
            sampling=SamplingParams(
                max_tokens=self.settings.max_tokens,
                temperature=self.settings.temperature,
                stop=[] if prompt.multiline else ["\n"],
            ),
            model=None,
        )
        started = time.monotonic()
        text = ""
        async with aclosing(self.engine.generate(request)) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    text += event.text
                    end = _end(text, prompt, final=False)
                    if end is not None:
                        text = text[:end]
                        break
                elif isinstance(event, Finished):
                    self._model = event.result.model or self._model
                    text = event.result.text
                    text = text[: _end(text, prompt, final=True)]
        duration_ms = int((time.monotonic() - started) * 1000)
        text = _trim(text, prompt)
        if not text:
            return None
        proposal = Proposal(
            id=uuid.uuid4().hex,
            text=text,
            range=types.Range(start=cursor, end=cursor),
            uri=document.uri,
            model=self._model,
            multiline=prompt.multiline,
        )
        if self.store is not None:
            self.store.record_completion(
                CompletionRecord(
                    id=proposal.id,
                    path=_relative(document.path, workspace_root),
                    text=text,
                    prefix_length=len(prompt.prefix),
                    suffix_length=len(prompt.suffix),
                    duration_ms=duration_ms,
                    workspace=None if workspace_root is None else str(workspace_root),
                    language=document.language_id,
                    model=proposal.model,
                )
            )
        return proposal

    def _prompt(
        self,
        document: TextDocument,
        offset: int,
        related: Sequence[TextDocument],
        workspace_root: Path | None,
    ) -> _Prompt:
        source = document.source
        start = max(0, offset - self.settings.prefix_chars)
        if start > 0:
            # Start at a whole line, unless one line is longer than the budget.
            newline = source.find("\n", start - 1, offset)
            start = start if newline == -1 else newline + 1
        end = min(len(source), offset + self.settings.suffix_chars)
        if end < len(source):
            newline = source.rfind("\n", offset, end)
            end = end if newline == -1 else newline + 1
        line_start = source.rfind("\n", 0, offset) + 1
        line_end = source.find("\n", offset)
        before = source[line_start:offset]
        after = source[offset : len(source) if line_end == -1 else line_end]
        context = self._related(document, related, workspace_root)
        if context:
            context += _comment(document.language_id, _relative(document.path, workspace_root))
        return _Prompt(
            prefix=context + source[start:offset],
            suffix=source[offset:end],
            multiline=not after.strip(),
            indent=len(before) - len(before.lstrip()),
        )

    def _related(
        self, document: TextDocument, related: Sequence[TextDocument], workspace_root: Path | None
    ) -> str:
        """Other open documents of the language, each under a comment naming its path, whole
        lines from the top, until `related_chars` is spent."""
        budget = self.settings.related_chars
        parts = []
        for other in related:
            if other.uri == document.uri or other.language_id != document.language_id:
                continue
            header = _comment(other.language_id, _relative(other.path, workspace_root))
            room = budget - len(header)
            text = other.source[:room] if room > 0 else ""
            if len(other.source) > room:
                text = text[: text.rfind("\n") + 1]
            if not text.strip():
                continue
            text += "" if text.endswith("\n") else "\n"
            parts.append(header + text)
            budget -= len(header) + len(text)
        return "".join(parts)

    # ------------------------------------------------------------------ telemetry

    def shown(self, proposal_id: str) -> None:
        self._event(proposal_id, "shown")

    def accepted(self, proposal_id: str) -> None:
        self._event(proposal_id, "accepted")

    def partially_accepted(self, proposal_id: str, accepted_length: int) -> None:
        """The user took the first `accepted_length` characters (a word or a line)."""
        self._event(proposal_id, "partially_accepted", {"accepted_length": accepted_length})

    def rejected(self, proposal_id: str) -> None:
        self._event(proposal_id, "rejected")

    def _event(self, proposal_id: str, kind: str, detail: dict[str, int] | None = None) -> None:
        if self.store is not None and not self.store.record_completion_event(
            proposal_id, kind, detail
        ):
            log.debug("%s for an unknown completion %r ignored", kind, proposal_id)


def inline_items(proposal: Proposal) -> list[types.InlineCompletionItem]:
    """The `textDocument/inlineCompletion` result."""
    return [
        types.InlineCompletionItem(
            insert_text=proposal.text, range=proposal.range, command=_accepted(proposal)
        )
    ]


def completion_items(proposal: Proposal) -> list[types.CompletionItem]:
    """The `textDocument/completion` result, for editors without inline completion."""
    label = next((line.strip() for line in proposal.text.splitlines() if line.strip()), "")
    return [
        types.CompletionItem(
            label=label,
            kind=types.CompletionItemKind.Text,
            text_edit=types.TextEdit(range=proposal.range, new_text=proposal.text),
            insert_text_format=types.InsertTextFormat.PlainText,
            command=_accepted(proposal),
        )
    ]


def _accepted(proposal: Proposal) -> types.Command:
    return types.Command(title="accepted", command=ACCEPTED_COMMAND, arguments=[proposal.id])


def _end(text: str, prompt: _Prompt, *, final: bool) -> int | None:
    """Where the completion ends in `text` so far, or None while that is undecided."""
    if not prompt.multiline:
        newline = text.find("\n")
        return newline if newline != -1 else (len(text) if final else None)
    return _block_end(text, prompt.indent, final=final)


def _block_end(text: str, indent: int, *, final: bool) -> int | None:
    """A block completion keeps its first line, then ends before the first line that leaves
    the cursor's block: a line indented less than the cursor's line, or a blank line
    followed by one indented no deeper (the next statement at the cursor's level, e.g. the
    next function). Indentation is counted in whitespace characters."""
    lines = text.split("\n")
    start = len(lines[0]) + 1
    blank_before = False
    for line in lines[1:]:
        if not line.strip():
            blank_before = True
        else:
            width = len(line) - len(line.lstrip())
            if width < indent or (blank_before and width <= indent):
                return start
            blank_before = False
        start += len(line) + 1
    return len(text) if final else None


def _trim(text: str, prompt: _Prompt) -> str:
    """Drop what the suffix already has: in a block, everything from a line equal to the
    suffix's first line (models without fill-in-the-middle write on past the cursor's gap);
    then a tail that repeats the start of the suffix (a `)` the line already closes).
    Trailing whitespace goes too."""
    first = next((line.rstrip() for line in prompt.suffix.splitlines() if line.strip()), "")
    if prompt.multiline and first:
        lines = text.split("\n")
        start = len(lines[0]) + 1
        for line in lines[1:]:
            # Indentation included: an inner `}` is not the suffix's closing `}`.
            if line.rstrip() == first:
                text = text[:start]
                break
            start += len(line) + 1
    text = text.rstrip()
    for size in range(min(len(text), len(prompt.suffix)), 0, -1):
        if text.endswith(prompt.suffix[:size]):
            text = text[:-size].rstrip()
            break
    return text


def _comment(language_id: str | None, text: str) -> str:
    start, end = _COMMENTS.get(language_id or "", ("#", ""))
    return f"{start} {text}{end}\n"


def _relative(path: str, root: Path | None) -> str:
    """The path the model sees: relative to the workspace when inside it, else as is."""
    if root is not None and Path(path).is_relative_to(root):
        return Path(path).relative_to(root).as_posix()
    return Path(path).as_posix()
