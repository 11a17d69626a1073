"""Fixtures for end-to-end tests of the language server: the real server process with a scripted
model (tests/support/scripted_lsp_server.py), a workspace folder, and clients that play a
recorded editor (support.lsp_editor)."""

import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import client_capabilities, make_test_lsp_client
from support.lsp_editor import PROFILES, PROJECT, SERVER, Editor
from support.raw_lsp import home, project

Launch = Callable[..., Awaitable[Editor]]
__all__ = ["home", "project"]  # the raw client's fixtures, for test_protocol_robustness


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The editor's workspace folder, holding `PROJECT`."""
    root = tmp_path / "project"
    for name, text in PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root.resolve()


@pytest.fixture
async def launch(tmp_path: Path, workspace: Path) -> AsyncIterator[Launch]:
    """Start a server and initialize a client against it: `await launch(profile, ...)`.

        `speaks_protocol`: the client declares `capabilities.experimental.opencomposer` (it
        renders events and answers `opencomposer/approval/request`); `env`: settings for the server,
        as OPENCOMPOSER_* variables. Servers are shut down after the test, which fails if anything
    went wrong on the client's side."""
    editors: list[Editor] = []

    async def start(
        profile: str = "neovim", *, speaks_protocol: bool = True, env: dict[str, str] | None = None
    ) -> Editor:
        script = tmp_path / f"script-{len(editors)}.json"
        # Neovim reports an applied edit after answering it (its didChange is debounced).
        editor = Editor(
            make_test_lsp_client(), workspace, script, change_before_answer=profile != "neovim"
        )
        editor.serve()
        # The environment of the test (isolated HOME, no OPENCOMPOSER_* of the developer's).
        server_env = {**os.environ, "OPENCOMPOSER_HOME": str(tmp_path / "data"), **(env or {})}
        await editor.client.start_io(sys.executable, str(SERVER), str(script), env=server_env)
        editors.append(editor)

        capabilities = client_capabilities(profile)
        if speaks_protocol:
            capabilities.experimental = {"opencomposer": {}}  # an empty object declares it
        result = await editor.client.initialize_session(
            lsp.InitializeParams(
                capabilities=capabilities,
                root_uri=workspace.as_uri(),
                workspace_folders=[lsp.WorkspaceFolder(uri=workspace.as_uri(), name="project")],
            )
        )
        editor.initialize_result = result
        editor.encoding = result.capabilities.position_encoding or lsp.PositionEncodingKind.Utf16
        return editor

    yield start
    for editor in editors:
        await editor.client.shutdown_session()
        await editor.client.stop()
    assert [error for editor in editors for error in editor.errors] == []


@pytest.fixture(params=PROFILES)
def profile(request: pytest.FixtureRequest) -> str:
    """Each recorded editor in turn, for the tests whose outcome its capabilities change."""
    return request.param
