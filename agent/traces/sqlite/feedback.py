"""What became of the agent's work (outcomes: a reward signal) and whether a workspace's
traces may be used for training (consent)."""

import json
import sqlite3
from datetime import UTC, datetime

from opencomposer.agent.traces.base import Outcome


def insert_outcome(db: sqlite3.Connection, outcome: Outcome, detail: str) -> None:
    db.execute(
        "INSERT INTO outcomes (thread_id, turn_id, item_id, kind, detail, at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            outcome.thread_id,
            outcome.turn_id,
            outcome.item_id,
            outcome.kind,
            detail,
            outcome.at.isoformat(),
        ),
    )


def read_outcomes(db: sqlite3.Connection, thread_id: str) -> list[Outcome]:
    rows = db.execute(
        "SELECT thread_id, kind, detail, turn_id, item_id, at FROM outcomes "
        "WHERE thread_id = ? ORDER BY id",
        (thread_id,),
    ).fetchall()
    return [
        Outcome(r[0], r[1], json.loads(r[2]), r[3], r[4], datetime.fromisoformat(r[5]))
        for r in rows
    ]


def write_consent(db: sqlite3.Connection, workspace: str, allowed: bool) -> None:
    db.execute(
        "INSERT INTO workspaces VALUES (?, ?, ?) ON CONFLICT (path) DO UPDATE SET "
        "training_consent = excluded.training_consent, updated_at = excluded.updated_at",
        (workspace, int(allowed), datetime.now(UTC).isoformat()),
    )


def read_consent(db: sqlite3.Connection, workspace: str) -> bool:
    """No answer is no."""
    row = db.execute(
        "SELECT training_consent FROM workspaces WHERE path = ?", (workspace,)
    ).fetchone()
    return bool(row and row[0])
