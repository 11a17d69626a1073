"""The commands' environment: an allow-list, and what of the rest is masked."""

import pytest

from opencomposer.agent.tools.terminal.environment import (
    NON_INTERACTIVE,
    credential_parts,
    scrub_environment,
)

RANDOM_KEY = "q7Zr2LmX9vTb4NcW8kPd1s"


def test_only_the_allow_list_and_configured_names_reach_commands() -> None:
    base = {
        # The built-in allow-list.
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "VIRTUAL_ENV": "/w/.venv", "CARGO_HOME": "/home/u/.cargo", "TERM": "xterm-256color",
        # Configured by the user: an exact name and a pattern.
        "MYAPP_MODE": "fast", "MYAPP_URL": "http://localhost:3000", "EXTRA": "1",
        # Everything else stays out, secret or not.
        "DATABASE_URL": "postgres://app:s3cr3t-pw@db/app", "SENTRY_DSN": "https://"
        "3f9a1c7e52b84d06a9e1f7c2b5d8e4a1@o1.ingest.sentry.io/42", "MY_APP_PWD": "hunter2!",
        "RANDOM_THING": RANDOM_KEY, "DISPLAY": ":0", "XAUTHORITY": "/home/u/.Xauthority",
        "PWD": "/server/cwd", "HTTP_PROXY": "http://proxy:3128", "KEYBOARD_LAYOUT": "us",
        # Never passed, even by a pattern: our own settings and credential-agent handles.
        "OPENCOMPOSER_SERVER__TOKEN": "oc-token-value-1", "SSH_AUTH_SOCK": "/run/ssh.sock",
        "GITHUB_TOKEN": "ghp_value_1",
    }  # fmt: skip
    env, masked = scrub_environment(base, passed=["MYAPP_*", "EXTRA", "SSH_*", "OPEN*"])
    assert env == {
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "VIRTUAL_ENV": "/w/.venv", "CARGO_HOME": "/home/u/.cargo",
        "MYAPP_MODE": "fast", "MYAPP_URL": "http://localhost:3000", "EXTRA": "1",
        **NON_INTERACTIVE,
    }  # fmt: skip
    assert env["TERM"] == "dumb"
    assert masked == [
        "postgres://app:s3cr3t-pw@db/app", "s3cr3t-pw",
        "https://3f9a1c7e52b84d06a9e1f7c2b5d8e4a1@o1.ingest.sentry.io/42",
        "3f9a1c7e52b84d06a9e1f7c2b5d8e4a1",
        "hunter2!", RANDOM_KEY, "oc-token-value-1", "ghp_value_1",
    ]  # fmt: skip


def test_an_agent_handle_passes_only_by_its_exact_name() -> None:
    base = {"SSH_AUTH_SOCK": "/run/ssh.sock"}
    assert "SSH_AUTH_SOCK" not in scrub_environment(base, passed=["*"])[0]
    env, masked = scrub_environment(base, passed=["SSH_AUTH_SOCK"])
    assert (env["SSH_AUTH_SOCK"], masked) == ("/run/ssh.sock", [])


def test_configured_secret_names_are_never_passed_and_always_masked() -> None:
    base = {"PATH": "/usr/bin", "internal_ref": "plain-but-secret", "NPM_TOKEN": "npm-abc-123"}
    env, masked = scrub_environment(
        base, secret_names=["INTERNAL_REF"], passed=["internal_ref", "NPM_TOKEN"]
    )
    assert env == {"PATH": "/usr/bin", "NPM_TOKEN": "npm-abc-123", **NON_INTERACTIVE}
    # A configured variable reaches commands, yet its credential-looking value stays masked.
    assert masked == ["plain-but-secret", "npm-abc-123"]


@pytest.mark.parametrize(("name", "value", "parts"), [
    # Secret-sounding names, whatever the value.
    ("MY_APP_PWD", "hunter2!", ["hunter2!"]),
    ("STRIPE_SECRET", "whatever-value", ["whatever-value"]),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/keys/sa.json", ["/keys/sa.json"]),
    ("PGPASSWORD", "pg-pass-1", ["pg-pass-1"]),
    ("SESSION_COOKIE", "abc=def; path=/", ["abc=def; path=/"]),
    # Credentials in a URL, under any name: the URL and the secret part on its own.
    ("DB", "mysql://root:topsecret@localhost:3306/app", [
        "mysql://root:topsecret@localhost:3306/app", "topsecret"]),
    ("CACHE", "redis://:pw12345678@cache:6379/0", ["redis://:pw12345678@cache:6379/0",
                                                   "pw12345678"]),
    # Long random tokens and known shapes, under any name.
    ("THING", RANDOM_KEY, [RANDOM_KEY]),
    ("THING", "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1", ["sk-proj-A1b2C3d4E5f6G7h8I9j0K1"]),
    # Ordinary values are left: a false positive would mask ordinary text everywhere.
    ("DISPLAY", ":0", []), ("XAUTHORITY", "/home/u/.Xauthority", []),
    ("EDITOR_PATH", "/usr/local/bin/code", []), ("OLDPWD", "/home/u/src", []),
    ("PWD", "/home/u/src", []), ("SSH_AUTH_SOCK", "/run/user/1000/ssh-agent.sock", []),
    ("REPO", "ssh://git@github.com/org/repo.git", []),
    ("TRIPLE", "x86_64-linux-gnu-gcc-12", []), ("NODE_ENV", "production", []),
    ("LS_COLORS", "rs=0:di=01;34:ln=01;36", []), ("EMPTY_TOKEN", "", []),
])  # fmt: skip
def test_what_counts_as_a_credential(name: str, value: str, parts: list[str]) -> None:
    assert credential_parts(name, value) == parts
