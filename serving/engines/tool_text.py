"""Tool calls printed as text: an incremental parser for models and servers without native
tool calling.

Formats: Kimi K2 (`<|tool_calls_section_begin|>` ... `functions.NAME:IDX`
`<|tool_call_argument_begin|>` ARGS ...), DeepSeek V3 and V3.1 (`<｜tool▁calls▁begin｜>` ...
`<｜tool▁sep｜>` ...) and the `<tool_call>{"name": ..., "arguments": ...}</tool_call>` form of
Hermes/Qwen. Text arrives in arbitrary chunks, so a marker may be split anywhere: the parser
holds back any tail that could still become a marker, and emits each call once its end
marker arrives. Nothing is ever dropped: a block that cannot be parsed, or that is still
open when the stream ends without parseable arguments, comes back as text.
"""

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, auto


@dataclass(frozen=True, slots=True)
class ParsedText:
    text: str


@dataclass(frozen=True, slots=True)
class ParsedToolCall:
    id: str | None
    """The call id when the format carries one (Kimi K2); None otherwise."""

    name: str
    arguments: str


Parsed = ParsedText | ParsedToolCall
CallBody = Callable[[str], ParsedToolCall | None]


@dataclass(frozen=True)
class ToolTextFormat:
    name: str
    section_begin: tuple[str, ...]
    """Markers opening a block of calls; empty when each call stands alone."""

    section_end: tuple[str, ...]
    call_begin: str
    call_end: str
    parse_call: CallBody


_KIMI_HEAD = re.compile(r"\s*(?:functions\.)?(?P<name>[^\s:]+?)(?::\d+)?\s*")


def _parse_kimi(body: str) -> ParsedToolCall | None:
    head, sep, arguments = body.partition("<|tool_call_argument_begin|>")
    match = _KIMI_HEAD.fullmatch(head)
    if not sep or not match:
        return None
    return ParsedToolCall(id=head.strip(), name=match["name"], arguments=arguments.strip())


_FENCED_JSON = re.compile(r"```(?:json)?\s*(?P<args>.*?)\s*```", re.DOTALL)


def _parse_deepseek(body: str) -> ParsedToolCall | None:
    left, sep, right = body.partition("<｜tool▁sep｜>")
    if not sep:
        return None
    if left.strip() == "function":  # V3: type<sep>name, then the arguments in a json fence
        name, _, rest = right.partition("\n")
        fenced = _FENCED_JSON.search(rest)
        arguments = fenced["args"] if fenced else rest.strip()
    else:  # V3.1: name<sep>arguments
        name, arguments = left, right.strip()
    name = name.strip()
    return ParsedToolCall(id=None, name=name, arguments=arguments) if name else None


def _parse_hermes(body: str) -> ParsedToolCall | None:
    try:
        call = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return None
    arguments = call.get("arguments", call.get("parameters", {}))
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ParsedToolCall(id=None, name=call["name"], arguments=arguments)


KIMI_K2 = ToolTextFormat(
    name="kimi_k2",
    section_begin=("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>"),
    section_end=("<|tool_calls_section_end|>", "<|tool_call_section_end|>"),
    call_begin="<|tool_call_begin|>",
    call_end="<|tool_call_end|>",
    parse_call=_parse_kimi,
)
DEEPSEEK_V3 = ToolTextFormat(
    name="deepseek_v3",
    section_begin=("<｜tool▁calls▁begin｜>",),
    section_end=("<｜tool▁calls▁end｜>",),
    call_begin="<｜tool▁call▁begin｜>",
    call_end="<｜tool▁call▁end｜>",
    parse_call=_parse_deepseek,
)
HERMES = ToolTextFormat(
    name="hermes",
    section_begin=(),
    section_end=(),
    call_begin="<tool_call>",
    call_end="</tool_call>",
    parse_call=_parse_hermes,
)
FORMATS = {fmt.name: fmt for fmt in (KIMI_K2, DEEPSEEK_V3, HERMES)}


class _State(Enum):
    TEXT = auto()
    SECTION = auto()
    CALL = auto()


def _first(buffer: str, markers: tuple[str, ...]) -> tuple[int, str] | None:
    """Earliest occurrence of any marker, as (position, marker)."""
    hits = [(pos, marker) for marker in markers if (pos := buffer.find(marker)) >= 0]
    return min(hits) if hits else None


def _unsafe_tail(buffer: str, markers: tuple[str, ...]) -> int:
    """Length of the longest buffer suffix that is a proper prefix of a marker."""
    start = buffer.rfind("<", max(0, len(buffer) - max(map(len, markers))))
    while start >= 0:
        tail = buffer[start:]
        if any(marker.startswith(tail) for marker in markers):
            return len(tail)
        start = buffer.find("<", start + 1)
    return 0


class ToolTextParser:
    """Feed text chunks, get text and tool calls back in order."""

    def __init__(self, formats: tuple[ToolTextFormat, ...] = tuple(FORMATS.values())) -> None:
        self._openers: dict[str, ToolTextFormat] = {}
        for fmt in formats:
            for marker in fmt.section_begin or (fmt.call_begin,):
                self._openers[marker] = fmt
        self._opener_markers = tuple(self._openers)
        self._buffer = ""
        self._state = _State.TEXT
        self._format: ToolTextFormat | None = None
        self._in_section = False
        self._opened_with = ""

    def feed(self, text: str) -> list[Parsed]:
        self._buffer += text
        out: list[Parsed] = []
        while self._step(out):
            pass
        return out

    def finish(self) -> list[Parsed]:
        """Flush at end of stream."""
        out: list[Parsed] = []
        leftover, self._buffer = self._buffer, ""
        if self._state is _State.CALL and self._format is not None:
            call = self._format.parse_call(leftover.strip())
            if call is not None:
                out.append(call)
                leftover = ""
            else:
                leftover = self._opened_with + leftover
        elif self._state is _State.SECTION and not leftover.strip():
            leftover = ""
        if leftover:
            out.append(ParsedText(leftover))
        self._state, self._format = _State.TEXT, None
        return out

    def _step(self, out: list[Parsed]) -> bool:
        """Consume what can be decided now; True if called again may make progress."""
        if self._state is _State.TEXT:
            return self._step_text(out)
        assert self._format is not None
        if self._state is _State.SECTION:
            hit = _first(self._buffer, (self._format.call_begin, *self._format.section_end))
            if hit is None:
                return False
            pos, marker = hit
            self._buffer = self._buffer[pos + len(marker) :]
            if marker == self._format.call_begin:
                self._state, self._opened_with = _State.CALL, marker
            else:
                self._state, self._format = _State.TEXT, None
            return True
        pos = self._buffer.find(self._format.call_end)
        if pos < 0:
            return False
        body = self._buffer[:pos]
        self._buffer = self._buffer[pos + len(self._format.call_end) :]
        call = self._format.parse_call(body.strip())
        out.append(call or ParsedText(self._opened_with + body + self._format.call_end))
        if self._in_section:
            self._state = _State.SECTION
        else:
            self._state, self._format = _State.TEXT, None
        return True

    def _step_text(self, out: list[Parsed]) -> bool:
        hit = _first(self._buffer, self._opener_markers)
        if hit is None:
            keep = _unsafe_tail(self._buffer, self._opener_markers)
            ready = self._buffer[: len(self._buffer) - keep]
            if ready:
                out.append(ParsedText(ready))
                self._buffer = self._buffer[len(ready) :]
            return False
        pos, marker = hit
        if pos:
            out.append(ParsedText(self._buffer[:pos]))
        self._buffer = self._buffer[pos + len(marker) :]
        self._format = self._openers[marker]
        self._in_section = bool(self._format.section_begin)
        self._state = _State.SECTION if self._in_section else _State.CALL
        self._opened_with = marker
        return True
