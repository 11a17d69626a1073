"""Prompt templates: Jinja files in `agent/prompts/`, so prompts are read and reviewed as text,
not strings buried in code. A missing value is an error, never an empty hole in a prompt."""

from functools import cache
from pathlib import Path
from typing import Any

import jinja2

PROMPTS = Path(__file__).parent / "prompts"


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROMPTS),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
    )


def render(name: str, **values: Any) -> str:
    """Render `prompts/<name>.md.j2`, without surrounding blank lines."""
    return _environment().get_template(f"{name}.md.j2").render(**values).strip()
