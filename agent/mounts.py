"""Where a folder is visible besides its own name: the mount table.

Resolving symlinks gives a folder one name, but a bind mount shows the same folder under a
second one (`mount --bind ~/.ssh /mnt/keys`), and no path comparison sees through that. The
kernel's table of this process's mounts (`/proc/self/mountinfo`) says, for each mount, which
file system it shows and from which folder of it (`root`); a mount showing a folder below
the root of a file system that is also mounted whole is an alias of a folder there.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from opencomposer.paths import within

_MOUNTINFO = Path("/proc/self/mountinfo")
# mountinfo writes space, tab, newline and backslash in paths as octal escapes (`\040`).
_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    device: str
    """`major:minor` of the file system shown."""

    root: Path
    """The folder of that file system shown at `point`."""

    point: Path
    """Where it is shown."""


def read_mounts() -> list[Mount]:
    """This process's mounts in the order they were made (a later one over the same point
    hides the earlier); none where there is no /proc."""
    try:
        lines = _MOUNTINFO.read_text(errors="surrogateescape").splitlines()
    except OSError:
        return []
    mounts = []
    for line in lines:
        fields = line.partition(" - ")[0].split()
        if len(fields) >= 5:
            mounts.append(Mount(fields[2], Path(_unescape(fields[3])), Path(_unescape(fields[4]))))
    return mounts


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), text)


def source(path: Path, mounts: list[Mount]) -> Path:
    """The name `path` (absolute, resolved) has where its file system is mounted from its
    root: itself unless it is reached through a mount of a folder that is also visible
    elsewhere."""
    holding = [m for m in mounts if within(path, m.point)]
    if not holding:
        return path
    deepest = max(len(m.point.parts) for m in holding)
    mount = [m for m in holding if len(m.point.parts) == deepest][-1]
    whole = [m for m in mounts if m.device == mount.device and within(mount.root, m.root)]
    primary = min(whole, key=lambda m: len(m.root.parts))
    if primary is mount:
        return path
    return primary.point / mount.root.relative_to(primary.root) / path.relative_to(mount.point)


def mounted_below(folder: Path, mounts: list[Mount]) -> list[tuple[Path, Path]]:
    """(where, what) for each mount strictly inside `folder`: what else it shows."""
    return [
        (m.point, source(m.point, mounts))
        for m in mounts
        if m.point != folder and within(m.point, folder)
    ]
