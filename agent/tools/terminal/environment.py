"""The environment commands run with: an allow-list, every interactive program disarmed.

A command gets the variables a shell and the common toolchains need to work (ALLOWED, each
by its exact name: a prefix such as `LC_` would pass `LC_MY_TOKEN` too), the names or `*`
patterns the user configured (`tools.sandbox.env`), and our NON_INTERACTIVE values; nothing
else of the server's environment reaches it. A deny-list
by name cannot work: `DATABASE_URL`, `SENTRY_DSN` or `MY_APP_PWD` name no secret word.

What is left out is not forgotten: values that look like credentials (a secret-sounding
name, a URL with a password, a long random token) go to the redactor, so a command that
finds them some other way (a config file, /proc) still cannot show them to the model.
"""

import fnmatch
from collections.abc import Iterable, Mapping

from opencomposer.redact import looks_like_credential, url_credentials

# What commands get from the server's environment, with our NON_INTERACTIVE values on top.
# The shell's basics (who, where, which locale and time zone, where temporary files go), and
# the variables that say where a toolchain lives, without which `python`, `node`, `go`,
# `cargo` or `java` found on PATH cannot find their own libraries or packages (a virtual
# environment's site-packages, nvm's node, the Rust toolchain rustup selected). Nothing here
# holds a credential or a handle to one (no proxies: their URLs carry passwords; no agent
# sockets, no D-Bus, no display).
ALLOWED = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TMP",
    "TEMP", "TERM",
    "JAVA_HOME", "GOPATH", "GOROOT", "GOBIN", "CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN",
    "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYENV_ROOT", "PYENV_VERSION",
    "NVM_DIR", "NVM_BIN", "VOLTA_HOME", "PNPM_HOME", "BUN_INSTALL", "DENO_INSTALL_ROOT",
    "GEM_HOME", "GEM_PATH", "RBENV_ROOT", "ASDF_DIR", "ASDF_DATA_DIR", "SDKMAN_DIR",
    "GRADLE_USER_HOME", "MAVEN_HOME", "ANDROID_HOME", "ANDROID_SDK_ROOT", "DOTNET_ROOT",
    "CUDA_HOME",
    # The locale's categories (POSIX and glibc's), by name.
    "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY", "LC_MESSAGES",
    "LC_PAPER", "LC_NAME", "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION",
})  # fmt: skip

# Never passed, even when a configured pattern matches: our own settings (the server token,
# the engine's API key).
NEVER_PASSED_PREFIXES = ("OPENCOMPOSER_",)
# Handles to agents that hand out credentials on request (the SSH and GPG agents, the desktop
# keyring over D-Bus, Kerberos, git's credential helpers): passed only when configured by
# their exact name, never by a pattern; their values (socket paths) are not secrets.
ACCESS_NAMES = frozenset({
    "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS", "KRB5CCNAME", "GIT_ASKPASS",
    "SSH_ASKPASS", "VSCODE_GIT_IPC_HANDLE", "VSCODE_GIT_ASKPASS_MAIN", "VSCODE_GIT_ASKPASS_NODE",
})  # fmt: skip

# Any of these words, between underscores, marks a variable as secret: OPENAI_API_KEY,
# AWS_SECRET_ACCESS_KEY, GH_TOKEN, DB_PASSWORD, MY_APP_PWD, SENTRY_DSN. AUTH and PAT
# (personal access token: GITHUB_PAT) are words of their own, so PATH and XAUTHORITY are not
# caught; PWD alone (or OLDPWD) is the shell's working directory.
SECRET_WORDS = frozenset({
    "TOKEN", "TOKENS", "KEY", "KEYS", "APIKEY", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS",
    "PASSWD", "PASS", "PWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "PAT",
    "DSN", "COOKIE",
})  # fmt: skip
# Secrets whose names hide the word (libpq, MySQL).
SECRET_NAMES = frozenset({"PGPASSWORD", "MYSQL_PWD"})
_NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})

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


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    if upper in _NOT_SECRET_NAMES:
        return False
    return upper in SECRET_NAMES or any(word in SECRET_WORDS for word in upper.split("_"))


def credential_parts(name: str, value: str) -> list[str]:
    """What of a variable's value to mask: the whole value under a secret-sounding name or
    when it looks like a credential, and the password or key inside a URL on its own too
    (text may show it without the rest). Empty for anything else: a false positive masks
    ordinary text everywhere, so paths, words and numbers under plain names are left."""
    if not value:
        return []
    parts = url_credentials(value)
    if (
        (is_secret_name(name) and name.upper() not in ACCESS_NAMES)
        or parts
        or looks_like_credential(value)
    ):
        return [value, *parts]
    return []


def _passes(name: str, patterns: Iterable[str]) -> bool:
    """Whether a configured entry lets `name` through: an exact name always, a pattern only
    for names that hold no handle to a credential agent."""
    for pattern in patterns:
        if pattern == name:
            return True
        if name not in ACCESS_NAMES and fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def scrub_environment(
    base: Mapping[str, str], secret_names: Iterable[str] = (), passed: Iterable[str] = ()
) -> tuple[dict[str, str], list[str]]:
    """The environment for commands, and the values the redactor must mask.

    `passed` are the user's configured names and patterns (`tools.sandbox.env`); values in
    them that look like credentials reach commands but are still masked in what the model
    and clients see. `secret_names` (`tools.secret_env`) are never passed, always masked.
    """
    configured_secret = {name.upper() for name in secret_names}
    patterns = list(passed)
    env: dict[str, str] = {}
    secrets: list[str] = []
    for name, value in base.items():
        upper = name.upper()
        if upper in configured_secret:
            if value:
                secrets.append(value)
            continue
        builtin = name in ALLOWED
        if not builtin:
            secrets += credential_parts(name, value)
        if not upper.startswith(NEVER_PASSED_PREFIXES) and (builtin or _passes(name, patterns)):
            env[name] = value
    env.update(NON_INTERACTIVE)
    return env, secrets
