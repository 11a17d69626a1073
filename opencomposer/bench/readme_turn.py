"""The README's agent turn with the default model, timed: what a new user waits for.

The README shows a turn started over HTTP in the user's project with the model `make serve`
pulls (SmolLM2-135M on the embedded engine, default settings). Here the same turn runs in
the runtime itself (HTTP adds milliseconds to a turn of tens of seconds) in a small project,
timed from the turn's start to its end, the model's loading included, as a first turn has
it. The baseline is the goal the project holds itself to: a minute on a fresh machine. The
row's note says how the turn ended, since a turn that stops early for a loop or its step cap
is fast for a reason a user should know.
"""

import subprocess
import tempfile
import time
from pathlib import Path

from opencomposer.bench.rows import Row
from opencomposer.config import Settings

QUESTION = "What does calc.py do?"
GOAL_SECONDS = 60.0
CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


async def time_readme_turn(models_dir: Path | None = None) -> Row:
    """One turn of the default model on `QUESTION`; pulls the model first if it is missing
    (not timed), into `models_dir` (default: the user's models folder, where `make serve`
    puts it)."""
    from opencomposer.agent.protocol.items import TextInput
    from opencomposer.agent.runtime import AgentRuntime
    from opencomposer.serving.engines import make_engine
    from opencomposer.serving.model_store import DEFAULT_CHAT_MODEL, is_installed, pull

    with tempfile.TemporaryDirectory(prefix="opencomposer-bench-readme-") as scratch:
        root = Path(scratch)
        settings = Settings(home=root / "home", models_dir=models_dir or Settings().models_dir)
        if not is_installed(settings.models_dir, DEFAULT_CHAT_MODEL):
            pull(DEFAULT_CHAT_MODEL, settings.models_dir)
        project = root / "myproject"
        project.mkdir()
        (project / "calc.py").write_text(CALC)
        subprocess.run(["git", "init", "-q"], cwd=project, check=True)
        engine = make_engine(settings.engine, settings.models_dir)
        runtime = AgentRuntime(settings, engine)
        try:
            session = await runtime.start_thread(project)
            started = time.perf_counter()
            turn = await session.run_turn([TextInput(text=QUESTION)])
            wall = time.perf_counter() - started
        finally:
            await runtime.close()
            await engine.aclose()
    usage = turn.usage
    return Row(
        f"README turn, {DEFAULT_CHAT_MODEL}: wall time",
        "goal",
        GOAL_SECONDS,
        wall,
        "s",
        f"{QUESTION!r}: {turn.status.value}, stop_reason {turn.stop_reason}, "
        f"{usage.model_calls} model call(s), {usage.prompt_tokens:,} prompt and "
        f"{usage.completion_tokens:,} generated tokens; model loading included",
    )
