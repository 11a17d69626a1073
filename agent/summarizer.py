"""Self-summarization (the Composer 2 report, section 2): the model compacts its own context.

Past the trigger, the current context gets one short synthetic user query asking for a
summary; the model thinks and writes it (streamed into a `context_summary` item), and the
next step starts from a rebuilt context: system prompt, tool specs and user messages verbatim,
then the summary and the state block (to-do list, files touched, summary count). Unlike the
prompt-based compaction of OpenHands or Codex (a separate long summarization prompt, often a
separate model call without the cache), the summary is a continuation of the same context, so
the engine reuses its cached prefix, and it is a logged step of the rollout that training
rewards with the rest of the chain.

The trigger leaves room for the summary itself (`summary_max_tokens` plus the query), so
summarizing can never overflow the window. A failed or empty summary falls back to a
deterministic digest of the steps taken, which keeps the task and the state and says so.
"""

from collections.abc import Callable, Sequence
from typing import Protocol

from opencomposer.agent.context import (
    build_messages,
    conversation_state,
    last_summary,
    summary_count,
)
from opencomposer.agent.item_log import ItemLog
from opencomposer.agent.prompting import render
from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    CommandExecutionItem,
    ContextSummaryItem,
    FileChangeItem,
    FileReadItem,
    Item,
    ItemStatus,
    SearchItem,
    ToolCallFields,
)
from opencomposer.agent.tokens import ContextWindow
from opencomposer.serving.engines.base import ChatMessage, GenerationResult, SamplingParams
from opencomposer.serving.engines.errors import EngineError

# Tokens kept free beyond `summary_max_tokens` for the synthetic query and template overhead.
QUERY_RESERVE = 256
# Lines of the fallback digest; older steps are counted, not listed.
DIGEST_LINES = 40


class Generate(Protocol):
    """One engine call streamed into the log (`ActiveTurn.generate`); `text_item` receives
    the text instead of a new agent_message item."""

    async def __call__(
        self,
        messages: list[ChatMessage],
        sampling: SamplingParams,
        step: int,
        *,
        purpose: str,
        tool_choice: str = "auto",
        text_item: Item | None = None,
    ) -> GenerationResult: ...


def summary_budget(context_window: int, summary_max_tokens: int) -> int:
    """Tokens the summary step may generate: as configured, but at most an eighth of a small
    window, so an 8k model is not left with half its context for work."""
    return min(summary_max_tokens, context_window // 8)


def summary_trigger(context_window: int, trigger: float, summary_max_tokens: int) -> int:
    """Context size, in tokens, at which to summarize before the next step; what is left
    above it always fits the summary step."""
    wanted = int(trigger * context_window) if trigger <= 1 else int(trigger)
    reserve = summary_budget(context_window, summary_max_tokens) + QUERY_RESERVE
    return min(wanted, context_window - reserve)


async def summarize_if_due(
    log: ItemLog,
    window: ContextWindow,
    generate: Generate,
    *,
    turn_id: str,
    next_step: Callable[[], int],
    summary_max_tokens: int,
    temperature: float | None,
    force: bool = False,
) -> bool:
    """Summarize if the context has reached the trigger (or `force`). Only when the model
    has produced something since the last summary: otherwise there is nothing to condense
    and summarizing again could not make the context smaller."""
    if not _model_output_since_summary(log.items):
        return False
    messages = log.prompt()
    tokens = window.estimate(messages)
    if not force and tokens < window.summary_trigger:
        return False
    count = summary_count(log.items) + 1
    step = next_step()
    item = log.add(
        ContextSummaryItem(
            id=log.new_id(),
            turn_id=turn_id,
            step=step,
            summary_index=count,
            tokens_before=tokens,
            state=conversation_state(log.items, count),
        )
    )
    query = ChatMessage(role="user", content=render("summarize"))
    sampling = SamplingParams(
        max_tokens=summary_budget(window.size, summary_max_tokens), temperature=temperature
    )
    text, reason = "", ""
    try:
        result = await generate(
            [*messages, query],
            sampling,
            step,
            purpose="summary",
            tool_choice="none",
            text_item=item,
        )
        text = result.text.strip()
        reason = "" if text else "the summary was empty"
    except EngineError as exc:
        reason = f"{exc.kind}: {exc.message}"
    method = "model"
    if not text:
        method = "truncation"
        lines = digest(log.items)
        shown = lines[-DIGEST_LINES:]
        text = render("truncation", reason=reason, digest=shown, omitted=len(lines) - len(shown))
    final = log.item(item.id).model_copy(
        update={"text": text, "method": method, "status": ItemStatus.completed}
    )
    rebuilt = build_messages(
        log.system_prompt, [final if i.id == item.id else i for i in log.items]
    )
    window.reset()
    log.complete(item, text=text, method=method, tokens_after=window.estimate(rebuilt))
    return True


def _model_output_since_summary(items: Sequence[Item]) -> bool:
    """Looked for from the end, so a step pays for the items since the last model output,
    not for the thread."""
    for item in reversed(items):
        if isinstance(item, ContextSummaryItem):
            if item.status == ItemStatus.completed:
                return False
        elif item.step is not None:
            return True
    return False


def digest(items: Sequence[Item]) -> list[str]:
    """One line per step since the last summary: what was called and how it ended, and what
    the model last said. Deterministic, so a fallback is reproducible from the log."""
    start = last_summary(items)
    lines = []
    for item in items[(start + 1 if start is not None else 0) :]:
        if isinstance(item, ToolCallFields):
            lines.append(_call_line(item))
        elif isinstance(item, AgentMessageItem) and item.text.strip():
            text = " ".join(item.text.split())
            lines.append(f"you said: {text[:300]}{'…' if len(text) > 300 else ''}")
    return lines


def _call_line(item: ToolCallFields) -> str:
    if isinstance(item, CommandExecutionItem):
        what = f"ran `{item.command}`" + (
            f" (exit {item.exit_code})" if item.exit_code is not None else ""
        )
    elif isinstance(item, FileChangeItem):
        what = f"{item.tool} " + ", ".join(c.path for c in item.changes)
    elif isinstance(item, FileReadItem):
        what = f"read {item.path}"
    elif isinstance(item, SearchItem):
        what = f"{item.method} search for {item.query!r}"
    else:
        what = f"{item.tool} {item.arguments_text[:120]}"
    if item.status in (ItemStatus.failed, ItemStatus.declined, ItemStatus.interrupted):
        what += f" [{item.status.value}]"
    return what
