"""What lets a TCP connection in: its first message must be an `initialize` request carrying the
token. Every other first message is refused, with a reply when it was a request (the user with a
wrong token is told why). The listener facing real hostile connections is in
tests/security/test_lsp_framing.py."""

import json
from typing import Any

import pytest

from opencomposer.lsp.tcp import UNAUTHORIZED, Refusal, refusal

TOKEN = "s3cret-ß"


def body(message: Any) -> bytes:
    return json.dumps(message).encode()


def initialize(options: Any, msg_id: Any = 1) -> bytes:
    return body(
        {
            "jsonrpc": "2.0",
            "id": msg_id,
            "method": "initialize",
            "params": {"capabilities": {}, "initializationOptions": options},
        }
    )


def unauthorized(msg_id: Any) -> Refusal:
    return Refusal(
        "its initialize has no valid token",
        {
            "jsonrpc": "2.0",
            "id": msg_id,
            "error": {"code": -32803, "message": UNAUTHORIZED, "data": {"kind": "unauthorized"}},
        },
    )


def test_an_initialize_with_the_token_is_let_in():
    assert refusal(initialize({"token": TOKEN, "completion": {"enabled": False}}), TOKEN) is None


@pytest.mark.parametrize(
    "options",
    [
        None,
        {},
        {"token": None},
        {"token": 12345},
        {"token": [TOKEN]},
        {"token": ""},
        {"token": TOKEN + " "},
        {"token": TOKEN[:-1]},
        {"Token": TOKEN},
        {"token": "\ud800"},
        [TOKEN],
        TOKEN,
    ],
    ids=repr,
)
def test_an_initialize_without_the_token_is_told_so(options):
    assert refusal(initialize(options), TOKEN) == unauthorized(1)


@pytest.mark.parametrize(("msg_id", "echoed"), [("a", "a"), (7, 7), ({"x": 1}, None), (None, None)])
def test_the_reply_carries_the_request_id_when_it_is_one(msg_id, echoed):
    assert refusal(initialize({}, msg_id), TOKEN) == unauthorized(echoed)


def test_an_initialize_without_params_is_refused():
    message = body({"jsonrpc": "2.0", "id": 3, "method": "initialize"})

    assert refusal(message, TOKEN) == unauthorized(3)


def test_another_request_first_is_refused_as_not_initialized():
    message = body(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "workspace/executeCommand",
            "params": {"command": "opencomposer.ask", "arguments": ["rm -rf ~"]},
        }
    )

    assert refusal(message, TOKEN) == Refusal(
        "its first request is 'workspace/executeCommand'",
        {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {"code": -32002, "message": "workspace/executeCommand before initialize"},
        },
    )


@pytest.mark.parametrize(
    "message",
    [
        b"not json",
        b"\xff\xfe",
        b"[" * 100_000,
        b"[1, 2]",
        b'"initialize"',
        b"null",
        body({"jsonrpc": "2.0", "method": "exit"}),  # a notification: nothing to reply to
        body({"jsonrpc": "2.0", "method": "initialize", "params": {}}),
        body({"jsonrpc": "2.0", "id": 1, "result": None}),  # a reply to nothing
        body({"jsonrpc": "2.0", "id": 1, "method": 5}),
    ],
)
def test_a_first_message_that_is_no_request_gets_no_reply(message):
    refused = refusal(message, TOKEN)

    assert refused is not None and refused.reply is None
