"""Approvals a client cannot bypass: a policy sent at thread start only tightens the server's,
whatever it says and however the thread is reached later; and the commands that destroy
history or uncommitted work are classed dangerous, so the default policy asks about them."""

import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.agent.api import AgentAPI
from opencomposer.agent.protocol.common import ActionClass, ApprovalMode, ApprovalPolicy
from opencomposer.agent.protocol.items import ApprovalRequestItem, ItemStatus, TextInput
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.tools.terminal.classify import classify_command
from opencomposer.config import Settings

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "keep.txt").write_text("committed\n")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run([*GIT, "add", "."], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "init"], cwd=root, check=True)
    (root / "keep.txt").write_text("uncommitted work\n")
    return root


def runtime_for(tmp_path: Path, replies: list[Reply], **agent: Any) -> AgentRuntime:
    settings = Settings(
        home=tmp_path / "home",
        models_dir=tmp_path / "models",
        agent={"max_wall_time": 60, **agent},
        server={"workspace_roots": [tmp_path]},
    )
    return AgentRuntime(settings, ScriptedEngine(replies))


LOOSENING = [
    {"dangerous": "auto"},
    {"dangerous": "auto", "network": "auto", "writes_workspace": "auto"},
    {"tools": {"run_terminal": "auto"}},
    {"commands": {"rm": "auto"}},
    {"commands": {"rm -rf": "auto", "rm -rf .git": "auto"}},
    {"dangerous": "auto", "tools": {"run_terminal": "auto"}, "commands": {"rm": "auto"}},
]


@pytest.mark.parametrize("requested", LOOSENING)
async def test_a_client_policy_cannot_make_a_dangerous_command_run_unasked(
    tmp_path: Path, repo: Path, requested: dict[str, Any]
) -> None:
    runtime = runtime_for(
        tmp_path, [Reply(calls=[call("run_terminal", command="rm -rf .git")]), Reply(text="done")]
    )
    api = AgentAPI(runtime, lambda: [tmp_path])
    try:
        # The path both transports take: LSP dispatches JSON, HTTP validates the same params.
        started = await api.dispatch(
            "thread/start", {"workspace": str(repo), "approval_policy": requested}
        )
        session = await api.session(started["thread"]["id"])
        assert session.thread.approval_policy.dangerous == ApprovalMode.ask
        await session.run_turn([TextInput(text="clean up")])
        (request,) = [i for i in session.items if isinstance(i, ApprovalRequestItem)]
        command = session.item(request.target_item_id)
        assert (command.status, request.decided_by) == (ItemStatus.declined, "no_client")
        assert (repo / ".git" / "HEAD").is_file()
    finally:
        await runtime.close()


async def test_the_servers_policy_applies_to_a_thread_it_resumes(
    tmp_path: Path, repo: Path
) -> None:
    """A thread started when the server allowed everything, resumed after the user
    tightened the config: the config as it is now decides."""
    loose = runtime_for(tmp_path, [], approval={"writes_workspace": "auto"})
    thread_id = (await loose.start_thread(repo)).thread.id
    await loose.close()
    strict = runtime_for(
        tmp_path,
        [Reply(calls=[call("write_file", path="new.txt", content="x")]), Reply(text="ok")],
        approval={"writes_workspace": "deny"},
    )
    try:
        session = await strict.open_thread(thread_id)
        await session.run_turn([TextInput(text="write it")])
        write = next(i for i in session.items if i.type == "file_change")
        assert write.status == ItemStatus.declined and not (repo / "new.txt").exists()
    finally:
        await strict.close()


async def test_a_client_policy_can_tighten(tmp_path: Path, repo: Path) -> None:
    runtime = runtime_for(
        tmp_path,
        [
            Reply(
                calls=[
                    call("write_file", path="new.txt", content="x"),
                    call("read_file", path="keep.txt"),
                ]
            ),
            Reply(text="ok"),
        ],
    )
    try:
        session = await runtime.start_thread(
            repo,
            approval_policy=ApprovalPolicy(
                writes_workspace=ApprovalMode.deny, tools={"read_file": ApprovalMode.ask}
            ),
        )
        await session.run_turn([TextInput(text="go")])
        write, read = (i for i in session.items if i.type in ("file_change", "file_read"))
        assert write.status == ItemStatus.declined and not (repo / "new.txt").exists()
        assert read.status == ItemStatus.declined  # asked, and nobody could answer
    finally:
        await runtime.close()


DESTRUCTIVE = [
    "rm -rf .git",
    "rm -r ./.git/",
    "rm -rf sub/.git",
    "rm -rf .g*",
    "rm -fr .[g]it",
    "rm .git/index",
    "mv .git /tmp/elsewhere",
    "git reset --hard",
    "git reset --hard HEAD~3",
    "git -C sub reset --merge",
    "git checkout -- .",
    "git checkout .",
    "git checkout -f main",
    "git checkout HEAD~1 -- src",
    "git checkout src/app.py",
    "git checkout -- '*.py'",
    "git restore .",
    "git restore --worktree --staged x",
    "git switch --discard-changes main",
    "git switch -C main",
    "git clean -fdx",
    "git clean -xdf",
    "git clean --force",
    "git stash drop",
    "git stash clear",
    "git branch -D feature",
    "git branch -f main HEAD~2",
    "git tag -d v1.0",
    "git rm -f tracked.py",
    "git update-ref -d refs/heads/main",
    "git reflog expire --expire=now --all",
    "git gc --prune=now",
    "git filter-branch -- --all",
    "find . -delete",
    "find src -type f -delete",
    "find . -exec rm -rf {} +",
    "find . -type f -execdir /bin/rm {} ;",
    "echo ok && git reset --hard",
    "bash -c 'git clean -fd'",
    "timeout 5 git checkout -- .",
    "git -c alias.wipe='!rm -rf ~' wipe",
    "git -c core.fsmonitor=./evil status",
]
ROUTINE = [
    "git status",
    "git diff",
    "git checkout main",
    "git checkout -b feature/login",
    "git switch main",
    "git restore --staged x",
    "git stash",
    "git branch -d merged",
    "rm -rf build",
    "rm -rf node_modules dist",
    "find . -name '*.pyc' -delete",
    "find . -name __pycache__ -exec rm -rf {} +",
    "git reset HEAD file.py",
    "git -c user.name=me commit -m msg",
]


@pytest.mark.parametrize("command", DESTRUCTIVE)
def test_destroying_history_or_uncommitted_work_is_dangerous(command: str) -> None:
    assert classify_command(command).action_class == ActionClass.dangerous, command


@pytest.mark.parametrize("command", ROUTINE)
def test_routine_commands_are_not_dangerous(command: str) -> None:
    assert classify_command(command).action_class != ActionClass.dangerous, command


@pytest.mark.parametrize(
    "command",
    ["git checkout -- .", "git reset --hard", "git clean -fdx", "find . -delete", "git restore ."],
)
async def test_the_default_policy_asks_before_work_is_discarded(
    tmp_path: Path, repo: Path, command: str
) -> None:
    (repo / "untracked.txt").write_text("new\n")
    runtime = runtime_for(
        tmp_path, [Reply(calls=[call("run_terminal", command=command)]), Reply(text="done")]
    )
    try:
        session = await runtime.start_thread(repo)
        await session.run_turn([TextInput(text="tidy up")])
        run = next(i for i in session.items if i.type == "command_execution")
        assert run.status == ItemStatus.declined
        assert (repo / "keep.txt").read_text() == "uncommitted work\n"
        assert (repo / "untracked.txt").exists()
    finally:
        await runtime.close()
