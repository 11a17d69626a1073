import dataclasses
from collections.abc import Callable
from pathlib import Path
from textwrap import dedent

import pytest

from opencomposer.agent.tools.code_index import semantic_index
from opencomposer.agent.tools.code_index.chunking import Chunk
from opencomposer.agent.tools.code_index.embedder import MiniLMEmbedder
from opencomposer.agent.tools.code_index.lexical import BM25Index, tokenize
from opencomposer.agent.tools.code_index.semantic_index import (
    NO_MODEL_NOTE,
    SemanticIndex,
    UpdateStats,
)

REPO = {
    "app/config.py": '''\
        import tomllib
        from pathlib import Path


        def load_settings(path: Path) -> dict:
            """Read the TOML settings file and fill in defaults for missing keys."""
            with path.open("rb") as handle:
                settings = tomllib.load(handle)
            settings.setdefault("port", 8080)
            return settings
        ''',
    "app/auth.py": """\
        import hashlib
        import hmac
        import os


        def hash_password(password: str) -> bytes:
            salt = os.urandom(16)
            return salt + hashlib.scrypt(password.encode(), salt=salt, n=2**14, r=8, p=1)


        def verify_password(password: str, stored: bytes) -> bool:
            salt, digest = stored[:16], stored[16:]
            candidate = hashlib.scrypt(password.encode(), salt=salt, n=2**14, r=8, p=1)
            return hmac.compare_digest(candidate, digest)
        """,
    "app/db.py": """\
        import sqlite3


        def connect(path: str) -> sqlite3.Connection:
            connection = sqlite3.connect(path)
            connection.execute("PRAGMA foreign_keys = ON")
            return connection


        def find_user(connection: sqlite3.Connection, email: str) -> tuple | None:
            return connection.execute(
                "SELECT id, name FROM users WHERE email = ?", (email,)).fetchone()
        """,
    "web/src/cart.ts": """\
        export interface Item { name: string; priceCents: number; quantity: number }

        export function cartTotal(items: Item[]): number {
          return items.reduce((sum, item) => sum + item.priceCents * item.quantity, 0);
        }
        """,
    "web/src/api.ts": """\
        export async function fetchUser(id: string): Promise<unknown> {
          const response = await fetch(`/api/users/${id}`);
          if (!response.ok) throw new Error(`HTTP ${response.status}`);
          return response.json();
        }
        """,
    "worker/queue.go": """\
        package worker

        import "time"

        // RunWithRetry calls job until it succeeds, waiting twice as long after each failure.
        func RunWithRetry(job func() error, attempts int) error {
        \tvar err error
        \tfor i := 0; i < attempts; i++ {
        \t\tif err = job(); err == nil {
        \t\t\treturn nil
        \t\t}
        \t\ttime.Sleep(time.Second << i)
        \t}
        \treturn err
        }
        """,
    "docs/install.md": """\
        # Installation

        Install the package with pip, then start the server with `app serve`.
        """,
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for path, text in REPO.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(dedent(text))
    (root / "assets").mkdir()
    (root / "assets/logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (root / "build.log").write_text("x" * (semantic_index.MAX_FILE_BYTES + 1))
    return root


def lister(root: Path) -> Callable[[], list[Path]]:
    return lambda: sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def open_index(root: Path, embedder: MiniLMEmbedder | None) -> SemanticIndex:
    return SemanticIndex(root, lister(root), root.parent / "index.db", embedder)


def stats(update: UpdateStats) -> UpdateStats:
    return dataclasses.replace(update, seconds=0.0)


class Spy:
    """Records every text the index asks the embedder to encode."""

    def __init__(self, embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts: list[str] = []
        encode = embedder.encode

        def recording(texts, batch_size=32):  # type: ignore[no-untyped-def]
            self.texts += texts
            return encode(texts, batch_size)

        monkeypatch.setattr(embedder, "encode", recording)


@pytest.mark.parametrize(
    ("query", "path", "symbol"),
    [
        ("where do we parse the config file", "app/config.py", "load_settings"),
        ("check that a password is correct", "app/auth.py", "verify_password"),
        ("look up a user by email in the database", "app/db.py", "find_user"),
        ("total price of the shopping cart", "web/src/cart.ts", "cartTotal"),
        ("retry a failing job with exponential backoff", "worker/queue.go", "RunWithRetry"),
        ("how do I install it", "docs/install.md", "Installation"),
    ],
)
def test_natural_language_query_finds_the_right_chunk(
    repo: Path, embedder: MiniLMEmbedder, query: str, path: str, symbol: str
) -> None:
    index = open_index(repo, embedder)
    index.update()
    outcome = index.search(query, top_k=3)
    assert (outcome.method, outcome.note) == ("semantic", None)
    assert (outcome.hits[0].chunk.path, outcome.hits[0].chunk.symbol) == (path, symbol)
    assert outcome.hits[0].score > outcome.hits[1].score


def test_binary_and_oversized_files_are_skipped(repo: Path, embedder: MiniLMEmbedder) -> None:
    index = open_index(repo, embedder)
    # 8 files within the size limit (7 text, the PNG); the 1 MiB log is not even read.
    assert stats(index.update()) == UpdateStats(8, 7, 14, 0, 0.0)
    paths = {hit.chunk.path for hit in index.search("image log output", top_k=50).hits}
    assert paths == set(REPO)


def test_update_reembeds_only_changed_files_and_drops_deleted_ones(
    repo: Path, embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_index(repo, embedder)
    index.update()
    spy = Spy(embedder, monkeypatch)
    (repo / "app/db.py").write_text(
        dedent(REPO["app/db.py"])
        + dedent("""

        def delete_user(connection: sqlite3.Connection, user_id: int) -> None:
            connection.execute("DELETE FROM users WHERE id = ?", (user_id,))
        """)
    )
    (repo / "web/src/api.ts").unlink()
    (repo / "app/auth.py").write_text(dedent(REPO["app/auth.py"]))  # same bytes, new mtime
    assert stats(index.update()) == UpdateStats(7, 1, 4, 3 + 1, 0.0)
    assert {text.split("\n")[0] for text in spy.texts} == {"path: app/db.py"}
    assert stats(index.update()) == UpdateStats(7, 0, 0, 0, 0.0)
    hit = index.search("remove a user account", top_k=1).hits[0]
    assert (hit.chunk.path, hit.chunk.symbol) == ("app/db.py", "delete_user")
    assert all(h.chunk.path != "web/src/api.ts" for h in index.search("fetch", 20).hits)


def test_a_reopened_index_does_not_reembed_unchanged_files(
    repo: Path, embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = open_index(repo, embedder)
    first.update()
    before = first.search("hash a password", top_k=5)
    first.close()
    spy = Spy(embedder, monkeypatch)
    second = open_index(repo, embedder)
    assert stats(second.update()) == UpdateStats(8, 0, 0, 0, 0.0)
    assert second.search("hash a password", top_k=5) == before
    assert spy.texts == ["hash a password"]


def test_a_crash_mid_update_keeps_finished_files_and_loses_nothing(
    repo: Path, embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic_index, "_GROUP_CHUNKS", 1)  # one transaction per file
    calls = 0
    encode = embedder.encode

    def crash_on_third_file(texts, batch_size=32):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt
        return encode(texts, batch_size)

    monkeypatch.setattr(embedder, "encode", crash_on_third_file)
    with pytest.raises(KeyboardInterrupt):
        open_index(repo, embedder).update()
    monkeypatch.setattr(embedder, "encode", encode)
    resumed = open_index(repo, embedder)
    assert len(resumed.search("anything", top_k=50).hits) == 3 + 2  # app/auth.py, app/config.py
    assert stats(resumed.update()) == UpdateStats(8, 5, 9, 0, 0.0)


def test_a_different_embedder_rebuilds_the_index(repo: Path, embedder: MiniLMEmbedder) -> None:
    open_index(repo, None).update()
    assert stats(open_index(repo, embedder).update()) == UpdateStats(8, 7, 14, 0, 0.0)
    assert stats(open_index(repo, None).update()) == UpdateStats(8, 7, 14, 0, 0.0)


def test_without_a_model_bm25_answers_and_says_why(repo: Path) -> None:
    index = open_index(repo, None)
    assert stats(index.update()) == UpdateStats(8, 7, 14, 0, 0.0)
    outcome = index.search("verify_password", top_k=3)
    assert (outcome.method, outcome.note) == ("lexical", NO_MODEL_NOTE)
    assert "opencomposer models pull all-minilm-l6-v2" in NO_MODEL_NOTE
    assert outcome.hits[0].chunk == Chunk(
        "app/auth.py",
        11,
        14,
        dedent(REPO["app/auth.py"]).split("\n\n\n")[2].rstrip("\n"),
        "verify_password",
    )
    top = index.search("cartTotal", top_k=1).hits[0].chunk  # `cart` alone is in two chunks
    assert (top.path, top.symbol) == ("web/src/cart.ts", "cartTotal")
    (repo / "app/auth.py").unlink()
    assert stats(index.update()) == UpdateStats(7, 0, 0, 3, 0.0)
    assert [h.chunk.path for h in index.search("verify_password", top_k=3).hits] == []


def test_lexical_tokens_split_identifiers_and_keep_them_whole() -> None:
    assert tokenize("parseHTTPResponse2(load_config, i) where naïveCafé") == [
        "parsehttpresponse2",
        "parse",
        "http",
        "response",
        "load_config",
        "load",
        "config",
        "naïvecafé",
        "naïve",
        "café",
    ]


def test_bm25_takes_documents_in_and_out() -> None:
    index = BM25Index(
        [
            (1, "def load_config(path)"),
            (2, "print(load_config(path), flush=True)"),
            (3, "def save(data)"),
        ]
    )
    assert [doc for doc, _ in index.search("loadConfig", top_k=5)] == [1, 2]  # shorter first
    index.remove(1)
    index.add(3, "def load_config_file(path)")
    assert [doc for doc, _ in index.search("loadConfig", top_k=5)] == [3, 2]
    assert [doc for doc, _ in index.search("loadConfig", 5, accept=lambda d: d != 3)] == [2]


@pytest.mark.parametrize("model", [True, False])
def test_path_prefix_limits_hits_to_a_folder_or_file(
    repo: Path, embedder: MiniLMEmbedder, model: bool
) -> None:
    index = open_index(repo, embedder if model else None)
    index.update()
    for prefix, allowed in [
        ("web", {"web/src/cart.ts", "web/src/api.ts"}),
        ("./web/src/", {"web/src/cart.ts", "web/src/api.ts"}),
        ("app/db.py", {"app/db.py"}),
        ("we", set()),
    ]:
        hits = index.search("user price password settings", top_k=20, path_prefix=prefix).hits
        assert {hit.chunk.path for hit in hits} == allowed
    assert len(index.search("user", top_k=2, path_prefix=".").hits) == 2
