"""`opencomposer chat` as users run it: a real process, against an OpenAI-compatible server
(the fake upstream), in a real repository, then the trace exported."""

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.fake_openai import Compose, Endless, ThreadedFakeOpenAI

CLI = str(Path(sys.executable).parent / "opencomposer")


def chat(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [CLI, "chat", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo


FIX_TURN = [
    Compose("Looking for add.", [("grep", {"pattern": "def add"})]),
    Compose("", [("read_file", {"path": "calc.py"})]),
    Compose("", [("edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"})]),
    Compose("", [("run_terminal", {"command": "python -m pytest -q"})]),
    Compose("Fixed: add now adds, and the test passes."),
]


def test_chat_runs_a_multi_step_turn_and_exports_its_trace(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    with ThreadedFakeOpenAI() as fake:
        fake.enqueue(*FIX_TURN)
        proc = chat("-w", str(repo), "--engine", f"openai:{fake.base_url}", "make the tests pass")
        requests = list(fake.requests)
    assert proc.returncode == 0, proc.stderr
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    shown = proc.stdout
    for expected in (
        "Looking for add.",
        "▶ grep 'def add'",
        "▶ read calc.py",
        "▶ edit_file calc.py",
        "+    return a + b",
        "▶ $ python -m pytest -q",
        "1 passed",
        "Fixed: add now adds",
        "completed (answered)",
    ):
        assert expected in shown, (expected, shown)
    # Five model calls went over HTTP, each with the whole conversation so far.
    assert len(requests) == 5
    last = requests[-1]["body"]
    assert [m["role"] for m in last["messages"]] == ["system", "user"] + ["assistant", "tool"] * 4
    assert {t["function"]["name"] for t in last["tools"]} >= {"grep", "edit_file", "run_terminal"}

    export = subprocess.run([CLI, "traces", "export"], capture_output=True, text=True, check=True)
    [record] = [json.loads(line) for line in export.stdout.splitlines()]
    items = [item for turn in record["turns"] for item in turn["items"]]
    assert [i["type"] for i in items] == [
        "user_message",
        "agent_message",
        "search",
        "file_read",
        "file_change",
        "command_execution",
        "agent_message",
    ]
    assert [c["purpose"] for c in record["model_calls"]] == ["agent"] * 5
    assert record["model_calls"][0]["request"]["messages"][1]["content"].startswith(
        "make the tests pass"
    )


def test_chat_json_streams_raw_events_and_continues_a_thread(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    with ThreadedFakeOpenAI() as fake:
        fake.enqueue(Compose("first answer"), Compose("second answer"))
        first = chat("-w", str(repo), "--engine", f"openai:{fake.base_url}", "--json", "hello")
        events = [json.loads(line) for line in first.stdout.splitlines()]
        thread_id = events[0]["thread_id"]
        second = chat(
            "-w",
            str(repo),
            "--engine",
            f"openai:{fake.base_url}",
            "--json",
            "--thread",
            thread_id,
            "and again",
        )
        history = fake.requests[-1]["body"]["messages"]
    assert events[0]["type"] == "turn.started"
    assert events[-1]["type"] == "turn.completed"
    assert events[-1]["turn"]["status"] == "completed"
    assert second.returncode == 0
    assert [m["role"] for m in history] == ["system", "user", "assistant", "user"]
    assert history[2]["content"] == "first answer"


def test_dangerous_calls_are_denied_without_a_terminal(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    with ThreadedFakeOpenAI() as fake:
        fake.enqueue(
            Compose("", [("run_terminal", {"command": "rm -rf calc.py"})]),
            Compose("I was not allowed to delete it."),
        )
        proc = chat(
            "-w",
            str(repo),
            "--engine",
            f"openai:{fake.base_url}",
            "--approval",
            "ask",
            "delete calc.py",
        )
    assert proc.returncode == 0
    assert (repo / "calc.py").exists()
    assert "No client was connected to approve it" in proc.stdout


def test_ctrl_c_interrupts_the_turn_cleanly(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    with ThreadedFakeOpenAI() as fake:
        fake.enqueue(Endless(interval=0.05))
        proc = subprocess.Popen(
            [CLI, "chat", "-w", str(repo), "--engine", f"openai:{fake.base_url}", "talk forever"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while not fake.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "tick" in stdout and "interrupted (interrupted)" in stdout
    # The model ran before it was stopped: its call counts, its tokens estimated.
    assert re.search(r"· 1 model call · ~[\d,]+ prompt \+ ~[\d,]+ completion tokens", stdout)


def test_bad_engine_spec_is_a_clear_error(tmp_path: Path) -> None:
    proc = chat("-w", str(tmp_path), "--engine", "carrier-pigeon:x", "hi")
    assert proc.returncode == 2
    assert "unknown engine 'carrier-pigeon:x'" in proc.stderr


def test_engine_embedded_folder_is_the_model_used(tmp_path: Path) -> None:
    """`--engine embedded:DIR` without `--model`: DIR, not the configured default."""
    missing = tmp_path / "no-such-model"
    proc = chat("-w", str(tmp_path), "--engine", f"embedded:{missing}", "hi")
    assert proc.returncode == 1
    assert f"model '{missing}' is not available here" in proc.stdout + proc.stderr
