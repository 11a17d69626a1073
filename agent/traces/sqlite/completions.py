"""The editor's inline completions and what the user did with each (shown, accepted, partly
accepted, rejected): telemetry for tuning the completion model, kept apart from threads."""

import json
import sqlite3
from datetime import UTC, datetime

from opencomposer.agent.traces.base import CompletionEvent, CompletionRecord
from opencomposer.redact import Redactor


def insert_completion(db: sqlite3.Connection, record: CompletionRecord, redactor: Redactor) -> None:
    db.execute(
        "INSERT INTO completions (id, workspace, path, language, model, prefix_length, "
        "suffix_length, text, duration_ms, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.id,
            record.workspace,
            redactor.redact(record.path),
            record.language,
            record.model,
            record.prefix_length,
            record.suffix_length,
            redactor.redact(record.text),
            record.duration_ms,
            record.at.isoformat(),
        ),
    )


def insert_completion_event(
    db: sqlite3.Connection, completion_id: str, kind: str, detail: str
) -> bool:
    """False (nothing written) when the id is not a recorded completion."""
    cursor = db.execute(
        "INSERT INTO completion_events (completion_id, kind, detail, at) "
        "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM completions WHERE id = ?)",
        (completion_id, kind, detail, datetime.now(UTC).isoformat(), completion_id),
    )
    return cursor.rowcount == 1


def read_completions(
    db: sqlite3.Connection, clause: str, args: tuple[object, ...]
) -> list[CompletionRecord]:
    rows = db.execute(
        "SELECT id, path, text, prefix_length, suffix_length, duration_ms, workspace, "
        f"language, model, at FROM completions {clause}",
        args,
    ).fetchall()
    records = [
        CompletionRecord(
            id=id_,
            path=path,
            text=text,
            prefix_length=prefix_length,
            suffix_length=suffix_length,
            duration_ms=duration_ms,
            workspace=workspace,
            language=language,
            model=model,
            at=datetime.fromisoformat(at),
        )
        for (
            id_,
            path,
            text,
            prefix_length,
            suffix_length,
            duration_ms,
            workspace,
            language,
            model,
            at,
        ) in rows
    ]
    for record in records:
        record.events = [
            CompletionEvent(kind, json.loads(detail), datetime.fromisoformat(at))
            for kind, detail, at in db.execute(
                "SELECT kind, detail, at FROM completion_events WHERE completion_id = ? "
                "ORDER BY id",
                (record.id,),
            )
        ]
    return records
