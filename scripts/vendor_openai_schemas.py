"""Extracts the response schemas our OpenAI-compatible API is tested against from OpenAI's
published OpenAPI document into `tests/support/openai_openapi/schemas.json`.

Only the named roots and the schemas they reference (transitively) are kept, under the same
`#/components/schemas/` paths, so their `$ref`s resolve unchanged; the rest of the ~3 MB
document stays out of the tree. The header records where the schemas came from, so a refresh
is a reviewable diff:

    git clone https://github.com/openai/openai-openapi && cd openai-openapi
    python scripts/vendor_openai_schemas.py openapi.yaml \
        --commit "$(git log -1 --format=%H -- openapi.yaml)" \
        --date "$(git log -1 --format=%cs -- openapi.yaml)"

(run from this repository's root, with the path to the clone's openapi.yaml).
"""

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

ROOTS = (
    "CreateChatCompletionResponse",
    "CreateChatCompletionStreamResponse",
    "CreateCompletionResponse",
    "ListModelsResponse",
    "Model",
    "ErrorResponse",
)
PREFIX = "#/components/schemas/"
OUT = Path(__file__).resolve().parents[1] / "tests/support/openai_openapi/schemas.json"


def referenced(schemas: dict[str, Any], roots: tuple[str, ...]) -> dict[str, Any]:
    """The roots and every schema reachable from them through `$ref`, by name."""
    kept: dict[str, Any] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in kept:
            continue
        kept[name] = schemas[name]
        pending.extend(_refs(schemas[name]))
    return dict(sorted(kept.items()))


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"].removeprefix(PREFIX)] if isinstance(node.get("$ref"), str) else []
        return found + [name for value in node.values() for name in _refs(value)]
    if isinstance(node, list):
        return [name for value in node for name in _refs(value)]
    return []


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("openapi", type=Path, help="openai-openapi's openapi.yaml")
    parser.add_argument("--commit", required=True, help="the commit the file is from")
    parser.add_argument("--date", required=True, help="that commit's date (YYYY-MM-DD)")
    args = parser.parse_args()
    # The C loader when PyYAML has it: the pure-Python one takes a minute over this file.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    document = yaml.load(args.openapi.read_text(), Loader=loader)
    vendored = {
        "source": {
            "repository": "https://github.com/openai/openai-openapi",
            "file": "openapi.yaml",
            "commit": args.commit,
            "date": args.date,
            "openapi": document["openapi"],
            "licence": "MIT, Copyright (c) OpenAI: see LICENSE beside this file",
            "extracted_by": "scripts/vendor_openai_schemas.py",
        },
        "components": {"schemas": referenced(document["components"]["schemas"], ROOTS)},
    }
    OUT.write_text(json.dumps(vendored, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
