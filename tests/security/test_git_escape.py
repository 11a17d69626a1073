"""Finding 3: a sandboxed command must not change what the user's own git runs on the host.

Each attack is a real command through the real harness (bubblewrap, git inside), followed by
the user's git on the host (status, add, commit, checkout: what runs fsmonitor, filters and
hooks). Every payload touches a marker outside the workspace, where the sandbox cannot write,
so a marker that exists means host code execution. The controls plant the same payloads from
the host, proving the host's git sequence does run each kind.
"""

import os
import shlex
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from opencomposer.agent.tools.harness import CallOutcome, ToolHarness
from opencomposer.agent.tools.terminal import git_scan
from opencomposer.agent.tools.terminal.git_config import parse_config, render_config
from opencomposer.agent.tools.terminal_tools import READ_ONLY_GIT
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings

IDENTITY = {
    "GIT_AUTHOR_NAME": "u",
    "GIT_AUTHOR_EMAIL": "u@example.com",
    "GIT_COMMITTER_NAME": "u",
    "GIT_COMMITTER_EMAIL": "u@example.com",
}


@pytest.fixture(scope="module")
def git(bwrap: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")


@pytest.fixture
def marker(outside: Path) -> Path:
    return outside / "host-code-ran"


@pytest.fixture
async def tools(git: None, tmp_path: Path) -> AsyncIterator[ToolHarness]:
    root = tmp_path / "ws"
    root.mkdir()
    harness = ToolHarness(Workspace(root), ToolSettings(), tmp_path / "data")
    assert harness.sandbox.name == "bubblewrap"
    yield harness
    await harness.close()


@pytest.fixture
def root(tools: ToolHarness) -> Path:
    return tools.workspace.root


@pytest.fixture
def repo(root: Path) -> Path:
    """The workspace as the user's repository, with one commit."""
    host_git(root, "init", "-q", "-b", "main")
    (root / "README").write_text("hello\n")
    host_git(root, "add", "README")
    host_git(root, "commit", "-qm", "first")
    return root


def host_git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git as the user runs it on the host. Its output is decoded leniently: `git diff` of a
    crafted repository prints the planted objects, binary unless git spots a NUL in them."""
    env = {**os.environ, **IDENTITY, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run(
        ["git", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        encoding="utf-8",
        errors="replace",
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def as_user(folder: Path) -> None:
    """What the user does next, on the host: between them they run fsmonitor, filters,
    hooks, an alias and a rebase's todo list."""
    for args in (
        ["status"],
        ["add", "-A"],
        ["commit", "-q", "--allow-empty", "-m", "host"],
        ["checkout", "-q", "-b", "host-branch"],
        ["diff", "HEAD~1"],
        ["st"],
        ["rebase", "--continue"],
    ):
        host_git(folder, *args)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes() if path.is_file() else b"/"
        for path in sorted(folder.rglob("*"))
    }


def script(marker: Path) -> str:
    return f"#!/bin/sh\ntouch {marker}\n"


def plant(path: str, marker: Path) -> str:
    """Shell that writes an executable payload at `path`."""
    return f"printf '%s' {shlex.quote(script(marker))} > {path} && chmod +x {path}"


async def run(tools: ToolHarness, command: str) -> CallOutcome:
    outcome = await tools.call("run_terminal", {"command": command, "timeout": 60})
    assert outcome.ok, outcome.text
    return outcome


def neutralized(outcome: CallOutcome) -> list[str]:
    return sorted(
        f"{change['path']} {change['action']}" for change in outcome.data.get("git_guard", [])
    )


# ---------------------------------------------------------------------------- controls


@pytest.mark.parametrize("kind", ["hook", "fsmonitor", "hooks_path", "filter"])
def test_control_the_hosts_git_runs_each_payload(kind: str, repo: Path, marker: Path) -> None:
    """Planted from the host, every payload kind runs: the attacks below can fail."""
    payload = repo / "payload.sh"
    payload.write_text(script(marker))
    payload.chmod(0o755)
    if kind == "hook":
        shutil.copy(payload, repo / ".git/hooks/pre-commit")
    elif kind == "fsmonitor":
        host_git(repo, "config", "core.fsmonitor", str(payload))
    elif kind == "hooks_path":
        host_git(repo, "config", "core.hooksPath", ".husky")
        (repo / ".husky").mkdir()
        shutil.copy(payload, repo / ".husky/pre-commit")
    else:
        host_git(repo, "config", "filter.evil.clean", str(payload))
        (repo / ".git/info/attributes").write_text("*.txt filter=evil\n")
        (repo / "a.txt").write_text("x\n")
    as_user(repo)
    assert marker.exists()


# ---------------------------------------------------------------------------- the user's .git


@pytest.mark.parametrize(
    "command",
    [
        "echo '{payload}' > .git/hooks/pre-commit",
        "rm -f .git/hooks/pre-commit.sample; cp {payload} .git/hooks/post-checkout",
        "git config core.fsmonitor {payload}",
        "git config alias.st '!{payload}'",
        "git config filter.evil.clean {payload} && echo '*.txt filter=evil' > .git/info/attributes",
        "mkdir -p crafted && printf '[core]\\n\\tfsmonitor = {payload}\\n' > crafted/config && "
        "echo ../crafted > .git/commondir",
        "mkdir -p .git/modules/x/hooks && cp {payload} .git/modules/x/hooks/post-checkout",
        "ln -s .git g && cp {payload} g/hooks/pre-commit",
        "ln -s .git/hooks h && cp {payload} h/pre-commit",
        "mv .git .git-old; mkdir .git",
        "rm -rf .git",
        "git -c user.name=a -c user.email=b commit -qam change --no-verify",
    ],
    ids=[
        "hook",
        "new-hook",
        "fsmonitor",
        "alias",
        "filter",
        "commondir",
        "modules",
        "symlink",
        "hooks-link",
        "swap",
        "remove",
        "commit",
    ],
)
async def test_the_repositorys_git_directory_is_read_only(
    command: str, tools: ToolHarness, repo: Path, marker: Path
) -> None:
    await run(tools, plant("payload.sh", marker))
    (repo / "README").write_text("changed\n")
    before = snapshot(repo / ".git")
    outcome = await run(tools, command.format(payload=repo / "payload.sh"))
    assert READ_ONLY_GIT in outcome.text
    assert snapshot(repo / ".git") == before
    as_user(repo)
    assert not marker.exists()
    assert host_git(repo, "log", "--format=%s").stdout.split() == ["host", "first"]


async def test_a_missing_hooks_folder_stays_missing(
    tools: ToolHarness, repo: Path, marker: Path
) -> None:
    shutil.rmtree(repo / ".git/hooks")
    outcome = await run(tools, f"mkdir -p .git/hooks && {plant('.git/hooks/pre-commit', marker)}")
    assert READ_ONLY_GIT in outcome.text and not (repo / ".git/hooks").exists()
    as_user(repo)
    assert not marker.exists()


async def test_git_reads_still_work_and_writes_say_why(tools: ToolHarness, repo: Path) -> None:
    (repo / "README").write_text("changed\n")
    reads = await run(
        tools,
        "git status --short && git diff --stat && git log --oneline && "
        "git show --stat HEAD >/dev/null && git blame README >/dev/null && "
        "git grep -c changed",
    )
    assert "[exit code 0]" in reads.text and " M README" in reads.text
    assert READ_ONLY_GIT not in reads.text
    for write in (
        "git add README",
        "git stash",
        "git checkout -q -b topic",
        "git config x.y z",
        "git -c user.name=a -c user.email=b commit -qam x",
    ):
        outcome = await run(tools, write)
        assert "[exit code 0]" not in outcome.text and READ_ONLY_GIT in outcome.text, write


# ---------------------------------------------------------------------------- hooks folder


@pytest.mark.parametrize("exists", [True, False], ids=["existing", "missing"])
async def test_the_configured_hooks_folder_is_read_only(
    exists: bool, tools: ToolHarness, repo: Path, marker: Path
) -> None:
    host_git(repo, "config", "core.hooksPath", ".husky")
    if exists:
        (repo / ".husky").mkdir()
        (repo / ".husky/readme").write_text("husky\n")
    outcome = await run(
        tools, f"mkdir -p .husky; {plant('.husky/pre-commit', marker)}; mv .husky .husky-old"
    )
    assert READ_ONLY_GIT in outcome.text
    assert not (repo / ".husky/pre-commit").exists() and not (repo / ".husky-old").exists()
    # The trace a missing hooks folder leaves: an empty folder, which git does not show.
    assert sorted(p.name for p in (repo / ".husky").iterdir()) == (["readme"] if exists else [])
    assert host_git(repo, "status", "--porcelain").stdout == ("?? .husky/\n" if exists else "")
    as_user(repo)
    assert not marker.exists()


async def test_a_hooks_folder_moved_away_and_replaced(
    tools: ToolHarness, repo: Path, marker: Path
) -> None:
    """Its parent can be renamed (only the pinned folder itself is a mount point): the new
    folder at the configured path is found and its hooks moved aside."""
    (repo / "tools/hooks").mkdir(parents=True)
    (repo / "tools/build.sh").write_text("make\n")
    host_git(repo, "config", "core.hooksPath", "tools/hooks")
    outcome = await run(
        tools,
        f"mv tools tools-old && mkdir -p tools/hooks && {plant('tools/hooks/pre-commit', marker)}",
    )
    assert neutralized(outcome) == ["tools/hooks/pre-commit moved aside"]
    assert "[git guard: tools/hooks/pre-commit moved aside" in outcome.text
    assert (repo / "tools-old/build.sh").exists()
    as_user(repo)
    assert not marker.exists()


async def test_an_included_config_file_is_read_only(
    tools: ToolHarness, repo: Path, marker: Path
) -> None:
    """Projects share config with `include.path = ../.gitconfig`: a tracked file."""
    (repo / ".gitconfig").write_text("[pull]\n\trebase = true\n")
    host_git(repo, "config", "include.path", "../.gitconfig")
    await run(tools, plant("payload.sh", marker))
    outcome = await run(
        tools, f"printf '[core]\\n\\tfsmonitor = {repo}/payload.sh\\n' >> .gitconfig"
    )
    assert "Read-only file system" in outcome.text
    as_user(repo)
    assert not marker.exists()


# ---------------------------------------------------------------------------- new repositories


@pytest.mark.parametrize(
    "command, changed",
    [
        (
            "git init -q sub && git -C sub config core.fsmonitor {payload}",
            ["sub/.git/config rewritten"],
        ),
        (
            "git init -q sub && cp {payload} sub/.git/hooks/pre-commit && "
            "cp {payload} sub/.git/hooks/post-checkout",
            ["sub/.git/hooks/post-checkout moved aside", "sub/.git/hooks/pre-commit moved aside"],
        ),
        (
            "git init -q sub && git -C sub config core.hooksPath ../hk && mkdir hk && "
            "cp {payload} hk/pre-commit",
            ["sub/.git/config rewritten"],
        ),
        (
            "git init -q sub && git -C sub config alias.st '!{payload}' && "
            "git -C sub config include.path ../../inc",
            ["sub/.git/config rewritten"],
        ),
        (
            "git init -q sub && git -C sub config filter.evil.clean {payload} && "
            "echo '* filter=evil' > sub/.git/info/attributes && echo x > sub/f",
            ["sub/.git/config rewritten"],
        ),
        (
            "mkdir -p sub/.git/hooks && cp {payload} sub/.git/hooks/pre-commit && "
            "cd sub && git init -q",
            ["sub/.git/hooks/pre-commit moved aside"],
        ),
        (
            "mkdir -p crafted/objects crafted/refs crafted/hooks sub && echo 'ref: "
            "refs/heads/main' "
            "> crafted/HEAD && cp {payload} crafted/hooks/pre-commit && "
            "echo 'gitdir: ../crafted' > sub/.git",
            ["crafted/hooks/pre-commit moved aside"],
        ),
        (
            "git init -q sub && git init -q --bare crafted && cp {payload} "
            "crafted/hooks/pre-commit "
            "&& echo ../../crafted > sub/.git/commondir",
            ["crafted/hooks/pre-commit moved aside"],
        ),
        (
            "git init -q sub && mkdir sub/.git/modules && "
            'git init -q --separate-git-dir "$PWD/sub/.git/modules/x" sub/x && '
            "cp {payload} sub/.git/modules/x/hooks/post-checkout",
            ["sub/.git/modules/x/hooks/post-checkout moved aside"],
        ),
        (
            "git init -q -b main sub && cd sub && git -c user.name=a -c user.email=b commit -q "
            "--allow-empty -m x && mkdir .git/rebase-merge && cd .git/rebase-merge && "
            "echo refs/heads/main > head-name && git rev-parse HEAD | tee onto > orig-head && "
            "touch interactive done && echo 0 > msgnum && echo 1 > end && "
            "echo 'exec {payload}' > git-rebase-todo",
            ["sub/.git/rebase-merge moved aside"],
        ),
        (
            "mkdir -p sub/objects sub/refs && echo 'ref: refs/heads/main' > sub/HEAD && "
            "printf '[core]\\n\\tbare = false\\n\\tworktree = ..\\n\\tfsmonitor = {payload}\\n"
            "[alias]\\n\\tst = !{payload}\\n' > sub/config",
            ["sub/config rewritten"],
        ),
        (
            "mkdir real && git init -q real && cp {payload} real/.git/hooks/pre-commit && "
            "mkdir sub && ln -s ../real/.git sub/.git",
            ["real/.git/hooks/pre-commit moved aside"],
        ),
        (
            "git init -q sub && printf '[core]\\n\\tfsmonitor = {payload}\\n' > evil.cfg && "
            "rm sub/.git/config && ln -s ../../evil.cfg sub/.git/config",
            ["sub/.git/config moved aside"],
        ),
        (
            "git init -q sub && git init -q --bare crafted && cp {payload} "
            "crafted/hooks/pre-commit "
            "&& echo ../../crafted > common && ln -s ../../common sub/.git/commondir",
            ["crafted/hooks/pre-commit moved aside", "sub/.git/commondir moved aside"],
        ),
    ],
    ids=[
        "fsmonitor",
        "hooks",
        "hooks-path",
        "alias-include",
        "filter",
        "hooks-first",
        "gitdir-file",
        "commondir",
        "submodule",
        "rebase-exec",
        "bare",
        "symlinked",
        "config-link",
        "commondir-link",
    ],
)
async def test_a_repository_made_by_a_command_is_neutralized(
    command: str, changed: list[str], tools: ToolHarness, repo: Path, marker: Path
) -> None:
    await run(tools, plant("payload.sh", marker))
    outcome = await run(tools, command.format(payload=repo / "payload.sh"))
    assert "[exit code 0]" in outcome.text
    assert neutralized(outcome) == changed
    assert "[git guard: " in outcome.text
    for folder in (repo / "sub/x", repo / "sub", repo / "real", repo):
        if folder.exists():
            as_user(folder)
    assert not marker.exists()
    again = await run(tools, "true")
    assert "git_guard" not in again.data  # reported once, and trusted from then on


async def test_a_symlink_loop_named_git_breaks_nothing(tools: ToolHarness, repo: Path) -> None:
    outcome = await run(tools, "mkdir loop && ln -s .git loop/.git && ln -s a b && ln -s b a")
    assert neutralized(outcome) == ["loop/.git moved aside"]
    assert "[exit code 0]" in (await run(tools, "ls loop")).text


async def test_a_nested_repository_is_read_only_and_cannot_be_swapped(
    tools: ToolHarness, repo: Path, marker: Path
) -> None:
    (repo / "lib").mkdir()
    host_git(repo / "lib", "init", "-q")
    config = (repo / "lib/.git/config").read_bytes()
    await run(tools, plant("payload.sh", marker))
    blocked = await run(tools, f"git -C lib config core.fsmonitor {repo}/payload.sh")
    assert READ_ONLY_GIT in blocked.text
    swapped = await run(
        tools,
        f"mv lib lib-old && git init -q lib && git -C lib config core.fsmonitor {repo}/payload.sh",
    )
    assert neutralized(swapped) == ["lib/.git/config rewritten"]
    assert (repo / "lib-old/.git/config").read_bytes() == config
    as_user(repo / "lib")
    as_user(repo / "lib-old")
    assert not marker.exists()


async def test_a_gitdir_pointing_out_of_the_workspace_is_moved_aside(
    tools: ToolHarness, repo: Path, outside: Path, marker: Path
) -> None:
    """A `.git` file naming a folder outside (another user's /var/tmp, a host /tmp path)."""
    crafted = outside / "crafted"
    host_git(outside, "init", "-q", "crafted")
    (crafted / ".git/hooks/pre-commit").write_text(script(marker))
    (crafted / ".git/hooks/pre-commit").chmod(0o755)
    outcome = await run(
        tools,
        f"mkdir sub && echo 'gitdir: {crafted}/.git' > sub/.git && echo /tmp/elsewhere > other.git",
    )
    assert neutralized(outcome) == ["sub/.git moved aside"]
    assert not (repo / "sub/.git").exists()
    as_user(repo / "sub")
    assert not marker.exists()


async def test_the_users_relative_hooks_path_in_a_new_repository(
    tools: ToolHarness, repo: Path, marker: Path
) -> None:
    """A relative core.hooksPath in the user's global config applies to every work tree, so
    a repository a command makes gets one too: its hooks are found after its config is
    cleaned."""
    (Path.home() / ".gitconfig").write_text("[core]\n\thooksPath = .githooks\n")
    outcome = await run(
        tools,
        "git init -q sub && mkdir sub/.githooks && " + plant("sub/.githooks/pre-commit", marker),
    )
    assert neutralized(outcome) == ["sub/.githooks/pre-commit moved aside"]
    as_user(repo / "sub")
    assert not marker.exists()


async def test_a_folder_whose_times_are_put_back_is_listed_again(
    tools: ToolHarness, repo: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk re-lists only folders whose ctime changed. A command can put a folder's
    mtime back after adding a repository to it (`touch -r`), never its ctime."""
    monkeypatch.setattr(git_scan, "RACY_NS", 0)  # trust every listing at once
    (repo / "a/b").mkdir(parents=True)
    await run(tools, plant("payload.sh", marker))  # the walk lists a/b
    outcome = await run(
        tools,
        "touch -r a/b stamp && git init -q a/b/sub && "
        f"git -C a/b/sub config core.fsmonitor {repo}/payload.sh && "
        "touch -r stamp a/b",
    )
    assert neutralized(outcome) == ["a/b/sub/.git/config rewritten"]
    as_user(repo / "a/b/sub")
    assert not marker.exists()


async def test_a_background_job_is_reviewed_whenever_it_is_read(
    tools: ToolHarness, repo: Path, marker: Path
) -> None:
    """While a job runs, what it made is cleaned at every read and never trusted: planting
    again after the first clean is caught again."""
    await run(tools, plant("payload.sh", marker))
    fsmonitor = f"git -C sub config core.fsmonitor {repo}/payload.sh"
    outcomes = [
        await tools.call(
            "run_terminal",
            {
                "command": f"git init -q sub && {fsmonitor} && echo planted && read go && "
                f"{fsmonitor} "
                "&& echo again && sleep 60",
                "background": True,
            },
        )
    ]
    job = outcomes[0].data["job_id"]

    async def read_until(word: str) -> None:
        for _ in range(40):
            if word in "".join(outcome.text for outcome in outcomes):
                return
            outcomes.append(await tools.call("terminal_output", {"job_id": job, "wait": 0.5}))
        raise AssertionError(f"the job never printed {word!r}")

    await read_until("planted")
    assert [change for o in outcomes for change in neutralized(o)] == ["sub/.git/config rewritten"]
    outcomes.append(await tools.call("terminal_input", {"job_id": job, "text": "go\n"}))
    await read_until("again")
    assert [change for o in outcomes for change in neutralized(o)] == [
        "sub/.git/config rewritten"
    ] * 2
    assert (await tools.call("terminal_kill", {"job_id": job})).ok
    as_user(repo / "sub")
    assert not marker.exists()


async def test_what_is_moved_aside_is_kept_privately(
    tools: ToolHarness, repo: Path, tmp_path: Path
) -> None:
    outcome = await run(tools, "git init -q sub && echo 'exit 0' > sub/.git/hooks/pre-commit")
    [change] = outcome.data["git_guard"]
    kept = Path(change["kept"])
    assert kept.read_text() == "exit 0\n"
    quarantine = tmp_path / "data" / "quarantine"
    assert kept.is_relative_to(quarantine) and quarantine.stat().st_mode & 0o777 == 0o700
    listing = await run(tools, f"ls {quarantine}")
    assert "No such file or directory" in listing.text


async def test_the_users_own_new_repository_is_trusted(tools: ToolHarness, root: Path) -> None:
    """A repository made on the host between commands is the user's: pinned, not cleaned."""
    await run(tools, "true")
    host_git(root, "init", "-q", "mine")
    host_git(root / "mine", "config", "alias.st", "!echo mine")
    (root / "mine/.git/hooks/pre-commit").write_text("#!/bin/sh\nexit 0\n")
    outcome = await run(tools, "git -C mine config x.y z")
    assert "git_guard" not in outcome.data and READ_ONLY_GIT in outcome.text
    assert (root / "mine/.git/hooks/pre-commit").exists()
    assert host_git(root / "mine", "st").stdout == "mine\n"


def test_a_rewritten_config_reads_back_as_written(git: None) -> None:
    """What the guard writes in place of a command's config, git reads as the keys kept."""
    entries = [
        ("core.bare", None),
        ("core.filemode", "true"),
        ("remote.my.fork.url", 'https://example.com/a "b" \\ c\td'),
        ("remote.my.fork.fetch", "+refs/heads/*:refs/remotes/fork/*"),
        ('branch.we"ird\\name.merge', "refs/heads/main"),
        ("user.name", "A\nB"),
        ("core.filemode", "false"),
    ]
    assert parse_config(render_config(entries).encode()) == entries


# ---------------------------------------------------------------------------- file tools


@pytest.mark.parametrize(
    "path",
    [
        ".husky/pre-commit",
        ".husky/sub/x",
        "g/hooks/pre-commit",
        ".git/hooks/pre-commit",
        "sub/.git/config",
        ".gitconfig",
        "bare/HEAD",
    ],
)
async def test_the_file_tools_refuse_what_git_runs(
    path: str, tools: ToolHarness, repo: Path
) -> None:
    host_git(repo, "config", "core.hooksPath", ".husky")
    host_git(repo, "config", "include.path", "../.gitconfig")
    (repo / "g").symlink_to(".git")
    (repo / "bare/objects").mkdir(parents=True)
    (repo / "bare/refs").mkdir()
    outcome = await tools.call("write_file", {"path": path, "content": "#!/bin/sh\n"})
    assert outcome.error is not None and outcome.error.kind == "denied", outcome.text
    assert not (repo / path).exists()


async def test_the_file_tools_cannot_assemble_a_git_directory(
    tools: ToolHarness, root: Path
) -> None:
    for path in ("evil/HEAD", "evil/objects/x"):
        assert (await tools.call("write_file", {"path": path, "content": "x\n"})).ok
    last = await tools.call("write_file", {"path": "evil/refs/heads/main", "content": "x\n"})
    assert last.error is not None and last.error.kind == "denied"
    assert "git directory evil" in last.text
