"""DEPLOYER__DB__POOL__MAX=20 style overrides, values coerced to the type of the default."""

import json

PREFIX = "DEPLOYER__"


def _coerce(text: str, like):
    if isinstance(like, bool):
        return text.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(like, int):
        return int(text)
    if isinstance(like, float):
        return float(text)
    if isinstance(like, list):
        return json.loads(text) if text.startswith("[") else [p.strip() for p in text.split(",") if p.strip()]
    return text


def from_environ(environ: dict[str, str], defaults: dict) -> dict:
    """The overrides in `environ` as a nested dict."""
    tree: dict = {}
    for key, value in sorted(environ.items()):
        if not key.startswith(PREFIX):
            continue
        path = [p.lower() for p in key[len(PREFIX):].split("__") if p]
        like = defaults
        for part in path:
            like = like.get(part) if isinstance(like, dict) else None
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = _coerce(value, like)
    return tree
