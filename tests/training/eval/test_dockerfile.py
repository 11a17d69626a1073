"""Harbor's own environment format: a task whose environment is a Dockerfile alone, built on
this host in the sandbox, and what cannot be honoured without a container runtime, said."""

import textwrap
from pathlib import Path

import pytest
from support.bench_fixtures import run_bench

from opencomposer.training.eval.task import TaskError, load_task

pytestmark = pytest.mark.usefixtures("bwrap")

TEST_SH = """\
#!/bin/bash
cd /srv/project
[ "$GREETING" = "hello world" ] || { echo "ENV not applied: $GREETING"; exit 1; }
[ -f built.txt ] && [ -f lib/util.py ] && [ -f config/settings.ini ] || { ls -R; exit 1; }
python3 -P -c 'import sys; sys.path.insert(0, "."); from app import answer; assert answer() == 42'
"""


def harbor_task(root: Path, dockerfile: str, name: str = "harbor-task") -> Path:
    """A task as Terminal-Bench 2.x ships them: no app/, no setup.sh."""
    task = root / name
    environment = task / "environment"
    (environment / "src" / "lib").mkdir(parents=True)
    (environment / "src" / "app.py").write_text("def answer():\n    return 41\n")
    (environment / "src" / "lib" / "util.py").write_text("X = 1\n")
    (environment / "settings.ini").write_text("[app]\n")
    (environment / "Dockerfile").write_text(textwrap.dedent(dockerfile))
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text(TEST_SH)
    (task / "solution").mkdir()
    (task / "solution" / "solve.sh").write_text("cd /srv/project && sed -i 's/41/42/' app.py\n")
    (task / "instruction.md").write_text(f"Make answer() return 42 ({name}).\n")
    (task / "task.toml").write_text('version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n')
    return task


GOOD = """\
    FROM python:3.11-slim-bookworm
    ARG GREETING_WORD=world
    ENV GREETING="hello ${GREETING_WORD}" \\
        PYTHONDONTWRITEBYTECODE=1
    WORKDIR /srv/project
    RUN apt-get update && apt-get install -y --no-install-recommends git \\
        && rm -rf /var/lib/apt/lists/*
    COPY src/ ./
    COPY ["settings.ini", "config/"]
    RUN echo "built with $GREETING" > built.txt && test -f lib/util.py
    CMD ["python3", "app.py"]
"""


async def test_a_dockerfile_task_is_built_here_and_graded(outside: Path):
    """WORKDIR, ARG, ENV, COPY (folder contents, JSON form, into a folder) and RUN are
    honoured; an install of what this host has is skipped; the oracle passes and the
    untouched repository fails, with the workspace at the WORKDIR and the ENV applied."""
    task_dir = harbor_task(outside / "tasks", GOOD)
    task = load_task(task_dir)
    assert str(task.workdir) == "/srv/project"
    assert task.env["GREETING"] == "hello world"
    assert any("skipped apt-get" in warning for warning in task.warnings), task.warnings
    run = await run_bench(outside, [task_dir], mode="oracle")
    oracle, untouched = run.results
    assert (oracle.reward, oracle.error) == (1.0, None), (oracle.error, oracle.problem)
    assert (untouched.reward, untouched.error) == (0.0, None)
    workspace = run.run_dir / "harbor-task" / "oracle" / "workspace"
    assert (workspace / "built.txt").read_text() == "built with hello world\n"
    assert not (workspace / "src").exists() and (workspace / "lib" / "util.py").exists()


@pytest.mark.parametrize(
    ("dockerfile", "problem"),
    [
        ("FROM python:3.11 AS build\nFROM debian:12\nWORKDIR /app\n", "multi-stage"),
        ("FROM python:3.11\nWORKDIR /app\nCOPY --from=build /x /app/\n", "multi-stage"),
        ("FROM python:3.11\nWORKDIR /app\nCOPY src/ /opt/elsewhere/\n", "only copies into"),
        (
            "FROM debian:12\nWORKDIR /app\nRUN apt-get install -y no-such-package-octest\n",
            "no-such-package-octest, which this host lacks",
        ),
        (
            "FROM python:3.11\nWORKDIR /app\nRUN pip install --no-cache-dir no-such-dist-octest\n",
            "no-such-dist-octest",
        ),
        ("FROM brainfuck-lang:1\nWORKDIR /app\nADD https://x.invalid/a.tgz /app/\n", "URL"),
    ],
)
def test_what_needs_a_container_runtime_is_said(outside: Path, dockerfile: str, problem: str):
    task_dir = harbor_task(outside / "tasks", dockerfile)
    with pytest.raises(TaskError) as caught:
        load_task(task_dir)
    assert problem in str(caught.value)


def test_a_toolchain_at_another_version_is_a_warning(outside: Path):
    task_dir = harbor_task(outside / "tasks", "FROM python:2.7\nWORKDIR /app\nCOPY src/ ./\n")
    warnings = load_task(task_dir).warnings
    assert any("built and tested with this host's python" in w for w in warnings), warnings


async def test_a_failing_run_step_fails_the_environment_with_its_output(outside: Path):
    task_dir = harbor_task(
        outside / "tasks",
        "FROM python:3.11\nWORKDIR /app\nCOPY src/ ./\nRUN echo about to fail && exit 3\n",
    )
    run = await run_bench(outside, [task_dir], mode="oracle")
    for result in run.results:
        assert result.error is not None and "line 4 (RUN) exited with 3" in result.error
        assert "about to fail" in result.error
