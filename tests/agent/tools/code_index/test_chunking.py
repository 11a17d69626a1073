from textwrap import dedent

from hypothesis import given
from hypothesis import strategies as st

from opencomposer.agent.tools.code_index.chunking import Chunk, chunk_file, embedding_input

PYTHON = dedent('''\
    """Settings for the app."""

    import json
    from pathlib import Path

    DEFAULT_PORT = 8080


    # Read the settings file; missing keys take defaults.
    def load_config(path: Path) -> dict:
        with path.open() as handle:
            return json.load(handle)


    class Settings:
        """Typed settings."""

        port: int = DEFAULT_PORT

        @classmethod
        def from_file(cls, path: Path) -> "Settings":
            raw = load_config(path)
            return cls(**raw)

        def describe(self) -> str:
            return f"port {self.port}"


    if __name__ == "__main__":
        print(Settings.from_file(Path("app.json")).describe())
    ''')

TYPESCRIPT = dedent("""\
    import { Item } from "./item";

    export interface Cart {
      items: Item[];
    }

    /** Sum of prices, in cents. */
    export function total(cart: Cart): number {
      return cart.items.reduce((sum, item) => sum + item.price, 0);
    }

    export const isEmpty = (cart: Cart): boolean => cart.items.length === 0;
    const TAX_RATE = 0.2;

    export class CartStore {
      private carts = new Map<string, Cart>();

      get(id: string): Cart | undefined {
        return this.carts.get(id);
      }

      put(id: string, cart: Cart): void {
        this.carts.set(id, cart);
      }
    }
    """)

GO = dedent("""\
    package worker

    import (
    \t"time"
    )

    // Job is one unit of queued work.
    type Job struct {
    \tID       string
    \tAttempts int
    }

    // Backoff doubles the wait after every failed attempt.
    func Backoff(attempt int) time.Duration {
    \treturn time.Second << attempt
    }

    func (j *Job) Retry() {
    \tj.Attempts++
    \ttime.Sleep(Backoff(j.Attempts))
    }
    """)


def lines(path: str, source: str, start: int, end: int, symbol: str | None) -> Chunk:
    """The chunk holding lines start..end of `source`, as chunk_file must cut it."""
    return Chunk(path, start, end, "\n".join(source.split("\n")[start - 1 : end]), symbol)


def test_python_definitions_are_chunks_and_module_code_is_grouped() -> None:
    assert chunk_file("app/config.py", PYTHON) == [
        lines("app/config.py", PYTHON, 1, 6, None),
        lines("app/config.py", PYTHON, 9, 12, "load_config"),
        lines("app/config.py", PYTHON, 15, 26, "Settings"),
        lines("app/config.py", PYTHON, 29, 30, None),
    ]
    assert chunk_file("app/config.py", PYTHON)[1].text == (
        "# Read the settings file; missing keys take defaults.\n"
        "def load_config(path: Path) -> dict:\n"
        "    with path.open() as handle:\n"
        "        return json.load(handle)"
    )


def test_python_class_over_the_limit_is_cut_into_members() -> None:
    assert chunk_file("app/config.py", PYTHON, max_lines=8) == [
        lines("app/config.py", PYTHON, 1, 6, None),
        lines("app/config.py", PYTHON, 9, 12, "load_config"),
        lines("app/config.py", PYTHON, 15, 18, "Settings"),
        lines("app/config.py", PYTHON, 20, 23, "Settings.from_file"),
        lines("app/config.py", PYTHON, 25, 26, "Settings.describe"),
        lines("app/config.py", PYTHON, 29, 30, None),
    ]


def test_typescript_exports_arrow_functions_and_class_members() -> None:
    assert chunk_file("web/cart.ts", TYPESCRIPT) == [
        lines("web/cart.ts", TYPESCRIPT, 1, 1, None),
        lines("web/cart.ts", TYPESCRIPT, 3, 5, "Cart"),
        lines("web/cart.ts", TYPESCRIPT, 7, 10, "total"),
        lines("web/cart.ts", TYPESCRIPT, 12, 12, "isEmpty"),
        lines("web/cart.ts", TYPESCRIPT, 13, 13, None),
        lines("web/cart.ts", TYPESCRIPT, 15, 25, "CartStore"),
    ]
    # The class signature opens the first member's chunk; the closing brace is in none.
    assert chunk_file("web/cart.ts", TYPESCRIPT, max_lines=6)[5:] == [
        lines("web/cart.ts", TYPESCRIPT, 15, 16, "CartStore"),
        lines("web/cart.ts", TYPESCRIPT, 18, 20, "CartStore.get"),
        lines("web/cart.ts", TYPESCRIPT, 22, 24, "CartStore.put"),
    ]


def test_go_doc_comments_stay_with_their_declaration_and_methods_name_the_receiver() -> None:
    assert chunk_file("worker/job.go", GO) == [
        lines("worker/job.go", GO, 1, 5, None),
        lines("worker/job.go", GO, 7, 11, "Job"),
        lines("worker/job.go", GO, 13, 16, "Backoff"),
        lines("worker/job.go", GO, 18, 21, "Job.Retry"),
    ]


def test_long_function_is_cut_into_balanced_overlapping_windows() -> None:
    body = "".join(f"    total += {n}\n" for n in range(23))
    source = f"def add_up():\n    total = 0\n{body}"  # 25 lines
    # max_lines 10: overlap 1, so three windows of 9 lines sharing their edge lines.
    assert chunk_file("sum.py", source, max_lines=10) == [
        lines("sum.py", source, 1, 9, "add_up"),
        lines("sum.py", source, 9, 17, "add_up"),
        lines("sum.py", source, 17, 25, "add_up"),
    ]


def test_module_code_between_definitions_is_packed_up_to_the_limit() -> None:
    source = "".join(f"CONSTANT_{n} = {n}\n" for n in range(7)) + "def f():\n    pass\n"
    assert chunk_file("consts.py", source, max_lines=4) == [
        lines("consts.py", source, 1, 4, None),
        lines("consts.py", source, 5, 7, None),
        lines("consts.py", source, 8, 9, "f"),
    ]


def test_markdown_is_cut_at_headings_and_fenced_hashes_are_not_headings() -> None:
    source = dedent("""\
        # Opencomposer

        An open coding-agent server.
        It runs anywhere.

        ## Install

        Run `pip install opencomposer`.

        ```sh
        # not a heading
        opencomposer serve
        ```
        ## Usage
        Open the editor.
        """)
    assert chunk_file("README.md", source) == [
        lines("README.md", source, 1, 4, "Opencomposer"),
        lines("README.md", source, 6, 13, "Install"),
        lines("README.md", source, 14, 15, "Usage"),
    ]
    assert chunk_file("README.md", source, max_lines=4)[1:3] == [
        lines("README.md", source, 6, 8, "Install"),
        lines("README.md", source, 10, 13, "Install"),
    ]


def test_prose_packs_paragraphs_and_drops_blank_lines() -> None:
    source = "a\nb\n\nc\nd\ne\n\n\nf\n"
    assert chunk_file("notes.txt", source, max_lines=3) == [
        Chunk("notes.txt", 1, 2, "a\nb", None),
        Chunk("notes.txt", 4, 6, "c\nd\ne", None),
        Chunk("notes.txt", 9, 9, "f", None),
    ]
    assert chunk_file("notes.txt", source, max_lines=6) == [
        Chunk("notes.txt", 1, 6, "a\nb\n\nc\nd\ne", None),
        Chunk("notes.txt", 9, 9, "f", None),
    ]


def test_empty_files_have_no_chunks_and_line_endings_are_normalised() -> None:
    assert chunk_file("empty.py", "") == []
    assert chunk_file("blank.yaml", " \n\t\n") == []
    assert chunk_file("crlf.py", "def f():\r\n    pass\r\n") == [
        Chunk("crlf.py", 1, 2, "def f():\n    pass", "f")
    ]


def test_embedding_input_labels_the_text_with_path_and_symbol() -> None:
    assert embedding_input(Chunk("a/b.py", 3, 4, "def bar():\n    pass", "Foo.bar")) == (
        "path: a/b.py\nsymbol: Foo.bar\ndef bar():\n    pass"
    )
    assert embedding_input(Chunk("a/b.py", 1, 1, "import os", None)) == "path: a/b.py\nimport os"


@given(
    st.lists(st.sampled_from(["", "word", "  indented", "# heading", "```"]), max_size=80),
    st.integers(min_value=1, max_value=30),
)
def test_prose_chunks_cover_every_line_within_the_limit(rows: list[str], max_lines: int) -> None:
    source = "\n".join(rows)
    chunks = chunk_file("notes.md", source, max_lines)
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    assert {n for n, row in enumerate(rows, 1) if row.strip()} <= covered
    for chunk in chunks:
        assert chunk.end_line - chunk.start_line < max_lines
        assert chunk.text == "\n".join(rows[chunk.start_line - 1 : chunk.end_line])
    assert chunks == chunk_file("notes.md", source, max_lines)
