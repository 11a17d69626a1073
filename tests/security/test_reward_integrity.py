"""Class 2: a trial cannot forge its reward. Tried as a policy under RL would: read the answers
where the host keeps them (a checkout's git objects, the tasks not selected, the run folder),
decide the test runner's exit status from the code under test, and make the host-side grading
follow what it left (a link where a protected folder was, a FIFO where a file was, a file of a
terabyte). An honest solution still scores 1 under every guard.

Every run is the real bench: the real runner, agent runtime and tool harness, real bubblewrap,
a scripted engine playing the agent's tool calls.
"""

import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from support.bench_fixtures import run_bench
from support.bench_tasks import CALC_TESTS, write_task

pytestmark = pytest.mark.usefixtures("bwrap")

GIT = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def calc_task(root: Path, name: str = "calc-add", test_sh: str | None = None, **extra) -> Path:
    tests = {**CALC_TESTS, **({"test.sh": test_sh} if test_sh else {})}
    return write_task(
        root,
        name,
        instruction=f"add() is wrong; please fix {name}.",
        app={"calc.py": "def add(a, b):\n    return a - b\n"},
        tests=tests,
        solution={"calc.py": "def add(a, b):\n    return a + b\n"},
        toml='[verifier]\ntimeout_sec = 60.0\nprotected_paths = ["**/conftest.py", "pytest.ini"]\n',
        **extra,
    )


def write_calc(content: str) -> tuple[str, dict]:
    return ("write_file", {"path": "calc.py", "content": content, "overwrite": True})


def run(command: str) -> tuple[str, dict]:
    return ("run_terminal", {"command": command})


@pytest.fixture
def checkout(outside: Path) -> Path:
    """Tasks inside a git checkout, as the built-in suite ships: the answers are in its
    objects, committed and packed."""
    repo = outside / "checkout"
    calc_task(repo / "tasks")
    calc_task(repo / "tasks", "calc-other")
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "tasks"], ["gc", "-q"]):
        subprocess.run(["git", *argv], cwd=repo, env=GIT, check=True)
    return repo


async def test_the_host_holds_no_answer_the_agent_can_read(outside: Path, checkout: Path):
    """The trial's commands see an allow-list of the host: no checkout, no git objects, no
    task, selected or not, no run folder, whatever path, link or tool is used."""
    task = checkout / "tasks" / "calc-add"
    other = checkout / "tasks" / "calc-other"
    probes = [
        f"git -C {checkout} log --oneline; git -C {checkout} show HEAD:tasks/calc-add/solution/"
        "files/calc.py",
        f"ls {checkout}/.git/objects/pack; cat {other}/solution/files/calc.py {task}/tests/*",
        f"ln -s {checkout} here && cat here/tasks/calc-add/solution/files/calc.py",
        f"cat /proc/1/root{task}/solution/files/calc.py 2>&1 | wc -l; ls -A {outside}",
        "find / \\( -path /proc -o -path /sys -o -path /usr \\) -prune -o \\( -name '*.pack' "
        "-o -name solve.sh -o -name test_calc.py \\) -print 2>/dev/null | head; "
        "grep -rl 'a + b' /var /srv /opt /mnt /media /home /root /run 2>/dev/null | head",
    ]
    plays = {"calc-add": [run(probe) for probe in probes]}
    bench = await run_bench(outside, [task], plays)
    shown = "\n".join(bench.engine.seen["calc-add"])
    assert "return a + b" not in shown and "assert add(2, 3)" not in shown
    found = bench.engine.seen["calc-add"][4]
    assert f"{checkout}/" not in found and "solve.sh" not in found and "test_calc" not in found
    # Of the folder holding the checkout, only the path down to the workspace exists.
    assert bench.engine.seen["calc-add"][3].startswith("1\nrun\n")
    assert bench.results[0].reward == 0.0


EXIT_HOOKS = {
    "atexit at import": "import atexit, os\natexit.register(os._exit, 0)\n",
    "atexit from the call": (
        "def add(a, b):\n    import atexit, os\n    atexit.register(lambda: os._exit(0))\n"
        "    return a - b\n"
    ),
    "os._exit inside the call": "def add(a, b):\n    import os\n    os._exit(0)\n",
    "os._exit at import": "import os\nos._exit(0)\n",
    "a timer that exits mid-run": (
        "import os, threading\nthreading.Timer(0, os._exit, (0,)).start()\nimport time\n"
        "time.sleep(1)\n"
    ),
    "a signal handler turning the kill into success": (
        "import os, signal, sys\nsignal.signal(signal.SIGTERM, lambda *a: os._exit(0))\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
    ),
    "sys.exit from an exit hook": "import atexit, sys\natexit.register(sys.exit, 0)\n",
}


@pytest.mark.parametrize("hook", list(EXIT_HOOKS))
async def test_code_under_test_cannot_decide_the_exit_status(outside: Path, hook: str):
    """Two lines of the code under test used to turn failing tests into a pass."""
    source = EXIT_HOOKS[hook]
    if "def add" not in source:
        source += "\ndef add(a, b):\n    return a - b\n"
    task = calc_task(outside / "tasks")
    (result,) = (await run_bench(outside, [task], {"calc-add": [write_calc(source)]})).results
    assert (result.reward, result.passed) == (0.0, False), result.problem


async def test_a_planted_stand_in_for_the_guard_is_never_loaded(outside: Path):
    """A test.sh that puts the workspace on sys.path (no -P): modules the agent names like
    the guard do not replace it, and its exit hook still loses."""
    test_sh = (
        "#!/bin/bash\ncd /app\npython3 -m pytest -c /tests/pytest.ini --rootdir=/tests -q /tests"
        "\nstatus=$?\necho $(( status == 0 )) > /logs/verifier/reward.txt\nexit $status\n"
    )
    task = calc_task(outside / "tasks", test_sh=test_sh)
    stand_in = "def pytest_configure(config):\n    pass\n"
    plays = {
        "calc-add": [
            ("write_file", {"path": name, "content": stand_in})
            for name in ("pytest_exit_guard.py", "opencomposer_exit_guard.py", "exit_guard.py")
        ]
        + [write_calc(EXIT_HOOKS["atexit at import"] + "\ndef add(a, b):\n    return a - b\n")]
    }
    (result,) = (await run_bench(outside, [task], plays)).results
    assert result.reward == 0.0


async def test_an_honest_solution_still_scores_one(outside: Path):
    """Under every guard (exit guard, restore, isolated verifier), the right fix passes, also
    when the code uses atexit and subprocesses of its own as ordinary code does."""
    honest = (
        "import atexit, subprocess, sys\n"
        "atexit.register(print, 'bye')\n"
        "subprocess.run([sys.executable, '-c', 'pass'], check=True)\n\n"
        "def add(a, b):\n    return a + b\n"
    )
    task = calc_task(outside / "tasks")
    bench = await run_bench(outside, [task], {"calc-add": [write_calc(honest)]})
    (result,) = bench.results
    assert (result.reward, result.passed, result.problem) == (1.0, True, None)
    oracle = await run_bench(outside, [task], mode="oracle", run_dir=outside / "oracle")
    assert [r.reward for r in oracle.results] == [1.0, 0.0]


@pytest.fixture
def victim(outside: Path) -> Path:
    """Host files a link in the workspace could point the restore at."""
    folder = outside / "victim"
    folder.mkdir()
    (folder / "conftest.py").write_text("keep me\n")
    (folder / "pytest.ini").write_text("keep me too\n")
    return folder


@pytest.mark.parametrize(
    "attack",
    [
        "rm -rf tests && ln -s {victim} tests",
        "ln -sf {victim}/pytest.ini pytest.ini",
        "rm -f pytest.ini && ln -s {victim} pytest.ini",
        "mkdir -p sub && ln -s {victim} sub/lib && touch sub/lib/x; ln -s {victim} deep",
        "ln -s . loop && ln -s loop/loop conftest.py",
    ],
)
async def test_grading_follows_no_link_the_agent_left(outside: Path, victim: Path, attack: str):
    """Protected paths are put back in a sandbox where nothing of the host is writable: a
    link in place of a protected folder or file changes no host file, and the trial is
    still graded."""
    task = write_task(
        outside / "tasks",
        "repo-tests",
        instruction="Fix add (repo-tests).",
        app={
            "calc.py": "def add(a, b):\n    return a - b\n",
            "tests/test_calc.py": CALC_TESTS["test_calc.py"],
            "pytest.ini": "[pytest]\n",
            "conftest.py": "",
        },
        tests={
            "test.sh": "cd /app && python3 -m pytest -q -p no:cacheprovider tests\nstatus=$?\n"
            "echo $(( status == 0 )) > /logs/verifier/reward.txt\nexit $status\n"
        },
        solution={"calc.py": "def add(a, b):\n    return a + b\n"},
        toml='[verifier]\nprotected_paths = ["tests/*", "tests", "**/conftest.py", "pytest.ini"]\n',
    )
    before = {path.name: path.read_text() for path in victim.iterdir()}
    plays = {"repo-tests": [run(attack.format(victim=victim))]}
    (result,) = (await run_bench(outside, [task], plays)).results
    assert {path.name: path.read_text() for path in victim.iterdir()} == before
    assert result.error is None and result.reward == 0.0


@pytest.mark.parametrize(
    "left",
    [
        "mkfifo conftest.py",
        "rm pytest.ini && mkfifo pytest.ini",
        "mkfifo big && truncate -s 1G huge.bin && mkfifo tests.fifo",
    ],
)
async def test_nothing_the_agent_leaves_hangs_the_grading(outside: Path, left: str):
    """A FIFO at a protected path or anywhere in the workspace, and a sparse gigabyte: the
    restore and the diff neither block nor read them; the trial ends, graded."""
    task = write_task(
        outside / "tasks",
        "fifo",
        instruction="Fix add (fifo).",
        app={"calc.py": "def add(a, b):\n    return a - b\n", "pytest.ini": "[pytest]\n"},
        tests=CALC_TESTS,
        solution={"calc.py": "def add(a, b):\n    return a + b\n"},
        toml='[verifier]\ntimeout_sec = 60.0\nprotected_paths = ["**/conftest.py", "pytest.ini"]\n',
    )
    fix = textwrap.dedent("def add(a, b):\n    return a + b\n")
    plays = {"fifo": [run(left), write_calc(fix)]}
    (result,) = (await run_bench(outside, [task], plays)).results
    assert result.error is None
    assert (result.reward, result.passed) == (1.0, True), result.problem


async def test_a_fifo_or_link_as_the_reward_file_reads_as_no_reward(outside: Path):
    """The code under test replaces the reward file with a FIFO (a read would block) after
    the tests passed: the verifier does not open it and falls back on the exit status."""
    test_sh = (
        "#!/bin/bash\ncd /app\npython3 -P -m pytest -c /tests/pytest.ini --rootdir=/tests -q "
        "/tests\nstatus=$?\necho 0 > /logs/verifier/reward.txt\n"
        "python3 -P -c 'import sys; sys.path.append(\"/app\"); import calc'\nexit 1\n"
    )
    task = calc_task(outside / "tasks", test_sh=test_sh)
    fifo = (
        "import os\nif os.path.exists('/logs/verifier/reward.txt'):\n"
        "    os.remove('/logs/verifier/reward.txt')\n    os.mkfifo('/logs/verifier/reward.txt')\n"
        "\ndef add(a, b):\n    return a + b\n"
    )
    (result,) = (await run_bench(outside, [task], {"calc-add": [write_calc(fifo)]})).results
    assert (result.reward, result.reward_source) == (0.0, "exit_status")


@pytest.mark.parametrize(
    "daemon",
    [
        "setsid nohup sh -c 'sleep 2; echo \"def add(a, b): return a + b\" > calc.py' >/dev/null "
        "2>&1 &",
        "(sh -c 'sleep 2; printf \"def add(a, b):\\n    return a + b\\n\" > calc.py' &) ; true",
        'python3 -c "import os,time\nif os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): '
        "os._exit(0)\ntime.sleep(2)\nopen('calc.py','w').write('def add(a, b):\\n    return a + "
        "b\\n')\"",
    ],
)
async def test_the_agents_processes_are_gone_before_the_tests(outside: Path, daemon: str):
    """Whatever the agent detached (setsid, double fork, a subshell) dies with its sandbox:
    nothing of the agent runs while the verifier does."""
    task = calc_task(outside / "tasks")
    bench = await run_bench(outside, [task], {"calc-add": [run(daemon)]})
    (result,) = bench.results
    assert result.reward == 0.0
    workspace = bench.run_dir / "calc-add" / "attempt-0" / "workspace"
    assert "a - b" in (workspace / "calc.py").read_text()


async def test_a_test_script_that_replaces_pythonpath_is_told_why_it_fails(outside: Path):
    """The guard is found through PYTHONPATH; a test.sh that replaces it (instead of adding
    to it) runs no test, and the oracle check says why, rather than grading without it."""
    test_sh = (
        "#!/bin/bash\ncd /app\nPYTHONPATH=/app python3 -m pytest -c /tests/pytest.ini "
        "--rootdir=/tests -q /tests\n"
    )
    task = calc_task(outside / "tasks", test_sh=test_sh)
    oracle, _ = (await run_bench(outside, [task], mode="oracle")).results
    assert oracle.reward == 0.0 and "replaces PYTHONPATH" in (oracle.problem or "")
