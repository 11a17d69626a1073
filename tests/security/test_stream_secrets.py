"""Secrets in streamed forms never leave in clear: end to end through the real runtime (real
bubblewrap, real SQLite, real subprocesses; a real uvicorn server for SSE), with an engine
double that streams the model's text in exactly the pieces a test chooses.

Command output is redacted once, as one stream per command (stdout and stderr together, for
the command's whole life), and streamed text once more per item, so what decides is what
arrives, never when: a private key printed a line at a time with pauses, in pieces without
newlines, with CRLF, half on stderr, cut by the output cap, or across a foreground call and
a later read, is masked whole; a known value is recognised wrapped at any width, indented,
with CRLF or as JSON escapes it. Every test looks in every sink: the live events, the SQLite
file and its WAL (raw bytes and rows), the export, and what the model was sent; and checks
that the masked text was there (the output says `[REDACTED]`).
"""

import base64
import json
import random
import re
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.interpreters import SANDBOX_PYTHON
from support.live_server import live_server
from support.pieces import (
    PiecesEngine,
    Streamed,
    dumped,
    run_turn,
    settings,
    stored_text,
    stream_turn,
)

from opencomposer.agent.protocol.events import Event
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.traces.export import iter_threads
from opencomposer.redact import (
    MASK,
    PEM_SPAN,
    RELEASED_PREFIX,
    Redactor,
    SourcedStreamRedactor,
    StreamRedactor,
)

_RNG = random.Random(31)
# A .env value long enough that base64-style wrapping (76 columns) cuts it.
DOTENV_SECRET = "".join(
    _RNG.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz23456789") for _ in range(100)
)
# A value known only because the server's environment held it under a credential's name.
ENV_SECRET = "".join(_RNG.choice("0123456789abcdef") for _ in range(40))
PYTHON = shlex.quote(SANDBOX_PYTHON)
# Prints a file in writes of N characters with a pause after each, flushing every one.
DRIBBLE = """import sys, time
text, size, pause = open(sys.argv[1]).read(), int(sys.argv[2]), float(sys.argv[3])
for at in range(0, len(text), size):
    sys.stdout.write(text[at : at + size])
    sys.stdout.flush()
    time.sleep(pause)
"""
TO_JSON = f"{PYTHON} -c 'import json,sys; print(json.dumps(sys.stdin.read()))'"


def armored(label: str, body_bytes: int, headers: str = "", checksum: str = "") -> str:
    """A private key as tools print it: a header, base64 at 64 columns, an END line."""
    body = base64.b64encode(_RNG.randbytes(body_bytes)).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n{headers}{lines}\n{checksum}-----END {label}-----\n"


KEYS = {
    "rsa": armored("RSA PRIVATE KEY", 1190),
    "ec": armored("EC PRIVATE KEY", 121),
    "openssh": armored("OPENSSH PRIVATE KEY", 400),
    "pkcs8-encrypted": armored("ENCRYPTED PRIVATE KEY", 1250),
    "legacy-encrypted": armored(
        "RSA PRIVATE KEY",
        1190,
        "Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,6E3BB4A1D5E0F7C2A9B8D1E4F3C2B1A0\n\n",
    ),
    "pgp": armored(
        "PGP PRIVATE KEY BLOCK", 900, "Version: GnuPG v2.0.22 (GNU/Linux)\n\n", "=oC3m\n"
    ),
}


def body(key: str) -> str:
    """The key material: every line between its header (and header fields) and END line."""
    return "".join(
        line for line in key.splitlines() if line and "-----" not in line and ": " not in line
    )


# ---------------------------------------------------------------------------- leak checks


def unwrapped(text: str) -> str:
    """`text` without whitespace and without the escapes JSON and repr write for it, so a
    secret cut by line breaks, written in JSON or in a repr, reads whole again."""
    return re.sub(r"\\+[nrt]|\\+|\s+", "", text)


def assert_no_clear(material: Iterable[str], **sinks: str) -> None:
    """No 16 consecutive characters of any secret, however wrapped, in any sink."""
    for name, text in sinks.items():
        flat = unwrapped(text)
        for secret in material:
            plain = unwrapped(secret)
            for at in range(0, len(plain) - 15, 4):
                assert plain[at : at + 16] not in flat, f"{plain[at : at + 16]!r} leaked to {name}"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".env").write_text(f"SERVICE_TOKEN={DOTENV_SECRET}\n")
    (root / "secret.txt").write_text(DOTENV_SECRET)
    (root / "env-secret.txt").write_text(ENV_SECRET)
    (root / "dribble.py").write_text(DRIBBLE)
    for name, key in KEYS.items():
        (root / f"{name}.pem").write_text(key)
    return root.resolve()


async def run_calls(
    tmp_path: Path,
    workspace: Path,
    runtimes: list[AgentRuntime],
    steps: list[list[tuple[str, dict[str, Any]]]],
    **tools: Any,
) -> tuple[AgentRuntime, PiecesEngine, list[Event]]:
    """One turn whose model makes these calls, a step each: the runtime, the engine (what
    the model was sent) and the events as a live subscriber received them."""
    engine = PiecesEngine([Streamed([], calls) for calls in steps])
    runtime = AgentRuntime(settings(tmp_path, **tools), engine)
    runtimes.append(runtime)
    session = await runtime.start_thread(workspace)
    return runtime, engine, await run_turn(session, "go")


def sinks(
    tmp_path: Path, runtime: AgentRuntime, engine: PiecesEngine, live: list[Event]
) -> dict[str, str]:
    return {
        "live events": dumped(live),
        "trace store": stored_text(tmp_path / "home/traces.db"),
        "export": json.dumps(list(iter_threads(runtime.store)), default=str),
        "model": repr(engine.requests),
    }


def outputs(live: list[Event]) -> list[str]:
    """What each tool call's item says, in order: what the model read."""
    return [
        e.item.output or ""
        for e in live
        if e.type == "item.completed" and e.item.type in ("command_execution", "tool_call")
    ]


# ---------------------------------------------------------------------------- private keys

# How a command may print a file: a line at a time with pauses longer than any flush timer, in
# 7-character writes without newlines, with CRLF, half on stdout and half on stderr, indented
# in a YAML block, as a JSON string, or folded at a width that cuts the header in two.
PRINTERS = {
    "lines with pauses": (
        'while IFS= read -r line; do printf "%s\\n" "$line"; sleep 0.15; done < {f}'
    ),
    "pieces": f"{PYTHON} dribble.py {{f}} 7 0.004",
    "crlf": "sed 's/$/\\r/' {f}",
    "stdout then stderr": "head -n 8 {f}; sleep 0.3; tail -n +9 {f} >&2",
    "yaml block": "echo 'tls:'; echo '  key: |'; sed 's/^/    /' {f}",
    "json": f"{TO_JSON} < {{f}}",
    "folded": "fold -w 20 {f}",
    "folded, indented, crlf, paused": (
        "fold -w 13 {f} | while IFS= read -r l; do printf '  %s\\r\\n' \"$l\"; sleep 0.02; done"
    ),
    "folded json": f"fold -w 24 {{f}} | {TO_JSON}",
}
CASES = [
    ("rsa", "lines with pauses"),
    ("rsa", "pieces"),
    ("rsa", "crlf"),
    ("rsa", "stdout then stderr"),
    ("rsa", "yaml block"),
    ("rsa", "json"),
    ("ec", "lines with pauses"),
    ("openssh", "pieces"),
    ("pkcs8-encrypted", "stdout then stderr"),
    ("legacy-encrypted", "pieces"),
    ("pgp", "crlf"),
    ("rsa", "folded"),
    ("openssh", "folded, indented, crlf, paused"),
    ("pgp", "folded json"),
]


@pytest.mark.parametrize(("kind", "printer"), CASES)
async def test_a_private_key_printed_in_any_rhythm_is_masked_whole(
    tmp_path, workspace, runtimes, kind, printer
):
    command = "echo before; " + PRINTERS[printer].format(f=f"{kind}.pem") + "; echo after"
    runtime, engine, live = await run_calls(
        tmp_path, workspace, runtimes, [[("run_terminal", {"command": command})]]
    )
    [output] = outputs(live)
    assert "before" in output and "after" in output and MASK in output
    assert_no_clear([body(KEYS[kind])], **sinks(tmp_path, runtime, engine, live))


@pytest.mark.parametrize("around", [(300, 400), (120, 600), (40, 1500), (700, 700)])
async def test_a_key_cut_where_the_output_cap_falls_is_masked_whole(
    tmp_path, workspace, runtimes, around
):
    """The model and the live stream keep a head (333 characters) and a tail (667) of 1,000:
    where they fall, the printed key lies across the head's end, the tail's start, or both.
    It is masked before anything is cut, so neither side keeps a piece of it."""
    before, after = around
    command = (
        f"head -c {before} /dev/zero | tr '\\0' a; echo; cat rsa.pem;"
        f" head -c {after} /dev/zero | tr '\\0' z; echo"
    )
    runtime, engine, live = await run_calls(
        tmp_path, workspace, runtimes, [[("run_terminal", {"command": command})]], output_cap=1000
    )
    [output] = outputs(live)
    assert MASK in output or "bytes omitted" in output
    assert_no_clear([body(KEYS["rsa"])], **sinks(tmp_path, runtime, engine, live))


# ---------------------------------------------------------------------------- known values

WRAPPINGS = {
    "fold 1": "fold -w 1 {f}",
    "fold 7": "fold -w 7 {f}",
    "fold 20": "fold -w 20 {f}",
    "base64 columns": "fold -w 76 {f}",
    "indented": "fold -w 30 {f} | sed 's/^/        /'",
    "tab indented": "fold -w 33 {f} | sed 's/^/\\t\\t/'",
    "crlf": "fold -w 25 {f} | sed 's/$/\\r/'",
    "trailing spaces": "fold -w 45 {f} | sed 's/$/   /'",
    "json escaped": f"fold -w 40 {{f}} | {TO_JSON}",
    "lines with pauses": (
        '{{ cat {f}; echo; }} | fold -w 30 | while IFS= read -r l; do echo "$l"; sleep 0.15; done'
    ),
}


@pytest.mark.parametrize("wrapping", list(WRAPPINGS))
async def test_a_known_secret_wrapped_is_masked(tmp_path, workspace, runtimes, wrapping):
    command = "echo start; " + WRAPPINGS[wrapping].format(f="secret.txt") + "; echo; echo end"
    runtime, engine, live = await run_calls(
        tmp_path, workspace, runtimes, [[("run_terminal", {"command": command})]]
    )
    [output] = outputs(live)
    assert "start" in output and "end" in output and MASK in output
    assert_no_clear([DOTENV_SECRET], **sinks(tmp_path, runtime, engine, live))


async def test_a_secret_known_from_the_environment_is_masked_wrapped(
    tmp_path, workspace, runtimes, monkeypatch
):
    """A credential the sandbox's environment leaves out is masked however it is wrapped."""
    monkeypatch.setenv("BILLING_API_TOKEN", ENV_SECRET)
    commands = [
        "fold -w 9 env-secret.txt | sed 's/$/\\r/'",
        "fold -w 16 env-secret.txt | sed 's/^/ /'",
    ]
    runtime, engine, live = await run_calls(
        tmp_path, workspace, runtimes, [[("run_terminal", {"command": c})] for c in commands]
    )
    assert all(MASK in output for output in outputs(live))
    assert_no_clear([ENV_SECRET], **sinks(tmp_path, runtime, engine, live))


TINY_WRITES = {
    # One character a write, as a progress printer would.
    "one character a write": f"{PYTHON} dribble.py secret.txt 1 0.002",
    # Thirds on stdout, stderr, stdout: a reader of the interleaved streams sees one secret.
    "across stdout and stderr": (
        "head -c 33 secret.txt; sleep 0.3; head -c 66 secret.txt | tail -c 33 >&2; sleep 0.3;"
        " tail -c 34 secret.txt"
    ),
    # Pieces cut by line breaks and split between the streams at once.
    "wrapped across the streams": (
        "head -c 50 secret.txt | fold -w 10; sleep 0.3; tail -c 50 secret.txt | fold -w 10 >&2"
    ),
}


@pytest.mark.parametrize("writer", list(TINY_WRITES))
async def test_a_secret_in_tiny_writes_or_split_between_streams_is_masked(
    tmp_path, workspace, runtimes, writer
):
    command = f"echo start; {TINY_WRITES[writer]}; echo; echo end"
    runtime, engine, live = await run_calls(
        tmp_path, workspace, runtimes, [[("run_terminal", {"command": command})]]
    )
    [output] = outputs(live)
    assert MASK in output and "end" in output
    assert_no_clear([DOTENV_SECRET], **sinks(tmp_path, runtime, engine, live))


@pytest.mark.parametrize("kind", ["known value", "private key"])
async def test_a_secret_split_between_a_call_and_a_later_read_is_masked(
    tmp_path, workspace, runtimes, kind
):
    """The call returns at its timeout with the first part printed; the model reads the rest
    from the job later."""
    if kind == "known value":
        first, rest, material = "head -c 45 secret.txt", "tail -c 55 secret.txt", DOTENV_SECRET
    else:
        first, rest, material = "head -n 9 rsa.pem", "tail -n +10 rsa.pem", body(KEYS["rsa"])
    command = f"echo started; {first}; sleep 3; {rest}; echo; echo finished"
    runtime, engine, live = await run_calls(
        tmp_path,
        workspace,
        runtimes,
        [
            [("run_terminal", {"command": command, "timeout": 1})],
            [("terminal_output", {"job_id": "job-1", "wait": 30})],
        ],
    )
    started, read = outputs(live)
    assert "started" in started and "still running" in started
    assert MASK in read and "finished" in read
    assert_no_clear([material], **sinks(tmp_path, runtime, engine, live))


# ---------------------------------------------------------------------------- model deltas


async def test_secrets_in_model_deltas_are_masked(tmp_path, workspace, runtimes):
    """Reasoning and text streamed in pieces: a known value wrapped across deltas, a key a
    line a delta, and a tool call whose arguments carry a wrapped secret."""
    wrapped = "\n  ".join(DOTENV_SECRET[i : i + 23] for i in range(0, 100, 23))
    key = KEYS["openssh"]
    engine = PiecesEngine(
        [
            Streamed(
                [f"Here: {wrapped[:10]}", wrapped[10:47], f"{wrapped[47:]} and done."],
                [("write_file", {"path": "notes.md", "content": f"token:\n  {wrapped}\n"})],
                reasoning=key.splitlines(keepends=True),
            ),
            Streamed([c for c in f"again {wrapped} ok"]),
        ]
    )
    runtime = AgentRuntime(settings(tmp_path), engine)
    runtimes.append(runtime)
    session = await runtime.start_thread(workspace)
    live = await run_turn(session, "go")
    texts = [
        e.item.text
        for e in live
        if e.type == "item.completed" and e.item.type in ("agent_message", "reasoning")
    ]
    assert all(MASK in text for text in texts) and len(texts) == 3
    assert_no_clear([DOTENV_SECRET, body(key)], **sinks(tmp_path, runtime, engine, live))


# ---------------------------------------------------------------------------- over SSE


async def test_the_sse_stream_sends_no_key_printed_with_pauses(tmp_path, workspace):
    command = (
        PRINTERS["lines with pauses"].format(f="ec.pem")
        + "; "
        + WRAPPINGS["crlf"].format(f="secret.txt")
    )
    engine = PiecesEngine([Streamed([], [("run_terminal", {"command": command})])])
    with live_server(engine, tmp_path / "home") as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            thread_id, sse = await stream_turn(http, workspace, "print the key")
            events = (await http.get(f"/v1/threads/{thread_id}/events")).text
            export = (await http.get("/v1/traces/export")).text
    assert "item.delta" in sse and MASK in sse
    assert_no_clear(
        [body(KEYS["ec"]), DOTENV_SECRET],
        sse=sse,
        events=events,
        export=export,
        store=stored_text(tmp_path / "home/traces.db"),
    )


def test_the_leak_check_sees_a_wrapped_secret():
    """The check itself: a wrapped, escaped or repr'd secret is found."""
    for text in [
        DOTENV_SECRET,
        "\r\n    ".join(DOTENV_SECRET[i : i + 7] for i in range(0, 100, 7)),
        json.dumps("\n".join(DOTENV_SECRET[i : i + 20] for i in range(0, 100, 20))),
        repr(["x", DOTENV_SECRET[:50] + "\n" + DOTENV_SECRET[50:]]),
    ]:
        with pytest.raises(AssertionError, match="leaked"):
            assert_no_clear([DOTENV_SECRET], sink=text)
    assert_no_clear([DOTENV_SECRET], sink=f"{DOTENV_SECRET[:15]} and {MASK}")


# ---------------------------------------------------------------------------- the stream itself


def wrapped_forms(secret: str, rng: random.Random) -> str:
    """`secret` cut at random places by a line break and what may surround one."""
    cuts = sorted(rng.sample(range(1, len(secret)), rng.randint(1, 6)))
    gaps = ["\n", "\r\n", "\n    ", "  \n\t", "\\n", "\\r\\n  ", "\n+ ", "\n-"]
    parts = [secret[a:b] for a, b in zip([0, *cuts], [*cuts, len(secret)], strict=True)]
    return "".join(part + rng.choice(gaps) for part in parts[:-1]) + parts[-1]


def less_released_beginnings(text: str, secrets: Iterable[str]) -> str:
    """`text` less what a stream lets out of a secret wrapped right at its beginning: its
    first RELEASED_PREFIX characters or fewer at a line's end, before the mask of its rest."""
    beginnings = {s[:n] for s in secrets for n in range(1, RELEASED_PREFIX + 1)}
    alternatives = "|".join(map(re.escape, sorted(beginnings, key=len, reverse=True)))
    line_break = r"[ \t\r]*\n[ \t\r\n]*"
    return re.sub(rf"(?:{alternatives}){line_break}(?={re.escape(MASK)})", "", text)


@pytest.mark.parametrize("seed", range(6))
def test_a_stream_cut_anywhere_between_two_sources_joins_to_the_redacted_whole(seed):
    """Texts of wrapped secrets, keys and ordinary words, pushed in random pieces from two
    sources in turn: what comes out joins to the whole text redacted (but for a secret's first
    character or two where a line ended right after them), holds no piece of a secret, and
    says which source each part came from."""
    rng = random.Random(seed)
    redactor = Redactor([DOTENV_SECRET, ENV_SECRET])
    pieces = [
        lambda: wrapped_forms(DOTENV_SECRET, rng),
        lambda: wrapped_forms(ENV_SECRET, rng),
        lambda: KEYS[rng.choice(list(KEYS))].replace("\n", rng.choice(["\n", "\r\n", "\\n"])),
        lambda: wrapped_forms(KEYS[rng.choice(list(KEYS))].replace("\n", ""), rng),
        lambda: rng.choice(["ordinary words ", "\n", "- item\n", "+ added\n", "x = 'a\\nb'\n"]),
    ]
    for _ in range(8):
        text = "".join(rng.choice(pieces)() for _ in range(rng.randint(1, 5)))
        whole = redactor.redact(text)
        assert_no_clear([DOTENV_SECRET, ENV_SECRET, *map(body, KEYS.values())], whole=whole)
        for _ in range(6):
            cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 40))))
            stream, out = SourcedStreamRedactor(redactor), []
            for n, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(text)], strict=True)):
                out += stream.push("stdout" if n % 3 else "stderr", text[a:b])
            out += stream.flush()
            joined = "".join(part for _, part in out)
            assert_no_clear([DOTENV_SECRET, ENV_SECRET, *map(body, KEYS.values())], out=joined)
            secrets = [DOTENV_SECRET, ENV_SECRET]
            assert less_released_beginnings(joined, secrets) == less_released_beginnings(
                whole, secrets
            )
            assert {source for source, _ in out} <= {"stdout", "stderr"}


def test_what_a_stream_holds_back_is_bounded():
    """Held only while it may still become a secret: the beginning of a known value stops
    being held once a gap too long to be a wrap follows it, a key's header after PEM_SPAN
    characters without an END line (masked as far as its body goes), text that begins
    nothing at once."""
    stream = StreamRedactor(Redactor([DOTENV_SECRET]))
    assert stream.push("plain text that begins no secret\n") == "plain text that begins no secret\n"
    assert stream.push(f"token: {DOTENV_SECRET[:40]}\n  ") == "token: "
    assert stream.held > 40
    # 40 spaces are no wrap: what was held was only ever 40 characters of the secret.
    released = stream.push(" " * 40 + "more\n")
    assert released.startswith(DOTENV_SECRET[:40]) and stream.held < 8
    for filler in [" ", "\\", "\\n", "\n+", "\r\n\t"]:  # whatever may make up a gap
        stream.push(DOTENV_SECRET[:30])
        for _ in range(200):
            stream.push(filler * 50)
            assert stream.held < 300
    released = stream.push(KEYS["rsa"].split("\n", 1)[0] + "\n")
    for _ in range(PEM_SPAN // 64 + 8):
        released += stream.push(base64.b64encode(_RNG.randbytes(48)).decode() + "\n")
        assert stream.held < PEM_SPAN + 4096
    assert released.startswith(MASK)
