"""The trace database's tables, and opening one: a new file, this version's, or an older
version's brought up to date in place.

WAL with `synchronous=NORMAL`: a committed write survives the process being killed (a power
loss may lose the last few).
"""

import sqlite3
from pathlib import Path

from opencomposer.agent.traces.base import TraceStoreError

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY,
    workspace TEXT NOT NULL,
    system_prompt TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS threads_by_update ON threads (updated_at DESC, id DESC);
CREATE TABLE IF NOT EXISTS events (
    thread_id TEXT NOT NULL REFERENCES threads (id),
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turns (
    id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL REFERENCES threads (id),
    position INTEGER NOT NULL,
    status TEXT NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_by_thread ON turns (thread_id, position);
CREATE TABLE IF NOT EXISTS items (
    thread_id TEXT NOT NULL REFERENCES threads (id),
    id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (thread_id, id)
);
CREATE INDEX IF NOT EXISTS items_by_position ON items (thread_id, position);
CREATE TABLE IF NOT EXISTS model_calls (
    id INTEGER PRIMARY KEY,
    thread_id TEXT NOT NULL REFERENCES threads (id),
    turn_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    purpose TEXT NOT NULL,
    segment INTEGER NOT NULL,
    engine TEXT,
    model TEXT,
    weights_version TEXT,
    request TEXT NOT NULL,
    response TEXT,
    error TEXT,
    redacted INTEGER NOT NULL,
    prompt_token_ids BLOB,
    completion_token_ids BLOB,
    logprobs BLOB,
    routed_experts BLOB,
    routed_experts_shape TEXT,
    started_at TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    kept_messages INTEGER NOT NULL DEFAULT 0,
    kept_tools INTEGER NOT NULL DEFAULT 0,
    kept_prompt_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS model_calls_by_thread ON model_calls (thread_id, id);
CREATE TABLE IF NOT EXISTS outcomes (
    id INTEGER PRIMARY KEY,
    thread_id TEXT NOT NULL REFERENCES threads (id),
    turn_id TEXT,
    item_id TEXT,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS outcomes_by_thread ON outcomes (thread_id, id);
CREATE TABLE IF NOT EXISTS workspaces (
    path TEXT PRIMARY KEY,
    training_consent INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS completions (
    id TEXT PRIMARY KEY,
    workspace TEXT,
    path TEXT NOT NULL,
    language TEXT,
    model TEXT,
    prefix_length INTEGER NOT NULL,
    suffix_length INTEGER NOT NULL,
    text TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS completion_events (
    id INTEGER PRIMARY KEY,
    completion_id TEXT NOT NULL REFERENCES completions (id),
    kind TEXT NOT NULL,
    detail TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS completion_events_by_completion
    ON completion_events (completion_id, id);
CREATE TABLE IF NOT EXISTS turn_owners (
    turn_id TEXT PRIMARY KEY REFERENCES turns (id),
    owner TEXT NOT NULL
);
"""

# What brings a database of version N to N + 1 (a new table or index comes with _SCHEMA).
_MIGRATIONS = {
    # Version 2: a model call keeps only what it adds to the thread's previous call.
    1: [
        f"ALTER TABLE model_calls ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0"
        for column in ("kept_messages", "kept_tools", "kept_prompt_tokens")
    ],
}


def open_database(path: Path) -> sqlite3.Connection:
    """The database at `path`, at this version. The connection may be used from any thread,
    one at a time."""
    db = sqlite3.connect(path, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        db.execute("PRAGMA busy_timeout=5000")
        with db:
            db.execute("BEGIN IMMEDIATE")  # two processes opening one file migrate it once
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise TraceStoreError(
                    f"{path} was written by a newer opencomposer "
                    f"(schema {version} > {SCHEMA_VERSION})"
                )
            fresh = not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'threads'").fetchone()
            for step in range(version if not fresh else SCHEMA_VERSION, SCHEMA_VERSION):
                for statement in _MIGRATIONS.get(step, ()):
                    db.execute(statement)
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except BaseException:
        db.close()
        raise
    return db
