"""Folders no thread may be bound to, by rule: anything in a home's dot folders or its bin
folder, the folders on PATH and the XDG folders, the system's configuration, programs and
state, and any folder that holds one of those; through symlinks, `..`, a symlinked parent
and a bind mount; over the runtime (every transport's path), the agent API, a live HTTP
server, a resumed thread and `opencomposer chat`. Projects in a home, /tmp, /var/tmp, /srv,
/opt, /mnt, /media and /workspaces keep working. Each refusal names its rule."""

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.live_server import live_server
from support.scripted_engine import ScriptedEngine

from opencomposer.agent.api import AgentAPI
from opencomposer.agent.protocol.threads import Thread
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.session import SessionError
from opencomposer.agent.workspace_policy import refuse_unsafe_workspace
from opencomposer.config import Settings

CLI = str(Path(sys.executable).parent / "opencomposer")
DOT = "a home dot folder: settings, credentials and what runs at login live there"
ROOT = os.geteuid() == 0


@pytest.fixture
def home(isolated_home: Path) -> Path:
    """A home with the dot folders and bin folder attackers aim at, and projects beside them."""
    for folder in (
        ".ssh",
        ".config/systemd/user",
        ".local/bin",
        ".local/share/applications",
        ".gnupg",
        ".bashrc.d",
        ".dotfiles",
        "bin/sub",
        "src/project/lib",
        "code/app",
        "work/client/site",
    ):
        (isolated_home / folder).mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(isolated_home / "src/project")], check=True)
    return isolated_home


@pytest.fixture
def links(home: Path, tmp_path: Path) -> Path:
    """Project-looking names that are symlinks to refused folders."""
    folder = tmp_path / "links"
    folder.mkdir()
    for name, target in {
        "keys": home / ".ssh",
        "cfg": home / ".config",  # a symlinked parent: links/cfg/systemd
        "localbin": home / ".local/bin",
        "mybin": home / "bin",
        "etc": Path("/etc"),
        "chain": folder / "cfg",  # a link to a link
    }.items():
        (folder / name).symlink_to(target)
    return folder


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "data", models_dir=tmp_path / "data" / "models")


def refused_variants(home: Path, links: Path) -> list[tuple[str, str]]:
    """(workspace as a client would send it, what the refusal must say)."""
    real_home = pwd.getpwuid(os.getuid()).pw_dir
    return [
        # Each home rule directly.
        (f"{home}/.ssh", f"{home}/.ssh is {DOT}"),
        (f"{home}/.config", f"{home}/.config is {DOT}"),
        (f"{home}/.config/systemd", f"lies in ~/.config, {DOT}"),
        (f"{home}/.config/systemd/user", f"lies in ~/.config, {DOT}"),
        (f"{home}/.local/bin", f"lies in ~/.local, {DOT}"),
        (f"{home}/.local/share/applications", f"lies in ~/.local, {DOT}"),
        (f"{home}/.gnupg", DOT),
        (f"{home}/.bashrc.d", DOT),
        (f"{home}/.dotfiles", DOT),
        (f"{home}/.made-later", DOT),  # refused before it exists
        (f"{home}/bin", "is a home bin folder"),
        (f"{home}/bin/sub", "lies in ~/bin, a home bin folder"),
        # The home, and what holds it.
        (str(home), "is your home folder: open a project folder inside it"),
        ("~", "is your home folder"),
        (str(home.parent), f"holds {home}, your home folder"),
        ("/", "holds"),
        # The password database's home, whatever $HOME says.
        (f"{real_home}/.ssh", DOT),
        (f"{real_home}/.config/systemd", DOT),
        # Through a symlink, a symlinked parent, a chain of links, `..`.
        (str(links / "keys"), f"{home}/.ssh is {DOT}"),
        (str(links / "cfg" / "systemd"), f"{home}/.config/systemd lies in ~/.config"),
        (str(links / "chain" / "systemd" / "user"), "lies in ~/.config"),
        (str(links / "localbin"), "lies in ~/.local"),
        (str(links / "mybin"), "is a home bin folder"),
        (f"{home}/src/project/../../.ssh", f"{home}/.ssh is {DOT}"),
        (f"{home}/src/../.config/systemd", "lies in ~/.config"),
        (f"{links}/cfg/../bin", "is a home bin folder"),  # `..` after a link: the target's
        # The system's configuration, programs and state.
        ("/etc", "/etc is the system's configuration"),
        ("/etc/systemd", "lies in /etc, the system's configuration"),
        (str(links / "etc"), "/etc is the system's configuration"),
        ("/tmp/../etc", "/etc is the system's configuration"),
        ("/proc/self/root/etc/cron.d", "lies in /etc"),
        ("/usr/bin", "lies in /usr, the installed programs and libraries"),
        ("/usr/local/bin", "lies in /usr"),
        ("/usr/local", "lies in /usr"),
        ("/bin", "/usr/bin" if Path("/bin").is_symlink() else "/bin is a folder of system"),
        ("/lib", "/usr/lib" if Path("/lib").is_symlink() else "/lib is a folder of system"),
        ("/var", "/var is the system's state"),
        ("/var/lib", "lies in /var, the system's state"),
        ("/var/spool/cron", "lies in /var"),
        ("/boot", "/boot is the kernel and boot loader"),
        ("/proc/self", "lies in /proc"),
        ("/sys/kernel", "lies in /sys"),
        ("/dev/shm", "lies in /dev"),
        ("/run/user", "lies in /run"),
    ]


def existing(variants: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The variants that name a folder on this machine: the agent API says that a folder
    that does not exist is not a folder before any rule is asked."""
    return [(path, says) for path, says in variants if Path(path).expanduser().is_dir()]


def allowed_variants(home: Path, tmp_path: Path) -> list[Path]:
    """Existing folders where people keep work."""
    (tmp_path / "scratch").mkdir()
    return [
        home / "src/project",
        home / "src/project/lib",
        home / "code/app",
        home / "work/client/site",
        tmp_path / "scratch",  # under /tmp, as the test suite's workspaces are
    ]


# Where people keep work outside their home: fine by rule, whether or not the folder exists
# on this machine (the rule is checked before the folder is looked at).
FINE_ELSEWHERE = [
    "/srv/site",
    "/opt/app",
    "/mnt/data/project",
    "/media/usb/project",
    "/workspaces/project",
    "/workspace",
    "/tmp/project",
    "/var/tmp/project",
    "/var/www/site",
    "/usr/local/src/nginx-1.27",
    "/usr/src/app",
    "/data/projects/app",
]


def test_every_rule_refuses_directly(home: Path, links: Path, settings: Settings) -> None:
    for workspace, says in refused_variants(home, links):
        with pytest.raises(SessionError) as caught:
            refuse_unsafe_workspace(Path(workspace).expanduser().resolve(), settings)
        assert caught.value.kind == "forbidden", workspace
        assert says in caught.value.message, (workspace, caught.value.message)


def test_places_people_keep_work_are_fine(home: Path, tmp_path: Path, settings: Settings) -> None:
    for workspace in [*allowed_variants(home, tmp_path), *map(Path, FINE_ELSEWHERE)]:
        refuse_unsafe_workspace(workspace.resolve(), settings)


async def test_the_runtime_refuses_them_for_every_transport(
    home: Path, links: Path, tmp_path: Path, settings: Settings
) -> None:
    """LSP, `chat`, rollouts and the agent API all start threads through the runtime."""
    runtime = AgentRuntime(settings, ScriptedEngine([]))
    try:
        for workspace, says in refused_variants(home, links):
            with pytest.raises(SessionError) as caught:
                await runtime.start_thread(Path(workspace))
            assert (caught.value.kind, says in caught.value.message) == ("forbidden", True), (
                workspace,
                caught.value.message,
            )
        for fine in allowed_variants(home, tmp_path):
            assert (await runtime.start_thread(fine)).thread.workspace == str(fine.resolve())
        # A thread recorded on a dot folder before the rule existed is not reopened.
        old = Thread(id="thr_old", workspace=str(home / ".config/systemd"))
        runtime.store.create_thread(old, "system prompt")
        with pytest.raises(SessionError) as caught:
            await runtime.open_thread("thr_old")
        assert caught.value.kind == "forbidden" and "lies in ~/.config" in caught.value.message
    finally:
        await runtime.close()


async def test_the_agent_api_refuses_them_with_every_folder_allowed(
    home: Path, links: Path, settings: Settings
) -> None:
    """The configured roots are `/`: only the rules stand in the way."""
    runtime = AgentRuntime(settings, ScriptedEngine([]))
    api = AgentAPI(runtime, lambda: [Path("/")])
    try:
        for workspace, says in existing(refused_variants(home, links)):
            with pytest.raises(SessionError) as caught:
                await api.dispatch("thread/start", {"workspace": workspace})
            assert caught.value.kind == "forbidden" and says in caught.value.message, workspace
        made = await api.dispatch("thread/start", {"workspace": str(home / "code/app")})
        assert made["thread"]["workspace"] == str(home / "code/app")
    finally:
        await runtime.close()


def test_a_live_server_refuses_them(home: Path, links: Path, tmp_path: Path) -> None:
    with live_server(ScriptedEngine([]), tmp_path / "data", workspace_roots=[Path("/")]) as url:
        for workspace, says in existing(refused_variants(home, links)):
            response = httpx.post(f"{url}/v1/threads", json={"workspace": workspace}, timeout=10)
            assert response.status_code == 403, (workspace, response.text)
            error = response.json()["error"]
            assert error["kind"] == "forbidden" and says in error["message"], workspace
        assert httpx.get(f"{url}/v1/threads", timeout=10).json()["data"] == []
        made = httpx.post(
            f"{url}/v1/threads", json={"workspace": str(home / "src/project")}, timeout=10
        )
        assert made.status_code == 200, made.text


@pytest.fixture
def path_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tools folder whose bin is on PATH, and a project whose virtual environment's bin is
    (an activated venv)."""
    (tmp_path / "tools/bin").mkdir(parents=True)
    venv = tmp_path / "project/.venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "project/src").mkdir()
    monkeypatch.setenv(
        "PATH",
        os.pathsep.join([str(tmp_path / "tools/bin"), str(venv / "bin"), os.environ["PATH"]]),
    )
    return tmp_path


def test_folders_on_path(path_folders: Path, settings: Settings) -> None:
    for workspace, says in [
        (path_folders / "tools/bin", "is a folder on PATH"),
        (path_folders / "tools", f"holds {path_folders}/tools/bin, a folder on PATH"),
        (path_folders / "tools/bin/..", "holds"),
        (path_folders / "project/.venv/bin", "is a folder on PATH"),
    ]:
        with pytest.raises(SessionError) as caught:
            refuse_unsafe_workspace(workspace.resolve(), settings)
        assert says in caught.value.message, (workspace, caught.value.message)
    # A project whose own virtual environment is active is still the project.
    refuse_unsafe_workspace((path_folders / "project").resolve(), settings)
    refuse_unsafe_workspace((path_folders / "project/src").resolve(), settings)
    # A subfolder of a PATH folder is not on PATH.
    (path_folders / "tools/bin/cache").mkdir()
    refuse_unsafe_workspace((path_folders / "tools/bin/cache").resolve(), settings)


def test_xdg_folders_outside_the_home(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, data = tmp_path / "xdg-config", tmp_path / "xdg-data"
    (config / "systemd/user").mkdir(parents=True)
    (data / "applications").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    for workspace, says in [
        (config / "systemd/user", "lies in $XDG_CONFIG_HOME, the XDG config folder"),
        (data / "applications", "lies in $XDG_DATA_HOME, the XDG data folder"),
        (data, "is the XDG data folder"),
        (tmp_path, "holds"),
    ]:
        with pytest.raises(SessionError) as caught:
            refuse_unsafe_workspace(workspace, settings)
        assert says in caught.value.message, (workspace, caught.value.message)


def test_chat_names_the_rule(home: Path, tmp_path: Path) -> None:
    env = {**os.environ, "OPENCOMPOSER_HOME": str(tmp_path / "data")}
    proc = subprocess.run(
        [
            CLI,
            "chat",
            "-w",
            str(home / ".config/systemd"),
            "--engine",
            "openai:http://127.0.0.1:9/v1",
            "enable my service",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    said = " ".join(proc.stderr.split())  # as rich wrapped it
    assert f"{home}/.config/systemd lies in ~/.config, {DOT}" in said
    assert "Traceback" not in proc.stderr


@pytest.fixture
def mount_namespace() -> Iterator[list[str]]:
    """The prefix that runs a command in a mount namespace of its own, where it may bind
    folders without touching the machine's mounts."""
    unshare = shutil.which("unshare")
    prefix = [unshare, "--mount", "--propagation", "private"] if unshare else []
    if not ROOT:
        prefix[1:1] = ["--map-root-user"]
    if not unshare or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("cannot make a mount namespace here")
    yield prefix


BIND_CHECK = """
import sys
from pathlib import Path
from opencomposer.agent.session import SessionError
from opencomposer.agent.workspace_policy import refuse_unsafe_workspace
from opencomposer.config import Settings
settings = Settings(home=Path(sys.argv[1]))
for workspace in sys.argv[2:]:
    try:
        refuse_unsafe_workspace(Path(workspace).resolve(), settings)
        print("fine", workspace)
    except SessionError as exc:
        print("refused", workspace, "|", exc.message)
"""


def test_bind_mount_aliases_are_seen_through(
    home: Path, tmp_path: Path, mount_namespace: list[str]
) -> None:
    """`mount --bind ~/.ssh /tmp/.../keys`: the second name shows the same folder."""
    alias, holder, etc = tmp_path / "keys", tmp_path / "holder", tmp_path / "etc-alias"
    for folder in (alias, holder / "inner", etc):
        folder.mkdir(parents=True)
    script = (
        f"mount --bind {home}/.ssh {alias} && mount --bind {home} {holder}/inner && "
        f'mount --bind /etc {etc} && exec {sys.executable} -c "$0" "$@"'
    )
    checked = [
        alias,
        holder,  # holds the home through the mount inside it
        holder / "inner/.config",
        etc / "cron.d",
        holder / "inner/src/project",  # a project seen through the alias stays fine
    ]
    proc = subprocess.run(
        [
            *mount_namespace,
            "sh",
            "-c",
            script,
            BIND_CHECK,
            str(tmp_path / "data"),
            *map(str, checked),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr
    said = {line.split(" ", 2)[1]: line for line in proc.stdout.splitlines()}
    assert said[str(alias)].startswith("refused") and f"{home}/.ssh is {DOT}" in said[str(alias)]
    assert said[str(holder)].startswith("refused") and "your home folder" in said[str(holder)]
    assert said[str(holder / "inner/.config")].startswith("refused")
    assert DOT in said[str(holder / "inner/.config")]
    assert "/etc/cron.d lies in /etc" in said[str(etc / "cron.d")]
    assert said[str(holder / "inner/src/project")].startswith("fine")


def test_the_administrators_home_is_refused_to_other_users(tmp_path: Path) -> None:
    """Run as `nobody`, whose home is no folder: /root is the administrator's."""
    setpriv = shutil.which("setpriv")
    if not ROOT or setpriv is None:
        pytest.skip("needs root to run a check as another user")
    data = Path(tempfile.mkdtemp(prefix="oc-nobody-"))
    data.chmod(0o777)
    try:
        proc = subprocess.run(
            [
                setpriv,
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                sys.executable,
                "-c",
                BIND_CHECK,
                str(data),
                "/root",
                "/root/project",
                str(data),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HOME": "/nonexistent"},
        )
    finally:
        shutil.rmtree(data)
    if proc.returncode != 0 and "Permission denied" in proc.stderr:
        pytest.skip("this checkout is not readable by nobody")
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout.splitlines()
    assert said[0] == (
        "refused /root | /root is the administrator's home folder: its settings and "
        "credentials live there"
    )
    assert said[1].startswith("refused /root/project | /root/project lies in /root")
    assert said[2].startswith("refused")  # the data folder itself
