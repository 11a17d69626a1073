"""The Ray cluster bench trials run on: one started here, closed to the network, or one the
user names.

Ray has no authentication unless asked for, and a Ray port is a shell for whoever reaches it
(CVE-2023-48022, "ShadowRay"): it runs any code sent to it as the user who started it. So a
cluster started here (`local`) is closed twice over:
- every Ray process listens on loopback only. `ray.init(_node_ip_address="127.0.0.1")` is not
  enough: Ray turns a loopback node address into the machine's network address, and its gRPC
  servers (GCS, raylet, workers) then listen on every interface (checked with `ss` on Ray
  2.60). The node address stays loopback only when Ray is told it is not forming a
  multi-machine cluster (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`, the switch Ray keeps for
  laptops); then the GCS, raylets, workers, the runtime-env agent and the autoscaler's metrics
  all listen on 127.0.0.1;
- Ray's own token authentication is on, with a token made for this run alone. It reaches the
  processes Ray starts through their environment (never a file in the home folder, never an
  argument, which every local user can read in /proc), and the sandboxes never get it: their
  environment is an allow-list.

A cluster address given by the user (`auto`, `HOST:PORT`, `ray://...`) is that cluster's
business: it must sit on a network only trusted machines reach, with Ray's token
authentication on (`RAY_AUTH_MODE=token` and the token on every node, Ray's own setup), which
Ray uses here when the environment asks for it. Nothing secret travels to the workers either
way: see `ray_trials.public_settings`.
"""

import contextlib
import ipaddress
import os
import secrets
from collections.abc import Iterator, Mapping
from typing import Any

from opencomposer.training.errors import TrainingError

LOCAL = "local"

INSTALL = "bench run --ray needs Ray: pip install 'opencomposer[train]'"

# How Ray is told, before it is imported, to keep a cluster on this machine: the node address
# stays loopback (Ray reads the switch when `ray._private.ray_constants` is imported), token
# authentication is on. RAY_AUTH_TOKEN is added per run.
_LOCAL_ENVIRONMENT = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token"}


def local_environment() -> dict[str, str]:
    """What a local cluster's processes are started with: loopback only, and a fresh token."""
    return {**_LOCAL_ENVIRONMENT, "RAY_AUTH_TOKEN": secrets.token_hex(32)}


@contextlib.contextmanager
def connected(address: str, workers: int, node_environment: Mapping[str, str]) -> Iterator[Any]:
    """Ray, initialised for the run: a local cluster of `workers` CPUs started here when
    `address` is "local", else the named cluster joined. `node_environment` is what the
    processes Ray starts here inherit besides ours (for a local cluster, `local_environment()`
    and anything the workers need from this process). The environment and Ray are as they
    were once the block ends."""
    local = address == LOCAL
    environment = {**(local_environment() if local else {}), **node_environment}
    with _environment(environment), _imported_ray(local) as ray:
        if ray.is_initialized():
            raise TrainingError("Ray is already initialised in this process; run the bench alone")
        try:
            if local:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
            raise TrainingError(f"cannot reach the Ray cluster at {address}: {exc}") from None
        try:
            if local:
                _require_loopback(ray)
            yield ray
        finally:
            ray.shutdown()


@contextlib.contextmanager
def _imported_ray(local: bool) -> Iterator[Any]:
    """Ray, reading the environment as it is now. Ray reads its switches when it is first
    imported; a process that imported it before (a test session) is told again, and put back
    as it was afterwards."""
    try:
        import ray
        from ray._private import ray_constants
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]
    except ImportError as exc:
        raise TrainingError(f"{INSTALL} ({exc})") from None

    cluster = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = cluster and not local
    Config.initialize("")  # the authentication mode
    AuthenticationTokenLoader.instance().reset_cache()
    try:
        yield ray
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = cluster


def _require_loopback(ray: Any) -> None:
    """Refuse to run on a cluster whose address is not loopback: its ports would be open to
    the network (a Ray that ignores the switch above)."""
    host = ray.get_runtime_context().gcs_address.rpartition(":")[0].strip("[]")
    if not ipaddress.ip_address(host).is_loopback:
        raise TrainingError(
            f"the local Ray cluster listens on {host}, not loopback; refusing to run trials on "
            "a cluster the network can reach"
        )


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
