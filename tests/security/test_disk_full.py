"""A full data folder (class 5): the turn that meets it ends failed with a typed error naming
the folder, the next request is a clean refusal while it stays full, the next turn works
once space is freed, and nothing is left half-written.

Each test serves the real app under uvicorn, with a playbook engine, in a child process whose
data folder is a small tmpfs mounted in a mount namespace of its own (`unshare -m`); the test
fills that file system from outside, through `/proc/<child>/root`, at the moment it chooses,
and drives the server over HTTP. Commands run in real bubblewrap; the workspace lies on
another file system than the data folder, as it usually does. Where this machine cannot
mount (no root, no mount namespaces), the tests skip.
"""

import contextlib
import errno
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.timeout(180)

TESTS = Path(__file__).parents[1]
KiB, MiB = 1024, 1024 * 1024
# A stream that does not end within this long has hung (a turn here takes a second or two).
STREAM_TIMEOUT = 60
FULL = "data_folder_full"

CHILD = textwrap.dedent("""
    import json, resource, sys
    from pathlib import Path
    from support.live_server import live_server
    from support.playbook_engine import PlaybookEngine

    home, roots, plays = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
    if len(sys.argv) > 4:  # a file size limit of the server's own: EFBIG past it
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[4]), hard))
    engine = PlaybookEngine({key: [tuple(step) for step in steps] for key, steps in plays.items()})
    with live_server(engine, home, workspace_roots=[roots], timeout=STREAM_TIMEOUT) as url:
        print(url, flush=True)
        sys.stdin.read()  # serve until the test closes our stdin
""").replace("STREAM_TIMEOUT", str(STREAM_TIMEOUT))


@pytest.fixture(scope="module")
def can_mount() -> None:
    if shutil.which("unshare") is None:
        pytest.skip("util-linux's unshare is not installed")
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         "mount -t tmpfs -o size=1m tmpfs /mnt"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a mount namespace here: {probe.stderr.strip()}")


def in_small_folder(
    folder: Path, script: str, *args: str, size: str = "4m"
) -> subprocess.CompletedProcess[str]:
    """Run a Python script with a tmpfs of `size` mounted at `folder`, in a mount namespace
    of its own."""
    folder.mkdir(exist_ok=True)
    mount = f'mount -t tmpfs -o size={size},mode=0700 tmpfs "$1" && shift && exec "$@"'
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh", str(folder),
         sys.executable, "-c", script, str(folder), *args],
        capture_output=True, text=True, timeout=STREAM_TIMEOUT, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def git() -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")


@dataclass
class Server:
    url: str
    home: Path
    """The data folder as the server sees it."""

    outside: Path
    """The same folder seen from the test (through the child's mount namespace)."""

    workspace: Path

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(f"{self.url}/v1{path}", json=body, timeout=STREAM_TIMEOUT)

    def thread(self) -> str:
        response = self.post("/threads", {"workspace": str(self.workspace)})
        assert response.status_code == 200, response.text
        return response.json()["thread"]["id"]

    def read(self, thread_id: str) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/v1/threads/{thread_id}", timeout=STREAM_TIMEOUT)
        assert response.status_code == 200, response.text
        return response.json()

    def turn(
        self,
        thread_id: str,
        text: str,
        on_event: Callable[[dict[str, Any]], None] = lambda event: None,
    ) -> tuple[int, list[dict[str, Any]]]:
        """The turn's status code and events (its error body when refused); a stream that
        does not end fails the test by its timeout."""
        body = {"input": [{"type": "text", "text": text}]}
        with httpx.stream(
            "POST", f"{self.url}/v1/threads/{thread_id}/turns", json=body, timeout=STREAM_TIMEOUT
        ) as response:
            if response.status_code != 200:
                response.read()
                return response.status_code, [response.json()]
            events = []
            for line in response.iter_lines():
                if line.startswith("data:"):
                    events.append(json.loads(line[5:]))
                    on_event(events[-1])
        return 200, events

    # ------------------------------------------------------------------ the disk

    def free(self) -> int:
        info = os.statvfs(self.outside)
        return info.f_bavail * info.f_frsize

    def fill(self, leave: int = 0) -> None:
        """Take all but `leave` bytes of the data folder's file system."""
        fd = os.open(self.outside / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            chunk = b"\xa5" * (256 * KiB)
            while (room := self.free() - leave) > 0:
                try:
                    os.write(fd, chunk[:room])
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
        finally:
            os.close(fd)

    def make_room(self) -> None:
        (self.outside / "filler").unlink()


@pytest.fixture
def serve(can_mount: None, bwrap: Path, tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start the server with `plays` (a PlaybookEngine's), a data folder of 16 MiB, and
    optionally a limit on the size of the files it writes."""
    children: list[subprocess.Popen[str]] = []

    def start(
        plays: dict[str, list[tuple[str, dict[str, Any]]]], file_limit: int | None = None
    ) -> Server:
        home, workspace = tmp_path / "home", tmp_path / "workspace"
        home.mkdir()
        workspace.mkdir()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        }
        script = 'mount -t tmpfs -o size=16m,mode=0700 tmpfs "$1" && shift && exec "$@"'
        limit = [] if file_limit is None else [str(file_limit)]
        child = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(home),
             sys.executable, "-c", CHILD, str(home), str(tmp_path), json.dumps(plays), *limit],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        children.append(child)
        url = child.stdout.readline().strip()
        assert url.startswith("http://"), "the server did not start"
        # `unshare` and `sh` exec the server: its /proc root is inside the namespace.
        outside = Path(f"/proc/{child.pid}/root") / home.relative_to("/")
        return Server(url, home, outside, workspace)

    yield start
    for child in children:
        with contextlib.suppress(OSError):
            child.stdin.close()
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)


def ended(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The turn as its `turn.completed` says it ended (the stream's last event)."""
    assert events and events[-1]["type"] == "turn.completed", [e["type"] for e in events[-3:]]
    return events[-1]["turn"]


def completed_items(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        e["item"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == kind
    ]


def assert_names_the_folder(message: str, folder: Path) -> None:
    assert f"the data folder {folder} is full" in message, message
    assert "free:" in message and "then retry" in message, message


@contextlib.contextmanager
def opened(database: Path, scratch: Path) -> Iterator[sqlite3.Connection]:
    """A copy of a database the server holds (with its write-ahead log), opened: SQLite
    resolves `/proc/<pid>/root` to this namespace's root, so the path cannot be opened."""
    scratch.mkdir(exist_ok=True)
    for suffix in ("", "-wal"):
        source = database.with_name(database.name + suffix)
        if source.exists():
            shutil.copyfile(source, scratch / (database.name + suffix))
    with contextlib.closing(sqlite3.connect(scratch / database.name)) as db:
        yield db


def integrity(database: Path, scratch: Path) -> str:
    with opened(database, scratch) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


# ---------------------------------------------------------------------- the trace store

# A command that waits for the test's word (a file in the workspace), then prints 400 KB.
WAIT_THEN_PRINT = "while [ ! -e go ]; do sleep 0.05; done; head -c 300000 /dev/urandom | base64"


def test_a_turn_that_fills_the_store_fails_and_the_next_works_once_there_is_room(serve, tmp_path):
    """The store fills up while a command streams its output: the stream still ends, with
    the turn failed and the folder named; while the folder stays full a new turn is a 507 in
    the protocol's shape; once there is room the next turn works, and the store holds the
    failed turn's end too, intact."""
    server = serve({"stream": [("run_terminal", {"command": WAIT_THEN_PRINT, "timeout": 60})]})
    thread = server.thread()

    def fill_once_running(event: dict[str, Any]) -> None:
        if event["type"] == "item.started" and event["item"]["type"] == "command_execution":
            server.fill()
            (server.workspace / "go").touch()

    status, events = server.turn(thread, "stream something", fill_once_running)
    assert status == 200
    turn = ended(events)
    assert (turn["status"], turn["stop_reason"], turn["error"]["kind"]) == ("failed", "error", FULL)
    assert_names_the_folder(turn["error"]["message"], server.home)
    [command] = completed_items(events, "command_execution")
    assert command["status"] == "failed"  # killed with its turn, not left running
    [error] = completed_items(events, "error")
    assert error["error"]["kind"] == FULL

    status, [refused] = server.turn(thread, "again, still full")
    assert status == 507
    assert refused["error"]["kind"] == FULL
    assert_names_the_folder(refused["error"]["message"], server.home)

    server.make_room()
    status, events = server.turn(thread, "again, with room")
    assert status == 200
    assert ended(events)["status"] == "completed"
    assert [e["type"] for e in events[:1]] == ["turn.started"]  # not the last turn's end

    stored = server.read(thread)["turns"]
    assert [t["status"] for t in stored] == ["failed", "completed"]
    assert stored[0]["error"]["kind"] == FULL
    assert all(item["status"] != "in_progress" for t in stored for item in t["items"])
    assert integrity(server.outside / "traces.db", tmp_path / "copy") == "ok"


TICKING = "for i in $(seq 400); do echo tick $i; sleep 0.05; done"


@pytest.mark.parametrize(
    "when",
    [
        pytest.param(lambda e: e["type"] == "turn.started", id="at-turn-start"),
        pytest.param(
            lambda e: e["type"] == "item.started" and e["item"]["type"] == "command_execution",
            id="at-the-command",
        ),
        pytest.param(lambda e: e["type"] == "item.delta", id="mid-output"),
    ],
)
def test_wherever_the_store_fills_up_the_turn_ends_failed(serve, when, tmp_path):
    """The data folder fills up at one point of a turn or another (its start, the command's
    start, the middle of its output): the turn ends failed and the command is stopped; the
    next turn works once there is room, and the store holds the failed turn's end."""
    server = serve({"tick": [("run_terminal", {"command": TICKING, "timeout": 60})]})
    thread = server.thread()
    filled: list[bool] = []

    def fill(event: dict[str, Any]) -> None:
        if not filled and when(event):
            server.fill()
            filled.append(True)

    status, events = server.turn(thread, "tick for a while", fill)
    assert status == 200
    turn = ended(events)
    assert (turn["status"], turn["error"]["kind"]) == ("failed", FULL)
    started = {e["item"]["id"] for e in events if e["type"] == "item.started"}
    assert started == {e["item"]["id"] for e in events if e["type"] == "item.completed"}
    commands = completed_items(events, "command_execution")
    assert all("tick 400" not in (item["output"] or "") for item in commands)

    server.make_room()
    status, events = server.turn(thread, "and now")
    assert (status, ended(events)["status"]) == (200, "completed")
    stored = server.read(thread)["turns"]
    assert [(t["status"], (t["error"] or {}).get("kind")) for t in stored] == [
        ("failed", FULL),
        ("completed", None),
    ]
    assert integrity(server.outside / "traces.db", tmp_path / "copy") == "ok"


def test_a_store_past_the_servers_file_size_limit_fails_the_turn_the_same_way(serve):
    """The server may write no file over 128 KiB, and a 40 KB request (stored twice, and
    again in its model call) takes the store's write-ahead log past it: SQLite reports a
    write error, not a full disk, and it is the same typed failure all the same; the next
    turn is refused while the log cannot grow."""
    server = serve({"tick": [("run_terminal", {"command": TICKING, "timeout": 60})]}, 128 * KiB)
    thread = server.thread()
    status, events = server.turn(thread, "tick " + "z" * 40_000)
    assert status == 200
    turn = ended(events)
    assert (turn["status"], turn["error"]["kind"]) == ("failed", FULL)
    assert_names_the_folder(turn["error"]["message"], server.home)
    status, [refused] = server.turn(thread, "again")
    assert (status, refused["error"]["kind"]) == (507, FULL)


def test_no_thread_or_turn_starts_in_a_full_data_folder(serve):
    """Below a mebibyte free, starting a thread or a turn is refused up front (507, the
    folder named); nothing of them is written, and both work once there is room."""
    server = serve({"hello": []})
    thread = server.thread()
    server.fill(leave=200 * KiB)
    refused = server.post("/threads", {"workspace": str(server.workspace)})
    assert refused.status_code == 507
    assert refused.json()["error"]["kind"] == FULL
    assert_names_the_folder(refused.json()["error"]["message"], server.home)
    status, [body] = server.turn(thread, "hello")
    assert (status, body["error"]["kind"]) == (507, FULL)

    server.make_room()
    assert server.read(thread)["turns"] == []
    status, events = server.turn(thread, "hello")
    assert (status, ended(events)["status"]) == (200, "completed")
    assert server.thread().startswith("thr_")


# ---------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize(
    "call",
    [
        ("delete_file", {"path": "data.bin"}),
        ("move_file", {"path": "data.bin", "new_path": "moved.bin"}),
    ],
)
@pytest.mark.parametrize("limit", ["no-space", "file-size-limit"])
def test_a_checkpoint_that_does_not_fit_fails_the_turn_and_changes_nothing(
    serve, call, limit, tmp_path
):
    """Undo needs the file's 3 MB before-image and the data folder has 1.2 MB (ENOSPC), or
    the server may write no file over 2 MiB (EFBIG): the call is not made (the file is where
    it was, as it was), no image or row is left in the checkpoints, and the turn ends failed
    with the folder named."""
    server = serve({"tidy": [call]}, file_limit=2 * MiB if limit == "file-size-limit" else None)
    data = os.urandom(3 * MiB)
    (server.workspace / "data.bin").write_bytes(data)
    thread = server.thread()
    if limit == "no-space":
        server.fill(leave=1200 * KiB)
    status, events = server.turn(thread, "tidy up")
    assert status == 200
    turn = ended(events)
    assert (turn["status"], turn["error"]["kind"]) == ("failed", FULL)
    assert_names_the_folder(turn["error"]["message"], server.home)
    [change] = completed_items(events, "file_change")
    assert change["error"]["kind"] == FULL
    assert sorted(p.name for p in server.workspace.iterdir()) == ["data.bin"]
    assert (server.workspace / "data.bin").read_bytes() == data

    checkpoints = server.outside / "checkpoints"
    assert [p for p in (checkpoints / "blobs").rglob("*") if p.is_file()] == []

    if limit == "no-space":
        server.make_room()
    status, events = server.turn(thread, "and now")
    assert (status, ended(events)["status"]) == (200, "completed")
    with opened(checkpoints / "checkpoints.db", tmp_path / "copy") as db:
        assert db.execute("SELECT COUNT(*) FROM changes").fetchone() == (0,)
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# ---------------------------------------------------------------------- quarantine

# Three hooks of 1 MiB each in a repository the command makes: git would run them on the
# host. With 1.5 MB free, the quarantine keeps what fits and no more.
PLANT_HOOKS = (
    "git init -q planted && for hook in post-checkout pre-commit pre-push; do "
    "head -c 1048576 /dev/urandom > planted/.git/hooks/$hook; done; echo planted"
)


def test_hooks_a_full_data_folder_cannot_keep_are_removed_all_the_same(serve, git):
    """The workspace and the data folder are different file systems, so the quarantine
    copies; when the data folder fills up part way, what it could not keep is removed from
    the workspace all the same (the host's git must not run it), no partial copy is left,
    and the item says so."""
    server = serve({"plant": [("run_terminal", {"command": PLANT_HOOKS, "timeout": 60})]})
    thread = server.thread()
    server.fill(leave=1536 * KiB)
    status, events = server.turn(thread, "plant hooks")
    assert status == 200
    hooks = server.workspace / "planted/.git/hooks"
    assert sorted(p.name for p in hooks.iterdir() if not p.name.endswith(".sample")) == []

    [command] = completed_items(events, "command_execution")
    report = command["output"]
    actions = dict(re.findall(r"planted/\.git/hooks/(\S+) (moved aside|removed) \(", report))
    assert sorted(actions) == ["post-checkout", "pre-commit", "pre-push"], report
    moved = [hook for hook, action in actions.items() if action == "moved aside"]
    assert len(moved) < 3, "1.5 MB cannot hold three hooks of 1 MiB"
    for hook in set(actions) - set(moved):
        detail = re.search(rf"hooks/{hook} removed \((.*?)\)(?=; planted/|\. The user)", report)
        assert detail is not None and "not kept: " in detail[1], report
        assert_names_the_folder(detail[1], server.home)
    kept = [p for p in (server.outside / "quarantine").rglob("*") if p.is_file()]
    assert [p.stat().st_size for p in kept] == [MiB] * len(moved)  # whole, never a part


# ---------------------------------------------------------------------- the log file

LOGGING = textwrap.dedent("""
    import logging, os, sys
    from pathlib import Path
    from opencomposer.logs import configure_logging
    from opencomposer.redact import Redactor

    home = Path(sys.argv[1])
    configure_logging("INFO", home / "logs", Redactor())
    log = logging.getLogger("opencomposer.disk")
    fd = os.open(home / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"x" * 65536)
    except OSError:
        pass
    for n in range(20):
        log.warning("record %d %s", n, "y" * 5000)
    os.close(fd)
    os.unlink(home / "filler")
    log.warning("with room again")
    logging.shutdown()
    print((home / "logs" / "opencomposer.log").read_text().splitlines()[-1])
""")


def test_a_full_data_folder_drops_log_records_with_one_line_not_a_traceback_each(
    can_mount, tmp_path
):
    """Logging's own file handler prints a traceback for every record it cannot write; the
    log file says once that records are dropped and why, and writes again once there is
    room."""
    home = tmp_path / "home"
    done = in_small_folder(home, LOGGING)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Logging error" not in done.stderr
    [dropped] = [line for line in done.stderr.splitlines() if "log records are dropped" in line]
    assert_names_the_folder(dropped, home)
    assert '"msg": "with room again"' in done.stdout
