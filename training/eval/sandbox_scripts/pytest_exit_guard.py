"""A pytest plugin loaded into every pytest run of a verifier: the code under test cannot
decide how pytest exits.

The code under test runs inside the test runner's process, so two lines of it used to decide
a grade: `atexit.register(os._exit, 0)` turns failing tests into exit status 0, and an
`os._exit(0)` at import or inside a test ends the run "successfully" before any test fails.
This plugin closes both:
- when pytest ran as a program (`pytest`, `python -m pytest`), the process ends as soon as
  pytest is done, with pytest's own status, raised to 1 when a test or a collection failed
  (whatever a hook did to `session.exitstatus`): exit handlers registered by the code under
  test never run;
- every session says on the verifier's pipe that it started, with a random nonce made before
  any code under test is imported, and that it ended, with the same nonce. The verifier
  grades 0 when a session started and never ended: the code under test ended the process
  from inside. Forging an end takes the nonce, which only this plugin's memory holds.

Loaded with `-p` under a name chosen per verification (the verifier mounts this file under
it), so a module the agent planted cannot stand in for it. Standard library and pytest only.
"""

import os
import secrets
import sys
from types import FrameType

import pytest

# Where the verifier says which descriptor is its pipe (training/eval/exit_guard.py).
_FD_VARIABLE = "VERIFIER_EXIT_GUARD_FD"


class _Session:
    def __init__(self) -> None:
        self.nonce = secrets.token_hex(16)
        self.failures = 0
        self.status: int | None = None


_SESSIONS: dict[int, _Session] = {}
# How pytest runs as a program: its scripts, and its console entry point (named both ways
# across releases).
_PYTEST_SCRIPTS = ("pytest", "py.test")
_ENTRY_POINTS = ("console_main", "_console_main")


def _say(line: str) -> None:
    """One record on the verifier's pipe; a pipe the code under test closed or filled loses
    it, which the verifier reads as a session that never ended."""
    try:
        fd = int(os.environ.get(_FD_VARIABLE, ""))
        os.write(fd, line.encode())
    except (ValueError, OSError):
        pass


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    session = _SESSIONS[id(config)] = _Session()
    _say(f"start {os.getpid()} {session.nonce}\n")


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _count(report)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _count(report)


def _count(report: pytest.CollectReport | pytest.TestReport) -> None:
    if report.failed:
        for session in _SESSIONS.values():
            session.failures += 1


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    guarded = _SESSIONS.get(id(session.config))
    if guarded is not None:
        status = int(session.exitstatus)
        guarded.status = max(status, 1) if guarded.failures else status


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    session = _SESSIONS.pop(id(config), None)
    if session is None:
        return
    status = "?" if session.status is None else str(session.status)
    _say(f"end {os.getpid()} {session.nonce} {status}\n")
    if session.status is not None and _run_as_program():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(session.status)


def _run_as_program() -> bool:
    """Whether pytest is this process's program (`python -m pytest`, the `pytest` script, its
    console entry point on the stack), not `pytest.main()` called by a script that goes on
    afterwards."""
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        path = frame.f_code.co_filename.replace("\\", "/")
        if (
            path.endswith("/pytest/__main__.py")
            or path.rsplit("/", 1)[-1] in _PYTEST_SCRIPTS
            or (frame.f_code.co_name in _ENTRY_POINTS and "/_pytest/" in path)
        ):
            return True
        frame = frame.f_back
    return False
