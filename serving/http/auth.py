"""Who may talk to the server: loopback by default, a bearer token for anything else."""

import ipaddress
import secrets

from fastapi import HTTPException, Request, status


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(32)


class BearerToken:
    """FastAPI dependency: the request must carry `Authorization: Bearer <token>`."""

    def __init__(self, token: str) -> None:
        self._expected = token.encode()

    async def __call__(self, request: Request) -> None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        # compare_digest: the time taken must not reveal how much of a guess was right.
        if scheme.lower() != "bearer" or not secrets.compare_digest(given.encode(), self._expected):
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "missing or wrong bearer token",
                headers={"WWW-Authenticate": "Bearer"},
            )
