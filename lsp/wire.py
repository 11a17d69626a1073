"""JSON-RPC details shared by the server's handlers: untyped payloads as plain JSON, and the
agent's errors as JSON-RPC errors."""

from typing import Any

import attrs
from lsprotocol import converters
from pygls.exceptions import JsonRpcException

from opencomposer.agent.session import SessionError

_CONVERTER = converters.get_converter()

REQUEST_FAILED = -32803
"""LSP's RequestFailed: the request was valid but could not be served."""

SESSION_ERROR_CODES = {"invalid_request": -32602, "not_found": -32602}
"""JSON-RPC codes of `SessionError` kinds (InvalidParams); other kinds are RequestFailed. The
kind itself travels in the error's `data`, for clients that branch on it."""


def plain_json(value: Any) -> Any:
    """pygls hands over untyped params and results (custom methods, command arguments) as
    cattrs-built objects or dicts; the agent's models want plain JSON."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):
        return {key: plain_json(inner) for key, inner in value.items()}
    if isinstance(value, list | tuple) and not hasattr(value, "_asdict"):
        return [plain_json(inner) for inner in value]
    if hasattr(value, "_asdict"):
        return plain_json(value._asdict())
    if attrs.has(type(value)):  # lsprotocol's types (slotted: no __dict__)
        return _CONVERTER.unstructure(value)
    return plain_json(vars(value))


def session_error(exc: SessionError) -> JsonRpcException:
    return JsonRpcException(
        exc.message, code=SESSION_ERROR_CODES.get(exc.kind, REQUEST_FAILED), data={"kind": exc.kind}
    )
