"""The exact prompt a thread gives the model, in every chat format, against files checked in
under `golden/`. Models are trained on these strings: any change to the system prompt, the
turn context, `build_messages` or a chat format shows here as a diff to review, never as a
silent shift of the training distribution. The facts (OS, shell, date, git status) are fixed,
so the prompt is the same on any machine, any day.

After an intended change, rewrite them with `UPDATE_GOLDEN=1 pytest` on this file.
"""

import os
from pathlib import Path

import pytest
from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.agent.context import build_messages
from opencomposer.agent.facts import FixedFacts, MachineDescription
from opencomposer.agent.protocol.items import TextInput
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.serving.engines.embedded.chat_format import (
    CHATML,
    DEEPSEEK_V3_CHAT,
    KIMI_K2_CHAT,
    ChatFormat,
)

GOLDEN = Path(__file__).parent / "golden"
FACTS = FixedFacts(
    MachineDescription(os="Linux 6.1.0", shell="/bin/bash", date="2026-01-15"),
    git_summary="branch main, 1 changed file\n M calc.py",
)
WORKSPACE = "/workspace"  # the real root differs per run; it is shown as this


@pytest.fixture
async def thread_prompt(settings, repo: Path):
    """The messages and tools of the last step of a two-step turn (a read, then an answer),
    and the same messages rebuilt from the stored log."""
    engine = ScriptedEngine(
        [
            Reply(reasoning="Look at add first.", calls=[call("read_file", path="calc.py")]),
            Reply(text="`add` subtracts; it should return `a + b`."),
        ]
    )
    runtime = AgentRuntime(settings(), engine, facts=FACTS)
    try:
        session = await runtime.start_thread(repo, tools=["read_file"])
        await session.run_turn([TextInput(text="Why does test_add fail?")])
        sent = engine.requests[-1]
        rebuilt = build_messages(runtime.store.system_prompt(session.thread.id), session.items)
    finally:
        await runtime.close()
    return sent, rebuilt, str(repo)


@pytest.mark.parametrize("chat", [CHATML, DEEPSEEK_V3_CHAT, KIMI_K2_CHAT], ids=lambda c: c.name)
async def test_the_prompt_is_exactly_the_golden_one(thread_prompt, chat: ChatFormat) -> None:
    sent, rebuilt, root = thread_prompt
    # What was sent is what the stored log gives (then the answer): a resumed thread or an
    # export sees the same prompt.
    assert rebuilt[:-1] == sent.messages and rebuilt[-1].role == "assistant"
    text = chat.render(sent.messages, sent.tools).replace(root, WORKSPACE)
    golden = GOLDEN / f"{chat.name}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), "no golden prompt yet: run with UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8")


async def test_the_facts_come_from_the_source_given(thread_prompt) -> None:
    sent, _, _ = thread_prompt
    system, user = sent.messages[0].content or "", sent.messages[1].content or ""
    assert "Linux 6.1.0" in system and "2026-01-15" in system and "/bin/bash" in system
    assert "branch main, 1 changed file\n M calc.py" in user
