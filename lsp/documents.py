"""The editor's open documents as the agent's workspace overlay.

pygls keeps each open document's text current from the client's incremental changes; this view
maps a file's resolved path to that text, so every agent read sees unsaved buffers. One gap is
closed here: after the editor accepts a `workspace/applyEdit`, its `didChange` for that edit may
come later (Neovim debounces it), and a read in between must already see the edit. The expected
text is held until the document's version moves past the one the edit was made against.
"""

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from pygls.workspace import TextDocument, Workspace

WorkspaceSource = Callable[[], Workspace | None]
"""The pygls workspace, which exists only once the client has initialized."""


class OpenDocuments(Mapping[Path, str]):
    def __init__(self, workspace: WorkspaceSource) -> None:
        self._workspace = workspace
        self._expected: dict[Path, tuple[int | None, str]] = {}
        self._paths: dict[str, Path] = {}
        """Resolved path of each document URI (resolving costs system calls; URIs repeat)."""

    def document(self, path: Path) -> TextDocument | None:
        """The open document of a resolved path."""
        for uri, document in self._documents().items():
            if self._path_of(uri, document) == path:
                return document
        return None

    def expect(self, path: Path, version: int | None, text: str) -> None:
        """The editor accepted an edit made against `version` that leaves `text`."""
        self._expected[path] = (version, text)

    def __getitem__(self, path: Path) -> str:
        document = self.document(path)
        if document is None:
            self._expected.pop(path, None)
            raise KeyError(path)
        expected = self._expected.get(path)
        if expected is not None:
            version, text = expected
            if document.version == version:
                return text
            del self._expected[path]  # the editor's own change arrived: it is the truth
        return document.source

    def __iter__(self) -> Iterator[Path]:
        for uri, document in list(self._documents().items()):
            path = self._path_of(uri, document)
            if path is not None:
                yield path

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def _documents(self) -> dict[str, TextDocument]:
        workspace = self._workspace()
        return workspace.text_documents if workspace is not None else {}

    def _path_of(self, uri: str, document: TextDocument) -> Path | None:
        if uri not in self._paths:
            if not uri.startswith("file:"):  # untitled buffers, notebooks: no file to overlay
                return None
            self._paths[uri] = Path(document.path).resolve()
        return self._paths[uri]
