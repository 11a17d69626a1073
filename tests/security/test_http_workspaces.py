"""Folders no thread may be bound to, whatever the allowed roots say: the home folder and
everything above it, a git directory and anything inside one, and opencomposer's own data and
config folders. Refused over HTTP (with the roots opened to all of `/`, so only the rule
stands in the way), by the runtime itself (rollouts, LSP), for an old thread resumed, and by
`opencomposer chat -w`; a project folder inside the home folder stays fine."""

import asyncio
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from support.live_server import live_server
from support.scripted_engine import ScriptedEngine

from opencomposer import paths
from opencomposer.agent.protocol.threads import Thread
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.session import SessionError
from opencomposer.config import Settings

CLI = str(Path(sys.executable).parent / "opencomposer")


@pytest.fixture
def layout(tmp_path: Path, isolated_home: Path) -> dict[str, Path]:
    """A home folder with a project (a git repository) in it, a bare repository, the data
    folder beside them, and symlinks pointing at the forbidden places."""
    project = isolated_home / "src" / "project"
    (project / "lib").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    bare = isolated_home / "src" / "dotfiles.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    config = paths.user_config_file().parent
    config.mkdir(parents=True)
    data = tmp_path / "data"
    (data / "logs").mkdir(parents=True)
    links = isolated_home / "links"
    links.mkdir()
    (links / "home").symlink_to(isolated_home)
    (links / "git").symlink_to(project / ".git")
    (links / "data").symlink_to(data)
    return {
        "home": isolated_home,
        "project": project,
        "bare": bare,
        "config": config,
        "data": data,
        "links": links,
    }


def forbidden(layout: dict[str, Path]) -> list[str]:
    home, project, bare = layout["home"], layout["project"], layout["bare"]
    return [
        "~",
        "~/",
        str(home),
        f"{home}/",
        f"{home}/src/..",
        str(home.parent),
        "/",
        pwd.getpwuid(os.getuid()).pw_dir,  # the real home, whatever $HOME says
        str(layout["links"] / "home"),
        str(project / ".git"),
        str(project / ".git" / "hooks"),
        str(project / ".git" / "refs"),
        str(layout["links"] / "git"),
        str(bare),
        str(bare / "hooks"),
        str(layout["data"]),
        str(layout["data"] / "logs"),
        str(layout["data"].parent),
        str(layout["links"] / "data"),
        str(layout["config"]),
    ]


def test_forbidden_workspaces_are_refused_over_http(layout: dict[str, Path]) -> None:
    with live_server(ScriptedEngine([]), layout["data"], workspace_roots=[Path("/")]) as url:
        for workspace in forbidden(layout):
            response = httpx.post(f"{url}/v1/threads", json={"workspace": workspace}, timeout=10)
            assert response.status_code == 403, (workspace, response.text)
            assert response.json()["error"]["kind"] == "forbidden"
        for workspace in ["\udc80", f"{layout['project']}/\udc80", f"{layout['home']}\x00"]:
            # json.dumps escapes them (`"\\udc80"`, `"\\u0000"`), as a hostile client would.
            response = httpx.post(
                f"{url}/v1/threads",
                timeout=10,
                content=json.dumps({"workspace": workspace}),
                headers={"Content-Type": "application/json"},
            )
            assert response.status_code == 400, (workspace, response.text)
            assert response.json()["error"]["kind"] == "invalid_request"
        assert httpx.get(f"{url}/v1/threads", timeout=10).json()["data"] == []
        for fine in (layout["project"], layout["project"] / "lib"):
            made = httpx.post(f"{url}/v1/threads", json={"workspace": str(fine)}, timeout=10)
            assert made.status_code == 200, made.text


def test_the_runtime_refuses_them_for_every_transport(layout: dict[str, Path]) -> None:
    settings = Settings(home=layout["data"], models_dir=layout["data"] / "models")

    async def attempts() -> list[str]:
        runtime = AgentRuntime(settings, ScriptedEngine([]))
        kinds = []
        try:
            for workspace in forbidden(layout):
                with pytest.raises(SessionError) as caught:
                    await runtime.start_thread(Path(workspace))
                kinds.append(caught.value.kind)
            # A name that is not UTF-8 (as the CLI gets it from the file system).
            with pytest.raises(SessionError) as caught:
                await runtime.start_thread(layout["project"] / os.fsdecode(b"\xff"))
            kinds.append(caught.value.kind)
            # A thread recorded on the home folder before the rule existed is not reopened.
            old = Thread(id="thr_old", workspace=str(layout["home"]))
            runtime.store.create_thread(old, "system prompt")
            with pytest.raises(SessionError) as caught:
                await runtime.open_thread("thr_old")
            kinds.append(caught.value.kind)
            assert (await runtime.start_thread(layout["project"])).thread.workspace == str(
                layout["project"]
            )
        finally:
            await runtime.close()
        return kinds

    assert asyncio.run(attempts()) == ["forbidden"] * len(forbidden(layout)) + [
        "invalid_request",
        "forbidden",
    ]


def test_chat_refuses_the_home_folder(layout: dict[str, Path]) -> None:
    env = {**os.environ, "HOME": str(layout["home"]), "OPENCOMPOSER_HOME": str(layout["data"])}
    proc = subprocess.run(
        [
            CLI,
            "chat",
            "-w",
            str(layout["home"]),
            "--engine",
            "openai:http://127.0.0.1:9/v1",
            "list my files",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    assert "is your home folder: open a project folder inside it" in " ".join(
        proc.stderr.split()
    )  # as rich wrapped it
    assert "Traceback" not in proc.stderr
