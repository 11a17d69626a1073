"""Schema-driven fuzzing of the whole HTTP API with schemathesis: every operation in the app's
own OpenAPI document gets valid and invalid requests (wrong types, missing fields, strange path
parameters and headers), and no answer may be a 5xx. The server is the real one under uvicorn
with an engine that answers at once, so the run is bounded by the number of examples.

Every operation is fuzzed, the streaming ones included: no generated request can name a thread
that exists (ids are random), so the turn and resume streams answer 404 or 400 at once, and a
streamed chat completion against the instant engine ends after a few chunks. `/v1/doctor` has
no parameters, so it is called once; it only reads the machine.
"""

from pathlib import Path

import pytest
import requests
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from support.live_server import live_server

from opencomposer.serving.engines.base import GenerationResult

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from opencomposer.serving.engines.replay import ReplayEngine  # noqa: E402

EXAMPLES_PER_OPERATION = 40


class EndlessReplay(ReplayEngine):
    """A replay engine that never runs out: every generation is the same short answer."""

    def __init__(self) -> None:
        super().__init__([GenerationResult(text="ok")], model="replay-model")

    async def generate(self, request):  # type: ignore[no-untyped-def]
        self._next = 0
        async for event in super().generate(request):
            yield event


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_request_makes_the_server_fail(tmp_path: Path, mode: GenerationMode) -> None:
    (tmp_path / "ws").mkdir()
    with live_server(EndlessReplay(), tmp_path / "home") as url:
        # One real thread, so listing, reading and exporting have something to render.
        created = requests.post(
            f"{url}/v1/threads", json={"workspace": str(tmp_path / "ws")}, timeout=10
        )
        assert created.status_code == 200, created.text
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
        session = requests.Session()
        failures: list[str] = []
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 12, [op.label for op in operations]
        for operation in operations:

            @settings(
                max_examples=EXAMPLES_PER_OPERATION,
                deadline=None,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def fuzz(case: schemathesis.Case) -> None:
                case.call_and_validate(
                    base_url=url, session=session, timeout=10, checks=[not_a_server_error]
                )

            try:
                fuzz()
            except Unsatisfiable:
                # Negative mode only: an operation without parameters or with only free-form
                # strings has no invalid request to make.
                assert mode == GenerationMode.NEGATIVE, operation.label
            except Exception as exc:  # gathered, so every operation runs
                failures.append(f"{operation.label}: {exc}")
        assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize(
    "workspace", ["/tmp/a\x00b", "\x00", "~no-such-user-here/x", "/tmp/" + "a" * 5000]
)
def test_an_unusable_workspace_path_is_a_400(tmp_path: Path, workspace: str) -> None:
    """Found by fuzzing: these made `POST /v1/threads` fail with a 500 (ValueError for a NUL
    byte, RuntimeError for an unknown user's home, OSError for a name too long)."""
    with live_server(EndlessReplay(), tmp_path / "home") as url:
        response = requests.post(f"{url}/v1/threads", json={"workspace": workspace}, timeout=10)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["kind"] == "invalid_request"
