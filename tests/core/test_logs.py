"""Logging: readable stderr, JSON lines on disk, and no secret reaching either."""

import json
import logging
from pathlib import Path

import pytest

from opencomposer.logs import LOG_FILE_NAME, configure_logging
from opencomposer.redact import MASK, Redactor

SECRET = "s3cr3t-token-value-xyz"


@pytest.fixture
def log(tmp_path: Path):
    log_file = configure_logging("INFO", tmp_path / "logs", Redactor([SECRET]))
    assert log_file == tmp_path / "logs" / LOG_FILE_NAME
    yield logging.getLogger("opencomposer.serving.test"), log_file
    logging.getLogger("opencomposer").handlers.clear()


def test_records_are_json_lines_with_fields_and_secrets_masked(capsys, log):
    logger, log_file = log
    logger.info("upstream said %s", f"Bearer {SECRET}", extra={"status": 500, "key": SECRET})
    logger.debug("below the level")
    try:
        raise ValueError(f"failed with {SECRET}")
    except ValueError:
        logger.exception("request failed")
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert [(r["level"], r["logger"], r["msg"]) for r in records] == [
        ("INFO", "opencomposer.serving.test", f"upstream said Bearer {MASK}"),
        ("ERROR", "opencomposer.serving.test", "request failed"),
    ]
    assert (records[0]["status"], records[0]["key"]) == (500, MASK)
    assert "ValueError: failed with" in records[1]["exc"]
    stderr = capsys.readouterr().err
    assert "serving.test: upstream said Bearer [REDACTED]  status=500 key=[REDACTED]" in stderr
    assert SECRET not in stderr + log_file.read_text()


def test_an_unwritable_log_folder_degrades_to_stderr(tmp_path: Path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert configure_logging("INFO", blocker / "logs", Redactor()) is None
    assert "not writing a log file" in capsys.readouterr().err
    logging.getLogger("opencomposer").handlers.clear()


@pytest.mark.parametrize(
    "text",
    [
        "key sk-proj-abcdefghijklmnopqrstuvwxyz0123",
        "token ghp_" + "a" * 36,
        "hf_" + "B" * 34,
        "aws AKIAABCDEFGHIJKLMNOP",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
        "Authorization: Bearer abc.def-ghi_jkl",
    ],
)
def test_credential_shapes_are_masked(text):
    redacted = Redactor().redact(text)
    assert MASK in redacted
    assert text.split()[-1][-8:] not in redacted


def test_short_values_and_ordinary_text_are_left_alone():
    redactor = Redactor(["abc", None, ""])
    assert redactor.redact("abc is short; sk- alone is fine") == "abc is short; sk- alone is fine"
