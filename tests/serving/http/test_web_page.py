"""The trace viewer at `/`, in a headless Chromium driven by Playwright, against a real uvicorn
server and the scripted engine: what a new user sees before any thread; create a thread, start
a turn and watch its items stream in, then reload and see the finished thread; the model that
serves a thread; a turn's usage; answer approvals; see a file change's diff. Skipped
where Chromium or Playwright is missing (CI installs Debian's `chromium` and the `playwright`
package; no `playwright install`)."""

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.browser import CHROMIUM, REQUIRES_CHROMIUM, sync_api
from support.live_server import live_server
from support.scripted_engine import Reply, ScriptedEngine, call

pytestmark = REQUIRES_CHROMIUM

TOKEN = "a-long-enough-token-for-the-page"
TIMEOUT_MS = 30_000


@pytest.fixture
def browser() -> Iterator["sync_api.Browser"]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            yield browser
        finally:
            browser.close()


def open_page(browser: "sync_api.Browser", url: str) -> tuple["sync_api.Page", list[str]]:
    """A page that records its script errors."""
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    sync_api.expect.set_options(timeout=TIMEOUT_MS)  # its own default is 5 s
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(url)
    return page, errors


def usage_line(usage: dict[str, Any]) -> str:
    """How a finished turn's footer reads the usage the server reports."""
    about = "~" if usage["estimated"] else ""
    calls = usage["model_calls"]
    return (
        f"tokens: {about}{usage['prompt_tokens']} prompt ({usage['cached_prompt_tokens']} cached)"
        f" · {about}{usage['completion_tokens']} completion"
        f" · {calls} model call{'' if calls == 1 else 's'}"
    )


def new_threads(url: str, workspace: Path, *titles: str) -> list[str]:
    """The ids of new threads in `workspace`, one per title."""
    return [
        httpx.post(f"{url}/v1/threads", json={"workspace": str(workspace), "title": title}).json()[
            "thread"
        ]["id"]
        for title in titles
    ]


def last_turn(url: str, thread_id: str, token: str | None = None) -> dict[str, Any]:
    """The thread's last turn, as the server has it."""
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    reply = httpx.get(f"{url}/v1/threads/{thread_id}", headers=auth)
    reply.raise_for_status()
    turns: list[dict[str, Any]] = reply.json()["turns"]
    return turns[-1]


def test_no_turn_box_until_a_thread_is_open(tmp_path: Path, workspace: Path, browser) -> None:
    expect = sync_api.expect
    with live_server(ScriptedEngine([]), tmp_path / "home") as url:
        page, errors = open_page(browser, url)
        expect(page.locator("#threads")).to_have_text("No threads yet.")
        expect(page.locator("#welcome")).to_be_visible()
        expect(page.locator("#welcome")).to_contain_text("New thread")
        expect(page.locator("#composer")).to_be_hidden()
        expect(page.locator("#request")).to_be_hidden()

        page.fill("#workspace", str(workspace))
        page.fill("#title", "first")
        page.click("#new-thread button")
        expect(page.locator("#thread-header h2")).to_have_text("first")
        expect(page.locator("#composer")).to_be_visible()
        expect(page.locator("#welcome")).to_be_hidden()
        page.click("#send")  # nothing written: the page says so
        expect(page.locator("#status")).to_have_text("Write a request for the agent first.")
        expect(page.locator("#request")).to_be_focused()

        # A thread that does not load leaves no turn box, nor the last thread's header.
        page.evaluate("location.hash = 'thread=thr_missing'")
        expect(page.locator("#status")).to_contain_text("Cannot open thread: no thread thr_missing")
        expect(page.locator("#thread-header")).to_have_text("")
        expect(page.locator("#composer")).to_be_hidden()
        expect(page.locator("#welcome")).to_be_hidden()

        page.evaluate("location.hash = ''")  # no thread again: back to the welcome
        expect(page.locator("#welcome")).to_be_visible()
        expect(page.locator("#composer")).to_be_hidden()
        expect(page.locator("#threads")).to_contain_text("first")
        assert [e for e in errors if "404" not in e] == []  # the missing thread's, logged


def test_the_meta_line_names_the_model_that_serves_the_thread(
    tmp_path: Path, workspace: Path, browser
) -> None:
    expect = sync_api.expect
    with live_server(ScriptedEngine([]), tmp_path / "home") as url:
        # No model in the settings: the thread names none, and the engine serves its own.
        served = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
        threads = f"{url}/v1/threads"
        unset = httpx.post(threads, json={"workspace": str(workspace)}).json()["thread"]
        named = httpx.post(
            threads, json={"workspace": str(workspace), "model": "another-model"}
        ).json()["thread"]
        assert unset["model"] is None and served == "scripted-model"
        page, errors = open_page(browser, f"{url}/#thread={unset['id']}")
        meta = page.locator("#thread-header .meta")
        expect(meta.locator(".model")).to_have_text(served)
        expect(meta).to_have_text(re.compile(f"^{re.escape(unset['workspace'])} · {served} · "))
        page.evaluate(f"location.hash = 'thread={named['id']}'")
        expect(meta.locator(".model")).to_have_text("another-model")
        assert errors == []


def test_a_turn_streams_into_the_page_and_survives_a_reload(
    tmp_path: Path, workspace: Path, browser
) -> None:
    expect = sync_api.expect
    request = "which files? <b>not bold</b>"
    replies = [
        Reply(calls=[call("glob", pattern="*.py")], delay=0.02),
        Reply(text="two python files: app.py and util.py", delay=0.02),
    ]
    engine = ScriptedEngine(replies)
    with live_server(engine, tmp_path / "home", token=TOKEN) as url:
        page, errors = open_page(browser, url)
        # The endpoint list stays on the page.
        expect(page.locator("#endpoints")).to_contain_text("/v1/protocol/schema")
        # Without the token the API refuses; pasting it (kept in sessionStorage) lets it in.
        expect(page.locator("#status")).to_contain_text(
            "Cannot list threads: the server needs its token: paste the one"
        )
        page.fill("#token", TOKEN)
        page.click("#token-form button")
        expect(page.locator("#status")).to_have_text("")
        errors.clear()  # the 401 above is logged by the browser as a console error

        page.fill("#workspace", str(workspace))
        page.fill("#title", "look around")
        page.click("#new-thread button")
        expect(page.locator("#composer")).to_be_visible()
        expect(page.locator("#thread-header h2")).to_have_text("look around")
        expect(page.locator("#threads")).to_contain_text("look around")

        page.fill("#request", request)
        page.click("#send")
        turn = page.locator(".turn").first
        expect(turn.locator(".item.user_message .text")).to_have_text(request)
        expect(turn.locator(".item.search")).to_contain_text("glob")
        expect(turn.locator(".item.search code")).to_have_text("*.py")
        expect(turn.locator(".item.agent_message .text")).to_have_text(
            "two python files: app.py and util.py"
        )
        expect(turn.locator(".turn-footer")).to_contain_text("stop: ")
        thread_id = page.evaluate("location.hash").removeprefix("#thread=")
        reported = last_turn(url, thread_id, TOKEN)["usage"]
        assert reported["model_calls"] == 2 and not reported["estimated"]
        expect(turn.locator(".turn-footer .usage")).to_have_text(usage_line(reported))
        expect(turn.locator(".turn-footer")).not_to_contain_text("null")  # absent parts
        expect(page.locator("#send")).to_be_enabled()
        expect(page.locator("#interrupt")).to_be_hidden()
        # The search's output is there, collapsed.
        output = turn.locator(".item.search details")
        expect(output).not_to_have_attribute("open", "")
        expect(output.locator("pre")).to_contain_text("app.py")
        assert turn.locator(".item.user_message b").count() == 0  # text, never markup

        page.reload()  # the token survives in sessionStorage; the hash reopens the thread
        turn = page.locator(".turn").first
        expect(turn.locator(".item.agent_message .text")).to_have_text(
            "two python files: app.py and util.py"
        )
        expect(turn.locator(".item.user_message .text")).to_have_text(request)
        expect(turn.locator(".item.search code")).to_have_text("*.py")
        expect(turn.locator(".turn-footer")).to_contain_text("completed")
        expect(turn.locator(".turn-footer .usage")).to_have_text(usage_line(reported))
        items = turn.locator(".item").evaluate_all("els => els.map(e => e.dataset.type)")
        assert items[0] == "user_message" and items[-1] == "agent_message"
        assert "search" in items
        assert errors == []


def test_the_printed_url_signs_the_page_in_and_leaves_no_token_behind(
    tmp_path: Path, workspace: Path, browser
) -> None:
    expect = sync_api.expect
    with live_server(ScriptedEngine([]), tmp_path / "home", token=TOKEN) as url:
        page, errors = open_page(browser, f"{url}/?token={TOKEN}")
        expect(page.locator("#status")).to_have_text("")
        assert page.url == f"{url}/"  # out of the address bar, the history and bookmarks
        assert page.evaluate("sessionStorage.getItem('opencomposer.token')") == TOKEN
        page.fill("#workspace", str(workspace))
        page.fill("#title", "signed in by URL")
        page.click("#new-thread button")
        expect(page.locator("#thread-header h2")).to_have_text("signed in by URL")
        page.reload()
        expect(page.locator("#threads")).to_contain_text("signed in by URL")
        assert errors == []


def test_a_running_turn_shows_its_text_as_it_streams_and_can_be_interrupted(
    tmp_path: Path, workspace: Path, browser
) -> None:
    expect = sync_api.expect
    engine = ScriptedEngine([Reply(text="I will look at every file in turn", hang_after=3)])
    with live_server(engine, tmp_path / "home") as url:
        page, errors = open_page(browser, url)
        page.fill("#workspace", str(workspace))
        page.click("#new-thread button")
        expect(page.locator("#thread-header h2")).to_have_text("(untitled)")
        page.fill("#request", "look")
        page.click("#send")
        turn = page.locator(".turn").first
        answer = turn.locator(".item.agent_message")
        expect(answer.locator(".text")).not_to_have_text("")  # deltas arrived, turn still runs
        expect(answer.locator(".badge")).to_have_text("in_progress")
        expect(page.locator("#send")).to_be_disabled()
        # Usage is summed when the turn ends: a running turn shows none, not zeros.
        expect(turn.locator(".turn-footer .usage")).to_have_count(0)
        page.click("#interrupt")
        expect(turn.locator(".turn-footer .badge")).to_have_text("interrupted")
        expect(page.locator("#interrupt")).to_be_hidden()
        expect(page.locator("#send")).to_be_enabled()
        expect(page.locator("#thread-header h2")).to_have_text("look")  # titled by the request
        # Cut short, the call never said what it used: its tokens are estimated, and say so.
        thread_id = page.evaluate("location.hash").removeprefix("#thread=")
        reported = last_turn(url, thread_id)["usage"]
        assert reported["model_calls"] == 1 and reported["estimated"]
        assert reported["prompt_tokens"] > 0
        expect(turn.locator(".turn-footer .usage")).to_have_text(usage_line(reported))
        expect(turn.locator(".turn-footer .usage")).to_contain_text("~")
        assert errors == []


def test_a_running_turn_keeps_to_its_thread_when_another_is_shown(
    tmp_path: Path, workspace: Path, browser
) -> None:
    expect = sync_api.expect
    engine = ScriptedEngine(
        [Reply(text="I will look at every file in turn", hang_after=3), Reply(text="done here")]
    )
    with live_server(engine, tmp_path / "home") as url:
        first, second = new_threads(url, workspace, "first", "second")
        page, errors = open_page(browser, f"{url}/#thread={first}")
        page.fill("#request", "look")
        page.click("#send")
        expect(page.locator(".item.agent_message .text")).not_to_have_text("")
        expect(page.locator("#interrupt")).to_be_visible()

        page.click(f"#threads a[href='#thread={second}']")  # the first thread's turn runs on
        expect(page.locator("#thread-header h2")).to_have_text("second")
        expect(page.locator("#send")).to_be_enabled()  # a turn here may start
        expect(page.locator("#interrupt")).to_be_hidden()  # nothing here to interrupt
        running = last_turn(url, first)
        httpx.post(
            f"{url}/v1/threads/{first}/turns/{running['id']}/interrupt", json={}
        ).raise_for_status()
        page.fill("#request", "and here?")
        page.click("#send")
        expect(page.locator(".item.agent_message .text")).to_have_text("done here")
        # Only this thread's turn is drawn here, though the other's ended meanwhile.
        expect(page.locator(".turn")).to_have_count(1)
        expect(page.locator(".item")).to_have_count(2)

        page.click(f"#threads a[href='#thread={first}']")
        expect(page.locator(".turn-footer .badge")).to_have_text("interrupted")
        (said,) = (
            i["text"] for i in last_turn(url, first)["items"] if i["type"] == "agent_message"
        )
        expect(page.locator(".item.agent_message .text")).to_have_text(said)
        expect(page.locator("#send")).to_be_enabled()
        expect(page.locator("#interrupt")).to_be_hidden()
        assert errors == []


def test_approvals_are_answered_from_the_page(tmp_path: Path, workspace: Path, browser) -> None:
    expect = sync_api.expect
    words = ["first", "second", "third", "fourth"]
    replies = [
        *(Reply(calls=[call("run_terminal", command=f"echo {word}")]) for word in words),
        Reply(text="ran three of the four"),
    ]
    engine = ScriptedEngine(replies)
    with live_server(engine, tmp_path / "home") as url:
        # The page has no approval policy field: the thread is made over the API.
        thread = httpx.post(
            f"{url}/v1/threads",
            json={
                "workspace": str(workspace),
                "approval_policy": {"tools": {"run_terminal": "ask"}},
            },
        ).json()["thread"]
        page, errors = open_page(browser, f"{url}/#thread={thread['id']}")
        page.fill("#request", "run them")
        page.click("#send")
        turn = page.locator(".turn").first
        approvals = turn.locator(".item.approval_request")
        commands = turn.locator(".item.command_execution")

        def answer(n: int, button: str, decided: str, note: str = "") -> None:
            approval = approvals.nth(n)
            expect(approval.locator(".summary")).to_have_text(f"echo {words[n]}")
            expect(approval.locator(".reason")).to_have_text(
                "approval needed by the rule for tool run_terminal"
            )
            expect(approval.get_by_role("button")).to_have_text(
                ["Approve", "Approve for this thread", "Deny"]
            )
            approval.locator("input").fill(note)
            approval.get_by_role("button", name=button, exact=True).click()
            expect(approval.get_by_role("button")).to_have_count(0)
            expect(approval.locator(".decision")).to_have_text(decided)

        answer(0, "Approve", "approved (by client)")
        expect(commands.nth(0).locator(".output")).to_contain_text("first")
        answer(1, "Deny", "denied (by client) — not that one", note="not that one")
        expect(commands.nth(1).locator(".badge")).to_have_text("declined")
        expect(commands.nth(1).locator(".output")).to_contain_text("not that one")
        answer(2, "Approve for this thread", "approved for this thread (by client)")
        expect(commands.nth(2).locator(".output")).to_contain_text("third")
        # Granted for the thread: the fourth command runs without asking.
        expect(commands.nth(3).locator(".output")).to_contain_text("fourth")
        expect(turn.locator(".item.agent_message .text")).to_have_text("ran three of the four")
        expect(turn.locator(".turn-footer .badge")).to_have_text("completed")
        expect(approvals).to_have_count(3)

        page.reload()  # answered requests show their decisions, and no buttons
        expect(page.locator(".item.approval_request .decision")).to_have_text(
            [
                "approved (by client)",
                "denied (by client) — not that one",
                "approved for this thread (by client)",
            ]
        )
        assert page.locator(".item.approval_request button").count() == 0
        assert errors == []


def test_a_file_change_shows_its_diff(tmp_path: Path, workspace: Path, browser) -> None:
    expect = sync_api.expect
    replies = [
        Reply(
            calls=[
                call(
                    "edit_file",
                    path="app.py",
                    old_string="print('hi')",
                    new_string="print('<b>hello</b>')",
                )
            ]
        ),
        Reply(text="edited"),
    ]
    with live_server(ScriptedEngine(replies), tmp_path / "home") as url:
        page, errors = open_page(browser, url)
        page.fill("#workspace", str(workspace))
        page.click("#new-thread button")
        page.fill("#request", "greet louder")
        page.click("#send")
        change = page.locator(".item.file_change")
        expect(change.locator(".change code")).to_have_text("app.py")
        diff = change.locator(".diff")
        expect(diff.locator(".file")).to_have_text(["--- a/app.py", "+++ b/app.py"])
        expect(diff.locator(".hunk")).to_have_count(1)
        expect(diff.locator(".del")).to_have_text(["-print('hi')"])
        expect(diff.locator(".add")).to_have_text(["+print('<b>hello</b>')"])
        assert diff.locator("b").count() == 0  # model output is text, never markup
        expect(page.locator(".item.agent_message .text")).to_have_text("edited")
        assert (workspace / "app.py").read_text() == "print('<b>hello</b>')\n"
        assert errors == []


def test_a_turn_that_fails_in_another_thread_is_told_on_that_thread(
    tmp_path: Path, workspace: Path, browser
) -> None:
    expect = sync_api.expect
    with live_server(ScriptedEngine([]), tmp_path / "home") as url:
        first, second = new_threads(url, workspace, "first", "second")
        page, errors = open_page(browser, f"{url}/#thread={first}")
        held: list[Any] = []  # the first thread's turn request, answered once it is not shown
        page.route(f"**/v1/threads/{first}/turns", lambda route: held.append(route))
        page.fill("#request", "look")
        page.click("#send")
        expect(page.locator("#send")).to_be_disabled()
        page.click(f"#threads a[href='#thread={second}']")
        expect(page.locator("#thread-header h2")).to_have_text("second")
        held[0].fulfill(
            status=503,
            content_type="application/json",
            body='{"error": {"message": "the engine is away", "type": "engine_unavailable"}}',
        )
        page.wait_for_function("() => !state.running.size")  # that turn is over
        expect(page.locator("#status")).to_have_text("")  # not this thread's failure
        page.click(f"#threads a[href='#thread={first}']")
        expect(page.locator("#status")).to_have_text("Turn failed: the engine is away")
        expect(page.locator("#status")).to_have_class("error")
        page.click(f"#threads a[href='#thread={second}']")
        expect(page.locator("#status")).to_have_text("")  # told once, where it happened
        # messages in the page's console are the server's answer to the held request
        assert [e for e in errors if "503" not in e] == []


def test_an_interrupted_turn_says_so_once(tmp_path: Path, workspace: Path, browser) -> None:
    expect = sync_api.expect
    engine = ScriptedEngine([Reply(text="I will look at every file in turn", hang_after=3)])
    with live_server(engine, tmp_path / "home") as url:
        thread = httpx.post(f"{url}/v1/threads", json={"workspace": str(workspace)}).json()
        page, errors = open_page(browser, f"{url}/#thread={thread['thread']['id']}")
        page.fill("#request", "look")
        page.click("#send")
        expect(page.locator(".item.agent_message .text")).not_to_have_text("")
        page.click("#interrupt")
        footer = page.locator(".turn-footer")
        expect(footer.locator(".badge")).to_have_text("interrupted")
        expect(footer.locator(".usage")).to_have_count(1)
        assert footer.inner_text().count("interrupted") == 1, footer.inner_text()
        assert errors == []
