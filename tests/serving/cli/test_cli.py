"""The `opencomposer` command as users run it: a real process, its output and exit status."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.fake_openai import Replay, Status, ThreadedFakeOpenAI

from opencomposer import paths
from opencomposer.agent.protocol.schema import protocol_schema_json
from opencomposer.agent.tools.sandbox import probe_bubblewrap

CLI = str(Path(sys.executable).parent / "opencomposer")


def run(
    *args: str, check_rc: int | None = 0, unset: tuple[str, ...] = (), **env: str
) -> subprocess.CompletedProcess:
    """The CLI with this environment plus `env`, less the variables named in `unset`."""
    kept = {name: value for name, value in os.environ.items() if name not in unset}
    proc = subprocess.run(
        [CLI, *args], capture_output=True, text=True, timeout=60, env={**kept, **env}
    )
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def test_help_lists_only_working_commands():
    out = run("--help").stdout
    for command in ("doctor", "serve", "config", "engine", "protocol"):
        assert command in out
    assert run("--version").stdout.startswith("opencomposer ")


def every_command() -> list[list[str]]:
    """The argv of every command and subcommand, read from the command tree typer builds."""
    import typer.main

    from opencomposer.serving.cli.app import app

    found: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:  # typer's own click, vendored
        found.append(path)
        if hasattr(command, "commands"):  # a group
            for name, sub in command.commands.items():
                if not sub.hidden:
                    walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def test_help_shows_values_not_placeholders_and_nothing_cut():
    commands = every_command()
    assert ["chat"] in commands and ["traces", "export"] in commands
    for argv in commands:
        shown = run(*argv, "--help", unset=("COLUMNS",)).stdout  # as piped
        assert "<bool>" not in shown, (argv, shown)  # flags (--help too) take no value
        usage = next(line for line in shown.splitlines() if "Usage:" in line)
        assert "{" not in usage, (argv, usage)  # arguments are named as they are typed
        assert "…" not in shown, (argv, shown)  # an example cut short cannot be copied
    chat = run("chat", "--help").stdout
    assert "<auto|ask|deny>" in chat and "chat [OPTIONS] REQUEST" in chat
    refused = run("chat", "--approval", "maybe", "x", check_rc=2, COLUMNS="200")
    assert "'maybe' is not one of 'auto', 'ask', 'deny'" in refused.stderr


def test_config_show_json_reports_values_and_sources(tmp_path: Path):
    user = paths.user_config_file()
    user.parent.mkdir(parents=True)
    user.write_text('[engine]\nmodel = "from-file"\n')
    data = json.loads(
        run(
            "config",
            "show",
            "--json",
            "-c",
            "server.port=9100",
            OPENCOMPOSER_LOGGING__LEVEL="DEBUG",
        ).stdout
    )
    assert data["settings"]["engine.model"] == "from-file"
    assert data["settings"]["server.port"] == 9100
    assert {k: data["sources"][k] for k in ("engine.model", "server.port", "logging.level")} == {
        "engine.model": f"user file {user}",
        "server.port": "command line",
        "logging.level": "env OPENCOMPOSER_LOGGING__LEVEL",
    }
    assert data["files"] == [str(user)]


def test_config_show_for_humans_marks_sources(tmp_path: Path):
    out = run("config", "show", "-w", str(tmp_path), "-c", "engine.model=x").stdout
    assert "engine.model" in out and "command line" in out
    assert "workspace file" in out


def test_bad_config_exits_2_with_file_and_key(tmp_path: Path):
    (tmp_path / ".opencomposer.toml").write_text("[engine]\nidle_timeout = -1\n")
    proc = run("config", "show", "-w", str(tmp_path), check_rc=2)
    assert f"workspace file {tmp_path}/.opencomposer.toml: engine.idle_timeout = -1" in proc.stderr
    assert "greater than 0" in proc.stderr
    proc = run("config", "show", "-c", "nonsense", check_rc=2)
    assert "expected KEY=VALUE" in proc.stderr


def test_protocol_schema_to_stdout_and_file(tmp_path: Path):
    assert run("protocol", "schema").stdout == protocol_schema_json()
    target = tmp_path / "schemas" / "p.json"
    run("protocol", "schema", "--out", str(target))
    assert target.read_text() == protocol_schema_json()


def test_doctor_json_reports_what_works_here():
    with ThreadedFakeOpenAI() as fake:
        data = json.loads(
            run(
                "doctor",
                "--json",
                "-c",
                "engine.backend=openai",
                "-c",
                f"engine.base_url={fake.base_url}",
            ).stdout
        )
    checks = {c["name"]: c for c in data["checks"]}
    assert set(checks) == {
        "config",
        "python",
        "torch",
        "cuda",
        "gpu extra",
        "sandbox",
        "limits",
        "ripgrep",
        "git",
        "slirp4netns",
        "neovim",
        "node",
        "data folder",
        "local models",
        "http auth",
        "engine",
    }
    assert data["healthy"] is True
    assert checks["engine"]["status"] == "ok"
    # The window the agent will assume, and the step cap it derives from it (a quarter).
    assert (
        "fake-model (8,192-token window; agent steps stop at 2,048 tokens)"
        in (checks["engine"]["detail"])
    )
    assert checks["ripgrep"]["status"] == "ok"  # the ripgrep wheel is a dependency
    assert checks["local models"]["status"] == "missing"
    for check in checks.values():
        assert check["status"] == "ok" or check["disables"], check

    # The sandbox verdict must match what bubblewrap really does on this machine.
    works, _ = probe_bubblewrap()
    expected = "ok" if works else "missing" if paths.find_program("bwrap") is None else "error"
    assert checks["sandbox"]["status"] == expected
    if works:
        assert "host view" in checks["sandbox"]["detail"]
        assert "keyrings closed" in checks["sandbox"]["detail"]


def test_doctor_reports_a_broken_config_instead_of_crashing(tmp_path: Path):
    (tmp_path / ".opencomposer.toml").write_text("this is not toml")
    proc = run("doctor", "--json", "-w", str(tmp_path), check_rc=1)
    config = json.loads(proc.stdout)["checks"][0]
    assert (config["name"], config["status"]) == ("config", "error")
    assert "not valid TOML" in config["detail"]


def test_doctor_table_for_humans():
    out = run(
        "doctor",
        "-c",
        "engine.backend=openai",
        "-c",
        "engine.base_url=http://127.0.0.1:9/v1",
        COLUMNS="250",
    ).stdout
    assert "sandbox" in out and "engine" in out
    assert "cannot reach the model server at http://127.0.0.1:9/v1" in out


def test_piped_tables_keep_each_row_on_one_line():
    """Rich assumes 80 columns for a pipe; a row broken mid-path cannot be grepped."""
    with ThreadedFakeOpenAI() as fake:
        proc = run(
            "doctor",
            "-c",
            "engine.backend=openai",
            "-c",
            f"engine.base_url={fake.base_url}",
            unset=("COLUMNS",),
        )
    engine = next(line for line in proc.stdout.splitlines() if line.startswith("engine"))
    assert f"openai backend at {fake.base_url} serves fake-model (8,192-token window;" in engine
    data_folder = next(line for line in proc.stdout.splitlines() if line.startswith("data folder"))
    assert "writable; SQLite" in data_folder  # the path before it was not broken either


def test_engine_generate_streams_text_and_reports_stats():
    with ThreadedFakeOpenAI() as fake:
        fake.enqueue(Replay("text_with_usage", delay=0.01))
        proc = run(
            "engine",
            "generate",
            "hi",
            "--base-url",
            fake.base_url,
            "--system",
            "Be brief.",
            "--max-tokens",
            "20",
            "--temperature",
            "0",
        )
        body = fake.requests[0]["body"]
    assert proc.stdout == "Hello, world!\n"
    assert "4 tokens in" in proc.stderr and "finish: stop" in proc.stderr
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert (body["max_tokens"], body["temperature"], body["model"]) == (20, 0.0, "fake-model")


def test_engine_generate_json_with_tools(tmp_path: Path):
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            [
                {
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "description": "Read a file.",
                        "parameters": {
                            "type": "object",
                            "properties": {"path": {"type": "string"}},
                        },
                    },
                }
            ]
        )
    )
    with ThreadedFakeOpenAI() as fake:
        fake.enqueue(Replay("tool_call_fragmented"))
        proc = run(
            "engine",
            "generate",
            "read it",
            "--json",
            "--tools",
            str(tools),
            "--engine",
            f"openai:{fake.base_url}",
        )
        sent_tools = fake.requests[0]["body"]["tools"]
    data = json.loads(proc.stdout)
    assert data["tool_calls"] == [
        {"id": "call_abc123", "name": "read_file", "arguments": '{"path": "src/main.py"}'}
    ]
    assert (data["finish_reason"], data["usage"]["completion_tokens"]) == ("tool_calls", 18)
    assert sent_tools[0]["function"]["name"] == "read_file"


@pytest.mark.parametrize(
    ("scenario", "kind", "message"),
    [
        (Status(401, {"error": {"message": "bad key"}}), "engine_auth", "bad key"),
        (Replay("text_with_usage", die_after=2), "engine_stream_interrupted", "broke mid-stream"),
    ],
)
def test_engine_errors_are_one_clear_line(scenario, kind, message):
    with ThreadedFakeOpenAI() as fake:
        fake.enqueue(scenario)
        proc = run(
            "engine",
            "generate",
            "hi",
            "--base-url",
            fake.base_url,
            "-c",
            "engine.max_retries=0",
            check_rc=1,
        )
    assert f"engine error ({kind})" in proc.stderr
    assert message in proc.stderr


def test_unreachable_engine_is_a_clear_error():
    proc = run(
        "engine",
        "generate",
        "hi",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "-c",
        "engine.max_retries=0",
        check_rc=1,
    )
    assert "engine error (engine_unavailable): cannot reach the model server" in proc.stderr


def test_bad_tools_file_is_a_usage_error(tmp_path: Path):
    tools = tmp_path / "tools.json"
    tools.write_text("{not json")
    proc = run("engine", "generate", "hi", "--tools", str(tools), check_rc=2)
    assert "--tools" in proc.stderr
