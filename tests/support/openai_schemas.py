"""OpenAI's own response schemas as a check on the raw JSON our server sends.

The schemas are vendored in `openai_openapi/schemas.json` (extracted from openai/openai-openapi
by `scripts/vendor_openai_schemas.py`; MIT, see the LICENSE there). The document is OpenAPI
3.1, whose schemas are JSON Schema 2020-12, but a few still say 3.0's `nullable: true` (the
stream chunk's `finish_reason`, `logprobs` and `usage`), a keyword 2020-12 does not know: read
literally, those schemas would refuse the nulls OpenAI itself sends. Each such schema is read
as `anyOf: [the schema, null]`, the one conversion made; nothing else is loosened
(`discriminator` and the `x-` keys are annotations, which a 2020-12 validator skips).
"""

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs

DOCUMENT = Path(__file__).parent / "openai_openapi" / "schemas.json"


def _nulls_allowed(node: Any) -> Any:
    """`node` with every OpenAPI 3.0 `nullable: true` spelled in JSON Schema 2020-12."""
    if isinstance(node, list):
        return [_nulls_allowed(value) for value in node]
    if not isinstance(node, dict):
        return node
    schema = {key: _nulls_allowed(value) for key, value in node.items() if key != "nullable"}
    return {"anyOf": [schema, {"type": "null"}]} if node.get("nullable") is True else schema


@cache
def _validator(name: str) -> jsonschema_rs.Draft202012Validator:
    components = _nulls_allowed(json.loads(DOCUMENT.read_text())["components"])
    # The schemas' `$ref`s point into `#/components/schemas/`, so they sit at that path here.
    return jsonschema_rs.Draft202012Validator(
        {"$ref": f"#/components/schemas/{name}", "components": components}
    )


def violations(name: str, instance: Any) -> list[str]:
    """How `instance` breaks OpenAI's schema `name`, one `path: problem` line each (none: it
    conforms)."""
    return [
        f"{'/'.join(map(str, error.instance_path)) or '(root)'}: {error.message}"
        for error in _validator(name).iter_errors(instance)
    ]
