"""Resource limits for one command: how many processes it may have, how much memory, how
large a file and how much CPU time, and which of them this machine can enforce.

Best first: a cgroup of the command's own, made under this process's own cgroup (v2 where
its controllers can be delegated to children, else the v1 `pids` and `memory` hierarchies).
The command joins it before it runs (see `CommandLimits.wrap`), so it cannot fork first. Its
counters tell the job supervisor when a limit was hit (a fork bomb stays at the limit forever
otherwise), and its member list finds every process to kill, even one that left the
command's session. Without a cgroup, rlimits stand in: RLIMIT_AS per process for memory,
and RLIMIT_NPROC inside the sandbox's user namespace, where it counts the sandbox's own
processes (kernel >= 5.14). Neither kills the command on a breach. RLIMIT_NPROC
never binds uid 0, and outside a user namespace it counts every process of the user, so a
server running as root, or in the fallback sandbox, has no process limit without a cgroup;
`describe()` says so. File size, CPU time and core dumps are rlimits everywhere (they are
per process anyway), set as hard limits so a command cannot raise them back.
"""

import asyncio
import contextlib
import errno
import functools
import logging
import os
import resource
import shlex
import signal
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opencomposer.config import SandboxSettings
from opencomposer.paths import find_program

log = logging.getLogger(__name__)

PREFIX = "opencomposer-"
"""Every cgroup made here is named `opencomposer-<pid>-<id>`, pid being its maker's."""

# On cgroup v2 this process moves into this leaf of its own cgroup: a cgroup holding no
# process itself may then give controllers to the commands' cgroups beside the leaf.
SERVER_LEAF = "opencomposer"
# Seconds to wait for a command's cgroup to empty after its processes were killed (measured:
# 1 to 15 ms after a bomb of 1,024 processes, on 2 loaded cores).
RELEASE_TIMEOUT = 2.0
_RELEASE_POLL = 0.01
_PRLIMIT = {
    resource.RLIMIT_FSIZE: "fsize",
    resource.RLIMIT_CPU: "cpu",
    resource.RLIMIT_CORE: "core",
    resource.RLIMIT_AS: "as",
}
_SELF_CGROUP = Path("/proc/self/cgroup")
_MOUNTINFO = Path("/proc/self/mountinfo")


@dataclass(frozen=True)
class Limit:
    """One limit as `doctor` and `bench security` show it."""

    name: str
    value: str
    setting: str
    """The setting that sets it, e.g. `tools.sandbox.max_processes`."""

    enforced_by: str | None
    """`cgroup v2`, `cgroup v1`, `rlimit` (with where it applies), `job supervisor`; None when
    this machine cannot enforce it."""

    detail: str
    """What reaching it does, or why it is not enforced."""


@dataclass(frozen=True)
class Cgroups:
    """Where this process makes each command's cgroup, per controller."""

    version: int | None = None
    """2 or 1; None when no controller is usable."""

    pids: Path | None = None
    memory: Path | None = None
    reason: str = ""
    """Why cgroups, or one controller, are not used."""

    @property
    def folders(self) -> list[Path]:
        """The parents to make children in: one on v2, one per controller on v1."""
        return list(dict.fromkeys(p for p in (self.pids, self.memory) if p is not None))


@dataclass(frozen=True)
class Breach:
    setting: str
    note: str
    """The line appended to the command's output."""


def _read(path: Path) -> str:
    return path.read_text().strip()


def _counter(path: Path, key: str) -> int:
    """A `key value` line of a cgroup events file; 0 when the file or key is absent."""
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:,} bytes"


def half_of_memory() -> int:
    """The default memory limit: half of this machine's memory."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2


@dataclass
class CommandLimits:
    """One command's limits: the cgroups it joins and the rlimits it gets, both before it
    runs. Empty, it limits nothing (the baseline `bench security` measures against)."""

    cgroups: list[Path] = field(default_factory=list)
    rlimits: list[tuple[int, int]] = field(default_factory=list)
    prlimit: Path | None = None
    max_processes: int = 0
    memory_bytes: int = 0

    def _file(self, name: str) -> Path | None:
        return next((f / name for f in self.cgroups if (f / name).exists()), None)

    @functools.cached_property
    def _counters(self) -> list[tuple[Path, str, Breach]]:
        """(events file, counter, breach) for each limit whose hit the cgroup counts."""
        counters = []
        if (events := self._file("pids.events")) is not None:
            counters.append(
                (
                    events,
                    "max",
                    Breach(
                        "tools.sandbox.max_processes",
                        f"[killed: reached the limit of {self.max_processes:,} processes "
                        "(tools.sandbox.max_processes)]",
                    ),
                )
            )
        if (oom := self._file("memory.events") or self._file("memory.oom_control")) is not None:
            counters.append(
                (
                    oom,
                    "oom_kill",
                    Breach(
                        "tools.sandbox.max_memory_bytes",
                        f"[killed: out of memory: the command's processes together reached "
                        f"{_size(self.memory_bytes)} (tools.sandbox.max_memory_bytes)]",
                    ),
                )
            )
        return counters

    def _values(self) -> list[tuple[int, int]]:
        """Each rlimit, never above the hard limit this process already has (a child may
        only lower it)."""
        values = []
        for which, value in self.rlimits:
            hard = resource.getrlimit(which)[1]
            values.append((which, value if hard == resource.RLIM_INFINITY else min(value, hard)))
        return values

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """`argv` under the limits, set by programs it execs through, all in the one process
        we start: a shell joins the cgroups (`0` is the writer itself), prlimit lowers the
        rlimits, soft and hard alike, then exec hands the process to `argv`. Nothing runs
        before it joins, so nothing escapes. Not set between fork and exec in Python: that
        costs subprocess its vfork, and forking the server copies its page tables (measured
        on 2 loaded cores, starting `true` from a process of 1.2 GB: 1.1 ms with vfork, 310 ms
        with a no-op preexec_fn, 3.4 ms through sh and prlimit)."""
        prefix: list[str] = []
        if self.cgroups:
            joins = " && ".join(
                f"echo 0 > {shlex.quote(str(f / 'cgroup.procs'))}" for f in self.cgroups
            )
            prefix += ["/bin/sh", "-c", f'{joins} && exec "$@"', "opencomposer-limits"]
        if self.rlimits and self.prlimit is not None:
            prefix += [
                str(self.prlimit),
                *(f"--{_PRLIMIT[which]}={v}:{v}" for which, v in self._values()),
                "--",
            ]
        return [*prefix, *argv]

    @property
    def preexec_fn(self) -> Callable[[], None] | None:
        """Only where prlimit is missing: the rlimits set in the child, at the cost of a
        fork of this process."""
        if not self.rlimits or self.prlimit is not None:
            return None

        values = self._values()

        def lower() -> None:
            for which, value in values:
                resource.setrlimit(which, (value, value))

        return lower

    def breach(self) -> Breach | None:
        """The limit the command has hit, read from its cgroup's counters."""
        return next(
            (breach for path, key, breach in self._counters if _counter(path, key) > 0), None
        )

    def members(self) -> list[int]:
        pids: set[int] = set()
        for folder in self.cgroups:
            with contextlib.suppress(FileNotFoundError):
                pids.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
        return sorted(pids)

    def stop(self) -> None:
        """SIGKILL every process in the command's cgroups, also those that left its process
        group (setsid, double fork). Forks are refused first (pids.max 0), so the sweep ends;
        v2's cgroup.kill does it atomically."""
        kill = self._file("cgroup.kill")
        if kill is not None:
            with contextlib.suppress(OSError):
                kill.write_text("1")
        pids_max = self._file("pids.max")
        if pids_max is not None:
            with contextlib.suppress(OSError):
                pids_max.write_text("0")
        for pid in self.members():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    async def release(self) -> None:
        """Kill what is left and remove the command's cgroups, waiting up to RELEASE_TIMEOUT
        for the dying to leave."""
        deadline = time.monotonic() + RELEASE_TIMEOUT
        while self.cgroups:
            self.stop()
            folder = self.cgroups[-1]
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    log.warning("could not remove the command's cgroup %s: %s", folder, exc)
                    return
                await asyncio.sleep(_RELEASE_POLL)
                continue
            self.cgroups.pop()


class ResourceLimits:
    """The limits every command of one sandbox runs under, and how this machine enforces
    each. `user_namespace`: the sandbox gives commands a user namespace of their own."""

    def __init__(
        self, settings: SandboxSettings, *, user_namespace: bool, cgroups: Cgroups | None = None
    ) -> None:
        self.settings = settings
        self.user_namespace = user_namespace
        self.cgroups = cgroups if cgroups is not None else find_cgroups()
        self.memory_bytes = settings.max_memory_bytes or half_of_memory()
        self.prlimit = find_program("prlimit")
        self._nproc = (
            user_namespace
            and os.geteuid() != 0
            and self.cgroups.pids is None
            and self.prlimit is not None
        )
        n = settings.max_processes
        self.wrapper = [str(self.prlimit), f"--nproc={n}:{n}", "--"] if self._nproc else []
        """Run inside the sandbox before the shell: sets RLIMIT_NPROC once the sandbox's user
        namespace exists (set before it, the limit would count every process of the user)."""

    def _rlimits(self, *, memory: bool) -> list[tuple[int, int]]:
        limits = [
            (resource.RLIMIT_FSIZE, self.settings.max_file_bytes),
            (resource.RLIMIT_CPU, self.settings.max_cpu_seconds),
            (resource.RLIMIT_CORE, 0),
        ]
        if memory:
            limits.append((resource.RLIMIT_AS, self.memory_bytes))
        return limits

    def per_process(self) -> CommandLimits:
        """The rlimits alone, memory as address space: for a short run nobody supervises."""
        return CommandLimits(
            rlimits=self._rlimits(memory=True), prlimit=self.prlimit, memory_bytes=self.memory_bytes
        )

    def open(self) -> CommandLimits:
        """Make the cgroups of one command, limits written, ready for the child to join;
        `release()` it once the command has ended. Raises OSError, leaving nothing behind."""
        n = self.settings.max_processes
        limits = CommandLimits(
            rlimits=self._rlimits(memory=self.cgroups.memory is None),
            prlimit=self.prlimit,
            max_processes=n,
            memory_bytes=self.memory_bytes,
        )
        name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        try:
            for parent in self.cgroups.folders:
                folder = parent / name
                folder.mkdir()
                limits.cgroups.append(folder)
                if parent == self.cgroups.pids:
                    (folder / "pids.max").write_text(str(n))
                if parent == self.cgroups.memory:
                    _limit_memory(folder, self.memory_bytes)
        except OSError:
            for folder in limits.cgroups:
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        return limits

    def describe(self) -> list[Limit]:
        """Every limit, its value, and how it is enforced here (or why it is not)."""
        s = self.settings
        per_process = "rlimit, per process"
        return [
            self._processes(),
            self._memory(),
            Limit(
                "file size",
                _size(s.max_file_bytes),
                "tools.sandbox.max_file_bytes",
                per_process,
                "a larger write fails (EFBIG, or SIGXFSZ for programs that do not handle it)",
            ),
            Limit(
                "CPU time",
                f"{s.max_cpu_seconds:,} s",
                "tools.sandbox.max_cpu_seconds",
                per_process,
                "the process is killed",
            ),
            Limit("core dumps", "none", "", per_process, "a crash writes no core file"),
            Limit(
                "lifetime",
                f"{s.max_lifetime:g} s",
                "tools.sandbox.max_lifetime",
                "job supervisor",
                "the command's whole process tree is killed",
            ),
        ]

    def _processes(self) -> Limit:
        value = f"{self.settings.max_processes:,}"
        setting = "tools.sandbox.max_processes"
        if self.cgroups.pids is not None:
            return Limit(
                "processes",
                value,
                setting,
                f"cgroup v{self.cgroups.version}",
                "threads count too; reaching it kills the command",
            )
        if self._nproc:
            return Limit(
                "processes",
                value,
                setting,
                "rlimit in the sandbox's user namespace",
                "threads count too; forks beyond it fail, the command is not killed",
            )
        if not self.user_namespace:
            why = (
                "the fallback sandbox has no user namespace, and RLIMIT_NPROC outside one "
                "counts every process of this user"
            )
        elif os.geteuid() == 0:
            why = "running as root, and RLIMIT_NPROC never applies to uid 0"
        else:
            why = "prlimit (util-linux) not found to set RLIMIT_NPROC in the sandbox"
        return Limit(
            "processes",
            value,
            setting,
            None,
            f"NOT enforced: no cgroup ({self.cgroups.reason}); {why}",
        )

    def _memory(self) -> Limit:
        value = _size(self.memory_bytes)
        setting = "tools.sandbox.max_memory_bytes"
        if self.cgroups.memory is not None:
            return Limit(
                "memory",
                value,
                setting,
                f"cgroup v{self.cgroups.version}",
                "all the command's processes together, swap included; reaching it "
                "kills the command",
            )
        return Limit(
            "memory",
            value,
            setting,
            "rlimit, per process (address space)",
            f"an allocation beyond it fails; not the processes together (no cgroup: "
            f"{self.cgroups.reason})",
        )

    def summary(self) -> str:
        """One line: the limits grouped by how they are enforced."""
        groups: dict[str, list[str]] = {}
        for lim in self.describe():
            groups.setdefault(lim.enforced_by or "NOT enforced", []).append(
                f"{lim.name} {lim.value}"
            )
        return "; ".join(f"{how}: {', '.join(values)}" for how, values in groups.items())

    def problems(self) -> list[str]:
        """What a fork bomb or a memory hog could still do here."""
        weak = [lim for lim in self.describe() if lim.name in ("processes", "memory")]
        return [
            f"{lim.name}: {lim.detail}"
            for lim in weak
            if lim.enforced_by is None or lim.enforced_by.startswith("rlimit")
        ]


def _limit_memory(folder: Path, nbytes: int) -> None:
    """The memory limit with swap kept out of it, where the controller allows."""
    if (folder / "memory.max").exists():  # v2
        (folder / "memory.max").write_text(str(nbytes))
        for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
            if (folder / name).exists():
                (folder / name).write_text(value)
        return
    (folder / "memory.limit_in_bytes").write_text(str(nbytes))
    # memory + swap may not be below memory alone; equal, it leaves no room for swap.
    if (folder / "memory.memsw.limit_in_bytes").exists():
        (folder / "memory.memsw.limit_in_bytes").write_text(str(nbytes))


# ---------------------------------------------------------------------------- discovery


def _own_cgroups() -> dict[str, str]:
    """Controller name (`""` for the v2 hierarchy) -> this process's cgroup path."""
    paths: dict[str, str] = {}
    for line in _SELF_CGROUP.read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    return paths


def _mount_folder(controller: str, path: str) -> Path | None:
    """The folder of cgroup `path` where its hierarchy is mounted (v2 for controller `""`)."""
    for line in _MOUNTINFO.read_text().splitlines():
        fields, _, rest = line.partition(" - ")
        parts, tail = fields.split(), rest.split()
        fstype, options = tail[0], tail[-1].split(",")
        if fstype != ("cgroup2" if controller == "" else "cgroup"):
            continue
        if controller and controller not in options:
            continue
        root, mountpoint = parts[3], parts[4]
        if os.path.commonpath([root, path]) != root:
            continue
        return Path(mountpoint) / os.path.relpath(path, root)
    return None


def _sweep(parent: Path) -> None:
    """Remove empty cgroups left by a process that died before releasing them."""
    for folder in parent.glob(f"{PREFIX}*-*"):
        pid = folder.name[len(PREFIX) :].split("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                folder.rmdir()
        except PermissionError:
            continue


def _v1_folder(controller: str, path: str | None) -> tuple[Path | None, str]:
    if path is None:
        return None, f"no v1 {controller} hierarchy"
    folder = _mount_folder(controller, path)
    if folder is None or not folder.is_dir():
        return None, f"the v1 {controller} hierarchy is not mounted here"
    probe = folder / f"{PREFIX}{os.getpid()}-probe"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        return None, f"cannot make a v1 {controller} cgroup in {folder}: {exc.strerror}"
    return folder, ""


def _v2_folder(path: str | None) -> tuple[Path | None, str]:
    """This process's v2 cgroup, readied to hold commands' cgroups: it must offer `pids` and
    `memory`. Where they are not yet enabled for children, we enable them only in a cgroup
    holding this process alone and delegated to it (writable by us; marked by systemd when
    systemd made it), moving the process into a leaf first: a cgroup with processes of its
    own cannot give controllers to children (the no-internal-processes rule)."""
    folder = _mount_folder("", path) if path is not None else None
    if folder is None or not (folder / "cgroup.controllers").exists():
        return None, "no cgroup v2 hierarchy"
    wanted = {"pids", "memory"}
    missing = wanted - set(_read(folder / "cgroup.controllers").split())
    if missing:
        return None, f"cgroup v2 offers no {' or '.join(sorted(missing))} controller to {path}"
    if wanted <= set(_read(folder / "cgroup.subtree_control").split()):
        return folder, ""
    others = [p for p in _read(folder / "cgroup.procs").split() if int(p) != os.getpid()]
    if others:
        return None, (
            f"cgroup v2 {path} holds {len(others)} other processes, so it cannot "
            "give controllers to commands; start the server in a cgroup of its own, "
            "e.g. `systemd-run --user --scope -p Delegate=yes opencomposer serve`"
        )
    if not _delegated(folder):
        return None, f"cgroup v2 {path} is not delegated to this process"
    leaf = folder / SERVER_LEAF
    try:
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
        (folder / "cgroup.subtree_control").write_text("+pids +memory")
    except OSError as exc:
        with contextlib.suppress(OSError):
            (folder / "cgroup.procs").write_text(str(os.getpid()))
            leaf.rmdir()
        return None, f"cannot enable pids and memory for children of {path}: {exc.strerror}"
    return folder, ""


def _delegated(folder: Path) -> bool:
    if not all(
        os.access(folder / name, os.W_OK) for name in ("cgroup.procs", "cgroup.subtree_control")
    ):
        return False
    if not folder.name.endswith((".service", ".scope", ".slice")):
        return True  # not a systemd unit: ours to manage once writable
    for name in ("trusted.delegate", "user.delegate"):
        with contextlib.suppress(OSError):
            if os.getxattr(folder, name) == b"1":
                return True
    return False


@functools.cache
def find_cgroups() -> Cgroups:
    """Where this process can make commands' cgroups, found (and on v2 readied) once per
    process: v2 when usable, else the v1 hierarchies, each controller on its own."""
    try:
        own = _own_cgroups()
    except OSError as exc:
        return Cgroups(reason=f"cannot read {_SELF_CGROUP}: {exc.strerror}")
    v2, v2_reason = _v2_folder(own.get(""))
    if v2 is not None:
        _sweep(v2)
        return Cgroups(2, v2, v2)
    pids, pids_reason = _v1_folder("pids", own.get("pids"))
    memory, memory_reason = _v1_folder("memory", own.get("memory"))
    for folder in (pids, memory):
        if folder is not None:
            _sweep(folder)
    reason = "; ".join(r for r in (v2_reason, pids_reason, memory_reason) if r)
    if pids is None and memory is None:
        return Cgroups(reason=reason)
    return Cgroups(1, pids, memory, reason)
