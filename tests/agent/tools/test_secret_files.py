"""Secret files: .env parsing as python-dotenv reads it, what of it is masked, and a watch that
finds nested and new files and notices changes."""

import json
from pathlib import Path

import pytest

from opencomposer.agent.tools import secret_files
from opencomposer.agent.tools.secret_files import (
    SecretFiles,
    dotenv_assignments,
    is_secret_file,
    parse_dotenv,
    secret_values,
)
from opencomposer.redact import MASK, Redactor


def test_parse_dotenv() -> None:
    text = (
        "# a comment\r\n"
        "export PLAIN=value with spaces # trailing comment\r\n"
        'DOUBLE="say \\"hi\\" # not a comment"\r\n'
        "SINGLE='single # kept \\' quote'\n"
        'ESCAPES="tab\\tnew\\nback\\\\"\n'
        'MULTI="-----BEGIN KEY-----\n'
        "abc\r\n"
        '-----END KEY-----"\n'
        "BACKTICK=`back tick`\n"
        "EMPTY=\n"
        "  SPACED = padded  \n"
        "not an assignment\n"
        'UNCLOSED="runs to\nthe end\n'
    )
    assert parse_dotenv(text) == {
        "PLAIN": "value with spaces",
        "DOUBLE": 'say "hi" # not a comment',
        "SINGLE": "single # kept ' quote",
        "ESCAPES": "tab\tnew\nback\\",
        "MULTI": "-----BEGIN KEY-----\nabc\n-----END KEY-----",
        "BACKTICK": "back tick",
        "EMPTY": "",
        "SPACED": "padded",
        "UNCLOSED": "runs to\nthe end",
    }


def test_what_a_dotenv_file_has_masked() -> None:
    text = (
        'API_TOKEN="ab\\"cd-1234"\n'  # as a program reads it and as the file shows it
        "PORT=5432\nDEBUG=true\nNODE_ENV=development\nHOST=localhost:5432\n"  # configuration
        "DATA_DIR=/var/lib/app\nAPI_URL=https://api.example.com/v1\n"
        "SHORT=abc\n"  # too short to mask anywhere
        "WEBHOOK=https://hooks.slack.com/services/T0/B0/q7Zr2LmX9vTb4NcW8kPd1s\n"
        "DB=postgres://app:pw-123456@db/app\n"
        "ANY_NAME=correct-horse-battery\n"  # .env values count whatever their name
        'CERT="-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEF\n'
        'AASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"\n'
    )
    assert secret_values(dotenv_assignments(text)) == [
        'ab"cd-1234',
        'ab\\"cd-1234',
        "https://hooks.slack.com/services/T0/B0/q7Zr2LmX9vTb4NcW8kPd1s",
        "postgres://app:pw-123456@db/app",
        "correct-horse-battery",
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEF\nAASCBKcwggSjAgEAAoIBAQC7\n"
        "-----END PRIVATE KEY-----",
        "MIIEvQIBADANBgkqhkiG9w0BAQEF",
        "AASCBKcwggSjAgEAAoIBAQC7",  # line by line too
    ]


@pytest.mark.parametrize(("name", "secret"), [
    (".env", True), (".env.local", True), (".env.production", True), ("sub/.env", True),
    (".envrc", False), ("env", False), ("x.env", False), (".environment", False),
])  # fmt: skip
def test_is_secret_file(name: str, secret: bool) -> None:
    assert is_secret_file(name) is secret


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_watch_finds_nested_files_and_skips_dependencies(tmp_path: Path) -> None:
    write(tmp_path / ".env", "ROOT_SECRET=root-value-1\n")
    write(tmp_path / "services/api/.env.local", "NESTED_SECRET=nested-value-2\n")
    write(tmp_path / "node_modules/pkg/.env", "DEP=dependency-value-3\n")
    write(tmp_path / ".git/.env", "GIT=git-internal-value-4\n")
    write(tmp_path / ".envrc", "export DIRENV=direnv-value-5\n")
    (tmp_path / ".env.d").mkdir()
    redactor = Redactor()
    watch = SecretFiles(tmp_path, redactor)
    watch.refresh()
    assert sorted(watch.values) == ["nested-value-2", "root-value-1"]
    assert redactor.redact("root-value-1 nested-value-2 dependency-value-3") == (
        f"{MASK} {MASK} dependency-value-3"
    )


def test_the_watch_sees_files_added_and_changed_after_it_started(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(secret_files, "REFRESH_INTERVAL", 10**9)  # only forced refreshes
    redactor = Redactor()
    watch = SecretFiles(tmp_path, redactor)
    watch.refresh()
    write(tmp_path / "deep/er/.env.test", "LATE=added-later-value\n")
    watch.refresh()  # throttled: not yet
    assert watch.values == []
    watch.refresh(force=True)
    assert watch.values == ["added-later-value"]
    write(tmp_path / "deep/er/.env.test", "LATE=changed-value-now\n# longer than before\n")
    watch.refresh(force=True)
    (tmp_path / "deep/er/.env.test").unlink()
    watch.refresh(force=True)
    # A value stays masked once known: it may still be in the thread's history.
    assert watch.values == ["added-later-value", "changed-value-now"]


def test_the_walk_is_bounded(tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.setattr(secret_files, "MAX_FOLDERS", 5)
    for n in range(10):
        (tmp_path / f"d{n}").mkdir()
    watch = SecretFiles(tmp_path, Redactor())
    watch.refresh()
    assert len(watch._folders) == 5
    assert "more than 5 folders" in caplog.text


@pytest.mark.parametrize("arguments", [
    {"path": ".env", "content": "NEW_KEY=just-written-value\n"},
    {"path": "app/.env.local", "content": 'export NEW_KEY="just-written-value"\n'},
    {"command": "echo NEW_KEY=just-written-value >> .env"},
    {"command": "printf 'NEW_KEY=just-written-value\\n' > config/.env.prod"},
    {"patch": "*** Begin Patch\n*** Update File: .env\n@@\n+NEW_KEY=just-written-value\n"
              "*** End Patch"},
])  # fmt: skip
def test_a_call_that_writes_a_secret_file_is_learnt_before_it_runs(
    tmp_path: Path, arguments
) -> None:
    redactor = Redactor()
    SecretFiles(tmp_path, redactor).note_call(arguments)
    for text in [*arguments.values(), json.dumps(arguments)]:
        assert "just-written-value" not in redactor.redact(text)


def test_a_call_that_names_no_secret_file_teaches_nothing(tmp_path: Path) -> None:
    redactor = Redactor()
    SecretFiles(tmp_path, redactor).note_call({"command": "export OTHER=not-a-secret-value"})
    assert redactor.secrets() == ()


def test_variable_names_are_not_taken_for_values(tmp_path: Path) -> None:
    redactor = Redactor()
    SecretFiles(tmp_path, redactor).note_call(
        {"path": "app/.env", "old_string": "DATABASE_URL", "new_string": "replaced-value-1"}
    )
    assert redactor.redact("DATABASE_URL=replaced-value-1") == f"DATABASE_URL={MASK}"
