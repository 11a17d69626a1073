"""Typed engine failures. Each says what happened and what to do; `kind` is what clients and
the agent's error items see, `retryable` whether the same request may succeed later.
"""


class EngineError(Exception):
    kind = "engine_error"
    retryable = False

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        """The HTTP status behind the failure, when there was one."""


class EngineUnavailable(EngineError):
    """The backend cannot be reached (refused connection, unknown host, no model loaded)."""

    kind = "engine_unavailable"
    retryable = True


class EngineTimeout(EngineError):
    """No connection, or no output, within the configured time."""

    kind = "engine_timeout"
    retryable = True


class EngineAuthError(EngineError):
    """The backend refused our credentials (401/403)."""

    kind = "engine_auth"


class EngineRequestError(EngineError):
    """The backend rejected the request as invalid (4xx)."""

    kind = "engine_bad_request"


class ContextLengthExceeded(EngineRequestError):
    """The prompt plus requested completion exceed the model's context window: compact the
    context (self-summarization) rather than retrying as is."""

    kind = "context_overflow"


class ModelNotFound(EngineRequestError):
    """The backend does not serve the model asked for (a 404 naming the model)."""

    kind = "model_not_found"


class EngineRateLimited(EngineError):
    kind = "engine_rate_limited"
    retryable = True


class EngineServerError(EngineError):
    """The backend failed (5xx, or an error reported inside the stream)."""

    kind = "engine_server_error"
    retryable = True


class EngineProtocolError(EngineError):
    """The backend sent something that is not a valid response (malformed chunk)."""

    kind = "engine_protocol_error"
    retryable = True


class EngineStreamInterrupted(EngineError):
    """The stream ended before the generation finished (the server died or dropped us)."""

    kind = "engine_stream_interrupted"
    retryable = True
