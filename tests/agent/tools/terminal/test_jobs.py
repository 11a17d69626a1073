"""JobManager against real processes in both sandboxes: soft timeouts, jobs, input, output
windows, whole-tree kills, cancellation and secrets.

The "fork bomb" here is bounded (200 sleeps, well under the default limit of 1,024
processes); real bombs and the limits that stop them are tested in
tests/security/test_resource_limits.py.
"""

import asyncio
import dataclasses
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from support.interpreters import SANDBOX_PYTHON

from opencomposer.agent.tools.errors import (
    Denied,
    InvalidArguments,
    NotFound,
    UnexpectedEnvironment,
)
from opencomposer.agent.tools.secret_files import dotenv_secret_values
from opencomposer.agent.tools.terminal.jobs import NO_OUTPUT, CommandResult
from opencomposer.agent.tools.terminal.limits import PREFIX, find_cgroups
from opencomposer.config import SandboxSettings
from opencomposer.redact import MASK

SPAWN_200 = "for i in $(seq 200); do sleep {marker} & done; echo spawned; wait"


def finished(output: str, exit_code: int, output_bytes: int | None = None) -> CommandResult:
    """The expected result of a command that finished within the call."""
    return CommandResult(
        job_id=None,
        exit_code=exit_code,
        output=output,
        output_bytes=len(output) if output_bytes is None else output_bytes,
        truncated=False,
        timed_out=False,
        running=False,
        duration_ms=0,
    )


def timeless(result: CommandResult) -> CommandResult:
    return dataclasses.replace(result, duration_ms=0)


def our_cgroups() -> list[Path]:
    """Cgroups this test process has made and not removed (none where it makes none)."""
    return [
        child
        for parent in find_cgroups().folders
        for child in parent.glob(f"{PREFIX}{os.getpid()}-*")
    ]


# ---------------------------------------------------------------------------- results


async def test_exit_codes_and_output(make_jobs, workspace: Path) -> None:
    jobs = make_jobs()
    async with asyncio.timeout(10):
        assert timeless(await jobs.run("echo hi", cwd=workspace)) == finished("hi\n", 0)
        assert timeless(await jobs.run("exit 3", cwd=workspace)) == finished(NO_OUTPUT, 3, 0)
        interleaved = "echo out; sleep 0.05; echo err >&2; sleep 0.05; echo out2"
        assert timeless(await jobs.run(interleaved, cwd=workspace)) == finished(
            "out\nerr\nout2\n", 0
        )


async def test_silent_command_says_so(make_jobs, workspace: Path) -> None:
    async with asyncio.timeout(10):
        result = await make_jobs().run("true", cwd=workspace)
    assert timeless(result) == finished(NO_OUTPUT, 0, 0)


async def test_killed_by_signal(kind: str, make_jobs, workspace: Path) -> None:
    async with asyncio.timeout(10):
        result = await make_jobs().run("kill -TERM $$", cwd=workspace)
    # The fallback reports the shell's death as -15; bwrap, which we started, exits 128+15.
    assert result.exit_code == (-15 if kind == "fallback" else 143)


async def test_foreground_stdin_is_closed(make_jobs, workspace: Path) -> None:
    async with asyncio.timeout(5):
        result = await make_jobs().run("cat", cwd=workspace, timeout=4)
    assert timeless(result) == finished(NO_OUTPUT, 0, 0)


async def test_output_is_capped_head_and_tail(make_jobs, workspace: Path) -> None:
    jobs = make_jobs(output_cap=3_000)
    async with asyncio.timeout(10):
        result = await jobs.run("seq 1 100000", cwd=workspace)
    assert (result.exit_code, result.output_bytes, result.truncated) == (0, 588_895, True)
    head, tail = result.output.split("[... ", 1)
    assert head.startswith("1\n2\n3\n") and len(head) == 1_000
    assert tail.startswith("585,895 bytes omitted ...]\n") and tail.endswith("99999\n100000\n")


async def test_endless_output_is_capped_then_killed(make_jobs, workspace: Path) -> None:
    jobs = make_jobs(output_cap=2_000)
    async with asyncio.timeout(10):
        running = await jobs.run("yes", cwd=workspace, timeout=0.5)
        assert (running.timed_out, running.running, running.truncated) == (True, True, True)
        assert running.output_bytes > 100_000 and len(running.output) < 2_100
        ended = await jobs.kill(running.job_id)
    assert (ended.running, ended.exit_code) == (False, -15)


# ---------------------------------------------------------------------------- jobs


async def test_soft_timeout_keeps_the_job(
    make_jobs, workspace: Path, marker: str, survivors
) -> None:
    jobs = make_jobs()
    async with asyncio.timeout(10):
        result = await jobs.run(f"echo started; sleep {marker}", cwd=workspace, timeout=0.5)
        assert timeless(result) == CommandResult(
            job_id="job-1",
            exit_code=None,
            output="started\n",
            output_bytes=8,
            truncated=False,
            timed_out=True,
            running=True,
            duration_ms=0,
        )
        assert result.duration_ms >= 500
        assert timeless(await jobs.output("job-1")) == dataclasses.replace(
            timeless(result), output=NO_OUTPUT, output_bytes=0, timed_out=False
        )
        killed = await jobs.kill("job-1")
        assert timeless(killed) == CommandResult(
            job_id="job-1",
            exit_code=-15,
            output=NO_OUTPUT,
            output_bytes=0,
            truncated=False,
            timed_out=False,
            running=False,
            duration_ms=0,
        )
        assert await survivors(marker) == []
    with pytest.raises(NotFound, match="already returned"):
        await jobs.output("job-1")
    with pytest.raises(NotFound, match="no job 'job-9'"):
        await jobs.kill("job-9")


async def test_a_line_ending_in_a_secrets_beginning_is_read_at_once(
    make_jobs, workspace: Path
) -> None:
    """A running command's last line shows at once though it ends in the first characters
    of known secrets (`started` in `d...` and `ed...`); the rest of one, printed after the
    line break, is masked."""
    secret = "dQw4w9WgXcQ7z8Kp2mN5"
    jobs = make_jobs(secrets=(secret, "ed" + secret[::-1]))
    script = f"echo started; while [ ! -e go ]; do sleep 0.02; done; echo {secret[1:]}; echo end"
    async with asyncio.timeout(10):
        first = await jobs.run(script, cwd=workspace, timeout=0.5)
        assert (first.output, first.running) == ("started\n", True)
        (workspace / "go").touch()
        last = await jobs.output("job-1", wait=5)
    assert (last.output, last.exit_code) == (f"{MASK}\nend\n", 0)


async def test_output_since_last_read(make_jobs, workspace: Path) -> None:
    jobs = make_jobs()
    script = "echo one; while [ ! -e go ]; do sleep 0.02; done; echo two; exit 4"
    async with asyncio.timeout(10):
        first = await jobs.run(script, cwd=workspace, timeout=0.3)
        assert (first.output, first.job_id, first.running) == ("one\n", "job-1", True)
        assert (await jobs.output("job-1")).output == NO_OUTPUT
        (workspace / "go").touch()
        last = await jobs.output("job-1", wait=5)
    assert timeless(last) == CommandResult(
        job_id="job-1",
        exit_code=4,
        output="two\n",
        output_bytes=4,
        truncated=False,
        timed_out=False,
        running=False,
        duration_ms=0,
    )


async def test_background_input_round_trip(make_jobs, workspace: Path) -> None:
    jobs = make_jobs()
    echo = (
        f"{shlex.quote(SANDBOX_PYTHON)} -c "
        "'import sys\nfor line in sys.stdin: print(\"got\", line.strip(), flush=True)'"
    )
    async with asyncio.timeout(10):
        started = await jobs.run(echo, cwd=workspace, background=True)
        assert (started.job_id, started.running, started.timed_out) == ("job-1", True, False)
        reply = await jobs.write_input("job-1", "hello\n")
        assert (reply.output, reply.running) == ("got hello\n", True)
        assert (await jobs.write_input("job-1", "again\n")).output == "got again\n"
        assert (await jobs.kill("job-1")).exit_code == -15


async def test_background_exit_is_reported_at_once(make_jobs, workspace: Path) -> None:
    async with asyncio.timeout(10):
        result = await make_jobs().run(
            "echo no such server; exit 2", cwd=workspace, background=True
        )
    assert timeless(result) == finished("no such server\n", 2)


async def test_input_needs_a_background_job(make_jobs, workspace: Path) -> None:
    jobs = make_jobs()
    async with asyncio.timeout(10):
        await jobs.run("sleep 30", cwd=workspace, timeout=0.2)
        with pytest.raises(InvalidArguments, match="not started with background=true"):
            await jobs.write_input("job-1", "x\n")


async def test_max_lifetime_kills_the_tree(
    make_jobs, workspace: Path, marker: str, started, survivors
) -> None:
    jobs = make_jobs(max_lifetime=1.0)
    async with asyncio.timeout(15):
        first = await jobs.run(SPAWN_200.format(marker=marker), cwd=workspace, timeout=0.3)
        assert first.running and await started(marker, 200)
        result = await jobs.output("job-1", wait=5)
        assert (result.running, result.exit_code) == (False, -15)
        assert "spawned" in first.output + result.output  # whichever read it arrived in
        assert result.output.endswith("\n[killed: ran past the 1 s limit for one command]")
        assert result.limit == "tools.sandbox.max_lifetime"
        assert await survivors(marker) == []


async def test_kill_takes_the_whole_tree(
    make_jobs, workspace: Path, marker: str, started, survivors
) -> None:
    jobs = make_jobs()
    async with asyncio.timeout(15):
        result = await jobs.run(SPAWN_200.format(marker=marker), cwd=workspace, timeout=0.3)
        assert result.running and await started(marker, 200)
        await jobs.kill(result.job_id)
        assert await survivors(marker) == []


async def test_leftover_background_processes_are_stopped(
    make_jobs, workspace: Path, marker: str, survivors
) -> None:
    """`server &` in a foreground command would hold the pipes open and outlive everything."""
    async with asyncio.timeout(10):
        result = await make_jobs().run(f"sleep {marker} & echo started", cwd=workspace, timeout=5)
        assert timeless(result) == finished("started\n", 0)
        assert await survivors(marker) == []


async def test_cancellation_kills_the_tree(
    make_jobs, workspace: Path, marker: str, started, survivors
) -> None:
    jobs = make_jobs()
    async with asyncio.timeout(15):
        call = asyncio.create_task(jobs.run(SPAWN_200.format(marker=marker), cwd=workspace))
        assert await started(marker, 200)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await survivors(marker) == []


async def test_a_job_goes_with_its_cancelled_supervisor(
    make_jobs, workspace: Path, marker: str, started, survivors
) -> None:
    """What happens to background jobs when the event loop closes under them (an editor that
    went away): the loop cancels every task, supervisors first, and nobody is left to stop
    the commands."""
    jobs = make_jobs()
    async with asyncio.timeout(15):
        result = await jobs.run(f"sleep {marker}", cwd=workspace, background=True)
        assert await started(marker, 1)
        supervisor = jobs._jobs[result.job_id].supervisor
        supervisor.cancel()
        with pytest.raises(asyncio.CancelledError):
            await supervisor
        assert await survivors(marker) == []


async def test_close_kills_every_job(
    make_jobs, workspace: Path, marker: str, started, survivors
) -> None:
    jobs = make_jobs()
    async with asyncio.timeout(15):
        await jobs.run(f"sleep {marker}", cwd=workspace, timeout=0.2)
        await jobs.run(f"sleep {marker}", cwd=workspace, background=True)
        assert await started(marker, 2)
        await jobs.close()
        await jobs.close()
        assert await survivors(marker) == []
    with pytest.raises(UnexpectedEnvironment):
        await jobs.run("true", cwd=workspace)


async def test_capture_runs_under_the_limits_and_cleans_up(make_jobs, workspace: Path) -> None:
    async with asyncio.timeout(10):
        captured = await make_jobs().capture("ulimit -f; ulimit -c", cwd=workspace, timeout=5)
    assert captured == (0, f"{SandboxSettings().max_file_bytes // 1024}\n0\n")
    assert our_cgroups() == []


async def test_a_command_that_cannot_start_leaves_no_cgroup(make_jobs, workspace: Path) -> None:
    """The kernel refuses an argument over 128 KiB (E2BIG) after the cgroup was made."""
    with pytest.raises(UnexpectedEnvironment, match="could not start the command"):
        await make_jobs().run(f": {'x' * 200_000}", cwd=workspace)
    assert our_cgroups() == []


# ---------------------------------------------------------------------------- environment


async def test_working_folder(make_jobs, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    jobs = make_jobs()
    async with asyncio.timeout(10):
        assert (await jobs.run("pwd", cwd=Path("sub"))).output == f"{workspace}/sub\n"
    with pytest.raises(Denied):
        await jobs.run("pwd", cwd=workspace / "..")
    with pytest.raises(NotFound):
        await jobs.run("pwd", cwd=Path("missing"))


async def test_secrets_removed_and_masked(make_jobs, workspace: Path) -> None:
    (workspace / ".env").write_text('API_PASSWORD="hunter2-very-secret"\n')
    token = "tok-1234567890abcdef"
    jobs = make_jobs(
        {"PATH": os.environ["PATH"], "MY_TOKEN": token},
        secrets=tuple(dotenv_secret_values(workspace)),
    )
    async with asyncio.timeout(10):
        assert (await jobs.run('echo "[$MY_TOKEN]"', cwd=workspace)).output == "[]\n"
        assert (await jobs.run(f"echo {token}", cwd=workspace)).output == "[REDACTED]\n"
        assert (await jobs.run("cat .env", cwd=workspace)).output == 'API_PASSWORD="[REDACTED]"\n'


async def test_live_output_is_streamed_by_line_and_masked(make_jobs, workspace: Path) -> None:
    seen: list[tuple[str, str]] = []
    jobs = make_jobs(secrets=("sekrit-value-123",))
    script = "printf 'a\\nsekrit-'; sleep 0.02; printf 'value-123\\n'; echo b >&2; printf tail"
    async with asyncio.timeout(10):
        await jobs.run(
            script, cwd=workspace, on_output=lambda stream, text: seen.append((stream, text))
        )
    stdout = "".join(text for stream, text in seen if stream == "stdout")
    assert stdout == "a\n[REDACTED]\ntail"
    assert [entry for entry in seen if entry[0] == "stderr"] == [("stderr", "b\n")]


async def test_pagers_and_prompts_are_disabled(make_jobs, workspace: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    commits = "".join(
        f"commit refs/heads/main\ncommitter A <a@b> {1_700_000_000 + i} +0000\ndata 4\nc{i:03d}\n"
        for i in range(300)
    )
    subprocess.run(["git", "init", "-q", "-b", "main", str(workspace)], check=True)
    subprocess.run(
        ["git", "fast-import", "--quiet"], cwd=workspace, input=commits.encode(), check=True
    )
    jobs = make_jobs()
    async with asyncio.timeout(10):
        log = await jobs.run("git log", cwd=workspace, timeout=5)
        assert (log.exit_code, log.running, log.truncated) == (0, False, True)
        # In a repository of the command's own: the workspace's .git is read-only in the
        # sandbox.
        settings = await jobs.run(
            "echo $PAGER $GIT_PAGER $GIT_TERMINAL_PROMPT $GIT_EDITOR $TERM; "
            "git init -q scratch && cd scratch && "
            "git -c user.name=A -c user.email=a@b commit --allow-empty",
            cwd=workspace,
            timeout=5,
        )
    # No editor waits for a commit message: git gets an empty one and gives up.
    assert (settings.exit_code, settings.running) == (1, False)
    assert settings.output == (
        "cat cat 0 true dumb\nAborting commit due to empty commit message.\n"
    )
