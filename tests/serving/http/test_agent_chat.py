"""A plain OpenAI client chatting with the agent: model `opencomposer-agent` and a thread
header run one agent turn, its words streamed and its tool calls summarized."""

from pathlib import Path

import httpx
import openai
from support.live_server import live_server
from support.scripted_engine import Reply, ScriptedEngine, call


def test_the_openai_client_chats_with_the_agent(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("remember the milk\n")
    engine = ScriptedEngine(
        [
            Reply(text="Let me look.", calls=[call("read_file", path="notes.txt")]),
            Reply(text="The note says to remember the milk."),
            Reply(text="Still the milk."),
        ]
    )
    with live_server(engine, tmp_path / "home") as url:
        thread = httpx.post(f"{url}/v1/threads", json={"workspace": str(workspace)}).json()
        thread_id = thread["thread"]["id"]
        sdk = openai.OpenAI(
            base_url=f"{url}/v1",
            api_key="unused",
            default_headers={"X-Opencomposer-Thread": thread_id},
        )
        reply = sdk.chat.completions.create(
            model="opencomposer-agent",
            messages=[{"role": "user", "content": "What does notes.txt say?"}],
        )
        text = reply.choices[0].message.content
        assert reply.model == "opencomposer-agent"
        assert text == ("Let me look.\n[read notes.txt: done]\nThe note says to remember the milk.")
        assert reply.usage is not None and reply.usage.total_tokens > 0

        stream = sdk.chat.completions.create(
            model="opencomposer-agent",
            stream=True,
            messages=[{"role": "user", "content": "And now?"}],
        )
        streamed = "".join(
            chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices
        )
        assert streamed == "Still the milk."
        # Both turns are in the thread's log, as any turn is.
        turns = httpx.get(f"{url}/v1/threads/{thread_id}").json()["turns"]
    assert [t["status"] for t in turns] == ["completed", "completed"]
    assert engine.requests[-1].messages[-1].content.startswith("And now?")
