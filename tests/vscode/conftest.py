"""Fixtures for the extension's tests in a real VS Code: one code-server with the packaged
extension and one headless Chromium per module, a fake OpenAI upstream as the model, and a
fresh workspace folder per test (opening it starts a new extension host and language server).

A failed test leaves a screenshot of the workbench and the logs under
build/test-artifacts/vscode/<test>/.
"""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.browser import CHROMIUM, REQUIRES_CHROMIUM, sync_api
from support.code_server import VSIX, CodeServer, copy_failure_artifacts, require_installed
from support.fake_openai import FakeOpenAI, Fill, ThreadedFakeOpenAI
from support.workbench import Workbench, until

pytestmark = REQUIRES_CHROMIUM
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts" / "vscode"
UTIL = "def twice(x):\n    return x * 2\n"
# Nothing the workbench asks for may leave the machine (marketplace, CDNs, telemetry).
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "files(mapping): files to put in the project folder before it is opened"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Iterator[None]:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAI]:
    with ThreadedFakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def code_server(
    tmp_path_factory: pytest.TempPathFactory, upstream: FakeOpenAI
) -> Iterator[CodeServer]:
    require_installed()
    server = CodeServer(tmp_path_factory.mktemp("code-server"), upstream.base_url)
    server.install(VSIX)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[sync_api.BrowserContext]:
    """One browser profile for the module: each test's page loads the workbench from its
    cache, as a user's browser would."""
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, args=[OFFLINE, "--no-sandbox"]
        )
        context = chromium.new_context(viewport={"width": 1400, "height": 900})
        yield context
        context.close()
        chromium.close()


@pytest.fixture
def project(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """The workspace folder: util.py, and the test's `files` mark (settings, tasks...)."""
    root = tmp_path / "project"
    marker = request.node.get_closest_marker("files")
    for name, text in {"util.py": UTIL, **(marker.args[0] if marker else {})}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root.resolve()


@pytest.fixture
def workbench(
    request: pytest.FixtureRequest,
    browser: sync_api.BrowserContext,
    code_server: CodeServer,
    upstream: FakeOpenAI,
    project: Path,
) -> Iterator[Workbench]:
    """The workbench on `project`, its chat view shown and the server started. The upstream's
    queue and records are the test's own. Inline completions, which VS Code asks for whenever
    the cursor rests in an editor, are answered with nothing, so they never take a chat
    reply from the queue."""
    upstream.scenarios.clear()
    upstream.requests.clear()
    upstream.fill = Fill("")
    page = browser.new_page()
    page.set_default_timeout(30_000)
    bench = Workbench(page)

    def keep_artifacts() -> None:
        into = ARTIFACTS / re.sub(r"[^\w.-]+", "_", request.node.name)
        copy_failure_artifacts(code_server, into)
        page.screenshot(path=str(into / "workbench.png"))

    try:
        bench.open_folder(code_server.url(project))
        bench.show_chat()
        # The server has answered `initialize` (it logs so): the client's features are in place.
        until(
            "the language server to initialize",
            lambda: f"workspace folders {project}" in code_server.output_channel(),
            timeout=60,
        )
    except Exception:
        keep_artifacts()
        page.close()
        raise
    yield bench
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        keep_artifacts()
    page.close()
