"""A real VS Code for the extension's tests: code-server (VS Code 1.100's workbench, served to
a browser) with the packaged `opencomposer.vsix` installed, in folders of its own, offline.

code-server is installed by `make test` under build/code-server (scripts/ensure-code-server.sh);
where it or the .vsix is missing the tests skip, except in CI, where that is a failure.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support.raw_lsp import free_port

REPO = Path(__file__).resolve().parents[2]
BINARY = REPO / "build" / "code-server" / "node_modules" / ".bin" / "code-server"
VSIX = REPO / "extension-bridge" / "vscode" / "opencomposer.vsix"
OPENCOMPOSER = Path(sys.executable).parent / "opencomposer"
STARTUP_S = 60


def require_installed() -> None:
    """Skip (fail in CI) where code-server or the packaged extension is not there."""
    missing = [
        f"{path.relative_to(REPO)} ({how})"
        for path, how in ((BINARY, "make test installs it"), (VSIX, "make vscode builds it"))
        if not path.exists()
    ]
    if not missing:
        return
    message = "no real VS Code to test in: missing " + ", ".join(missing)
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def user_settings(engine_url: str) -> dict[str, Any]:
    """The user's settings: the extension runs `opencomposer lsp` from this environment on the
    fake upstream; the workbench is kept from anything that would reach out or get in the way."""
    return {
        "opencomposer.server.command": str(OPENCOMPOSER),
        "opencomposer.engine": f"openai:{engine_url}",
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "workbench.welcomePage.walkthroughs.openOnInstall": False,
        "telemetry.telemetryLevel": "off",
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "update.mode": "none",
        "git.enabled": False,
        "security.workspace.trust.enabled": False,
        "task.allowAutomaticTasks": "on",
        "editor.inlineSuggest.enabled": True,
        "files.autoSave": "off",
        "window.confirmBeforeClose": "never",
    }


class CodeServer:
    """One code-server process with its own HOME, user data, extensions and opencomposer
    data folder under `root`."""

    def __init__(self, root: Path, engine_url: str) -> None:
        self.root = root
        self.home = root / "home"
        self.user_data = root / "user-data"
        self.extensions = root / "extensions"
        self.data = root / "opencomposer"
        self.log = root / "code-server.log"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        for folder in (self.home, self.user_data / "User", self.extensions):
            folder.mkdir(parents=True, exist_ok=True)
        (self.user_data / "User" / "settings.json").write_text(
            json.dumps(user_settings(engine_url), indent=2)
        )

    @property
    def env(self) -> dict[str, str]:
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("OPENCOMPOSER_", "VSCODE_"))
        }
        return {
            **env,
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local/share"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "EXTENSIONS_GALLERY": "{}",
            "OPENCOMPOSER_HOME": str(self.data),
        }

    def _command(self, *arguments: str) -> list[str]:
        return [
            str(BINARY),
            "--user-data-dir",
            str(self.user_data),
            "--extensions-dir",
            str(self.extensions),
            *arguments,
        ]

    def install(self, vsix: Path) -> None:
        done = subprocess.run(
            self._command("--install-extension", str(vsix)),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0 and "successfully installed" in done.stdout, done

    def start(self) -> None:
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                self._command(
                    "--auth",
                    "none",
                    "--bind-addr",
                    f"127.0.0.1:{self.port}",
                    "--disable-telemetry",
                    "--disable-update-check",
                    "--disable-workspace-trust",
                    "--disable-getting-started-override",
                ),
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + STARTUP_S
        while "HTTP server listening" not in self.log.read_text(errors="replace"):
            assert self.process.poll() is None, self.log.read_text(errors="replace")
            assert time.monotonic() < deadline, "code-server did not start"
            time.sleep(0.1)

    def url(self, folder: Path) -> str:
        return f"http://127.0.0.1:{self.port}/?folder={folder}"

    def output_channel(self) -> str:
        """The extension's output channel, as the newest extension host wrote it to disk."""
        logs = sorted(
            self.user_data.glob("logs/*/exthost*/opencomposer.opencomposer/*.log"),
            key=lambda path: path.stat().st_mtime,
        )
        return logs[-1].read_text(errors="replace") if logs else ""

    def servers(self, folder: Path) -> list[int]:
        """The pids of the `opencomposer lsp` processes working in `folder` (their cwd)."""
        found = []
        for entry in Path("/proc").iterdir():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
                cwd = os.readlink(entry / "cwd")
            except (OSError, ValueError):
                continue
            if (
                b"lsp" in command
                and any(part.endswith(b"opencomposer") for part in command)
                and Path(cwd) == folder
            ):
                found.append(int(entry.name))
        return found

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(10)


def copy_failure_artifacts(server: CodeServer, into: Path) -> None:
    """What a failed test leaves for whoever reads it: code-server's and the extension's logs."""
    into.mkdir(parents=True, exist_ok=True)
    if server.log.exists():
        shutil.copy(server.log, into / "code-server.log")
    (into / "opencomposer-output.log").write_text(server.output_channel())
