"""What the agent is asked when the user picks an editor action: fix a diagnostic, explain a
selection, write tests for it, or a free question about the current file.

The request carries the code as the user sees it (the buffer, unsaved edits included) as a
file reference with its line range, so the model does not have to read it first and the trace
records exactly what the user pointed at.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from lsprotocol import types as lsp
from pygls.workspace import TextDocument

from opencomposer.agent.prompting import render
from opencomposer.agent.protocol.common import LineRange
from opencomposer.agent.protocol.items import FileReference, TextInput, UserInput

Action = Literal["fix", "explain", "tests"]

MAX_REFERENCE_CHARS = 20_000
"""Longest selection sent whole; a longer one is sent as its line range only."""


def action_request(
    action: Action,
    document: TextDocument,
    root: Path,
    selection: lsp.Range,
    diagnostics: Sequence[lsp.Diagnostic] = (),
) -> list[UserInput]:
    """The turn input for an editor action on `selection` of `document`."""
    path = relative_path(document, root)
    problems = "\n".join(
        f"- line {d.range.start.line + 1}: {d.message}" + (f" ({d.source})" if d.source else "")
        for d in diagnostics
    )
    # agent/prompts/editor_<action>.md.j2
    text = render(f"editor_{action}", path=path, problems=problems or "- (no diagnostic given)")
    return [TextInput(text=text), reference(document, root, _whole_lines(selection))]


def question_request(
    question: str, document: TextDocument | None, root: Path, selection: lsp.Range | None
) -> list[UserInput]:
    """A free question, pointing at the selection (or the file) it was asked from."""
    inputs: list[UserInput] = [TextInput(text=question)]
    if document is not None:
        inputs.append(reference(document, root, selection and _whole_lines(selection)))
    return inputs


def reference(document: TextDocument, root: Path, lines: lsp.Range | None) -> FileReference:
    path = relative_path(document, root)
    if lines is None or lines.start == lines.end:
        return FileReference(path=path)
    first, last = lines.start.line, max(lines.start.line, lines.end.line - 1)
    text = "".join(document.lines[first : last + 1])
    return FileReference(
        path=path,
        range=LineRange(start=first + 1, end=last + 1),
        text=text if len(text) <= MAX_REFERENCE_CHARS else None,
    )


def relative_path(document: TextDocument, root: Path) -> str:
    path = Path(document.path).resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _whole_lines(selection: lsp.Range) -> lsp.Range:
    """The lines a selection touches: [first line, line after the last]. A selection ending at
    the start of a line does not include that line."""
    end_line = selection.end.line + (1 if selection.end.character > 0 else 0)
    end_line = max(end_line, selection.start.line + 1)
    return lsp.Range(
        start=lsp.Position(line=selection.start.line, character=0),
        end=lsp.Position(line=end_line, character=0),
    )
