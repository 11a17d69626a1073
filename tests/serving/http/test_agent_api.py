"""The agent over HTTP, against a real uvicorn server and the scripted engine: threads, turns
streamed as SSE, resuming a dropped stream, control requests, errors and the trace export."""

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.live_server import live_server
from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.serving.http import agent_api


@dataclass
class Frame:
    id: int | None = None
    event: str | None = None
    data: dict[str, Any] | None = None
    comment: str | None = None


async def frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """Parse an SSE body; comments come out as frames of their own."""
    frame = Frame()
    async for line in response.aiter_lines():
        if line.startswith(":"):
            yield Frame(comment=line[1:].strip())
        elif line.startswith("id: "):
            frame.id = int(line[4:])
        elif line.startswith("event: "):
            frame.event = line[7:]
        elif line.startswith("data: "):
            frame.data = json.loads(line[6:])
        elif line == "" and frame.event is not None:
            yield frame
            frame = Frame()


def text(value: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": value}]


@pytest.fixture
def serve(tmp_path: Path) -> Callable[[list[Reply]], Any]:
    @contextmanager
    def make(replies: list[Reply]) -> Iterator[tuple[str, ScriptedEngine]]:
        engine = ScriptedEngine(replies)
        with live_server(engine, tmp_path / "home") as url:
            yield url, engine

    return make


def client(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=20)


async def new_thread(http: httpx.AsyncClient, workspace: Path, **params: Any) -> str:
    response = await http.post("/v1/threads", json={"workspace": str(workspace), **params})
    assert response.status_code == 200, response.text
    return response.json()["thread"]["id"]


async def event_log(http: httpx.AsyncClient, thread_id: str, after: int = 0) -> list[dict]:
    response = await http.get(f"/v1/threads/{thread_id}/events", params={"after_seq": after})
    return response.json()["events"]


async def run_turn(
    http: httpx.AsyncClient,
    thread_id: str,
    request: str,
    on_event: Callable[[Frame], Any] | None = None,
) -> list[Frame]:
    """Start a turn and read its stream to the end, calling `on_event` for each event."""
    received = []
    async with http.stream(
        "POST", f"/v1/threads/{thread_id}/turns", json={"input": text(request)}
    ) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for frame in frames(response):
            if frame.event is not None:
                received.append(frame)
                if on_event is not None:
                    await on_event(frame)
    return received


async def wait_for_turn_status(http: httpx.AsyncClient, thread_id: str, status: str) -> dict:
    async with asyncio.timeout(10):
        while True:
            turns = (await http.get(f"/v1/threads/{thread_id}")).json()["turns"]
            if turns and turns[-1]["status"] == status:
                return turns[-1]
            await asyncio.sleep(0.05)


def completed_items(received: list[Frame]) -> list[dict]:
    return [f.data["item"] for f in received if f.event == "item.completed"]


async def test_a_turn_streams_its_events_as_sse(serve, workspace: Path) -> None:
    replies = [Reply(calls=[call("glob", pattern="*.py")]), Reply(text="two python files")]
    with serve(replies) as (url, _):
        async with client(url) as http:
            thread_id = await new_thread(http, workspace, title="look")
            received = await run_turn(http, thread_id, "which files?")

            assert [f.id for f in received] == [f.data["seq"] for f in received]
            assert [f.id for f in received] == list(range(2, 2 + len(received)))
            assert all(f.event == f.data["type"] for f in received)
            assert (received[0].event, received[-1].event) == ("turn.started", "turn.completed")
            assert received[-1].data["turn"]["status"] == "completed"
            items = completed_items(received)
            search = next(i for i in items if i["type"] == "search")
            assert search["status"] == "completed" and search["match_count"] == 2
            assert items[-1]["type"] == "agent_message"
            assert items[-1]["text"] == "two python files"
            # The stream is exactly the stored log (after thread.started).
            assert [f.data for f in received] == await event_log(http, thread_id, 1)

            listed = (await http.get("/v1/threads")).json()
            assert [t["id"] for t in listed["data"]] == [thread_id]
            read = (await http.get(f"/v1/threads/{thread_id}")).json()
            assert read["thread"]["title"] == "look"
            assert [i["id"] for i in read["turns"][0]["items"]] == [i["id"] for i in items]


SLOW_ANSWER = [Reply(text="a fairly long answer streamed slowly, piece by piece", delay=0.03)]


async def drop_and_resume(
    http: httpx.AsyncClient, thread_id: str, resume: Callable[[int], dict[str, Any]]
) -> int:
    """Start a turn, drop its stream five events in, and read the rest from the thread's event
    stream, asking with the request options `resume(id of the last event seen)`. The two parts
    are the whole log after thread.started, without gap or repeat; returns the last event's id."""
    first: list[Frame] = []
    async with http.stream(
        "POST", f"/v1/threads/{thread_id}/turns", json={"input": text("talk")}
    ) as response:
        async for frame in frames(response):
            first.append(frame)
            if len(first) == 5:
                break  # the connection drops mid-turn
    async with http.stream(
        "GET", f"/v1/threads/{thread_id}/events/stream", **resume(first[-1].id)
    ) as response:
        rest = [f async for f in frames(response)]
    assert rest[-1].event == "turn.completed"
    assert [f.data for f in first + rest] == await event_log(http, thread_id, 1)
    return rest[-1].id


async def test_last_event_id_resumes_without_gap_or_repeat(serve, workspace: Path) -> None:
    with serve(SLOW_ANSWER) as (url, _):
        async with client(url) as http:
            thread_id = await new_thread(http, workspace)
            last = await drop_and_resume(
                http, thread_id, lambda seen: {"headers": {"Last-Event-ID": str(seen)}}
            )

            # Idle: only what was missed, then the stream ends.
            async with http.stream(
                "GET", f"/v1/threads/{thread_id}/events/stream", headers={"Last-Event-ID": "0"}
            ) as response:
                replay = [f.data async for f in frames(response)]
            assert replay == await event_log(http, thread_id)
            up_to_date = await http.get(
                f"/v1/threads/{thread_id}/events/stream", headers={"Last-Event-ID": str(last)}
            )
            assert up_to_date.status_code == 200 and up_to_date.text == ""


async def test_after_seq_stands_in_for_last_event_id(serve, workspace: Path) -> None:
    """For a browser's EventSource, which cannot set a header on its first connection."""
    with serve(SLOW_ANSWER) as (url, _):
        async with client(url) as http:
            thread_id = await new_thread(http, workspace)
            last = str(
                await drop_and_resume(http, thread_id, lambda seen: {"params": {"after_seq": seen}})
            )

            # The header wins over the query: a reconnecting EventSource sends both.
            stream = f"/v1/threads/{thread_id}/events/stream"
            both = await http.get(stream, params={"after_seq": 0}, headers={"Last-Event-ID": last})
            assert both.status_code == 200 and both.text == ""
            up_to_date = await http.get(stream, params={"after_seq": last})
            assert up_to_date.status_code == 200 and up_to_date.text == ""
            for bad in ("-1", "x", "1.5"):
                assert_error(
                    await http.get(stream, params={"after_seq": bad}), 400, "invalid_request"
                )


async def test_interrupt_ends_a_hanging_turn(serve, workspace: Path) -> None:
    with serve([Reply(text="an answer that never ends", hang_after=3)]) as (url, engine):
        async with client(url) as http:
            thread_id = await new_thread(http, workspace)
            answers = []

            async def interrupt_once_streaming(frame: Frame) -> None:
                if frame.event == "item.delta" and not answers:
                    turn_id = frame.data["turn_id"]
                    answers.append(
                        await http.post(f"/v1/threads/{thread_id}/turns/{turn_id}/interrupt")
                    )

            received = await run_turn(http, thread_id, "hi", interrupt_once_streaming)
            assert answers[0].status_code == 200
            assert answers[0].json()["turn"]["status"] == "interrupted"
            assert received[-1].data["turn"]["status"] == "interrupted"
            assert engine.closed_mid_stream == 1


async def test_steer_adds_input_to_the_running_turn(serve, workspace: Path) -> None:
    replies = [Reply(calls=[call("run_terminal", command="sleep 0.5")]), Reply(text="fini")]
    with serve(replies) as (url, engine):
        async with client(url) as http:
            thread_id = await new_thread(http, workspace)
            steered = []

            async def steer_during_the_command(frame: Frame) -> None:
                item = (frame.data or {}).get("item", {})
                if frame.event == "item.started" and item.get("type") == "command_execution":
                    response = await http.post(
                        f"/v1/threads/{thread_id}/turns/{item['turn_id']}/steer",
                        json={"input": text("answer in French")},
                    )
                    steered.append(response.json()["item_id"])

            received = await run_turn(http, thread_id, "do it", steer_during_the_command)
            steer = next(i for i in completed_items(received) if i["id"] == steered[0])
            assert steer["type"] == "user_message" and steer["steer"]
            assert engine.requests[1].messages[-1].content == "answer in French"


async def test_input_steered_into_a_turn_that_ends_is_kept(serve, workspace: Path) -> None:
    with serve([Reply(text="never finishes", hang_after=2), Reply(text="Bonjour")]) as (
        url,
        engine,
    ):
        async with client(url) as http:
            thread_id = await new_thread(http, workspace)
            steered = []

            async def steer_then_interrupt(frame: Frame) -> None:
                if frame.event == "item.delta" and not steered:
                    turn_id = frame.data["turn_id"]
                    response = await http.post(
                        f"/v1/threads/{thread_id}/turns/{turn_id}/steer",
                        json={"input": text("answer in French")},
                    )
                    steered.append(response.json()["item_id"])
                    await http.post(f"/v1/threads/{thread_id}/turns/{turn_id}/interrupt")

            received = await run_turn(http, thread_id, "hi", steer_then_interrupt)
            assert received[-1].data["turn"]["status"] == "interrupted"
            steer = next(i for i in completed_items(received) if i["id"] == steered[0])
            assert steer["type"] == "user_message" and steer["steer"]
            # The next turn's prompt carries it, before the new request.
            await run_turn(http, thread_id, "again")
            contents = [m.content for m in engine.requests[1].messages if m.role == "user"]
            assert "answer in French" in contents[-2] and contents[-1].startswith("again")


async def test_undo_puts_back_a_turns_edits_and_read_says_where_the_log_is(
    serve, workspace: Path
) -> None:
    (workspace / "a.py").write_text("x = 1\n")
    replies = [
        Reply(calls=[call("edit_file", path="a.py", old_string="x = 1", new_string="x = 2")]),
        Reply(text="done"),
    ]
    with serve(replies) as (url, _engine):
        async with client(url) as http:
            thread_id = await new_thread(http, workspace)
            received = await run_turn(http, thread_id, "change x")
            read = (await http.get(f"/v1/threads/{thread_id}")).json()
            assert read["last_seq"] == received[-1].id
            assert (workspace / "a.py").read_text() == "x = 2\n"
            undone = await http.post(f"/v1/threads/{thread_id}/undo", json={"scope": "turn"})
            assert undone.status_code == 200, undone.text
            assert [c["path"] for c in undone.json()["restored"]] == ["a.py"]
            assert undone.json()["conflicts"] == []
            assert (workspace / "a.py").read_text() == "x = 1\n"
            missing = await http.post("/v1/threads/thr_nope/undo", json={})
            assert missing.status_code == 404
            (workspace / "a.py").write_text("x = 2\n")  # as the turn left it
            turn_id = received[0].data["turn"]["id"]
            for wrong in ("turn_nope", turn_id + "x"):
                unknown = await http.post(
                    f"/v1/threads/{thread_id}/undo", json={"scope": "turn", "turn_id": wrong}
                )
                assert unknown.status_code == 404, unknown.text
                assert unknown.json()["error"]["kind"] == "not_found"
            other = await new_thread(http, workspace)
            refused = await http.post(  # a real turn, but of the first thread
                f"/v1/threads/{other}/undo", json={"scope": "turn", "turn_id": turn_id}
            )
            assert refused.status_code == 404
            assert (workspace / "a.py").read_text() == "x = 2\n"


async def test_an_approval_is_answered_over_http(serve, workspace: Path) -> None:
    replies = [
        Reply(calls=[call("write_file", path="new.txt", content="hello")]),
        Reply(text="written"),
    ]
    with serve(replies) as (url, _):
        async with client(url) as http:
            thread_id = await new_thread(
                http, workspace, approval_policy={"writes_workspace": "ask"}
            )
            answers = []

            async def approve(frame: Frame) -> None:
                item = (frame.data or {}).get("item", {})
                if frame.event == "item.started" and item.get("type") == "approval_request":
                    answers.append(
                        await http.post(
                            f"/v1/threads/{thread_id}/approvals/{item['id']}",
                            json={"decision": "approve"},
                        )
                    )

            received = await run_turn(http, thread_id, "write it", approve)
            answered = answers[0].json()["item"]
            assert (answered["decision"], answered["decided_by"]) == ("approve", "client")
            assert received[-1].data["turn"]["status"] == "completed"
            assert (workspace / "new.txt").read_text() == "hello"


async def _start_and_drop(http: httpx.AsyncClient, thread_id: str, **body: Any) -> None:
    """Start a turn and disconnect once it has started."""
    async with http.stream(
        "POST", f"/v1/threads/{thread_id}/turns", json={"input": text("go"), **body}
    ) as response:
        async for frame in frames(response):
            if frame.event == "turn.started":
                break


async def test_a_turn_outlives_its_client(serve, workspace: Path) -> None:
    with serve([Reply(text="an answer nobody waits for", delay=0.05)]) as (url, _):
        async with client(url) as http:
            thread_id = await new_thread(http, workspace)
            await _start_and_drop(http, thread_id)
            turn = await wait_for_turn_status(http, thread_id, "completed")
            log = await event_log(http, thread_id)
            assert log[-1]["type"] == "turn.completed" and log[-1]["turn"]["id"] == turn["id"]
            message = next(i for i in turn["items"] if i["type"] == "agent_message")
            assert message["text"] == "an answer nobody waits for"


async def test_cancel_on_disconnect_interrupts_the_turn(serve, workspace: Path) -> None:
    with serve([Reply(text="never ends", hang_after=2)]) as (url, engine):
        async with client(url) as http:
            thread_id = await new_thread(http, workspace)
            await _start_and_drop(http, thread_id, cancel_on_disconnect=True)
            await wait_for_turn_status(http, thread_id, "interrupted")
            assert (await event_log(http, thread_id))[-1]["type"] == "turn.completed"
            assert engine.closed_mid_stream == 1


async def test_silence_is_filled_with_heartbeats(
    serve, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_api, "HEARTBEAT_SECONDS", 0.1)
    with serve([Reply(text="never ends", hang_after=2)]) as (url, _):
        async with client(url) as http:
            thread_id = await new_thread(http, workspace)
            async with http.stream(
                "POST", f"/v1/threads/{thread_id}/turns", json={"input": text("go")}
            ) as response:
                async for frame in frames(response):
                    if frame.event == "turn.started":
                        turn_id = frame.data["turn"]["id"]
                    if frame.comment == "ping":
                        break
            interrupted = await http.post(f"/v1/threads/{thread_id}/turns/{turn_id}/interrupt")
            assert interrupted.json()["turn"]["status"] == "interrupted"


def assert_error(response: httpx.Response, status: int, kind: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["kind"] == kind and error["message"]


async def test_bad_requests_get_the_error_body(serve, workspace: Path) -> None:
    with serve([Reply(text="slow", hang_after=1)]) as (url, _):
        async with client(url) as http:
            malformed = await http.post(
                "/v1/threads", content=b"{not json", headers={"content-type": "application/json"}
            )
            assert_error(malformed, 400, "invalid_request")
            missing = await http.post("/v1/threads", json={"workspace": str(workspace / "no")})
            assert_error(missing, 400, "invalid_request")
            assert_error(await http.get("/v1/threads/thr_nope"), 404, "not_found")
            assert_error(
                await http.post("/v1/threads/thr_nope/turns", json={"input": text("x")}),
                404,
                "not_found",
            )

            thread_id = await new_thread(http, workspace)
            empty = await http.post(f"/v1/threads/{thread_id}/turns", json={"input": []})
            assert_error(empty, 400, "invalid_request")
            async with http.stream(
                "POST", f"/v1/threads/{thread_id}/turns", json={"input": text("one")}
            ) as response:
                async for frame in frames(response):
                    turn_id = frame.data["turn"]["id"]
                    break
            second = await http.post(f"/v1/threads/{thread_id}/turns", json={"input": text("two")})
            assert_error(second, 409, "conflict")
            assert_error(
                await http.post(f"/v1/threads/{thread_id}/turns/turn_x/interrupt"), 404, "not_found"
            )
            assert_error(
                await http.post(
                    f"/v1/threads/{thread_id}/approvals/item_9", json={"decision": "approve"}
                ),
                404,
                "not_found",
            )
            assert_error(
                await http.get(
                    f"/v1/threads/{thread_id}/events/stream", headers={"Last-Event-ID": "x"}
                ),
                400,
                "invalid_request",
            )
            await http.post(f"/v1/threads/{thread_id}/turns/{turn_id}/interrupt")
            assert (await http.get("/healthz")).status_code == 200


async def test_traces_export_as_jsonl(serve, workspace: Path) -> None:
    with serve([Reply(text="done")]) as (url, _):
        async with client(url) as http:
            thread_id = await new_thread(http, workspace)
            await run_turn(http, thread_id, "go")
            response = await http.get("/v1/traces/export", params={"thread": thread_id})
            assert response.headers["content-type"] == "application/x-ndjson"
            records = [json.loads(line) for line in response.text.splitlines()]
            assert [r["thread"]["id"] for r in records] == [thread_id]
            assert records[0]["turns"][0]["items"][-1]["text"] == "done"
            # Nobody consented to training on this workspace.
            consented = await http.get("/v1/traces/export", params={"for_training": "true"})
            assert consented.text == ""
            assert_error(
                await http.get("/v1/traces/export", params={"thread": "thr_x"}), 404, "not_found"
            )


async def test_limits_and_tools_are_set_over_http(serve, workspace: Path) -> None:
    """The README's request: a thread narrowed to some tools and limits, a turn narrowed more."""
    glob = call("glob", pattern="*.py")
    with serve([Reply(calls=[glob])] * 4) as (url, engine):
        async with client(url) as http:
            created = await http.post(
                "/v1/threads",
                json={
                    "workspace": str(workspace),
                    "limits": {"max_steps": 3, "max_wall_time": 600},
                    "tools": ["glob", "read_file"],
                },
            )
            assert created.status_code == 200, created.text
            thread = created.json()["thread"]
            assert thread["tools"] == ["glob", "read_file"]
            assert thread["limits"] == {"max_steps": 3, "max_tokens": None, "max_wall_time": 600}
            async with http.stream(
                "POST",
                f"/v1/threads/{thread['id']}/turns",
                json={"input": text("look"), "limits": {"max_steps": 1}},
            ) as response:
                assert response.status_code == 200, await response.aread()
                body = [line async for line in response.aiter_lines()]
            ended = json.loads([line for line in body if line.startswith("data: ")][-1][6:])
            assert ended["turn"]["stop_reason"] == "max_steps"
            assert ended["turn"]["usage"]["model_calls"] == 1
            assert sorted(spec.name for spec in engine.requests[0].tools) == ["glob", "read_file"]
            unknown = await http.post(
                "/v1/threads", json={"workspace": str(workspace), "tools": ["format_disk"]}
            )
            assert unknown.status_code == 400 and "format_disk" in unknown.text
