"""Configuration: precedence over five layers, provenance, and errors that name the source."""

import re
from pathlib import Path

import pytest

from opencomposer import paths
from opencomposer.config import ConfigError, load_settings, parse_override


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def test_defaults_with_no_files(isolated_home: Path):
    loaded = load_settings()
    assert loaded.files == []
    assert all(origin == "default" for _, _, origin in loaded.explain())
    settings = loaded.settings
    assert settings.home == isolated_home / ".local/share/opencomposer"
    assert (settings.server.host, settings.server.port) == ("127.0.0.1", 8765)


def test_each_layer_overrides_the_one_below(workspace: Path, monkeypatch: pytest.MonkeyPatch):
    user = write(
        paths.user_config_file(),
        """
        [engine]
        base_url = "http://user:1/v1"
        model = "user-model"
        max_retries = 5
        idle_timeout = 30
        [server]
        port = 9001
    """,
    )
    ws = write(
        workspace / ".opencomposer.toml",
        """
        [engine]
        model = "workspace-model"
        max_retries = 4
        idle_timeout = 40
    """,
    )
    monkeypatch.setenv("OPENCOMPOSER_ENGINE__MAX_RETRIES", "3")
    monkeypatch.setenv("OPENCOMPOSER_ENGINE__IDLE_TIMEOUT", "50")
    loaded = load_settings(workspace, {"engine.idle_timeout": 60})
    engine = loaded.settings.engine
    assert (engine.base_url, engine.model, engine.max_retries, engine.idle_timeout) == (
        "http://user:1/v1",
        "workspace-model",
        3,
        60.0,
    )
    assert loaded.settings.server.port == 9001
    assert loaded.files == [user, ws]
    set_keys = {key: origin for key, _, origin in loaded.explain() if origin != "default"}
    assert set_keys == {
        "engine.base_url": f"user file {user}",
        "engine.model": f"workspace file {ws}",
        "engine.max_retries": "env OPENCOMPOSER_ENGINE__MAX_RETRIES",
        "engine.idle_timeout": "command line",
        "server.port": f"user file {user}",
    }


def test_home_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("OPENCOMPOSER_HOME", str(tmp_path / "data"))
    loaded = load_settings()
    assert loaded.settings.home == tmp_path / "data"
    assert loaded.origin("home") == "env OPENCOMPOSER_HOME"


def test_wrong_type_names_the_file_the_key_and_the_expected_type(workspace: Path):
    ws = write(workspace / ".opencomposer.toml", '[engine]\nmax_retries = "lots"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(workspace)
    assert str(caught.value) == (
        "invalid configuration:\n"
        f"  workspace file {ws}: engine.max_retries = 'lots': Input should be a valid "
        "integer, unable to parse string as an integer"
    )


def test_unknown_key_suggests_the_right_one():
    user = write(paths.user_config_file(), "[server]\nprot = 1\n")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert f"user file {user}: unknown key server.prot; did you mean 'port'?" in message
    assert "valid here: host, port, token" in message


def test_out_of_range_value_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENCOMPOSER_SERVER__PORT", "70000")
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "env OPENCOMPOSER_SERVER__PORT: server.port = '70000': Input should be less"
        ),
    ):
        load_settings()


def test_engine_kernels_defaults_to_the_reference_and_names_the_choices():
    assert load_settings().settings.engine.kernels == "reference"
    assert load_settings(None, {"engine.kernels": "triton"}).settings.engine.kernels == "triton"
    with pytest.raises(ConfigError, match=r"engine\.kernels = 'cuda'.*'reference' or 'triton'"):
        load_settings(None, {"engine.kernels": "cuda"})


def test_invalid_toml_names_the_file_and_line():
    user = write(paths.user_config_file(), "[engine\nmodel = 1\n")
    with pytest.raises(ConfigError, match=rf"{user}: not valid TOML: .*line 1"):
        load_settings()


def test_secrets_are_masked_in_errors_and_in_explain(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENCOMPOSER_ENGINE__API_KEY", "sk-very-secret-value-123")
    loaded = load_settings()
    assert ("engine.api_key", "********", "env OPENCOMPOSER_ENGINE__API_KEY") in loaded.explain()
    assert loaded.settings.engine.api_key.get_secret_value() == "sk-very-secret-value-123"
    write(paths.user_config_file(), "[server]\ntoken = 1234567890\n")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "server.token = ********: Input should be a valid string" in str(caught.value)
    assert "1234567890" not in str(caught.value)


@pytest.mark.parametrize("key", ["engine.base_url", "engine.api_key", "server.port", "home"])
def test_a_workspace_cannot_redirect_code_or_credentials(workspace: Path, key: str):
    table, _, leaf = key.rpartition(".")
    text = f'[{table}]\n{leaf} = "x"\n' if table else f'{leaf} = "x"\n'
    write(workspace / ".opencomposer.toml", text)
    with pytest.raises(ConfigError, match=f"key {key} cannot be set in a workspace file"):
        load_settings(workspace)


@pytest.mark.parametrize(
    ("flag", "parsed"),
    [
        ("server.port=9000", ("server.port", 9000)),
        ("engine.idle_timeout=2.5", ("engine.idle_timeout", 2.5)),
        ("engine.base_url=http://h:1/v1", ("engine.base_url", "http://h:1/v1")),
        ('engine.model="a=b"', ("engine.model", "a=b")),
        ("logging.level = DEBUG", ("logging.level", " DEBUG")),
    ],
)
def test_parse_override(flag: str, parsed: tuple):
    assert parse_override(flag) == parsed


def test_override_without_equals_is_an_error():
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_override("server.port")
