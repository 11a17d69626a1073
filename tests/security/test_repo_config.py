"""A repository's `.opencomposer.toml` can tighten the user's security settings, never loosen
them: lists of secrets and hidden paths only grow, lists of what is let through only shrink,
switches move only to the safe side, limits only go down, approvals only get stricter, and
what decides where code and credentials go stays user-only. A loosening value is refused
with an error that names the file, the key and why; env and flags, the user's own, may do
anything. Checked on the loaded settings, the CLI, the real sandbox and a real turn."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel
from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer import paths
from opencomposer.agent.protocol.common import ApprovalMode
from opencomposer.agent.protocol.items import ItemStatus, TextInput
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.config import ConfigError, LoadedSettings, Settings, load_settings
from opencomposer.config_trust import rule_of

CLI = str(Path(sys.executable).parent / "opencomposer")

USER = """
[tools]
secret_env = ["DEPLOY_TOKEN"]
[tools.sandbox]
env = ["MYAPP_*", "BUILD_MODE"]
hide = ["/srv/secrets"]
[agent]
max_steps = 50
[agent.approval]
commands = { "git push" = "deny", "pytest" = "auto" }
"""


@pytest.fixture
def user(isolated_home: Path) -> Path:
    """The user's own config file, with a secret, a pass-through list and a deny rule."""
    path = paths.user_config_file()
    path.parent.mkdir(parents=True)
    path.write_text(USER)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    return folder


def loaded(repo: Path, text: str) -> LoadedSettings:
    (repo / ".opencomposer.toml").write_text(text)
    return load_settings(repo)


def refused(repo: Path, text: str) -> str:
    (repo / ".opencomposer.toml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(repo)
    return str(caught.value)


# The same intent written as a table, dotted keys, an inline table and a capitalised table
# (TOML reads them alike; the loader must judge them alike).
SPELLINGS = [
    "[tools]\nsecret_env = {value}\n",
    "tools.secret_env = {value}\n",
    "tools = {{ secret_env = {value} }}\n",
    "[Tools]\nsecret_env = {value}\n",
]


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("[]", ["DEPLOY_TOKEN"]),  # emptied: the user's secret stays one
        ('["OTHER"]', ["DEPLOY_TOKEN", "OTHER"]),  # replaced: both are secrets
        ('["DEPLOY_TOKEN", "REPO_KEY"]', ["DEPLOY_TOKEN", "REPO_KEY"]),
    ],
)
def test_secret_env_only_grows(user: Path, repo: Path, spelling: str, value: str, expected):
    settings = loaded(repo, spelling.format(value=value)).settings
    assert settings.tools.secret_env == expected


@pytest.mark.parametrize(
    ("hide", "expected"),
    [
        ("[]", ["/srv/secrets"]),
        ('["/srv/other"]', ["/srv/secrets", "/srv/other"]),
        ('["/srv/other", "/srv/secrets"]', ["/srv/secrets", "/srv/other"]),
    ],
)
def test_hidden_paths_only_grow(user: Path, repo: Path, hide: str, expected: list[str]):
    for text in (f"[tools.sandbox]\nhide = {hide}\n", f"tools.sandbox.hide = {hide}\n"):
        settings = loaded(repo, text).settings
        assert settings.tools.sandbox.hide == [Path(path) for path in expected]


@pytest.mark.parametrize(
    ("text", "added"),
    [
        ('[tools.sandbox]\nenv = ["AWS_SECRET_ACCESS_KEY"]\n', "AWS_SECRET_ACCESS_KEY"),
        ('[tools.sandbox]\nenv = ["*"]\n', "*"),
        ('tools.sandbox.env = ["MYAPP_*", "BUILD_MODE", "HOME*"]\n', "HOME*"),
        ('[tools.sandbox]\nenv = ["MYAPP_*", "DEPLOY_*"]\n', "DEPLOY_*"),
        ('[tools.sandbox]\nexpose = ["~/.ssh"]\n', "~/.ssh"),
    ],
)
def test_what_commands_receive_cannot_widen(user: Path, repo: Path, text: str, added: str):
    message = refused(repo, text)
    key = "tools.sandbox.expose" if "expose" in text else "tools.sandbox.env"
    assert message.startswith(f"{repo / '.opencomposer.toml'}: {key} cannot be loosened")
    assert f"{added} would be added; it may only drop entries" in message
    assert "A repository could use it to" in message
    assert str(user) in message  # where to set it instead, if the user means it


def test_what_commands_receive_can_narrow(user: Path, repo: Path):
    settings = loaded(repo, '[tools.sandbox]\nenv = ["BUILD_MODE"]\nexpose = []\n').settings
    assert settings.tools.sandbox.env == ["BUILD_MODE"]
    assert settings.tools.sandbox.expose == []


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("tools.allow_network = true\n", "it would be true; only false may be set here"),
        ("[tools]\nallow_network = 1\n", "it would be true; only false may be set here"),
        ("[agent]\nmax_steps = 51\n", "51 is above your 50; it may only lower it"),
        ("agent.max_wall_time = 86400\n", "86400.0 is above your 3600.0"),
        ("agent.repetition_limit = 100\n", "100 is above your 4"),
        ("[tools]\noutput_cap = 10000000\n", "10000000 is above your 30000"),
        ("[tools.sandbox]\nmax_processes = 100000\n", "100000 is above your 1024"),
        ("[tools.sandbox]\nmax_lifetime = 1e9\n", "1000000000.0 is above your 3600.0"),
        ("[tools.sandbox]\nmax_file_bytes = 1e15\n", "is above your 2147483648"),
        ("[tools.sandbox]\nmax_cpu_seconds = 999999\n", "999999 is above your 7200"),
        # Unset, it is half the machine, worked out at run time: nothing to compare with.
        ("[tools.sandbox]\nmax_memory_bytes = 100000000\n", "a default worked out at run time"),
    ],
)
def test_loosening_switches_and_limits_is_refused(user: Path, repo: Path, text: str, why: str):
    message = refused(repo, text)
    key = text.split("=")[0].strip().split("\n")[-1]
    assert "cannot be loosened by a workspace file" in message
    assert why in message
    assert key in message


def test_tightening_switches_and_limits_applies(user: Path, repo: Path, monkeypatch):
    user.write_text(
        USER.replace("[tools.sandbox]\n", "[tools.sandbox]\nmax_memory_bytes = 1000000000\n")
    )
    monkeypatch.setenv("OPENCOMPOSER_TOOLS__ALLOW_NETWORK", "true")
    settings = loaded(
        repo,
        """
        [tools]
        allow_network = false
        output_cap = 2000
        [tools.sandbox]
        max_processes = 64
        max_memory_bytes = 200000000
        [agent]
        max_steps = 10
        max_turn_tokens = 5000
        max_wall_time = 60
        """,
    ).settings
    # The environment is the user's own and comes after the workspace file: it still wins.
    assert settings.tools.allow_network is True
    assert settings.tools.output_cap == 2000
    assert (settings.tools.sandbox.max_processes, settings.tools.sandbox.max_memory_bytes) == (
        64,
        200_000_000,
    )
    assert (settings.agent.max_steps, settings.agent.max_turn_tokens) == (10, 5000)
    assert settings.agent.max_wall_time == 60


def test_the_user_can_still_loosen_with_env_and_flags(user: Path, repo: Path, monkeypatch):
    monkeypatch.setenv("OPENCOMPOSER_TOOLS__SECRET_ENV", "[]")
    monkeypatch.setenv("OPENCOMPOSER_TOOLS__ALLOW_NETWORK", "true")
    (repo / ".opencomposer.toml").write_text("tools.allow_network = true\nagent.max_steps = 200\n")
    # The workspace file asks for what the user's own layers already give: no loosening.
    settings = load_settings(repo, {"agent.max_steps": 200}).settings
    assert settings.tools.secret_env == []
    assert settings.tools.allow_network is True
    assert settings.agent.max_steps == 200


@pytest.mark.parametrize(
    ("approval", "why"),
    [
        ('dangerous = "auto"', "dangerous would be auto, looser than your ask"),
        ('network = "auto"', "network would be auto, looser than your ask"),
        # A rule decides before the class modes: a new one at least as strict as the
        # strictest mode of the user's policy (deny here), else it could let a call through.
        ('tools = { run_terminal = "auto" }', "tools['run_terminal'] would be auto"),
        ('tools = { run_terminal = "ask" }', "tools['run_terminal'] would be ask"),
        ('commands = { "git push" = "ask" }', "commands['git push'] would be ask"),
        ('commands = { "git" = "auto" }', "commands['git'] would be auto"),
        ('commands = { "rm -rf" = "ask" }', "commands['rm -rf'] would be ask"),
    ],
)
def test_approvals_cannot_be_loosened(user: Path, repo: Path, approval: str, why: str):
    for text in (f"[agent.approval]\n{approval}\n", f"agent.approval.{approval}\n"):
        message = refused(repo, text)
        assert "agent.approval cannot be loosened by a workspace file" in message
        assert why in message
        assert "run tool calls without asking you" in message


def test_approvals_can_be_tightened(user: Path, repo: Path):
    policy = loaded(
        repo,
        """
        [agent.approval]
        writes_workspace = "ask"
        dangerous = "deny"
        tools = { write_file = "deny" }
        commands = { "pytest" = "ask", "make" = "deny" }
        """,
    ).settings.agent.approval
    assert (policy.writes_workspace, policy.dangerous) == (ApprovalMode.ask, ApprovalMode.deny)
    assert policy.tools == {"write_file": ApprovalMode.deny}
    assert policy.commands == {
        "git push": ApprovalMode.deny,  # the user's rule is kept
        "pytest": ApprovalMode.ask,
        "make": ApprovalMode.deny,
    }


def test_approvals_with_a_permissive_user_accept_ask_rules(isolated_home: Path, repo: Path):
    """Without a deny anywhere in the user's policy, a new rule may ask."""
    policy = loaded(repo, 'agent.approval.tools = { read_file = "ask" }\n').settings
    assert policy.agent.approval.tools == {"read_file": ApprovalMode.ask}


@pytest.mark.parametrize(
    "text",
    [
        '[server]\nworkspace_roots = ["/"]\n',
        'server.auth = "none"\n',
        'server = { allowed_origins = ["https://evil.example"] }\n',
        '[engine]\nbase_url = "https://evil.example/v1"\n',
        '[engine]\nbackend = "openai"\n',
        'engine.api_key = "x"\n',
        'engine.sglang_launch = "/tmp/evil"\n',
        'home = "/tmp/elsewhere"\n',
        'models_dir = "./models"\n',
        "[tools.sandbox]\nsomething_new = 1\n",  # a key added later is user-only too
        "tools.sandbox = 3\n",
        "[Server]\nport = 1\n",
    ],
)
def test_user_only_keys_are_refused(user: Path, repo: Path, text: str):
    message = refused(repo, text)
    assert "cannot be set in a workspace file, because a repository could use it to" in message
    assert message.startswith(str(repo / ".opencomposer.toml"))


def test_settings_without_a_rule_are_the_repository_s(user: Path, repo: Path):
    settings = loaded(
        repo, '[engine]\nmodel = "repo-model"\nidle_timeout = 300\n[tools]\ncommand_timeout = 90\n'
    ).settings
    assert (settings.engine.model, settings.engine.idle_timeout) == ("repo-model", 300)
    assert settings.tools.command_timeout == 90


def test_the_cli_reports_a_loosening_file_without_a_traceback(user: Path, repo: Path):
    (repo / ".opencomposer.toml").write_text("[tools]\nallow_network = true\n")
    proc = subprocess.run(
        [CLI, "config", "show", "-w", str(repo)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())  # as rich wrapped it
    assert "tools.allow_network cannot be loosened by a workspace file" in said
    assert "Traceback" not in proc.stderr


def test_an_emptied_secret_list_keeps_the_secret_from_commands(bwrap: Path, user: Path, repo: Path):
    """The real harness: the user passes MYAPP_* to commands and calls MYAPP_TOKEN a secret;
    the repository's file empties the secret list. The command still never sees it."""
    user.write_text('[tools]\nsecret_env = ["MYAPP_TOKEN"]\n[tools.sandbox]\nenv = ["MYAPP_*"]\n')
    (repo / ".opencomposer.toml").write_text("tools.secret_env = []\n")
    proc = subprocess.run(
        [
            CLI,
            "tool",
            "run_terminal",
            "-w",
            str(repo),
            "--args",
            '{"command": "echo token=${MYAPP_TOKEN:-unset} mode=$MYAPP_MODE"}',
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MYAPP_TOKEN": "tok-1234567890abcdef", "MYAPP_MODE": "fast"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "token=unset mode=fast" in proc.stdout
    assert "tok-1234567890abcdef" not in proc.stdout


async def test_a_tightened_policy_refuses_the_call_in_a_real_turn(
    isolated_home: Path, repo: Path, tmp_path: Path
):
    """The repository denies writes; the turn's write is declined and nothing is written."""
    (repo / ".opencomposer.toml").write_text('agent.approval.tools = { write_file = "deny" }\n')
    settings = load_settings(
        repo, {"home": str(tmp_path / "data"), "models_dir": str(tmp_path / "models")}
    ).settings
    replies = [Reply(calls=[call("write_file", path="new.txt", content="x")]), Reply(text="ok")]
    runtime = AgentRuntime(settings, ScriptedEngine(replies))
    try:
        session = await runtime.start_thread(repo)
        await session.run_turn([TextInput(text="write it")])
        write = next(i for i in session.items if i.type == "file_change")
        assert write.status == ItemStatus.declined and not (repo / "new.txt").exists()
    finally:
        await runtime.close()


# Settings a repository may choose freely: how the model runs and answers, the editor's
# options. A setting added to `engine`, `tools`, `agent`, `lsp` or `logging` must be given a
# rule in config.py or be added here on purpose; this test fails until someone decides.
REPOSITORY_OWNED = {
    *(
        f"engine.{name}"
        for name in [
            "model",
            "model_aliases",
            "context_window",
            "connect_timeout",
            "idle_timeout",
            "max_retries",
            "server_flavor",
            "device",
            "dtype",
            "threads",
            "speculative",
            "draft_tokens",
            "kv_cache_tokens",
            "max_batch_tokens",
            "kernels",
            "text_tool_calls",
        ]
    ),
    "tools.read_lines",
    "tools.command_timeout",
    *(
        f"agent.{name}"
        for name in [
            "max_step_tokens",
            "repeated_text_chars",
            "temperature",
            "context_window",
            "summary_trigger",
            "summary_max_tokens",
            "capture",
            "approval_timeout",
        ]
    ),
    "lsp.apply_edits",
    "lsp.reveal_edits",
    *(
        f"lsp.completion.{name}"
        for name in [
            "enabled",
            "debounce_ms",
            "max_tokens",
            "prefix_chars",
            "suffix_chars",
            "related_chars",
            "temperature",
        ]
    ),
    "logging.level",
}


def _unruled(model: type[BaseModel], inherited: object = None, prefix: str = "") -> set[str]:
    found = set()
    for name, field in model.model_fields.items():
        rule = rule_of(model, name) or inherited
        inner = field.annotation
        if rule is None and isinstance(inner, type) and issubclass(inner, BaseModel):
            found |= _unruled(inner, rule, f"{prefix}{name}.")
        elif rule is None:
            found.add(f"{prefix}{name}")
    return found


def test_every_setting_has_a_rule_or_was_left_to_repositories_on_purpose():
    assert _unruled(Settings) == REPOSITORY_OWNED
