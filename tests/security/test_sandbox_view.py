"""Finding 6, what a command sees: the system read-only with its secrets masked, the home
folders hidden but for what a build needs, opencomposer's data never visible.

Every test runs real commands in real bubblewrap with HOME in a folder outside /tmp (the
sandbox's /tmp is private, so a home under it would prove nothing), and plants what must
stay hidden.
"""

import asyncio
import os
import sys
from pathlib import Path

import pytest
from support.sandbox_fixtures import sandbox_over

from opencomposer.agent.tools.sandbox import (
    BubblewrapSandbox,
    default_masked_paths,
)
from opencomposer.agent.tools.terminal.environment import scrub_environment
from opencomposer.agent.tools.terminal.view import view


@pytest.fixture
def home(outside: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's home, with private files and git's config in it."""
    folder = outside / "home"
    (folder / ".ssh").mkdir(parents=True)
    (folder / ".ssh/id_ed25519").write_text("PRIVATE KEY")
    (folder / "notes.txt").write_text("diary")
    (folder / ".git-credentials").write_text("https://u:hunter2@example.com")
    (folder / ".config/git").mkdir(parents=True)
    (folder / ".config/git/credentials").write_text("https://u:hunter3@example.com")
    (folder / ".config/git/ignore").write_text("*.log\n")
    (folder / ".gitconfig").write_text("[user]\n\tname = Sandbox User\n")
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(folder / ".local/share"))
    return folder


async def run(sandbox: BubblewrapSandbox, command: str) -> tuple[int, str, str]:
    env, _ = scrub_environment(os.environ)
    process = await sandbox.spawn(
        command, cwd=sandbox.workspace_root, env=env, network=False, stdin=False
    )
    async with asyncio.timeout(30):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.fixture
def workspace(outside: Path) -> Path:
    folder = outside / "ws"
    folder.mkdir()
    return folder


async def test_system_secrets_are_masked(
    bwrap: Path, workspace: Path, outside: Path, home: Path
) -> None:
    secrets = [
        path for path in ("/etc/shadow", "/etc/gshadow", "/etc/shadow-") if Path(path).exists()
    ]
    if not secrets:
        pytest.skip("this system has no shadow files")
    sandbox = sandbox_over(bwrap, workspace, outside / "data")
    code, out, _ = await run(
        sandbox, " && ".join(f"wc -c < {path}" for path in secrets) + " && ls /etc/passwd"
    )
    assert (code, out) == (0, "0\n" * len(secrets) + "/etc/passwd\n")


async def test_the_home_is_hidden_and_writable_for_the_command(
    bwrap: Path, workspace: Path, outside: Path, home: Path
) -> None:
    sandbox = sandbox_over(bwrap, workspace, outside / "data")
    code, out, err = await run(
        sandbox,
        'ls -A "$HOME"; cat "$HOME/notes.txt"; echo cache > '
        '"$HOME/.cache-file" && cat "$HOME/.cache-file"',
    )
    assert code == 0
    # Only git's config shows (the credentials file beside it is masked: empty).
    assert out.split("\n")[:2] == [".config", ".gitconfig"]
    assert "No such file" in err and "diary" not in out
    assert out.endswith("cache\n") and not (home / ".cache-file").exists()
    code, out, _ = await run(
        sandbox,
        'git config user.name; cat "$HOME/.config/git/ignore"; '
        'wc -c < "$HOME/.config/git/credentials"; '
        'ls "$HOME/.ssh" "$HOME/.git-credentials"',
    )
    assert out == "Sandbox User\n*.log\n0\n"


async def test_a_symlinked_gitconfig_is_shown_where_git_looks(
    bwrap: Path, workspace: Path, outside: Path, home: Path
) -> None:
    """Dotfiles managers link ~/.gitconfig into a repository of dotfiles: the file shows at
    both paths, the rest of that repository does not."""
    (home / "dotfiles").mkdir()
    (home / "dotfiles/gitconfig").write_text("[user]\n\tname = Linked User\n")
    (home / "dotfiles/secrets.env").write_text("TOKEN=x")
    (home / ".gitconfig").unlink()
    (home / ".gitconfig").symlink_to(home / "dotfiles/gitconfig")
    sandbox = sandbox_over(bwrap, workspace, outside / "data")
    code, out, _ = await run(sandbox, f"git config user.name; ls {home}/dotfiles")
    assert (code, out) == (0, "Linked User\ngitconfig\n")


async def test_root_and_other_homes_are_hidden(
    bwrap: Path, workspace: Path, outside: Path, home: Path
) -> None:
    seen = view(workspace, [])
    shown = [destination for _, destination in seen.shown]
    hidden = [Path("/root"), *Path("/home").glob("*")]
    private = [
        entry
        for folder in hidden
        if os.access(folder, os.R_OK)
        for entry in folder.iterdir()
        if not any(entry == s or s.is_relative_to(entry) for s in shown)
    ]
    if not private:
        pytest.skip("no private file in /root or /home to look for")
    sandbox = sandbox_over(bwrap, workspace, outside / "data")
    checks = " ; ".join(f"test -e {entry} && echo {entry}" for entry in private[:50])
    code, out, _ = await run(sandbox, checks + "; true")
    assert (code, out) == (0, "")


@pytest.mark.parametrize("where", ["outside", "in-home"])
async def test_the_data_folder_is_never_visible(
    where: str, bwrap: Path, workspace: Path, outside: Path, home: Path
) -> None:
    data = outside / "data" if where == "outside" else home / ".local/share/opencomposer"
    data.mkdir(parents=True)
    (data / "traces.db").write_text("every prompt ever")
    (data / "checkpoints").mkdir()
    sandbox = sandbox_over(bwrap, workspace, data)
    code, out, _ = await run(
        sandbox, f"ls -A {data} 2>/dev/null; cat {data}/traces.db 2>/dev/null; true"
    )
    assert (code, out) == (0, "")


async def test_the_data_folder_inside_the_workspace_is_masked(
    bwrap: Path, workspace: Path, home: Path
) -> None:
    """A user who opens their home (or the data folder's parent) as the workspace still
    cannot have a command read the traces."""
    data = workspace / ".local/share/opencomposer"
    data.mkdir(parents=True)
    (data / "traces.db").write_text("every prompt ever")
    (workspace / ".ssh").mkdir()
    (workspace / ".ssh/id_rsa").write_text("KEY")
    sandbox = BubblewrapSandbox(
        workspace, bwrap, default_masked_paths(workspace, data), quarantine=data / "quarantine"
    )
    code, out, _ = await run(
        sandbox, f"ls -A {data} | wc -l; ls -A .ssh | wc -l; echo made > mine && cat mine"
    )
    assert (code, out) == (0, "0\n0\nmade\n")
    assert (data / "traces.db").read_text() == "every prompt ever"


async def test_path_tools_and_python_work(
    bwrap: Path, workspace: Path, outside: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool installed in the home (~/bin) and a toolchain whose bin/ needs its own lib/
    (~/.tool/bin -> ~/.tool/lib) keep working, as does the Python running the tests."""
    (home / "bin").mkdir()
    (home / "bin/hello").write_text("#!/bin/sh\necho hello from home\n")
    (home / "bin/hello").chmod(0o755)
    (home / ".tool/bin").mkdir(parents=True)
    (home / ".tool/lib").mkdir()
    (home / ".tool/lib/data").write_text("tool data\n")
    (home / ".tool/bin/tool").write_text(f"#!/bin/sh\ncat {home}/.tool/lib/data\n")
    (home / ".tool/bin/tool").chmod(0o755)
    monkeypatch.setenv("PATH", f"{home}/bin:{home}/.tool/bin:{os.environ['PATH']}")
    sandbox = sandbox_over(bwrap, workspace, outside / "data")
    python = sys.executable
    code, out, err = await run(
        sandbox,
        f"hello && tool && git --version >/dev/null && "
        f"{python} -c 'import sys, pydantic; print(sys.prefix)'",
    )
    assert (code, out) == (0, f"hello from home\ntool data\n{sys.prefix}\n"), err
    code, _, err = await run(sandbox, f"touch {home}/bin/planted")
    assert code == 1 and "Read-only file system" in err


async def test_expose_shows_a_hidden_folder_read_only(
    bwrap: Path, workspace: Path, outside: Path, home: Path
) -> None:
    (home / "datasets").mkdir()
    (home / "datasets/train.csv").write_text("a,b\n")
    hidden = sandbox_over(bwrap, workspace, outside / "data")
    exposed = sandbox_over(bwrap, workspace, outside / "data", expose=[home / "datasets"])
    command = f"cat {home}/datasets/train.csv; touch {home}/datasets/new"
    code, out, err = await run(hidden, command)
    assert out == "" and "No such file" in err
    code, out, err = await run(exposed, command)
    assert out == "a,b\n" and code == 1 and "Read-only file system" in err


async def test_credentials_stay_masked_in_what_is_shown(
    bwrap: Path, workspace: Path, outside: Path, home: Path
) -> None:
    """Exposing a folder that holds a credential store shows the folder, not the store."""
    (home / ".cargo/bin").mkdir(parents=True)
    (home / ".cargo/credentials.toml").write_text("token = 'crates-io-secret'")
    (home / ".cargo/config.toml").write_text("[build]\n")
    sandbox = sandbox_over(bwrap, workspace, outside / "data", expose=[home / ".cargo"])
    code, out, _ = await run(
        sandbox, f"cat {home}/.cargo/config.toml {home}/.cargo/credentials.toml"
    )
    assert (code, out) == (0, "[build]\n")


async def test_a_workspace_in_a_hidden_folder_is_visible_and_writable(
    bwrap: Path, outside: Path, home: Path
) -> None:
    workspace = home / "src/project"
    workspace.mkdir(parents=True)
    (workspace / "main.py").write_text("print(1)\n")
    sandbox = sandbox_over(bwrap, workspace, outside / "data")
    code, out, _ = await run(
        sandbox,
        f"ls {workspace} && echo x > made && ls -A {home}/src "
        f"&& cat {home}/notes.txt 2>/dev/null; true",
    )
    assert (code, out) == (0, "main.py\nproject\n")
    assert (workspace / "made").read_text() == "x\n"
