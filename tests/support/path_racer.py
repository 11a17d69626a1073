"""A process that keeps swapping a workspace path for a symlink to somewhere else, as a hostile
command in the sandbox would, to race the file tools' path checks.

    python path_racer.py MODE PATH TARGET SECONDS

Modes:
- `exchange`: PATH and a symlink to TARGET beside it (PATH.swap, made here) trade places
  atomically with renameat2(RENAME_EXCHANGE), so PATH is, turn by turn, the real entry and
  the symlink. Should a tool's write replace the symlink by a file, it is made again.
- `replace`: PATH is renamed away, a symlink to TARGET made in its place, then removed and
  PATH put back (no atomic exchange: what a loop of plain `mv` and `ln -s` does). A folder a
  tool made meanwhile at PATH is moved aside so the loop goes on.

It touches nothing but PATH and the names beside it; it stops after SECONDS or on SIGTERM and
prints how many swaps it made.
"""

import ctypes
import os
import platform
import signal
import sys
import time

AT_FDCWD = -100
RENAME_EXCHANGE = 2
_SYS_RENAMEAT2 = {"x86_64": 316, "aarch64": 276}

_libc = ctypes.CDLL(None, use_errno=True)


def renameat2_exchange(a: str, b: str) -> None:
    """renameat2(RENAME_EXCHANGE) through libc, or the raw system call where glibc is older
    than 2.28."""
    args = (AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)
    if hasattr(_libc, "renameat2"):
        result = _libc.renameat2(*args)
    else:
        result = _libc.syscall(_SYS_RENAMEAT2[platform.machine()], *args)
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno), a)


def exchange(path: str, target: str) -> None:
    swap = path + ".swap"
    if not (os.path.islink(path) or os.path.islink(swap)):
        if os.path.lexists(swap):
            os.unlink(swap)
        os.symlink(target, swap)
    renameat2_exchange(path, swap)


def replace(path: str, target: str) -> None:
    aside = path + ".aside"
    if os.path.lexists(aside):  # the last round was cut short: put the real entry back
        if os.path.lexists(path):
            os.rename(path, f"{path}.made-{time.monotonic_ns()}")
        os.rename(aside, path)
    os.rename(path, aside)
    os.symlink(target, path)
    os.sched_yield()  # let the tools run while the symlink is there
    os.unlink(path)
    os.rename(aside, path)


def main() -> None:
    mode, path, target, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    swap = {"exchange": exchange, "replace": replace}[mode]
    swaps = 0
    deadline = time.monotonic() + seconds
    try:
        print("ready", flush=True)
        while time.monotonic() < deadline:
            try:
                swap(path, target)
            except OSError:  # a tool deleted, moved or made the entry meanwhile
                continue
            swaps += 1
    finally:
        print(swaps, flush=True)


if __name__ == "__main__":
    main()
