"""The trace viewer at `/`, in a headless Chromium driven by Playwright, against a real uvicorn
server and the scripted engine: create a thread, start a turn and watch its items stream in,
then reload and see the finished thread. Skipped where Chromium or Playwright is missing (CI
installs Debian's `chromium` and the `playwright` package; no `playwright install`)."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.live_server import live_server
from support.scripted_engine import Reply, ScriptedEngine, call

sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="the playwright package is not installed (pip install playwright)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None,
                       reason="no chromium on PATH (Debian: apt-get install chromium)"),
]

TOKEN = "a-long-enough-token-for-the-page"
TIMEOUT_MS = 10_000


@pytest.fixture
def browser() -> Iterator["sync_api.Browser"]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def open_page(browser: "sync_api.Browser", url: str) -> tuple["sync_api.Page", list[str]]:
    """A page that records its script errors."""
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(url)
    return page, errors


def test_a_turn_streams_into_the_page_and_survives_a_reload(tmp_path: Path, workspace: Path,
                                                            browser) -> None:
    expect = sync_api.expect
    request = "which files? <b>not bold</b>"
    replies = [Reply(calls=[call("glob", pattern="*.py")], delay=0.02),
               Reply(text="two python files: app.py and util.py", delay=0.02)]
    engine = ScriptedEngine(replies)
    with live_server(engine, tmp_path / "home", token=TOKEN) as url:
        page, errors = open_page(browser, url)
        # The endpoint list stays on the page.
        expect(page.locator("#endpoints")).to_contain_text("/v1/protocol/schema")
        # Without the token the API refuses; pasting it (kept in sessionStorage) lets it in.
        expect(page.locator("#status")).to_contain_text("Cannot list threads")
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
            "two python files: app.py and util.py")
        expect(turn.locator(".turn-footer")).to_contain_text("stop: ")
        expect(turn.locator(".turn-footer")).to_contain_text("2 model calls")
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
            "two python files: app.py and util.py")
        expect(turn.locator(".item.user_message .text")).to_have_text(request)
        expect(turn.locator(".item.search code")).to_have_text("*.py")
        expect(turn.locator(".turn-footer")).to_contain_text("completed")
        expect(turn.locator(".turn-footer")).to_contain_text("2 model calls")
        items = turn.locator(".item").evaluate_all("els => els.map(e => e.dataset.type)")
        assert items[0] == "user_message" and items[-1] == "agent_message"
        assert "search" in items
        assert errors == []


def test_a_running_turn_shows_its_text_as_it_streams_and_can_be_interrupted(
        tmp_path: Path, workspace: Path, browser) -> None:
    expect = sync_api.expect
    engine = ScriptedEngine([Reply(text="I will look at every file in turn", hang_after=3)])
    with live_server(engine, tmp_path / "home") as url:
        page, errors = open_page(browser, url)
        page.fill("#workspace", str(workspace))
        page.click("#new-thread button")
        page.fill("#request", "look")
        page.click("#send")
        turn = page.locator(".turn").first
        answer = turn.locator(".item.agent_message")
        expect(answer.locator(".text")).not_to_have_text("")  # deltas arrived, turn still runs
        expect(answer.locator(".badge")).to_have_text("in_progress")
        expect(page.locator("#send")).to_be_disabled()
        page.click("#interrupt")
        expect(turn.locator(".turn-footer .badge")).to_have_text("interrupted")
        expect(page.locator("#interrupt")).to_be_hidden()
        expect(page.locator("#send")).to_be_enabled()
        assert errors == []
