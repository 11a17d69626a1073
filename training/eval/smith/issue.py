"""The instruction of a generated task: terse, as a user files a bug, written from what a
failing test printed (its failing line and pytest's `E` lines), never naming the file the bug
is in nor the fix."""

import re

_HEADER = re.compile(r"^_{3,} (?P<name>.+?) _{3,}$")
_END = re.compile(r"^={3,} ")
_MAX_ERROR_LINES = 8
_MAX_LINE = 160


def write_instruction(
    project: str, failing: list[str], output: str, hidden_names: list[str]
) -> str:
    """`failing`: the FAIL_TO_PASS ids, sorted; `hidden_names`: paths and file names the text
    must not carry (the mutated files)."""
    test = failing[0]
    excerpt = _failure_excerpt(output, _section_name(test))
    function = test.split("::")[-1]
    others = len(failing) - 1
    lines = [f"Something broke in {project}: `{function}` fails."]
    if others:
        lines[0] = lines[0][:-1] + f", and {others} other test{'s' if others > 1 else ''} too."
    if excerpt:
        lines += ["", "```", *excerpt, "```"]
    lines += ["", "The tests are right; fix the code, not the tests."]
    return _scrub("\n".join(lines), hidden_names) + "\n"


def _section_name(test: str) -> str:
    """The name pytest titles a failure's section with: `Class.test[param]` for
    `path::Class::test[param]`."""
    return ".".join(test.split("::")[1:])


def _failure_excerpt(output: str, section: str) -> list[str]:
    """The failing statement and its `E` lines from the test's section of a --tb=short log."""
    block: list[str] | None = None
    for line in output.splitlines():
        header = _HEADER.match(line)
        if header or _END.match(line):
            if block is not None:
                break
            if header and header["name"] == section:
                block = []
            continue
        if block is not None:
            block.append(line)
    if not block:
        return []
    first_error = next((i for i, line in enumerate(block) if line.startswith("E ")), None)
    if first_error is None:
        return []
    statement = (
        [block[first_error - 1]] if first_error and block[first_error - 1].startswith(" ") else []
    )
    errors = [line for line in block[first_error:] if line.startswith("E ")][:_MAX_ERROR_LINES]
    return [_clip(line) for line in statement + errors]


def _clip(line: str) -> str:
    return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 1] + "…"


def _scrub(text: str, hidden_names: list[str]) -> str:
    for name in sorted(hidden_names, key=len, reverse=True):
        text = text.replace(name, "…")
    return text
