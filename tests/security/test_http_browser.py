"""Real attacks from a real browser (headless Chromium through Playwright) on a server
running without a token, so that only the Host, Origin, Sec-Fetch and content-type checks
stand in the way:

- a hostile page on another loopback port (a tiny `http.server`) fires everything a page
  can send cross-site without a preflight (`no-cors` fetches with text, Blob and form
  bodies, `sendBeacon`, an image, an auto-submitted `text/plain` form), plus a CORS fetch
  that needs a preflight;
- DNS rebinding: Chromium resolves `evil.test` to 127.0.0.1, loads the attacker's page as
  `http://evil.test:PORT/` (our port) and calls the API same-origin.

Afterwards no thread exists, and the server's own metrics show that the requests reached it
and were refused. Chromium's Private Network Access checks would block some of these
requests by themselves; other browsers (and older Chromium) have none, so they are turned
off here to test the server's defence, not the browser's.
"""

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from support.browser import CHROMIUM, REQUIRES_CHROMIUM, sync_api
from support.live_server import live_server
from support.scripted_engine import ScriptedEngine

pytestmark = REQUIRES_CHROMIUM

NO_PNA = (
    "--disable-features=BlockInsecurePrivateNetworkRequests,LocalNetworkAccessChecks,"
    "PrivateNetworkAccessSendPreflights"
)
TIMEOUT_MS = 15_000


@pytest.fixture
def browser() -> Iterator["sync_api.Browser"]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", NO_PNA, "--host-resolver-rules=MAP evil.test 127.0.0.1"],
        )
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def hostile_site(html: str) -> Iterator[str]:
    """Serve `html` at / of another loopback port; yields its URL."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def answered(url: str) -> dict[tuple[str, str], float]:
    """(method, status) -> how many requests the server answered so, from its metrics."""
    counts: dict[tuple[str, str], float] = {}
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        match = re.match(
            r'opencomposer_http_requests_total\{method="(\w+)",route="[^"]*",'
            r'status="(\d+)"\} ([\d.]+)',
            line,
        )
        if match:
            key = (match[1], match[2])
            counts[key] = counts.get(key, 0) + float(match[3])
    return counts


def threads(url: str) -> list[dict]:
    return httpx.get(f"{url}/v1/threads", timeout=10).json()["data"]


CROSS_SITE_PAGE = """<!doctype html><meta charset="utf-8"><title>cute cats</title>
<iframe name="sink"></iframe>
<form id="form" method="POST" enctype="text/plain" target="sink" action="TARGET/v1/threads">
  <input type="hidden" name='{"workspace": "WORKSPACE", "x": "' value='"}'>
</form>
<img src="TARGET/v1/traces/export">
<pre id="out"></pre>
<script>
const target = "TARGET", body = JSON.stringify({workspace: "WORKSPACE"});
const post = (init) => fetch(target + "/v1/threads", {method: "POST", ...init});
const attempts = {
  text: () => post({mode: "no-cors", body}),
  blob: () => post({mode: "no-cors", body: new Blob([body])}),
  form: () => post({mode: "no-cors", body: new URLSearchParams({workspace: "WORKSPACE"})}),
  keepalive: () => post({mode: "no-cors", body, keepalive: true}),
  cors: () => post({headers: {"Content-Type": "application/json"}, body}),
  export: () => fetch(target + "/v1/traces/export", {mode: "no-cors"}),
  beacon: async () => navigator.sendBeacon(target + "/v1/threads", body),
};
(async () => {
  const results = {};
  for (const [name, attempt] of Object.entries(attempts)) {
    try { const r = await attempt(); results[name] = r && r.type ? r.type : String(r); }
    catch (error) { results[name] = String(error); }
  }
  document.querySelector("iframe").addEventListener("load", () => {
    document.getElementById("out").textContent = JSON.stringify(results);
  });
  document.getElementById("form").submit();
})();
</script>"""


def test_a_hostile_page_on_another_port_creates_nothing(tmp_path: Path, browser) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with live_server(ScriptedEngine([]), tmp_path / "home") as url:
        html = CROSS_SITE_PAGE.replace("TARGET", url).replace("WORKSPACE", str(workspace))
        with hostile_site(html) as attacker:
            page = browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(attacker)
            page.wait_for_function("document.getElementById('out').textContent !== ''")
            results = json.loads(page.locator("#out").text_content())
        assert threads(url) == []
        counts = answered(url)
    # The preflight was refused, so the CORS POST never went; the rest arrived and failed.
    assert results["cors"].startswith("TypeError")
    assert counts.get(("OPTIONS", "403"), 0) >= 1
    assert counts.get(("POST", "403"), 0) >= 6  # five fetches and beacons, and the form
    assert counts.get(("GET", "403"), 0) >= 2  # the image and the no-cors export
    assert not any(method == "POST" and status.startswith("2") for method, status in counts)


REBOUND_PAGE = """<!doctype html><meta charset="utf-8"><title>cute cats</title>
<pre id="out"></pre>
<script>
(async () => {
  const results = {};
  const calls = {
    create: ["/v1/threads", {method: "POST", headers: {"Content-Type": "application/json"},
                             body: JSON.stringify({workspace: "WORKSPACE"})}],
    export: ["/v1/traces/export", {}],
    list: ["/v1/threads", {}],
    page: ["/", {}],
  };
  for (const [name, [path, init]] of Object.entries(calls)) {
    try { results[name] = (await fetch(path, init)).status; }
    catch (error) { results[name] = String(error); }
  }
  document.getElementById("out").textContent = JSON.stringify(results);
})();
</script>"""


def test_dns_rebinding_is_refused_by_the_host_check(tmp_path: Path, browser) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with live_server(ScriptedEngine([]), tmp_path / "home") as url:
        port = url.rsplit(":", 1)[1]
        rebound = f"http://evil.test:{port}"
        page = browser.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        # Once evil.test resolves to 127.0.0.1, even the page itself is refused.
        assert page.goto(f"{rebound}/").status == 403
        # The attacker's page, as their own server sent it before the name was rebound;
        # every request it makes from then on reaches ours.
        html = REBOUND_PAGE.replace("WORKSPACE", str(workspace))
        page.route(
            f"{rebound}/cats.html",
            lambda route: route.fulfill(status=200, content_type="text/html", body=html),
        )
        page.goto(f"{rebound}/cats.html")
        page.wait_for_function("document.getElementById('out').textContent !== ''")
        results = json.loads(page.locator("#out").text_content())
        assert results == {"create": 403, "export": 403, "list": 403, "page": 403}
        assert threads(url) == []
        # The same page under the server's own name works: only the name was refused.
        own = browser.new_page()
        own.route(
            f"{url}/cats.html",
            lambda route: route.fulfill(status=200, content_type="text/html", body=html),
        )
        own.goto(f"{url}/cats.html")
        own.wait_for_function("document.getElementById('out').textContent !== ''")
        assert json.loads(own.locator("#out").text_content()) == {
            "create": 200,
            "export": 200,
            "list": 200,
            "page": 200,
        }
