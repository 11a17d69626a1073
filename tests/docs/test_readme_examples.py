"""The README's shell examples, run as written against a real `opencomposer serve`.

Only what a reader cannot avoid changing is substituted: the port (the server takes a free
one) and the placeholders the README names in capitals (THREAD) or leaves as `...`. The
server's engine is an OpenAI-compatible upstream (the fake one, scripted), so the turn is
quick and its answer known; the default model's own turn is timed by `bench http`.
"""

import json
import re
import subprocess
from pathlib import Path

from support.fake_openai import Compose, ThreadedFakeOpenAI
from support.serve_process import serving

README = Path(__file__).parents[2] / "README.md"


def shell_block(containing: str) -> list[str]:
    """The lines of the README's bash block that holds `containing`."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.DOTALL)
    (block,) = [b for b in blocks if containing in b]
    return block.splitlines()


def sh(lines: list[str], port: str, cwd: Path) -> str:
    script = "\n".join(lines).replace("localhost:8765", f"127.0.0.1:{port}")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def sse_events(stream: str) -> list[dict]:
    return [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: ")]


def test_the_readme_curl_session_runs_as_written(isolated_home: Path) -> None:
    lines = shell_block("/v1/threads/THREAD/turns")
    setup = [line for line in lines if line.startswith(("TOKEN=", "AUTH="))]
    start_thread = next(line for line in lines if line.startswith("curl -s") and "threads" in line)
    start_turn = next(line for line in lines if "/turns" in line and line.startswith("curl"))
    project = isolated_home / "myproject"  # the README runs it from the project's folder
    project.mkdir()
    (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")

    with ThreadedFakeOpenAI() as upstream:
        upstream.scenarios.append(Compose(text="calc.py adds two numbers."))
        with serving("--engine", f"openai:{upstream.base_url}", cwd=project) as served:
            port = served.url.rsplit(":", 1)[1]
            thread = json.loads(sh([*setup, start_thread], port, project))["thread"]
            assert thread["workspace"] == str(project)
            turn = start_turn.replace("THREAD", thread["id"]).replace(
                '"text": "..."', '"text": "What does calc.py do?"'
            )
            events = sse_events(sh([*setup, turn], port, project))

            # What the README says of a bare `-d`: a form type, refused with 415.
            bare = re.sub(r"\s+#.*$", "", start_thread).replace(' -H "$JSON"', "")
            bare += " -o /dev/null -w '%{http_code}'"
            assert sh([*setup, bare], port, project) == "415"

    completed = [e for e in events if e["type"] == "turn.completed"]
    assert [e["turn"]["stop_reason"] for e in completed] == ["answered"]
    answer = "".join(
        e["delta"]["text"] for e in events if e["type"] == "item.delta" and "text" in e["delta"]
    )
    assert answer == "calc.py adds two numbers."
    (sent,) = [r["body"] for r in upstream.chat_requests]
    assert "What does calc.py do?" in sent["messages"][-1]["content"]
