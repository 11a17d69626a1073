"""The environment commands run with: secrets removed, every interactive program disarmed.

A variable is treated as a secret when its name has a secret-sounding word (TOKEN, KEY,
SECRET, PASSWORD, ...) anywhere between underscores. That is deliberately broad: a command
missing a harmless `SORT_KEY` costs little, a leaked API key does not. Removed secret values
go to the redactor, so a command that finds them some other way still cannot print them.
"""

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from opencomposer.redact import MIN_SECRET_LENGTH

# Any of these words, between underscores, marks a variable as secret: OPENAI_API_KEY,
# AWS_SECRET_ACCESS_KEY, GH_TOKEN, DB_PASSWORD, GOOGLE_APPLICATION_CREDENTIALS.
# AUTH and PAT (personal access token: GITHUB_PAT) are words of their own, so PATH and
# XAUTHORITY are not caught.
SECRET_WORDS = frozenset({
    "TOKEN", "TOKENS", "KEY", "KEYS", "APIKEY", "SECRET", "SECRETS", "PASSWORD", "PASSWD",
    "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "AUTH", "PAT",
})  # fmt: skip
# Secrets whose names hide the word (libpq, MySQL).
SECRET_NAMES = frozenset({"PGPASSWORD", "MYSQL_PWD"})
# Removed, values not masked: whole families that are ours or a cloud's (OPENCOMPOSER_HOME,
# AWS_REGION are not secret, but nothing in them is a command's business).
REMOVED_PREFIXES = ("OPENCOMPOSER_", "AWS_")
# Removed, values not masked: handles to agents that hand out credentials on request (the SSH
# and GPG agents, the desktop keyring over D-Bus, VS Code's git credential helper).
ACCESS_NAMES = frozenset({
    "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS", "KRB5CCNAME", "GIT_ASKPASS",
    "SSH_ASKPASS", "VSCODE_GIT_IPC_HANDLE", "VSCODE_GIT_ASKPASS_MAIN", "VSCODE_GIT_ASKPASS_NODE",
})  # fmt: skip

# Every program a command starts runs without a terminal; these make the common ones finish
# instead of waiting for a person.
NON_INTERACTIVE = {
    # Pagers print and exit instead of waiting for `q`.
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "MANPAGER": "cat",
    # For programs that call `less` directly: quit when the text fits one screen (F), pass
    # colours through (R), do not clear the screen (X).
    "LESS": "FRX",
    # git fails at once instead of asking for a username and password.
    "GIT_TERMINAL_PROMPT": "0",
    # `git commit` without -m, `git rebase -i`, `crontab -e`: the editor "exits" at once with
    # the text unchanged, so git aborts with a message instead of waiting for vim.
    "GIT_EDITOR": "true",
    "EDITOR": "true",
    "VISUAL": "true",
    # apt and dpkg take default answers to configuration questions.
    "DEBIAN_FRONTEND": "noninteractive",
    # pip fails instead of prompting (uninstall confirmation, index credentials).
    "PIP_NO_INPUT": "1",
    # npx installs a missing package instead of asking "Ok to proceed? (y)".
    "NPM_CONFIG_YES": "true",
    # No escape codes in what the model reads.
    "TERM": "dumb",
    "NO_COLOR": "1",
    # Python output streams as it is printed instead of arriving when the buffer fills.
    "PYTHONUNBUFFERED": "1",
}

_DOTENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*)$")
# A .env file larger than this is not configuration; it is not read.
_MAX_DOTENV_BYTES = 1024 * 1024


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return upper in SECRET_NAMES or any(word in SECRET_WORDS for word in upper.split("_"))


def scrub_environment(
    base: Mapping[str, str], secret_names: Iterable[str] = ()
) -> tuple[dict[str, str], list[str]]:
    """The environment for commands, and the secret values removed from it (for the redactor).

    `secret_names` are configured extra names, removed and masked like the built-in ones.
    """
    configured = {name.upper() for name in secret_names}
    env: dict[str, str] = {}
    secrets: list[str] = []
    for name, value in base.items():
        upper = name.upper()
        if upper in configured or (upper not in ACCESS_NAMES and is_secret_name(name)):
            if value:
                secrets.append(value)
        elif not (upper.startswith(REMOVED_PREFIXES) or upper in ACCESS_NAMES):
            env[name] = value
    env.update(NON_INTERACTIVE)
    return env, secrets


def _unquote(value: str, lines: list[str]) -> str:
    """The value of a dotenv assignment; a quoted value may continue on the following lines,
    which are consumed from `lines`."""
    quote = value[:1]
    if quote not in ("'", '"'):
        return re.split(r"\s+#", value, maxsplit=1)[0].strip()
    # Inside double quotes \" is a quote character, not the end of the value.
    end = re.compile(r'(?<!\\)"') if quote == '"' else re.compile("'")
    text = value[1:]
    while not end.search(text) and lines:
        text += "\n" + lines.pop(0)
    found = end.search(text)
    text = text[: found.start()] if found else text
    return text.replace('\\"', '"') if quote == '"' else text


def parse_dotenv(text: str) -> dict[str, str]:
    """KEY=VALUE lines with optional `export `, quotes (multi-line when quoted) and comments."""
    values: dict[str, str] = {}
    lines = text.splitlines()
    while lines:
        match = _DOTENV_LINE.match(lines.pop(0))
        if match:
            values[match.group(1)] = _unquote(match.group(2).strip(), lines)
    return values


def dotenv_secret_values(workspace_root: Path) -> list[str]:
    """Values in `.env` and `.env.*` at the workspace root, to be masked in command output.

    Every value counts, not only secret-named ones: .env files exist to hold what should not
    be committed. Values shorter than the redactor's minimum are skipped (too likely to match
    ordinary text)."""
    values: list[str] = []
    for path in sorted(workspace_root.glob(".env*")):
        if not (path.name == ".env" or path.name.startswith(".env.")) or not path.is_file():
            continue
        try:
            if path.stat().st_size > _MAX_DOTENV_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        values += [v for v in parse_dotenv(text).values() if len(v) >= MIN_SECRET_LENGTH]
    return values
