"""Structured logging: readable lines on stderr, JSON lines in `<home>/logs`.

Fields passed with `extra={...}` become `key=value` pairs on stderr and JSON keys in the
file. stdout is never written to: it carries the LSP stream and `--json` output. Every record
goes through the redactor before any handler sees it, and through every agent runtime's
(`redact_also`), whose threads know their workspaces' secrets: the process's log belongs to
no single thread. Log files are 0600 in a 0700 folder, like all of the data folder.
"""

import io
import json
import logging
import logging.handlers
import sys
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from opencomposer.data_folder import full, is_full
from opencomposer.paths import private_dir, private_file, tighten_tree
from opencomposer.redact import Redactor
from opencomposer.terminal_text import for_terminal

LOGGER_NAME = "opencomposer"
LOG_FILE_NAME = "opencomposer.log"
_MAX_BYTES = 10 * 1024 * 1024
_BACKUPS = 5

_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields a caller attached with `extra=`."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS}


# The redactors of the live agent runtimes (held weakly: a runtime that is gone drops out).
# Logging is configured once per process, so this is process-wide like the handlers are.
_RUNTIMES: "weakref.WeakSet[Redactor]" = weakref.WeakSet()


def redact_also(redactor: Redactor) -> None:
    """Mask in the log what `redactor` or any of its children (the threads) knows."""
    _RUNTIMES.add(redactor)


class RedactingFilter(logging.Filter):
    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def _redact(self, text: str) -> str:
        text = self.redactor.redact(text)
        for runtime in list(_RUNTIMES):
            text = runtime.redact_everywhere(text)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._redact(record.getMessage())
        record.args = None
        for key, value in record_fields(record).items():
            if isinstance(value, str):
                setattr(record, key, self._redact(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = self._redact(logging.Formatter().formatException(record.exc_info))
        return True


class PrivateFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log whose every file is created 0600 (renamed backups keep the mode).

    When the data folder is full, records are dropped, said once on stderr (not a traceback
    per record, as logging's own handler prints), until one can be written again."""

    _full = False
    _failed = False

    def _open(self) -> io.TextIOWrapper:
        private_file(Path(self.baseFilename))
        return super()._open()

    def emit(self, record: logging.LogRecord) -> None:
        self._failed = False
        super().emit(record)
        if not self._failed:
            self._full = False

    def handleError(self, record: logging.LogRecord) -> None:
        self._failed = True
        error = sys.exc_info()[1]
        if error is None or not is_full(error):
            super().handleError(record)
        elif not self._full:
            self._full = True
            folder = Path(self.baseFilename).parent.parent
            sys.stderr.write(
                f"opencomposer: log records are dropped until there is room: "
                f"{full(folder, error).message}\n"
            )


class StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever `sys.stderr` is when each record is emitted, so that a stream
    swapped after setup (test capture, a server redirecting its output) is honoured."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


class HumanFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created).strftime("%H:%M:%S")
        name = record.name.removeprefix(LOGGER_NAME + ".")
        fields = " ".join(f"{k}={v}" for k, v in record_fields(record).items())
        line = f"{when} {record.levelname:<7} {name}: {record.getMessage()}"
        if fields:
            line += f"  {fields}"
        if record.exc_text:
            line += "\n" + record.exc_text
        return for_terminal(line)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **record_fields(record),
        }
        if record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, default=str, ensure_ascii=False)


def hand_below_errors_to(handler: logging.Handler) -> None:
    """From now on, records below ERROR go to `handler` (an editor's own log, which shows
    each at its level) instead of stderr, which keeps the errors: an LSP client shows
    everything a server writes to stderr as an error. The handler gets the same redaction."""
    logger = logging.getLogger(LOGGER_NAME)
    for stderr in [h for h in logger.handlers if isinstance(h, StderrHandler)]:
        stderr.setLevel(logging.ERROR)
        for existing in stderr.filters:
            handler.addFilter(existing)
    handler.addFilter(lambda record: record.levelno < logging.ERROR)
    logger.addHandler(handler)


def configure_logging(level: str, log_dir: Path | None, redactor: Redactor) -> Path | None:
    """Install the stderr and file handlers on the `opencomposer` logger (idempotent).

    Returns the log file in use, or None when `log_dir` is unset or cannot be written, which
    is reported on stderr instead of failing: logging must never stop the program.
    """
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    logger.setLevel(level)
    logger.propagate = False

    redacting = RedactingFilter(redactor)
    stderr = StderrHandler()
    stderr.setFormatter(HumanFormatter())
    stderr.addFilter(redacting)
    logger.addHandler(stderr)

    if log_dir is None:
        return None
    log_file = log_dir / LOG_FILE_NAME
    try:
        if private_dir(log_dir):  # an older installation's logs, 0644
            tighten_tree(log_dir)
        file_handler = PrivateFileHandler(
            log_file, maxBytes=_MAX_BYTES, backupCount=_BACKUPS, encoding="utf-8"
        )
    except OSError as exc:
        logger.warning("not writing a log file: %s", exc, extra={"log_dir": str(log_dir)})
        return None
    file_handler.setFormatter(JsonFormatter())
    file_handler.addFilter(redacting)
    logger.addHandler(file_handler)
    return log_file
