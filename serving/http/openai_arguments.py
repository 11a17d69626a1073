"""What an OpenAI request body may hold here: every argument either works as OpenAI documents
it, changes nothing OpenAI promises about the answer, or is refused, never silently ignored.

A client that sends `frequency_penalty: 0.5` or a `logit_bias` and gets an answer believes
the server honoured it. So an argument OpenAI documents that this server does
not implement is a 400 unless it holds the value that means "off", and an argument OpenAI does
not know is a 400 with OpenAI's own message for it. The arguments that are accepted and do
nothing are the ones that only describe the request (who sent it, metadata, storage and
service tier, cache keys).
"""

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

OPENAI_DEFAULT_TEMPERATURE = 1.0
"""OpenAI samples at temperature 1 when none is given (greedy is an explicit 0)."""


class OpenAIBody(BaseModel):
    """A part of a request body. Fields OpenAI defines on messages and tools that change
    nothing here (a previous answer's `refusal`, `annotations`) are ignored."""

    model_config = ConfigDict(extra="ignore")


class OpenAIRequest(OpenAIBody):
    """A whole request body, its top-level arguments checked as the module says."""

    DESCRIPTIVE: ClassVar[frozenset[str]] = frozenset()
    """Accepted and without effect: they describe the request, not the answer."""

    OFF: ClassVar[dict[str, tuple[Any, ...]]] = {}
    """Documented arguments not implemented here, with the values that mean "off"."""

    @model_validator(mode="before")
    @classmethod
    def _known_arguments(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name, value in data.items():
            if name in cls.model_fields or name in cls.DESCRIPTIVE:
                continue
            if name in cls.OFF:
                if any(value == off and type(value) is type(off) for off in cls.OFF[name]):
                    continue
                raise PydanticCustomError(
                    "unsupported_argument",
                    "{name} is not supported by this server: leave it out"
                    + (" or send {off}" if cls.OFF[name][1:] else ""),
                    {"name": name, "off": " or ".join(repr(v) for v in cls.OFF[name][1:])},
                )
            raise PydanticCustomError(
                "unrecognized_argument",
                "Unrecognized request argument supplied: {name}",
                {"name": name},
            )
        return data


PENALTIES_OFF: dict[str, tuple[Any, ...]] = {
    "frequency_penalty": (None, 0, 0.0),
    "presence_penalty": (None, 0, 0.0),
    "logit_bias": (None, {}),
}
