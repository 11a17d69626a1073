"""Who may call the server from a browser: the Host and Origin checks that defeat DNS
rebinding and cross-site requests (every web page the user opens can reach 127.0.0.1).

A browser sends `Host` as the authority of the URL it requested and `Origin` as the page that
asked. A page on evil.example whose name is re-pointed at 127.0.0.1 (DNS rebinding) reaches
our socket with `Host: evil.example:PORT`, so the Host must be a loopback name or address
spelled exactly, the address the server binds, or a name in `server.allowed_hosts`. A page
on any other origin (another port of 127.0.0.1 included) sends its own `Origin`, so a request
with an Origin must come from the page at that very Host, or from `server.allowed_origins`.
A browser request without an Origin (an image, a script, a link) still says
`Sec-Fetch-Site`: cross-site and same-site ones are refused, except a navigation that opens
the page itself. No CORS header is ever sent, so no other origin can read an answer either.

The Host's port is not compared with the socket's: an SSH tunnel or a proxy legitimately
rewrites it, and a request that names another port cannot come from a page on that port (its
Origin would differ from the Host, and is refused above).
"""

import ipaddress
import re
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from opencomposer.config import ServerSettings
from opencomposer.serving.http.errors import send_refusal

_NAME = re.compile(r"[a-z0-9.-]+")
"""A DNS name or an IPv4 address: what may stand before the port (userinfo, zone ids,
paths, spaces and percent-escapes may not)."""

_IPV6 = re.compile(r"[0-9a-f:.]+")
_PORT = re.compile(r"[0-9]{1,5}")

WILDCARDS = frozenset({"0.0.0.0", "::", ""})
"""Bind addresses that mean "every interface": no client names the server by them."""

NAVIGATION = ("GET", "/", "navigate", "document")
"""(method, path, Sec-Fetch-Mode, Sec-Fetch-Dest) of a top-level navigation to the page,
the one cross-site request let in, so a link to the page still opens it (never in a frame)."""


def host_name(value: str) -> str | None:
    """The name or address a Host header (`name[:port]`, `[v6][:port]`) names, lower-cased,
    IP addresses in their canonical form; None for anything else."""
    value = value.lower()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or not _IPV6.fullmatch(name):
            return None
    else:
        name, colon, port = value.partition(":")
        rest = colon + port
        if not _NAME.fullmatch(name):
            return None
    if rest and not (rest[0] == ":" and _PORT.fullmatch(rest[1:]) and int(rest[1:]) <= 65535):
        return None
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return None if value.startswith("[") else name


def is_loopback(name: str) -> bool:
    """`localhost` exactly (not `localhost.`, not a subdomain: a resolver may forward those),
    or an address in 127.0.0.0/8 or ::1 (an IPv4-mapped one is not: nothing local sends it)."""
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback and getattr(address, "ipv4_mapped", None) is None


def _origin(value: str) -> str:
    return value.strip().lower().rstrip("/")


@dataclass(frozen=True)
class HostPolicy:
    names: frozenset[str]
    """Host names accepted besides loopback ones, canonical (see `host_name`)."""

    origins: frozenset[str]
    """Origins accepted besides the server's own, lower-cased, without a trailing slash."""

    @classmethod
    def from_settings(cls, server: ServerSettings) -> "HostPolicy":
        """`server.allowed_hosts` and `server.allowed_origins`, plus the bind address when it
        names one interface (a user who binds 192.168.1.5 calls the server by it)."""
        names = {host_name(entry) or entry.lower() for entry in server.allowed_hosts}
        if server.host not in WILDCARDS:
            bound = server.host if ":" not in server.host else f"[{server.host}]"
            names.add(host_name(bound) or server.host.lower())
        return cls(frozenset(names), frozenset(_origin(o) for o in server.allowed_origins))

    def refusal(self, method: str, path: str, headers: list[tuple[bytes, bytes]]) -> str | None:
        """Why the request may not be served (a message naming the setting that would allow
        it), or None when it may."""
        values: dict[bytes, list[str]] = {}
        for key, value in headers:
            values.setdefault(key, []).append(value.decode("latin-1"))
        hosts = values.get(b"host", [])
        if len(hosts) != 1:
            return "the request must carry exactly one Host header"
        name = host_name(hosts[0])
        if name is None or not (is_loopback(name) or name in self.names):
            return (
                f"Host {hosts[0]!r} does not name this server: use 127.0.0.1, localhost "
                "or [::1], or add the name to server.allowed_hosts"
            )
        origins = values.get(b"origin", [])
        if origins:
            own = f"http://{hosts[0].lower()}"
            if len(origins) > 1 or _origin(origins[0]) not in (own, *self.origins):
                return (
                    f"requests from the web origin {origins[0]!r} are refused: only this "
                    f"server's own page ({own}) and server.allowed_origins may call it"
                )
            return None
        site = values.get(b"sec-fetch-site", ["none"])[-1].lower()
        mode = values.get(b"sec-fetch-mode", [""])[-1].lower()
        dest = values.get(b"sec-fetch-dest", [""])[-1].lower()
        if site in ("cross-site", "same-site") and (method, path, mode, dest) != NAVIGATION:
            return f"{site} browser requests are refused: only this server's own page may call it"
        return None


class BrowserGuard:
    """ASGI middleware: every HTTP request passes `HostPolicy.refusal` or gets 403."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            why = self.policy.refusal(scope["method"], scope["path"], scope["headers"])
            if why is not None:
                await send_refusal(send, scope["path"], 403, "forbidden", why)
                return
        await self.app(scope, receive, send)
