"""Who may call the API: whoever holds the server's bearer token, on loopback too (any local
process, and any web page the Host and Origin checks miss, can reach 127.0.0.1; Jupyter and
VS Code's server ask for a token for the same reason).

The token is `server.token` when configured, else one made once and kept in
`<home>/server-token` (0600), so that clients configured with it keep working across
restarts. It travels only in `Authorization: Bearer`, never in a URL (URLs end up in logs,
history and Referer headers); the page takes it from its own URL once and keeps it in
`sessionStorage`.
"""

import os
import re
import secrets
import stat
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from opencomposer import paths
from opencomposer.config import Settings
from opencomposer.serving.http.connections import authenticated
from opencomposer.serving.http.errors import send_refusal

TOKEN_FILE = "server-token"

_USABLE = re.compile(r"[A-Za-z0-9._~+/=-]{16,512}")
"""What a token kept in the file may be: what a header carries unquoted, and long enough
not to be guessed (the made ones are 43 characters, 256 random bits)."""
TOKEN_RULE = "16 to 512 characters of A-Z a-z 0-9 . _ ~ + / = -"


class TokenError(Exception):
    """The configured token or the token file cannot be used; the message says why and what
    to do."""


def new_token() -> str:
    return secrets.token_urlsafe(32)


def server_token(settings: Settings) -> str:
    """The token clients must send: `server.token`, or the one kept in the data folder (made
    now when there is none)."""
    if settings.server.token is not None:
        token = settings.server.token.get_secret_value()
        if not _USABLE.fullmatch(token):
            raise TokenError(f"server.token must be {TOKEN_RULE}")
        return token
    path = settings.home / TOKEN_FILE
    return _read_token(path) or _create_token(path)


def _read_token(path: Path) -> str | None:
    try:
        # O_NONBLOCK: a FIFO put in its place must not hang the server's start.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a symlink (ELOOP) or an unreadable file
        raise TokenError(
            f"cannot read the server token from {path}: {exc.strerror}; "
            "delete the file to make a new one"
        ) from None
    with os.fdopen(fd, "rb") as file:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_uid != os.getuid():
            raise TokenError(f"{path} is not a file of yours; delete it to make a new token")
        if status.st_mode & 0o077:  # an old or copied file: nobody else may read it
            os.fchmod(fd, 0o600)
        token = file.read(1024).decode("ascii", "replace").strip()
    if not _USABLE.fullmatch(token):
        raise TokenError(
            f"{path} does not hold a usable token ({TOKEN_RULE}); delete it to make a new one"
        )
    return token


def _create_token(path: Path) -> str:
    """Write a new token beside `path` and link it into place: the file appears whole with
    mode 0600, and when two servers start at once the second one reads the first one's (a
    rename, as in `paths.write_private`, would let it replace the token the first printed)."""
    paths.private_dir(path.parent)
    token = new_token()
    partial = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as file:
            file.write(token + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.link(partial, path)
    except FileExistsError:  # another server made it first
        return _read_token(path) or _create_token(path)
    finally:
        partial.unlink(missing_ok=True)
    return token


class RequireToken:
    """ASGI middleware: every request but those for `public` paths (which say nothing) must
    carry `Authorization: Bearer <token>`, or it gets 401."""

    def __init__(self, app: ASGIApp, token: str, public: frozenset[str]) -> None:
        self.app = app
        self._expected = token.encode()
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if self._carries_token(scope["headers"]):
                authenticated()  # its connection is no longer a stranger (`connections`)
            elif scope["path"] not in self.public:
                await send_refusal(
                    send,
                    scope["path"],
                    401,
                    "unauthorized",
                    (
                        "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
                        "with the token `opencomposer serve` printed (kept in server-token in "
                        "the data folder)"
                    ),
                    [(b"www-authenticate", b"Bearer")],
                )
                return
        await self.app(scope, receive, send)

    def _carries_token(self, headers: list[tuple[bytes, bytes]]) -> bool:
        given = [value for key, value in headers if key == b"authorization"]
        if len(given) != 1:
            return False
        scheme, _, value = given[0].partition(b" ")
        # compare_digest: the time taken must not reveal how much of a guess was right.
        return scheme.lower() == b"bearer" and secrets.compare_digest(value.strip(), self._expected)
