"""What the server refuses before any route runs: workspaces outside the allowed roots,
oversized bodies; and what /readyz says about the engine."""

from pathlib import Path

import httpx
from support.live_server import live_server
from support.scripted_engine import ScriptedEngine

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.embedded.service import EmbeddedEngine


def test_workspaces_must_be_inside_an_allowed_root(tmp_path: Path) -> None:
    allowed = tmp_path / "projects"
    (allowed / "app").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with live_server(ScriptedEngine([]), tmp_path / "home", workspace_roots=[allowed]) as url:
        ok = httpx.post(f"{url}/v1/threads", json={"workspace": str(allowed / "app")})
        assert ok.status_code == 200
        refused = httpx.post(f"{url}/v1/threads", json={"workspace": str(outside)})
        assert refused.status_code == 403
        error = refused.json()["error"]
        assert error["kind"] == "forbidden"
        # It says which folders may be opened and the setting that adds one.
        assert f"({allowed})" in error["message"] and "workspace_roots" in error["message"]
        relative = httpx.post(f"{url}/v1/threads", json={"workspace": "projects/app"})
        assert relative.status_code == 400
        assert "relative path" in relative.json()["error"]["message"]
        sneaky = httpx.post(
            f"{url}/v1/threads",
            json={"workspace": str(allowed / "app" / ".." / ".." / "elsewhere")},
        )
        assert sneaky.status_code == 403
        (allowed / "link").symlink_to(outside)
        assert (
            httpx.post(f"{url}/v1/threads", json={"workspace": str(allowed / "link")}).status_code
            == 403
        )


def test_oversized_bodies_are_refused_and_the_server_keeps_serving(tmp_path: Path) -> None:
    with live_server(ScriptedEngine([]), tmp_path / "home", max_body_bytes=2048) as url:
        big = {"workspace": "x" * 5000}
        declared = httpx.post(f"{url}/v1/threads", json=big)
        assert declared.status_code == 413 and declared.json()["error"]["kind"] == "too_large"

        def chunks():
            for _ in range(10):
                yield b"x" * 1000

        chunked = httpx.post(
            f"{url}/v1/chat/completions",
            content=chunks(),
            headers={"content-type": "application/json"},
        )
        assert chunked.status_code == 413
        assert httpx.get(f"{url}/healthz").status_code == 200


def test_readyz_reflects_the_engine(tmp_path: Path) -> None:
    with live_server(ScriptedEngine([]), tmp_path / "home") as url:
        assert httpx.get(f"{url}/readyz").json() == {"status": "ready"}
    missing = EmbeddedEngine(EngineSettings(model="not-pulled-anywhere"), tmp_path / "models")
    with live_server(missing, tmp_path / "home2") as url:
        response = httpx.get(f"{url}/readyz")
        assert response.status_code == 503
        assert response.json() == {"status": "not_ready", "reason": "engine_unavailable"}
