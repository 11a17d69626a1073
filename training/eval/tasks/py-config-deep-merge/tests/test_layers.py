import copy
import json
import subprocess
import sys

import pytest

from deployer.config import load
from deployer.config.defaults import DEFAULTS
from deployer.config.merge import merge

PRISTINE = copy.deepcopy(DEFAULTS)


@pytest.fixture(autouse=True)
def defaults_untouched():
    yield
    assert DEFAULTS == PRISTINE, "loading a configuration changed DEFAULTS"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_one_key_overrides_one_key(tmp_path):
    local = write(tmp_path, "local.toml", "[db]\ntimeout = 30.0\n")
    db = load([local], environ={})["db"]
    assert db == {**PRISTINE["db"], "timeout": 30.0}


def test_layers_deep(tmp_path):
    base = write(tmp_path, "base.toml", '[db]\nhost = "db.internal"\n[db.pool]\nmax = 40\n[http]\nworkers = 8\n')
    local = write(tmp_path, "local.toml", '[db]\ntimeout = 30.0\n[db.pool]\nmin = 2\n[log]\nlevel = "debug"\n')
    config = load([base, local], environ={})
    assert config["db"] == {"host": "db.internal", "port": 5432, "name": "orders", "timeout": 30.0, "pool": {"min": 2, "max": 40}}
    assert config["http"] == {"port": 8080, "workers": 8, "cors_origins": ["https://shop.example.com"]}
    assert config["log"] == {"level": "debug", "json": False}
    assert config["service"] == PRISTINE["service"]


def test_later_files_win(tmp_path):
    a = write(tmp_path, "a.toml", "[db.pool]\nmax = 40\n")
    b = write(tmp_path, "b.toml", "[db.pool]\nmax = 60\n")
    assert load([a, b], environ={})["db"]["pool"] == {"min": 1, "max": 60}
    assert load([b, a], environ={})["db"]["pool"] == {"min": 1, "max": 40}


def test_lists_and_scalars_are_replaced(tmp_path):
    f = write(tmp_path, "f.toml", 'features = ["search"]\n[http]\ncors_origins = ["http://localhost:3000"]\n')
    config = load([f], environ={})
    assert config["features"] == ["search"]
    assert config["http"]["cors_origins"] == ["http://localhost:3000"]


def test_a_table_can_replace_a_value_and_back():
    assert merge({"a": 1, "b": {"c": 1}}, {"a": {"x": 1}, "b": 2}) == {"a": {"x": 1}, "b": 2}
    assert merge({"a": {"b": {"c": 1, "d": 2}}}, {"a": {"b": {"d": 3}, "e": 4}}) == {"a": {"b": {"c": 1, "d": 3}, "e": 4}}


def test_merge_does_not_touch_its_inputs():
    base = {"a": {"b": {"c": 1}}, "l": [1]}
    over = {"a": {"b": {"d": 2}}, "l": [2]}
    base_copy, over_copy = copy.deepcopy(base), copy.deepcopy(over)
    merged = merge(base, over)
    assert base == base_copy and over == over_copy
    merged["a"]["b"]["c"] = 99
    merged["l"].append(3)
    assert base == base_copy and over == over_copy


def test_loads_are_independent(tmp_path):
    a = write(tmp_path, "a.toml", "[db.pool]\nmax = 99\n[log]\njson = true\n")
    first = load([a], environ={})
    second = load([], environ={})
    assert second == PRISTINE and first["db"]["pool"]["max"] == 99
    first["db"]["pool"]["min"] = 7
    first["features"].append("beta")
    assert load([], environ={}) == PRISTINE


def test_environment_overrides_one_key(tmp_path):
    base = write(tmp_path, "base.toml", '[db]\nhost = "db.internal"\n')
    config = load([base], environ={"DEPLOYER__DB__POOL__MAX": "20", "DEPLOYER__LOG__JSON": "true", "HOME": "/root"})
    assert config["db"] == {**PRISTINE["db"], "host": "db.internal", "pool": {"min": 1, "max": 20}}
    assert config["log"] == {"level": "info", "json": True}


def test_cli_on_the_shipped_files():
    done = subprocess.run([sys.executable, "-m", "deployer.cli"], cwd="/app", capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    config = json.loads(done.stdout)
    assert config["db"] == {"host": "db.internal", "port": 5432, "name": "orders_prod", "timeout": 30.0, "pool": {"min": 1, "max": 40}}
    assert config["log"]["level"] == "debug" and config["http"]["workers"] == 8
