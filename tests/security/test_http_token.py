"""The server token kept in the data folder: made once, private, reused; and what stands in
its place (a symlink, a FIFO, a loose or broken file, another server starting at the same
moment) is refused or handled, never followed, hung on, or half-written."""

import os
import stat
import threading
from pathlib import Path

import pytest

from opencomposer.config import Settings
from opencomposer.serving.http.auth import TOKEN_FILE, TokenError, server_token


def settings(home: Path, **server: object) -> Settings:
    return Settings(home=home, server=server)


def test_the_token_is_made_once_private_and_reused(tmp_path: Path) -> None:
    home = tmp_path / "data"
    token = server_token(settings(home))
    assert len(token) == 43  # 32 random bytes, URL-safe base64
    kept = home / TOKEN_FILE
    assert kept.read_text() == token + "\n"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert server_token(settings(home)) == token
    assert [p.name for p in home.iterdir()] == [TOKEN_FILE]  # no partial file left


def test_servers_starting_at_once_agree_on_one_token(tmp_path: Path) -> None:
    home = tmp_path / "data"
    tokens: list[str] = []
    start = threading.Barrier(8)

    def start_server() -> None:
        start.wait()
        tokens.append(server_token(settings(home)))

    threads = [threading.Thread(target=start_server) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(tokens) == 8 and len(set(tokens)) == 1
    assert (home / TOKEN_FILE).read_text().strip() == tokens[0]


def test_a_loose_token_file_is_tightened_and_kept(tmp_path: Path) -> None:
    home = tmp_path / "data"
    home.mkdir()
    kept = home / TOKEN_FILE
    kept.write_text("an-old-installations-token\n")
    kept.chmod(0o644)
    assert server_token(settings(home)) == "an-old-installations-token"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600


def test_a_symlink_or_fifo_in_its_place_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "data"
    home.mkdir()
    planted = tmp_path / "planted"
    planted.write_text("attacker-chosen-token-123456\n")
    (home / TOKEN_FILE).symlink_to(planted)
    with pytest.raises(TokenError, match="delete the file to make a new one"):
        server_token(settings(home))
    (home / TOKEN_FILE).unlink()
    os.mkfifo(home / TOKEN_FILE)
    with pytest.raises(TokenError, match="is not a file of yours"):
        server_token(settings(home))


@pytest.mark.parametrize(
    "content",
    [
        "",
        "\n",
        "short\n",
        "has spaces but is long enough\n",
        "x" * 600,
        "caf\u00e9-token-0123456789",
    ],
)
def test_a_broken_token_file_is_a_clear_error(tmp_path: Path, content: str) -> None:
    home = tmp_path / "data"
    home.mkdir()
    (home / TOKEN_FILE).write_text(content)
    with pytest.raises(TokenError, match="does not hold a usable token"):
        server_token(settings(home))
    assert (home / TOKEN_FILE).read_text() == content  # the user's file is left alone


def test_a_configured_token_is_used_as_is_and_checked(tmp_path: Path) -> None:
    home = tmp_path / "data"
    assert (
        server_token(settings(home, token="configured-token-abcdef")) == "configured-token-abcdef"
    )
    assert not (home / TOKEN_FILE).exists()
    for bad in ("", "short", "has a space in it somewhere", "line\nbreak-0123456789"):
        with pytest.raises(TokenError, match=r"server\.token must be"):
            server_token(settings(home, token=bad))
