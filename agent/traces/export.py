"""Traces as training data: one record per thread, with both layers of the trace.

SFT and review read the item log (what the user asked, what the agent said and did, how each
tool call ended); RL needs the token layer beside it, the ids, logprobs and routed experts
exactly as sampled, so the trainer scores the tokens the policy produced instead of a
re-tokenization, and knows which weights produced them and which summary segment of the
rollout each call belongs to. Outcomes (edits kept or reverted, follow-ups) are the reward
signal. `for_training` keeps only workspaces whose owner allowed it.

JSONL holds one record per thread; Parquet splits it into an item table and a model-call table
with typed token columns, for column-wise loading.
"""

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import numpy as np

from opencomposer.agent.protocol.threads import Thread
from opencomposer.agent.traces.base import TraceStore

FORMAT = "opencomposer.trace/1"
_PAGE = 200
_CALL_FIELDS = (
    "id",
    "turn_id",
    "step",
    "purpose",
    "segment",
    "engine",
    "model",
    "weights_version",
    "request",
    "response",
    "error",
    "redacted",
)
_TOKEN_FIELDS = ("prompt_token_ids", "completion_token_ids", "logprobs", "routed_experts")


class ExportError(Exception):
    """The export cannot be made: an unknown thread, or a missing optional dependency."""


def iter_threads(
    store: TraceStore,
    *,
    thread_ids: Iterable[str] | None = None,
    workspace: str | None = None,
    for_training: bool = False,
) -> Iterator[dict[str, Any]]:
    """Records of the given threads (all threads, most recently updated first, when None),
    optionally only those of one workspace and only those consented to for training."""
    consent: dict[str, bool] = {}
    for thread in _threads(store, thread_ids, workspace):
        if thread.workspace not in consent:
            consent[thread.workspace] = store.consent(thread.workspace)
        if for_training and not consent[thread.workspace]:
            continue
        yield _record(store, thread, consent[thread.workspace])


def thread_record(store: TraceStore, thread_id: str) -> dict[str, Any]:
    """The export record of one thread; raises ExportError for an unknown id."""
    thread = store.thread(thread_id)
    if thread is None:
        raise ExportError(f"unknown thread {thread_id}")
    return _record(store, thread, store.consent(thread.workspace))


def write_jsonl(records: Iterable[dict[str, Any]], out: IO[str]) -> int:
    """One record per line; returns the number of records written."""
    count = 0
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
    return count


def write_parquet(records: Iterable[dict[str, Any]], folder: Path) -> int:
    """`items.parquet` and `model_calls.parquet` in `folder`; returns the number of threads.

    Every record is read before anything is written, and each file appears by rename, so a
    failure never leaves a half-written table.
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ExportError(
            "Parquet export needs pyarrow: pip install 'opencomposer[parquet]'"
        ) from exc

    ints, floats, text = pa.list_(pa.int32()), pa.list_(pa.float32()), pa.string()
    item_schema = pa.schema(
        [
            ("thread_id", text),
            ("turn_id", text),
            ("item_id", text),
            ("position", pa.int32()),
            ("type", text),
            ("status", text),
            ("payload", text),
        ]
    )
    call_schema = pa.schema(
        [
            ("thread_id", text),
            ("id", pa.int64()),
            ("turn_id", text),
            ("step", pa.int32()),
            ("purpose", text),
            ("segment", pa.int32()),
            ("engine", text),
            ("model", text),
            ("weights_version", text),
            ("request", text),
            ("response", text),
            ("error", text),
            ("redacted", pa.bool_()),
            ("prompt_token_ids", ints),
            ("completion_token_ids", ints),
            ("logprobs", floats),
            ("routed_experts", ints),
            ("routed_experts_shape", ints),
            ("started_at", pa.timestamp("us", tz="UTC")),
            ("duration_ms", pa.int64()),
        ]
    )
    items: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    count = 0
    for record in records:
        count += 1
        thread_id = record["thread"]["id"]
        log = (item for turn in record["turns"] for item in turn["items"])
        items.extend(
            {
                "thread_id": thread_id,
                "turn_id": item["turn_id"],
                "item_id": item["id"],
                "position": position,
                "type": item["type"],
                "status": item["status"],
                "payload": json.dumps(item, ensure_ascii=False),
            }
            for position, item in enumerate(log)
        )
        for call in record["model_calls"]:
            calls.append(_call_row(thread_id, call))

    folder.mkdir(parents=True, exist_ok=True)
    for name, rows, schema in (("items", items, item_schema), ("model_calls", calls, call_schema)):
        target = folder / f"{name}.parquet"
        partial = folder / f".{name}.parquet.tmp"
        try:
            pq.write_table(pa.Table.from_pylist(rows, schema=schema), partial)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
    return count


def _threads(
    store: TraceStore, thread_ids: Iterable[str] | None, workspace: str | None
) -> Iterator[Thread]:
    if thread_ids is not None:
        for thread_id in thread_ids:
            thread = store.thread(thread_id)
            if thread is None:
                raise ExportError(f"unknown thread {thread_id}")
            if workspace is None or thread.workspace == workspace:
                yield thread
        return
    cursor: str | None = None
    while True:
        page, cursor = store.list_threads(limit=_PAGE, cursor=cursor, workspace=workspace)
        yield from page
        if cursor is None:
            return


def _record(store: TraceStore, thread: Thread, consent: bool) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "thread": thread.model_dump(mode="json"),
        "system_prompt": store.system_prompt(thread.id),
        "training_consent": consent,
        "turns": [turn.model_dump(mode="json") for turn in store.turns(thread.id)],
        "model_calls": [_call(call) for call in store.model_calls(thread.id)],
        "outcomes": [
            {
                "kind": o.kind,
                "turn_id": o.turn_id,
                "item_id": o.item_id,
                "detail": o.detail,
                "at": o.at.isoformat(),
            }
            for o in store.outcomes(thread.id)
        ],
    }


def _call(call: dict[str, Any]) -> dict[str, Any]:
    """A stored model call with its token layer grouped under `tokens`."""
    return {
        **{key: call[key] for key in _CALL_FIELDS},
        "tokens": {key: call[key] for key in _TOKEN_FIELDS},
        "started_at": call["started_at"],
        "duration_ms": call["duration_ms"],
    }


def _call_row(thread_id: str, call: dict[str, Any]) -> dict[str, Any]:
    experts = call["tokens"]["routed_experts"]
    shaped = None if experts is None else np.asarray(experts, dtype=np.int32)
    return {
        **{key: call[key] for key in _CALL_FIELDS},
        **{
            key: None if call[key] is None else json.dumps(call[key], ensure_ascii=False)
            for key in ("request", "response", "error")
        },
        **call["tokens"],
        "thread_id": thread_id,
        "duration_ms": call["duration_ms"],
        "routed_experts": None if shaped is None else shaped.ravel().tolist(),
        "routed_experts_shape": None if shaped is None else list(shaped.shape),
        "started_at": datetime.fromisoformat(call["started_at"]),
    }
