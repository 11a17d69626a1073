"""Class 1: the distributed engine is closed to the network. `bench run --ray local` starts a
real Ray cluster: every process of it listens on loopback alone, a client without the run's
token is refused, the token is nowhere on disk or in a command line, the workers' arguments
carry no secret, and a sandboxed command allowed the network reaches none of its ports."""

import asyncio
import importlib.util
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from opencomposer.agent.tools.sandbox import Mount
from opencomposer.training.eval.sandboxed import run_script

if importlib.util.find_spec("ray") is None:
    pytest.skip("Ray is not installed (pip install 'opencomposer[train]')", allow_module_level=True)

API_KEY = "sk-proj-rayclustertest0123456789abcdef"


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, pending = set(), [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.add(child)
            pending.append(child)
    return found


def _listening(pids: set[int]) -> list[tuple[int, str, int]]:
    """(pid, address, port) of every TCP socket in LISTEN state the processes hold."""
    inodes: dict[str, int] = {}
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:
            continue
    found = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:
                continue
            address, port = local.split(":")
            raw = bytes.fromhex(address)
            if family == socket.AF_INET:
                raw = raw[::-1]
            else:  # four little-endian words
                raw = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
            found.append((inodes[inode], socket.inet_ntop(family, raw), int(port, 16)))
    return found


def _loopback(address: str) -> bool:
    return address.startswith("127.") or address in ("::1", "::ffff:127.0.0.1")


# The driver: the bench's own cluster code in a process of its own (importing Ray changes the
# logging of the process that does, so not this test worker), reporting what the tests look
# at as one JSON line, then keeping the cluster up until its stdin closes.
DRIVER = f"""
import json, os, sys
from pathlib import Path
from opencomposer.config import Settings
from opencomposer.training.eval.ray_cluster import connected
from opencomposer.training.eval.ray_trials import public_settings, with_node_secrets

settings = Settings(engine={{"api_key": {API_KEY!r}}})
with connected("local", 1, {{"OPENCOMPOSER_ENGINE__API_KEY": {API_KEY!r}}}) as ray:

    @ray.remote
    def worker_view(settings_json):
        key = with_node_secrets(Settings.model_validate_json(settings_json)).engine.api_key
        return {{
            "key": key.get_secret_value() if key else None,
            "token_file": (Path.home() / ".ray" / "auth_token").exists(),
        }}

    report = {{
        "worker": ray.get(worker_view.remote(public_settings(settings))),
        "gcs": ray.get_runtime_context().gcs_address,
        "token": os.environ["RAY_AUTH_TOKEN"],
        "settings_json": public_settings(settings),
    }}
    print(json.dumps(report), flush=True)
    sys.stdin.read()
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict]:
    """One local cluster for the module (Ray takes seconds to start), with the engine's key
    in the driver's settings only."""
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert driver.stdout is not None and driver.stdin is not None
    try:
        line = driver.stdout.readline()
        assert line, "the driver ended before the cluster was up"
        report = json.loads(line)
        yield {**report, "pids": _descendants(driver.pid) | {driver.pid}}
    finally:
        driver.stdin.close()
        driver.wait(timeout=120)


def test_every_ray_process_listens_on_loopback_only(cluster: dict):
    listening = _listening(cluster["pids"])
    assert len({pid for pid, _, _ in listening}) >= 3  # the GCS, the raylet, a worker at least
    assert [entry for entry in listening if not _loopback(entry[1])] == []


def test_a_client_without_the_runs_token_is_refused(cluster: dict):
    """Ray's token authentication: no token, and a wrong one, cannot start a job; the run's
    own token can (so the probe reaches the cluster)."""
    probe = (
        "import ray\n"
        f"ray.init(address={cluster['gcs']!r}, log_to_driver=False)\n"
        "print('JOINED', ray.get(ray.remote(lambda: 1).remote()))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env |= {
        # The client looks for the cluster on loopback, as the driver does; Ray would turn
        # 127.0.0.1 into this machine's network address otherwise.
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        # Ray retries a refused connection for a minute by default.
        "RAY_gcs_rpc_server_connect_timeout_s": "5",
        "RAY_gcs_rpc_server_reconnect_timeout_s": "5",
        "HOME": "/nonexistent",
    }
    tries = {
        "none": {},
        "wrong": {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64},
        "the run's": {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": cluster["token"]},
    }
    for name, extra in tries.items():
        done = subprocess.run(
            [sys.executable, "-c", probe],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=100,
        )
        if name == "the run's":
            assert "JOINED 1" in done.stdout, done.stderr[-2000:]
        else:
            assert done.returncode != 0 and "JOINED" not in done.stdout
            assert "InvalidAuthToken" in done.stderr, done.stderr[-2000:]


def test_the_token_is_in_no_file_and_no_command_line(cluster: dict):
    token = cluster["token"]
    assert not cluster["worker"]["token_file"]
    for pid in cluster["pids"]:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        assert token.encode() not in cmdline


def test_worker_arguments_carry_no_secret(cluster: dict):
    """The settings a worker receives hold no key, not even pydantic's mask; it takes the
    key from its own node (here, the environment the local cluster inherited)."""
    assert API_KEY not in cluster["settings_json"] and "*****" not in cluster["settings_json"]
    assert '"api_key":null' in cluster["settings_json"]
    assert cluster["worker"]["key"] == API_KEY


def test_a_sandbox_with_the_network_reaches_no_ray_port(cluster: dict, bwrap: Path, tmp_path):
    """A task's script allowed the network (what the verifier runs the agent's code in)
    tries every Ray port on loopback, through the NAT's gateway and at this machine's own
    addresses: all refused. The same probe from the host connects, so the probe can fail."""
    ports = sorted({port for _, _, port in _listening(cluster["pids"])})
    addresses = {"127.0.0.1", "10.0.2.2"}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        try:
            udp.connect(("192.0.2.1", 9))  # no packet is sent: picks the outgoing address
            addresses.add(udp.getsockname()[0])
        except OSError:
            pass
    probe = (
        f"import socket\nfor a in {sorted(addresses)!r}:\n    for p in {ports!r}:\n"
        "        s = socket.socket()\n        s.settimeout(2)\n"
        "        print(a, p, s.connect_ex((a, p)) == 0)\n"
    )
    script = tmp_path / "probe.py"
    script.write_text(probe)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    run = asyncio.run(
        run_script(
            f"python3 /probe/{script.name}",
            workspace=workspace,
            mounts=[Mount(tmp_path, Path("/probe"))],
            data_dir=tmp_path / "data",
            hidden=[],
            timeout=120,
            network=True,
        )
    )
    assert run.exit_code == 0, run.output
    assert " True" not in run.output and run.output.count(" False") == len(addresses) * len(ports)
    host = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert "127.0.0.1" in host.stdout and " True" in host.stdout
