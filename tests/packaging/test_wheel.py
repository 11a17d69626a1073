"""The wheel as a user installs it: every subpackage under `opencomposer.*`, nothing bare,
and the command working from a fresh virtual environment."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from opencomposer.serving import model_store

REPO = Path(__file__).resolve().parents[2]
ROOTS = {
    "opencomposer": "opencomposer",
    "agent": "opencomposer/agent",
    "lsp": "opencomposer/lsp",
    "serving": "opencomposer/serving",
    "kernels": "opencomposer/kernels",
    "training": "opencomposer/training",
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Build from a copy, so the build leaves nothing behind in the working tree.
    source = tmp_path_factory.mktemp("src") / "opencomposer"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "node_modules"
        ),
    )
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "--wheel-dir",
            str(out),
            str(source),
        ],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("opencomposer-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with the wheel installed; its dependencies come from this test's venv
    through a path entry (installing torch again would cost a minute and a gigabyte)."""
    venv = tmp_path_factory.mktemp("venv") / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "deps-from-test-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
        check=True,
        timeout=300,
    )
    # Python 3.11 seeds venvs with an old setuptools that would shadow the one torch needs.
    subprocess.run(
        [str(python), "-m", "pip", "uninstall", "--quiet", "--yes", "setuptools"],
        check=True,
        timeout=120,
    )
    return venv


def test_wheel_holds_every_subpackage_and_no_bare_module(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"opencomposer", wheel.name.split("-py3")[0] + ".dist-info"}
    for folder, installed in ROOTS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            relative = init.relative_to(REPO / folder).as_posix()
            assert f"{installed}/{relative}" in names, relative
    data_files = [*(REPO / "agent").rglob("*.scm"), *(REPO / "agent").rglob("*.j2")]
    assert data_files
    for data in data_files:  # tree-sitter queries and prompt templates, loaded at run time
        relative = data.relative_to(REPO / "agent").as_posix()
        assert f"opencomposer/agent/{relative}" in names, relative
    tasks = sorted((REPO / "training" / "eval" / "tasks").rglob("*"))
    for task_file in (path for path in tasks if path.is_file()):  # the built-in bench suite
        relative = task_file.relative_to(REPO / "training").as_posix()
        assert f"opencomposer/training/{relative}" in names, relative
    for name in model_store.HEAD_FILES:  # SmolLM2's MTP head, installed with the model
        assert f"opencomposer/serving/model_recipes/smollm2_mtp/{name}" in names, name
    entry_points = (
        zipfile.ZipFile(wheel)
        .read(next(n for n in names if n.endswith("entry_points.txt")))
        .decode()
    )
    assert "opencomposer = opencomposer.serving.cli.app:main" in entry_points


def test_installed_command_works_from_a_fresh_venv(fresh_venv: Path, tmp_path: Path):
    bin_dir = fresh_venv / "bin"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            args, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, check=check
        )

    assert "doctor" in run("opencomposer", "--help").stdout
    doctor = json.loads(run("opencomposer", "doctor", "--json").stdout)
    assert doctor["healthy"] is True
    assert {"python", "torch", "sandbox", "engine"} <= {c["name"] for c in doctor["checks"]}
    assert "engine.base_url" in run("opencomposer", "config", "show").stdout
    schema = json.loads(run("opencomposer", "protocol", "schema").stdout)
    assert "turn/start" in schema["methods"]
    assert "no traces yet" in run("opencomposer", "traces", "list").stdout
    listed = json.loads(run("opencomposer", "bench", "list", "--json").stdout)
    assert len(listed) >= 20 and not any(row.get("problems") for row in listed)

    python = str(bin_dir / "python")
    located = run(
        python,
        "-c",
        "import opencomposer.agent.protocol, opencomposer.serving.engines"
        ".openai as m; print(m.__file__)",
    ).stdout
    assert located.startswith(str(fresh_venv))
    for bare in ("agent", "lsp", "serving", "kernels", "training"):
        proc = run(python, "-c", f"import {bare}", check=False)
        assert proc.returncode == 1 and "ModuleNotFoundError" in proc.stderr, bare
    run(python, "-m", "pip", "check")
