"""The workspace's code indexes: built on first use, kept fresh, closed with the harness.

The symbol index is built once and then follows the file watcher. The semantic index is
updated incrementally before each search; when an update would outlast the caller's patience
(the first embedding of a large workspace takes minutes on a CPU) the search is answered
from a keyword index instead, with a note, while embedding goes on in the background.
"""

import asyncio
import contextlib
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from opencomposer.agent.tools.code_index.symbol_index import SymbolIndex

if TYPE_CHECKING:  # torch-backed: imported on first semantic search, not at start-up
    from opencomposer.agent.tools.code_index.semantic_index import SemanticIndex

STILL_BUILDING = (
    "the semantic index is still being built, so these are keyword (BM25) "
    "matches; search again later for semantic ones"
)


class CodeIndexes:
    def __init__(
        self,
        root: Path,
        data_dir: Path,
        models_dir: Path | None,
        list_files: Callable[[], list[Path]],
    ) -> None:
        self.root = root
        self.models_dir = models_dir
        self.list_files = list_files
        digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
        self.folder = data_dir / "index" / digest
        self._symbols: SymbolIndex | None = None
        self._watch_stop = asyncio.Event()
        self._watcher: asyncio.Task | None = None
        self._semantic: SemanticIndex | None = None
        self._keywords: SemanticIndex | None = None
        self._semantic_update: asyncio.Future | None = None

    async def symbols(self) -> SymbolIndex:
        if self._symbols is None:
            index = SymbolIndex(self.root, self.list_files)
            await asyncio.to_thread(index.build)
            self._symbols = index
            self._watcher = asyncio.create_task(index.watch(self._watch_stop))
        return self._symbols

    async def semantic(self, wait: float) -> tuple["SemanticIndex", str | None]:
        """The semantic index, up to date; or the keyword index and why, when bringing the
        semantic one up to date takes longer than `wait` seconds."""
        from opencomposer.agent.tools.code_index.embedder import MiniLMEmbedder, find_model
        from opencomposer.agent.tools.code_index.semantic_index import SemanticIndex

        if self._semantic is None:
            model = find_model(self.models_dir) if self.models_dir else None
            embedder = await asyncio.to_thread(MiniLMEmbedder.load, model) if model else None
            self._semantic = SemanticIndex(
                self.root, self.list_files, self.folder / "semantic.db", embedder
            )
        if self._semantic.embedder is None:
            await asyncio.to_thread(self._semantic.update)
            return self._semantic, None
        if self._semantic_update is None or self._semantic_update.done():
            self._semantic_update = asyncio.ensure_future(asyncio.to_thread(self._semantic.update))
        done, _ = await asyncio.wait([self._semantic_update], timeout=wait)
        if done:
            self._semantic_update.result()
            return self._semantic, None
        if self._keywords is None:
            self._keywords = SemanticIndex(
                self.root, self.list_files, self.folder / "keywords.db", None
            )
        await asyncio.to_thread(self._keywords.update)
        return self._keywords, STILL_BUILDING

    async def close(self) -> None:
        self._watch_stop.set()
        for task in (self._watcher, self._semantic_update):
            if task is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(task, 30)
        for index in (self._semantic, self._keywords):
            if index is not None:
                index.close()
        self._semantic = self._keywords = self._semantic_update = self._watcher = None
