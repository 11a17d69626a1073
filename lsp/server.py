"""The opencomposer language server: the agent inside any LSP editor.

One server per editor connection. It owns an agent runtime whose workspaces read the editor's
open buffers and write through `workspace/applyEdit`, exposes the agent protocol as
`opencomposer/*` methods (the HTTP agent API one to one, `agent.api`), and offers plain-LSP ways
in for editors with no opencomposer code: commands, code actions, work-done progress, messages,
approvals as message requests. Inline completion comes from the same engine.

The handlers here translate; the agent's behaviour lives in `opencomposer.agent`. What a
message must be to reach them is `protocol_guard`'s business (`framing` reads the bytes), and
the stdio and TCP transports are `transport`'s and `tcp`'s.
"""

import asyncio
import io
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from lsprotocol import types as lsp
from pydantic import ValidationError
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.uris import to_fs_path
from pygls.workspace import Workspace

from opencomposer import __version__
from opencomposer.agent.api import AgentAPI
from opencomposer.agent.protocol.methods import TurnStartResponse
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.session import SessionError
from opencomposer.agent.tools.workspace import Workspace as AgentWorkspace
from opencomposer.config import LspSettings, Settings
from opencomposer.logs import hand_below_errors_to
from opencomposer.lsp.agent_link import APPROVAL_METHOD, EVENT_METHOD, AgentLink
from opencomposer.lsp.client_log import ClientLogHandler
from opencomposer.lsp.commands import EditorCommands
from opencomposer.lsp.completion import InlineCompleter, completion_items, inline_items
from opencomposer.lsp.documents import OpenDocuments
from opencomposer.lsp.edits import EditorWriter
from opencomposer.lsp.protocol_guard import GuardedServer
from opencomposer.lsp.tcp import serve_tcp
from opencomposer.lsp.transport import serve_stdio
from opencomposer.lsp.turn_feedback import TurnFeedback
from opencomposer.lsp.wire import REQUEST_FAILED, plain_json, session_error
from opencomposer.serving.engines.base import Engine
from opencomposer.serving.engines.errors import EngineError

log = logging.getLogger(__name__)

METHOD_PREFIX = "opencomposer/"


class OpenComposerServer(GuardedServer):
    def __init__(
        self, settings: Settings, engine_factory: Callable[[], Engine], *, token: str | None = None
    ) -> None:
        """`engine_factory` is called once the client has initialized. `token`: what a TCP
        connection must send in `initializationOptions.token` (checked by `lsp.tcp` before the
        connection reaches this server)."""
        super().__init__("opencomposer", __version__, experimental=protocol_capabilities())
        self.settings = settings
        self.lsp_settings: LspSettings = settings.lsp
        self.token = token
        self.client_log: ClientLogHandler | None = None
        """Over stdio, log lines below ERROR go to the editor (`lsp.client_log`), held until
        it has initialized; over TCP they stay on the terminal the server was started in."""
        self.speaks_protocol = False
        """The client sent an `opencomposer/*` request or declared
        `capabilities.experimental.opencomposer`: it renders events and answers approvals."""
        self._engine_factory = engine_factory
        self.documents = OpenDocuments(self._pygls_workspace)
        self.link = AgentLink(self, speaks_protocol=lambda: self.speaks_protocol)
        self.feedback = TurnFeedback(self)
        self.link.hooks.append(self.feedback)
        self.runtime: AgentRuntime | None = None
        self.api: AgentAPI | None = None
        self.completer: InlineCompleter | None = None
        self.editor_commands = EditorCommands(self)
        self._register()

    # ------------------------------------------------------------------ lifecycle

    def _pygls_workspace(self) -> Workspace | None:
        return self.protocol._workspace if self.ready else None

    def folders(self) -> list[Path]:
        """The editor's workspace folders (the root when it sent no folders)."""
        workspace = self._pygls_workspace()
        if workspace is None:
            return []
        uris = [folder.uri for folder in workspace.folders.values()]
        if not uris and workspace.root_uri:
            uris = [workspace.root_uri]
        return [Path(path).resolve() for uri in uris if (path := to_fs_path(uri))]

    def thread_roots(self) -> list[Path]:
        """Folders a thread may be bound to: the editor's and the configured ones."""
        return [*self.folders(), *self.settings.server.workspace_roots]

    def _workspace_for(self, root: Path) -> AgentWorkspace:
        writer = EditorWriter(
            self,
            self.documents,
            self.lsp_settings,
            root=root,
            client_shows_changes=lambda: self.speaks_protocol,
        )
        return AgentWorkspace(root, writer=writer, overlay=self.documents)

    def _initialize(self, params: lsp.InitializeParams) -> None:
        options = params.initialization_options or {}
        if not isinstance(options, dict):
            raise JsonRpcInvalidParams("initializationOptions must be an object")
        self.apply_options(options)
        experimental = params.capabilities.experimental
        declared = experimental.get("opencomposer") if isinstance(experimental, dict) else None
        # Any value but false or null declares it: `{}` (Lua's empty table, `[]`) too.
        if declared is not None and declared is not False:
            self.speaks_protocol = True
        engine = self._engine_factory()
        self.runtime = AgentRuntime(self.settings, engine, workspace_factory=self._workspace_for)
        self.api = AgentAPI(self.runtime, self.thread_roots)
        self.completer = InlineCompleter(engine, self.lsp_settings.completion, self.runtime.store)
        self.ready = True
        if self.client_log is not None:
            self.client_log.connect(self, asyncio.get_running_loop())
        client = params.client_info.name if params.client_info else "an unnamed client"
        log.info(
            "opencomposer %s serving %s: engine %s, workspace folders %s",
            __version__,
            client,
            self.settings.engine.backend,
            ", ".join(map(str, self.folders())) or "none",
        )

    def apply_options(self, options: dict[str, Any]) -> None:
        """Editor-side settings: `completion`, `applyEdits`, `revealEdits`. Only these: the
        engine and the approval policy are the user's own config (a project's editor settings
        must not loosen approvals)."""
        data = self.lsp_settings.model_dump()
        if isinstance(options.get("completion"), dict):
            data["completion"] = {**data["completion"], **options["completion"]}
        for key, field in (("applyEdits", "apply_edits"), ("revealEdits", "reveal_edits")):
            if key in options:
                data[field] = options[key]
        try:
            updated = LspSettings.model_validate(data)
        except ValidationError as exc:
            raise JsonRpcInvalidParams(f"invalid opencomposer settings: {exc}") from None
        # Mutated in place: writers and the completer hold these objects.
        for field in ("apply_edits", "reveal_edits"):
            setattr(self.lsp_settings, field, getattr(updated, field))
        for field, value in updated.completion.model_dump().items():
            setattr(self.lsp_settings.completion, field, value)

    async def close(self) -> None:
        """Stop following threads, interrupt running turns, close the trace store."""
        await self.link.close()
        if self.runtime is not None:
            runtime, self.runtime = self.runtime, None
            await runtime.close()

    # ------------------------------------------------------------------ transports

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve one client over stdio until it exits or goes away; a stream that breaks LSP's
        framing ends the process with status 1 (`lsp.transport`)."""
        self.client_log = ClientLogHandler()
        hand_below_errors_to(self.client_log)
        source = stdin or sys.stdin.buffer
        if not isinstance(source, io.BufferedIOBase):  # reads take what is there (`read1`)
            raise TypeError(f"stdin must be a buffered binary stream, not {type(source)}")
        serve_stdio(self, source, stdout or sys.stdout.buffer)

    def start_tcp(self, host: str, port: int) -> None:
        """Serve the first connection that authenticates with `token`, as over stdio; other
        connections cannot disturb the listener or that client's session (`lsp.tcp`)."""
        if self.token is None:
            raise ValueError("LSP over TCP needs a token")
        serve_tcp(self, host, port, self.token)

    # ------------------------------------------------------------------ features

    def _register(self) -> None:
        @self.feature(lsp.INITIALIZE)
        def initialize(params: lsp.InitializeParams) -> None:
            self._initialize(params)

        @self.feature(lsp.SHUTDOWN)
        async def shutdown(params: Any) -> None:
            await self.close()

        @self.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
        def configuration(params: lsp.DidChangeConfigurationParams) -> None:
            settings = params.settings
            if isinstance(settings, dict):
                section = settings.get("opencomposer", settings)
                if isinstance(section, dict):
                    try:
                        self.apply_options(section)
                    except JsonRpcInvalidParams as exc:
                        self.window_show_message(
                            lsp.ShowMessageParams(type=lsp.MessageType.Error, message=exc.message)
                        )

        @self.feature(lsp.TEXT_DOCUMENT_INLINE_COMPLETION, lsp.InlineCompletionOptions())
        async def inline_completion(
            params: lsp.InlineCompletionParams,
        ) -> lsp.InlineCompletionList | None:
            proposal = await self._complete(params.text_document.uri, params.position)
            if proposal is None:
                return None
            return lsp.InlineCompletionList(items=inline_items(proposal))

        @self.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions())
        async def completion(params: lsp.CompletionParams) -> lsp.CompletionList | None:
            # Only for editors without inline completion: the others have their own
            # completion sources, and ghost text is the better way to show a generation.
            text_document = self.client_capabilities.text_document
            if text_document is not None and text_document.inline_completion is not None:
                return None
            proposal = await self._complete(params.text_document.uri, params.position)
            if proposal is None:
                return None
            return lsp.CompletionList(is_incomplete=True, items=completion_items(proposal))

        @self.feature(
            lsp.TEXT_DOCUMENT_CODE_ACTION,
            lsp.CodeActionOptions(
                code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.Refactor]
            ),
        )
        def code_action(params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
            return self.editor_commands.code_actions(params)

        for name, handler in self.editor_commands.handlers().items():
            self.command(name)(_plain_function(handler))
        for method in AgentAPI.METHODS:
            self.feature(METHOD_PREFIX + method)(self._agent_method(method))

    def _agent_method(self, method: str) -> Callable[[Any], Any]:
        async def handle(params: Any) -> dict[str, Any]:
            self.speaks_protocol = True
            assert self.api is not None  # the protocol serves nothing before initialize
            payload = plain_json(params)
            try:
                if method == "turn/start":
                    return await self.start_turn_for_protocol(payload)
                result = await self.api.dispatch(method, payload)
            except SessionError as exc:
                raise session_error(exc) from None
            if method == "thread/start":
                session = await self.api.session(result["thread"]["id"])
                self.link.follow(session, 0)
            elif method == "thread/subscribe":
                session = await self.api.session(payload["thread_id"])
                self.link.follow(session, payload.get("after_seq", 0), restart=True)
            return result

        handle.__name__ = f"opencomposer_{method.replace('/', '_')}"
        return handle

    async def start_turn_for_protocol(self, payload: dict[str, Any]) -> dict[str, Any]:
        """`turn/start`: follow the thread from before the turn's first event, then start."""
        assert self.api is not None
        params = self.api.params("turn/start", payload)
        _, turn = await self.api.watch_turn(params, self.link.follow)
        return TurnStartResponse(turn=turn).model_dump(mode="json")

    async def _complete(self, uri: str, position: lsp.Position) -> Any:
        if self.completer is None or not self.lsp_settings.completion.enabled:
            return None
        document = self.workspace.get_text_document(uri)
        related = [
            d
            for d in self.workspace.text_documents.values()
            if d.uri != uri and d.language_id == document.language_id
        ]
        # A file opened on its own (no folder) still gets completions, with absolute paths.
        root = self.editor_commands.root_of(document) if self.folders() else None
        try:
            return await self.completer.complete(
                document, position, related=related, workspace_root=root
            )
        except EngineError as exc:  # no model, a server down: say so, not a traceback
            raise JsonRpcException(
                exc.message, code=REQUEST_FAILED, data={"kind": exc.kind}
            ) from None


def _plain_function(handler: Callable[..., Any]) -> Callable[..., Any]:
    """pygls marks a command's handler with attributes, which a bound method cannot take."""

    async def run(*arguments: Any) -> Any:
        return await handler(*arguments)

    return run


def protocol_capabilities() -> dict[str, Any]:
    """`capabilities.experimental.opencomposer`: how a client reaches the agent."""
    return {
        "opencomposer": {
            "version": __version__,
            "methods": [METHOD_PREFIX + method for method in AgentAPI.METHODS],
            "events": EVENT_METHOD,
            "approvals": APPROVAL_METHOD,
            "commands": sorted(EditorCommands.NAMES),
        }
    }


def advertised_capabilities(server: OpenComposerServer) -> dict[str, Any]:
    """What `initialize` answers, for a client that declares no capabilities (UTF-16)."""
    manager = server.protocol.fm
    capabilities = ServerCapabilitiesBuilder(
        lsp.ClientCapabilities(),
        {*manager.features, *manager.builtin_features},
        manager.feature_options,
        list(manager.commands),
        lsp.TextDocumentSyncKind.Incremental,
    ).build()
    capabilities.experimental = protocol_capabilities()
    return server.protocol._converter.unstructure(capabilities)
