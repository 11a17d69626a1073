"""Redaction: known values in every written form, credential shapes, per-thread children, and
streams that never let a secret out in pieces."""

import itertools
import json
import random

import pytest

from opencomposer.redact import MASK, Redactor, StreamRedactor, looks_like_credential

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx4bT7yQ9vLmZ2w3Rk5sJ\n"
    "Qm8Zr1pX4tY7uV0wN2bC5dE8fG==\n-----END RSA PRIVATE KEY-----"
)
SECRETS = [
    "hunter2-very-secret",
    "hunter2-very",
    "pa ss word 123",
    'q"uo\\te-secret',
    "multi\nline-secret-9",
    "émoji-clé-secrète",
]
# Text that makes every rule of the stream matter: known values (one a prefix of another,
# one with spaces, quotes, a newline), each credential shape, and a masked value that gives
# a following `Bearer` the word boundary it lacked.
PIECES = [
    *SECRETS,
    "Bearer abcdefgh.ijkl-mnop",
    "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1",
    PEM,
    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB unterminated",
    "AKIA" + "Q" * 16,
    "postgres://app:s3cr3tpass@db/x",
    "ghp_" + "a1" * 18,
    "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0NTY3.SflKxwRJSMeKKF2QT4f",
    "hunter2-very-secretBearer abcdefghijk",
    "plain words",
    " ",
    "\n",
    "x",
    "-",
    ":",
    "://",
    "@",
]


def chunks(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def streamed(redactor: Redactor, pieces: list[str]) -> list[str]:
    stream = StreamRedactor(redactor)
    return [stream.push(piece) for piece in pieces] + [stream.flush()]


@pytest.mark.parametrize("text", [
    "key sk-proj-abcdefghijklmnopqrstuvwxyz0123", "token ghp_" + "a" * 36, "hf_" + "B" * 34,
    "aws AKIAABCDEFGHIJKLMNOP", PEM, "Authorization: Bearer abc.def-ghi_jkl",
    "bEaReR abcdefghijklmnop", "glpat-" + "x1" * 10, "npm_" + "Ab1" * 12,
    "stripe sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSM",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n[cut]",
])  # fmt: skip
def test_credential_shapes_are_masked(text):
    redacted = Redactor().redact(text)
    assert MASK in redacted
    assert text.split()[-1][-8:] not in redacted or text.endswith("[cut]")


def test_a_url_keeps_its_user_and_loses_its_password():
    assert Redactor().redact("git remote: https://bob:tok-123456@github.com/x.git") == (
        f"git remote: https://bob:{MASK}@github.com/x.git"
    )


def test_short_values_and_ordinary_text_are_left_alone():
    redactor = Redactor(["abc", None, ""])
    text = (
        "abc is short; sk- alone is fine; see https://example.com/a:b@c and "
        "print('-----BEGIN RSA PRIVATE KEY-----')"
    )
    assert redactor.redact(text) == text.replace("-----BEGIN RSA PRIVATE KEY-----", MASK)


def test_a_secret_is_masked_as_json_writes_it_too():
    redactor = Redactor(SECRETS)
    for secret in SECRETS:
        for ascii_only in (False, True):
            encoded = json.dumps({"output": f"<{secret}>"}, ensure_ascii=ascii_only)
            assert json.loads(redactor.redact(encoded)) == {"output": f"<{MASK}>"}


def test_a_child_masks_its_parents_secrets_and_the_parent_not_the_childs():
    parent = Redactor(["runtime-api-key-1"])
    first, second = parent.child(["workspace-one-secret"]), parent.child()
    second.add("workspace-two-secret")
    parent.add("added-later-to-parent")
    text = "runtime-api-key-1 workspace-one-secret workspace-two-secret added-later-to-parent"
    assert first.redact(text) == f"{MASK} {MASK} workspace-two-secret {MASK}"
    assert second.redact(text) == f"{MASK} workspace-one-secret {MASK} {MASK}"
    assert parent.redact(text) == f"{MASK} workspace-one-secret workspace-two-secret {MASK}"
    assert parent.redact_everywhere(text) == f"{MASK} {MASK} {MASK} {MASK}"


def test_redact_data_masks_keys_values_and_models_and_keeps_clean_ones():
    from opencomposer.agent.protocol.items import CommandExecutionItem

    redactor = Redactor(["hunter2-very-secret"])
    assert redactor.redact_data({"hunter2-very-secret": ["a", ("hunter2-very-secret", 1)]}) == {
        MASK: ["a", [MASK, 1]]
    }
    item = CommandExecutionItem(
        id="i", turn_id="t", call_id="c", tool="run_command", command="echo hunter2-very-secret"
    )
    assert redactor.redact_data(item).command == f"echo {MASK}"
    clean = item.model_copy(update={"command": "ls"})
    assert redactor.redact_data(clean) is clean


@pytest.mark.parametrize("seed", range(4))
def test_a_stream_cut_anywhere_joins_to_the_redacted_whole(seed):
    """Random texts from PIECES, each streamed split at every position (2 pieces), at many
    random positions, and one character at a time: the joined output is always exactly the
    whole text redacted, so no secret ever goes out in two halves."""
    rng = random.Random(seed)
    redactor = Redactor(SECRETS)
    for _ in range(12):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 6)))
        whole = redactor.redact(text)
        splits = [[i] for i in range(1, len(text))]
        splits += [
            sorted(rng.sample(range(1, len(text)), min(len(text) - 1, 9))) for _ in range(10)
        ]
        splits.append(list(range(1, len(text))))
        for cuts in splits:
            assert "".join(streamed(redactor, chunks(text, cuts))) == whole, (text, cuts)


def test_a_stream_holds_back_only_what_may_still_become_a_secret():
    redactor = Redactor(["hunter2-very-secret"])
    stream = StreamRedactor(redactor)
    assert stream.push("the password is hunt") == "the password is "
    assert stream.push("er2-very-") == ""
    assert stream.push("secret, and that was it. ") == f"{MASK}, and that was it. "
    assert stream.push("Bearer ") == ""  # a token may follow
    assert stream.push("abcdefghijkl then") == f"Bearer {MASK} "
    assert stream.flush() == "then"
    # A private key is held whole until its END line, then goes out as one mask.
    head, body, end = (
        PEM.partition("\n")[0],
        "\nMIIEowIBAAKCAQEAx4bT7yQ9vLmZ2w3Rk5sJ\n",
        "-----END RSA PRIVATE KEY-----",
    )
    assert [stream.push(head), stream.push(body), stream.push(end + "\nok ")] == [
        "",
        "",
        f"{MASK}\nok ",
    ]


def test_a_line_ending_in_a_secrets_first_characters_goes_out_and_its_rest_is_masked():
    """Held, such a line would wait for the command's next output (one line in 30 with two
    secrets known); released, it costs at most RELEASED_PREFIX characters of a secret wrapped
    exactly there, and what follows is masked as far as the rest of the secret goes."""
    stream = StreamRedactor(Redactor(["hunter2-very-secret"]))
    assert stream.push("we hu\n") == "we hu\n"
    assert stream.push("  nter2-ve") == ""  # may still become the rest: held
    assert stream.push("ry-secret and more\n") == f"{MASK} and more\n"
    assert stream.push("h\n") == "h\n"
    assert stream.push("nothing of it\n") == "nothing of it\n"
    assert stream.push("the hun\r\n") == "the "  # three characters: held for the rest
    assert stream.push("ter2-very-secret\n") == f"{MASK}\n"
    assert stream.push("hu \\n") == ""  # no line's end, only its escape: held
    assert stream.push("nter2-very-secret") == MASK
    assert stream.flush() == ""


def test_what_a_stream_holds_is_bounded():
    stream = StreamRedactor(Redactor(["hunter2-very-secret"]))
    out = "".join(stream.push("a" * 1000) for _ in range(100))  # one endless word
    assert len(out) + stream.held == 100_000
    assert stream.held <= 4096


@pytest.mark.parametrize(("value", "credential"), [
    ("q7Zr2LmX9vTb4NcW8kPd1s", True), ("3f9a1c7e52b84d06a9e1f7c2b5d8e4a1", True),
    ("postgres://u:pass12345@h/db", True), ("ghp_" + "a1" * 18, True),
    ("x86_64-linux-gnu-gcc-12", False), ("ubuntu-22.04-desktop-amd64", False),
    ("/usr/lib/python3.11/site-packages", False), ("1234567890123456789012", False),
    ("https://example.com/v1/items", False), ("production", False), (":0", False),
])  # fmt: skip
def test_looks_like_credential(value, credential):
    assert looks_like_credential(value) is credential
