"""The data folder's helpers: folders 0700 and files 0600 whatever the umask, an older
installation's looser modes tightened, symbolic links left alone."""

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from opencomposer.paths import (
    private_database,
    private_dir,
    private_file,
    tighten_tree,
    write_private,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture(params=[0o000, 0o022])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """No umask at all (everything would be world-writable) and the usual one."""
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_what_the_helpers_create_is_private(tmp_path: Path, umask: int) -> None:
    home = tmp_path / "a" / "b" / "home"
    assert private_dir(home) is False  # made now, nothing to tighten
    write_private(home / "token", b"secret")
    private_file(home / "empty")
    assert private_database(home / "db" / "traces.db") is False
    with sqlite3.connect(home / "db" / "traces.db") as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE t (x)")
    created = [tmp_path / "a", tmp_path / "a" / "b", *[home, *home.rglob("*")]]
    assert {str(p.relative_to(tmp_path)): oct(mode(p)) for p in created} == {
        str(p.relative_to(tmp_path)): oct(0o700 if p.is_dir() else 0o600) for p in created
    }
    assert (home / "db" / "traces.db-wal").exists()  # SQLite made it with the file's mode
    assert (home / "token").read_bytes() == b"secret"


def test_an_older_installation_is_tightened(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "checkpoints" / "blobs" / "ab").mkdir(parents=True)
    blob = home / "checkpoints" / "blobs" / "ab" / "abcd"
    blob.write_bytes(b"old image")
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours")
    (home / "link").symlink_to(outside)
    for path in [home, *home.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    outside.chmod(0o644)
    assert private_dir(home) is True
    tighten_tree(home)
    assert {oct(mode(p)) for p in [home, *home.rglob("*")] if not p.is_symlink()} == {
        oct(0o700),
        oct(0o600),
    }
    assert mode(outside) == 0o644  # reached through a link: not ours to change
    private_file(blob)  # idempotent
    assert mode(blob) == 0o600


def test_only_existing_companions_are_touched(tmp_path: Path) -> None:
    private_database(tmp_path / "x.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]
