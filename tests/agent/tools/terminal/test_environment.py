"""The commands' environment: which names count as secret, and what .env files hold."""

from pathlib import Path

from opencomposer.agent.tools.terminal.environment import (
    NON_INTERACTIVE,
    dotenv_secret_values,
    parse_dotenv,
    scrub_environment,
)


def test_scrub_environment() -> None:
    base = {
        # Kept: look-alikes that are not secrets.
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "PWD": "/w",
        "XAUTHORITY": "/home/u/.Xauthority", "TOKENIZERS_PARALLELISM": "false",
        "KEYBOARD_LAYOUT": "us", "XDG_SESSION_TYPE": "x11", "TERM": "xterm-256color",
        # Removed and masked.
        "GITHUB_TOKEN": "ghp_value_1", "OPENAI_API_KEY": "sk-value-2",
        "AWS_SECRET_ACCESS_KEY": "aws-value-3", "DB_PASSWORD": "db-value-4",
        "GOOGLE_APPLICATION_CREDENTIALS": "/keys/sa.json", "PGPASSWORD": "pg-value-5",
        "github_pat": "lower-value-6", "DATABASE_URL": "postgres://u:p@h/db", "EMPTY_TOKEN": "",
        # Removed, not secret values: our own settings, a cloud's family, credential agents.
        "OPENCOMPOSER_HOME": "/data", "AWS_REGION": "eu-west-1",
        "SSH_AUTH_SOCK": "/run/ssh.sock", "GIT_ASKPASS": "/usr/bin/askpass",
    }  # fmt: skip
    env, secrets = scrub_environment(base, secret_names=["database_url"])
    assert env == {
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "PWD": "/w",
        "XAUTHORITY": "/home/u/.Xauthority", "TOKENIZERS_PARALLELISM": "false",
        "KEYBOARD_LAYOUT": "us", "XDG_SESSION_TYPE": "x11",
        **NON_INTERACTIVE,
    }  # fmt: skip
    assert env["TERM"] == "dumb"
    assert secrets == [
        "ghp_value_1", "sk-value-2", "aws-value-3", "db-value-4", "/keys/sa.json", "pg-value-5",
        "lower-value-6", "postgres://u:p@h/db",
    ]  # fmt: skip


def test_parse_dotenv() -> None:
    text = (
        "# a comment\n"
        "export PLAIN=value with spaces # trailing comment\n"
        'DOUBLE="say \\"hi\\" # not a comment"\n'
        "SINGLE='single # kept'\n"
        'MULTI="-----BEGIN KEY-----\n'
        "abc\n"
        '-----END KEY-----"\n'
        "EMPTY=\n"
        "not an assignment\n"
    )
    assert parse_dotenv(text) == {
        "PLAIN": "value with spaces",
        "DOUBLE": 'say "hi" # not a comment',
        "SINGLE": "single # kept",
        "MULTI": "-----BEGIN KEY-----\nabc\n-----END KEY-----",
        "EMPTY": "",
    }


def test_dotenv_secret_values(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("API_KEY=abcdefgh1234\nSHORT=abc\n")
    (tmp_path / ".env.production").write_text("export DB='prod-password-9'\n")
    (tmp_path / ".envrc").write_text("NOT_A_DOTENV=ignored-value-1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".env").write_text("NESTED=ignored-value-2\n")
    (tmp_path / ".env.d").mkdir()
    assert dotenv_secret_values(tmp_path) == ["abcdefgh1234", "prod-password-9"]
