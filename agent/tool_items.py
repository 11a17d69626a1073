"""From the model's tool calls to protocol items and back.

Each call is prepared (validated and classified by the harness), judged by the approval gate,
and given an item of its tool's view before anything runs, so every call the model made has
an item, with its result or the reason it has none. A call that cannot be prepared (unknown
tool, arguments that are not JSON or do not fit the schema) becomes a failed item whose error
the model reads next step; it never stops the turn.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opencomposer.agent.approvals import ApprovalGate, Verdict
from opencomposer.agent.item_log import ItemLog
from opencomposer.agent.protocol.common import ActionClass, ApprovalMode
from opencomposer.agent.protocol.items import (
    CommandExecutionItem,
    FileChangeItem,
    FileReadItem,
    ItemStatus,
    SearchItem,
    TodoListItem,
    ToolCallFields,
    ToolCallItem,
)
from opencomposer.agent.tools.errors import ToolError
from opencomposer.agent.tools.harness_protocol import (
    CallOutcome,
    Harness,
    HarnessUnavailable,
    PreparedCall,
)
from opencomposer.serving.engines.base import ToolCall

VIEW_ITEMS: dict[str, type[ToolCallFields]] = {
    "tool_call": ToolCallItem,
    "command_execution": CommandExecutionItem,
    "file_change": FileChangeItem,
    "search": SearchItem,
    "file_read": FileReadItem,
    "todo_list": TodoListItem,
}
_BASE_FIELDS = frozenset(ToolCallFields.model_fields) | {"type"}


@dataclass
class ToolCallPlan:
    call: ToolCall
    item: ToolCallFields
    prepared: PreparedCall | None
    """None when the call could not be prepared; `failure` says why."""

    failure: CallOutcome | None = None
    verdict: Verdict | None = None
    outcome: CallOutcome | None = None
    declined: bool = False

    @property
    def parallel(self) -> bool:
        """May run beside its neighbours: it only reads and needs nobody's approval."""
        return (
            self.prepared is not None
            and self.verdict is not None
            and self.prepared.action_class == ActionClass.read_only
            and self.verdict.mode == ApprovalMode.auto
        )


async def plan_calls(
    log: ItemLog,
    harness: Harness,
    gate: ApprovalGate,
    turn_id: str,
    step: int,
    calls: Sequence[ToolCall],
) -> list[ToolCallPlan]:
    """An item and a plan for each call the model made in one step (nothing is logged yet)."""
    plans = []
    for call in calls:
        base: dict[str, Any] = {
            "id": log.new_id(),
            "turn_id": turn_id,
            "step": step,
            "call_id": call.id,
            "tool": call.name,
            "arguments": _object(call.arguments),
            "arguments_text": call.arguments,
        }
        item: ToolCallFields
        try:
            prepared = await harness.prepare(call.name, call.arguments)
        except HarnessUnavailable:
            raise  # no call can run: the turn fails, not this call
        except ToolError as error:
            item = ToolCallItem(**base)
            plans.append(
                ToolCallPlan(call, item, None, failure=harness.failure(call.id, call.name, error))
            )
            continue
        item_type = VIEW_ITEMS[prepared.view]
        item = item_type(
            **base, action_class=prepared.action_class, **_known(item_type, prepared.view_fields)
        )
        plans.append(ToolCallPlan(call, item, prepared, verdict=gate.verdict(prepared)))
    return plans


def groups(plans: Sequence[ToolCallPlan]) -> list[list[ToolCallPlan]]:
    """Consecutive parallel-safe calls form one group; every other call is its own."""
    out: list[list[ToolCallPlan]] = []
    for plan in plans:
        if plan.parallel and out and out[-1][-1].parallel:
            out[-1].append(plan)
        else:
            out.append([plan])
    return out


def completion(
    item: ToolCallFields, outcome: CallOutcome, *, declined: bool = False
) -> dict[str, Any]:
    """The fields that complete a tool item from the call's outcome."""
    if declined:
        status = ItemStatus.declined
    else:
        status = ItemStatus.completed if outcome.ok else ItemStatus.failed
    return {
        **_known(type(item), outcome.fields),
        "output": outcome.text,
        "error": outcome.error,
        "duration_ms": outcome.duration_ms,
        "status": status,
    }


def _known(item_type: type[ToolCallFields], fields: dict[str, Any]) -> dict[str, Any]:
    """The view-specific fields the item type has (base fields are the runtime's)."""
    own = item_type.model_fields.keys() - _BASE_FIELDS
    return {key: value for key, value in fields.items() if key in own}


def _object(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def describe_call(item: ToolCallFields) -> str:
    """One line saying what a tool call does, for people (terminals, progress messages)."""
    if isinstance(item, CommandExecutionItem):
        return f"$ {item.command}"
    if isinstance(item, FileReadItem):
        return f"read {item.path}"
    if isinstance(item, SearchItem):
        return f"{item.tool} {item.query!r}"
    if isinstance(item, FileChangeItem):
        target = item.arguments.get("path") or item.arguments.get("patch", "")[:60]
        return f"{item.tool} {target}".rstrip()
    return f"{item.tool} {item.arguments_text[:100]}"
