"""Class 3: the sandbox shows no more of the host than a command needs. Services' unix
sockets (under /run, wherever the system keeps them), the kernel's keyrings, environment
variables that only look like the locale, and what the system keeps private are out of reach
by rule; the system view shows an allow-list of the host; an isolated network reaches the
internet, not this machine's loopback.

Real commands in real bubblewrap. Planting system files and sockets needs root (CI runs as
root); those tests skip with the reason elsewhere.
"""

import asyncio
import contextlib
import ctypes
import os
import platform
import secrets
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.sandbox_fixtures import sandbox_over

from opencomposer.agent.tools.sandbox import BubblewrapSandbox
from opencomposer.agent.tools.terminal import seccomp
from opencomposer.agent.tools.terminal.environment import scrub_environment
from opencomposer.agent.tools.terminal.view import PRIVATE_ENTRIES

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="planting system files needs root")


def run(
    sandbox: BubblewrapSandbox, command: str, *, network: bool = False, env: dict | None = None
) -> tuple[int, str, str]:
    async def go() -> tuple[int, str, str]:
        base, _ = scrub_environment(env if env is not None else os.environ)
        process = await sandbox.spawn(
            command, cwd=sandbox.workspace_root, env=base, network=network, stdin=False
        )
        async with asyncio.timeout(60):
            out, err = await process.communicate()
        return process.returncode or 0, out.decode(), err.decode()

    return asyncio.run(go())


@pytest.fixture
def workspace(outside: Path) -> Path:
    folder = outside / "ws"
    folder.mkdir()
    return folder


@pytest.fixture
def planted() -> Iterator[list[Path]]:
    """System paths a test creates; removed afterwards."""
    made: list[Path] = []
    yield made
    for path in reversed(made):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def answer_forever(server: socket.socket, greeting: bytes) -> None:
    """Greet every connection to `server` and close it, until the server is closed."""

    def answer() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = server.accept()
                connection.sendall(greeting)
                connection.close()

    threading.Thread(target=answer, daemon=True).start()


def serve_unix(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    answer_forever(server, b"root shell> ")
    return server


CONNECT = (
    "import socket, sys\n"
    "for path in sys.argv[1:]:\n"
    "    s = socket.socket(socket.AF_UNIX)\n"
    "    try:\n"
    "        s.connect(path); print(path, 'OPEN', s.recv(64))\n"
    "    except OSError as e:\n"
    "        print(path, 'closed', e.errno)\n"
)


@root_only
def test_service_sockets_are_out_of_reach(
    bwrap: Path, workspace: Path, outside: Path, planted: list[Path]
):
    """A daemon's socket under /run, deeper in it, reached through /var/run, or kept in the
    system's state or configuration folders: none connects from the sandbox; each does from
    the host (the probe can tell)."""
    tag = secrets.token_hex(4)
    folders = [
        Path(f"/run/octest-{tag}"),
        Path(f"/var/lib/octest-{tag}"),
        Path(f"/etc/octest-{tag}"),
    ]
    for folder in folders:
        folder.mkdir(mode=0o755)
        planted.append(folder)
    (folders[0] / "deep").mkdir()
    sockets = [
        Path(f"/run/octest-{tag}.sock"),
        folders[0] / "deep" / "daemon.sock",
        folders[1] / "state.sock",
        folders[2] / "admin.sock",
    ]
    planted += sockets
    servers = [serve_unix(path) for path in sockets]
    paths = [*map(str, sockets), f"/var/run/octest-{tag}.sock"]
    try:
        host = subprocess.run(
            [sys.executable, "-c", CONNECT, *paths], capture_output=True, text=True
        ).stdout
        assert host.count("OPEN") == 5, host
        sandbox = sandbox_over(bwrap, workspace, outside / "data")
        code, out, err = run(sandbox, f"python3 -c {shlex.quote(CONNECT)} " + " ".join(paths))
        assert code == 0, err
        assert "OPEN" not in out and out.count("closed") == 5, out
    finally:
        for server in servers:
            server.close()


# The keyring calls, by machine: (add_key, request_key, keyctl).
KEYRING_NUMBERS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}


@pytest.mark.skipif(platform.machine() not in KEYRING_NUMBERS, reason="syscall numbers unknown")
def test_the_session_keyring_is_closed(bwrap: Path, workspace: Path, outside: Path):
    """The server's session keyring holds a key; the sandbox can neither read it, list its
    keyrings, nor add a key (EPERM); the same probe on the host reads it."""
    add_key, request_key, keyctl = KEYRING_NUMBERS[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    # This process (the server) joins a keyring of its own and keeps a secret in it.
    assert libc.syscall(keyctl, 1, b"opencomposer-test") > 0  # KEYCTL_JOIN_SESSION_KEYRING
    key = libc.syscall(add_key, b"user", b"octest", b"hunter2-keyring", 15, -3)
    assert key > 0
    probe = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long\n"
        f"k = libc.syscall({request_key}, b'user', b'octest', None, 0)\n"
        "buf = ctypes.create_string_buffer(64)\n"
        f"n = libc.syscall({keyctl}, 11, k, buf, 64) if k > 0 else -1\n"  # KEYCTL_READ
        "print('read', buf.value if n > 0 else None, ctypes.get_errno())\n"
        f"print('session', libc.syscall({keyctl}, 0, -3, 0), ctypes.get_errno())\n"
        f"print('add', libc.syscall({add_key}, b'user', b'x', b'y', 1, -3), ctypes.get_errno())\n"
    )
    host = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout
    assert "hunter2-keyring" in host
    sandbox = sandbox_over(bwrap, workspace, outside / "data")
    code, out, err = run(sandbox, f"python3 -c {shlex.quote(probe)}")
    assert code == 0, err
    assert out == "read None 1\nsession -1 1\nadd -1 1\n"


def _run_bpf(program: bytes, arch: int, number: int) -> int:
    """A classic BPF interpreter for the instructions the filter uses."""
    data = struct.pack("=iI", number, arch)
    ops = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, accumulator = 0, 0
    while True:
        code, true, false, k = ops[pc]
        if code == 0x20:  # ld [k]
            accumulator = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code == 0x15:  # jeq #k
            pc += 1 + (true if accumulator == k else false)
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")


@pytest.mark.parametrize(
    ("machine", "arches"),
    [
        ("x86_64", {0xC000003E: (248, 249, 250), 0x40000003: (286, 287, 288)}),
        ("aarch64", {0xC00000B7: (217, 218, 219), 0x40000028: (309, 310, 311)}),
        ("riscv64", {0xC00000F3: (217, 218, 219)}),
        ("ppc64le", {0xC0000015: (269, 270, 271)}),
        ("s390x", {0x80000016: (278, 279, 280)}),
    ],
)
def test_the_filter_refuses_exactly_the_keyring_calls(machine: str, arches: dict):
    """Every architecture a process on the machine may call with: the three keyring calls
    are refused with EPERM (x32's numbers too), every neighbouring call is allowed, and so is
    an architecture the machine does not run."""
    program = seccomp.keyring_filter(machine)
    assert program is not None
    denied, allowed = 0x00050001, 0x7FFF0000
    for arch, numbers in arches.items():
        for number in numbers:
            assert _run_bpf(program, arch, number) == denied
            if arch == 0xC000003E:
                assert _run_bpf(program, arch, number | 0x40000000) == denied
        for number in {0, 1, 59, 60, min(numbers) - 1, max(numbers) + 1, 435}:
            assert _run_bpf(program, arch, number) == allowed
    assert _run_bpf(program, 0x12345678, numbers[0]) == allowed
    assert seccomp.keyring_filter("mips") is None


def test_the_environment_passes_by_exact_name(bwrap: Path, workspace: Path, outside: Path):
    """The locale passes by its variables' names; a name that only starts like one does not,
    and its value is masked if it looks secret."""
    server = {
        "PATH": os.environ["PATH"],
        "LC_ALL": "C.UTF-8",
        "LC_TIME": "C",
        "LC_API_TOKEN": "tok-" + secrets.token_hex(12),
        "LC_X": "not-a-locale",
        "LCOVERAGE_SECRET": secrets.token_hex(16),
        "LC_": "empty-category",
    }
    env, masked = scrub_environment(server)
    assert {k for k in env if k.startswith("LC")} == {"LC_ALL", "LC_TIME"}
    assert server["LC_API_TOKEN"] in masked and server["LCOVERAGE_SECRET"] in masked
    sandbox = sandbox_over(bwrap, workspace, outside / "data")
    code, out, _ = run(sandbox, "env | grep '^LC' | sort", env=server)
    assert (code, out) == (0, "LC_ALL=C.UTF-8\nLC_TIME=C\n")


@root_only
def test_what_the_system_keeps_private_is_masked_by_rule(
    bwrap: Path, workspace: Path, outside: Path, planted: list[Path]
):
    """Files and folders a package adds tomorrow, named nothing known: private ones (no read
    permission for others) read as empty or vanish, wherever they are in the system's
    configuration and state; public ones stay readable; the shared temporary folder is the
    users'."""
    tag = secrets.token_hex(4)
    public = Path(f"/etc/octest-{tag}.conf")
    private_file = Path(f"/etc/octest-{tag}.key")
    private_folder = Path(f"/etc/octest-{tag}.d")
    state = Path(f"/var/lib/octest-{tag}")
    planted += [public, private_file, private_folder, state]
    public.write_text("public setting\n")
    private_file.write_text("PRIVATE KEY\n")
    private_file.chmod(0o600)
    private_folder.mkdir(mode=0o700)
    (private_folder / "token").write_text("hidden token\n")
    state.mkdir(mode=0o755)
    (state / "db.conf").write_text("password=hunter2\n")
    (state / "db.conf").chmod(0o640)
    (state / "readme").write_text("public state\n")
    sandbox = sandbox_over(bwrap, workspace, outside / "data")
    _, out, _ = run(
        sandbox,
        f"cat {public} {private_file} {state}/db.conf {state}/readme; "
        f"ls -A {private_folder}; cat {private_folder}/token; echo end",
    )
    assert out == "public setting\npublic state\nend\n", out
    assert private_file in PRIVATE_ENTRIES.find() and state / "db.conf" in PRIVATE_ENTRIES.find()


def test_the_system_view_is_an_allow_list(bwrap: Path, workspace: Path, outside: Path):
    """Only the installed system, the toolchains and the workspace: the folder holding the
    workspace shows nothing else, nor do /srv, /opt, /var or /mnt; Python and git still work."""
    (outside / "answers.txt").write_text("42\n")
    (workspace / "main.py").write_text("print('ran')\n")
    sandbox = sandbox_over(bwrap, workspace, outside / "data", view="system")
    code, out, err = run(
        sandbox,
        f"ls -A {outside}; cat {outside}/answers.txt; ls -A /var; ls /srv /opt /mnt /media; "
        "python3 main.py && git --version >/dev/null && echo tools",
    )
    assert code == 0, err
    assert out.splitlines()[0] == "ws" and "42" not in out
    assert "tmp" in out.splitlines()[1] and "lib" not in out.splitlines()[1]
    assert out.endswith("ran\ntools\n")
    assert "No such file or directory" in err


@pytest.fixture
def loopback_service() -> Iterator[int]:
    """A TCP service on this machine's loopback (a database, a dev server, Ray's ports)."""
    server = socket.create_server(("127.0.0.1", 0))
    answer_forever(server, b"hello")
    yield server.getsockname()[1]
    server.close()


def test_an_isolated_network_does_not_reach_loopback_services(
    bwrap: Path, workspace: Path, outside: Path, loopback_service: int
):
    """Isolated: the namespace has an interface of its own, and neither 127.0.0.1 nor the
    NAT's gateway to the host's loopback (10.0.2.2) reaches the service. The host's network
    (the probe's control) does."""
    if shutil.which("slirp4netns") is None:
        pytest.skip("slirp4netns is not installed")
    probe = (
        "import socket\n"
        "for host in ('127.0.0.1', '10.0.2.2'):\n"
        "    s = socket.socket(); s.settimeout(3)\n"
        f"    print(host, s.connect_ex((host, {loopback_service})) == 0)\n"
    )
    isolated = sandbox_over(bwrap, workspace, outside / "data", network="isolated")
    code, out, err = run(isolated, f"python3 -c {shlex.quote(probe)}; ip -o -4 addr", network=True)
    assert code == 0 or "ip" in err
    assert out.startswith("127.0.0.1 False\n10.0.2.2 False\n"), out
    assert "10.0.2.100" in out or "ip: not found" in err or "command not found" in err
    shared = sandbox_over(bwrap, workspace, outside / "data", network="host")
    code, out, _ = run(shared, f"python3 -c {shlex.quote(probe)}", network=True)
    assert out.startswith("127.0.0.1 True\n")


def test_an_isolated_network_reaches_the_internet(bwrap: Path, workspace: Path, outside: Path):
    """Through the NAT, what the host reaches (here, the package index) is reached."""
    if shutil.which("slirp4netns") is None:
        pytest.skip("slirp4netns is not installed")
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        pytest.skip("this machine reaches no internet host")
    probe = "import socket; socket.create_connection(('pypi.org', 443), timeout=10).close()"
    isolated = sandbox_over(bwrap, workspace, outside / "data", network="isolated")
    code, out, err = run(isolated, f"python3 -c {shlex.quote(probe)} && echo reached", network=True)
    assert (code, out) == (0, "reached\n"), err
