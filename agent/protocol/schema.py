"""The protocol's JSON Schema, generated from the pydantic models.

Editor clients build on this document (VS Code generates TypeScript types from it); a copy is
checked in under extension-bridge/protocol/ and a test fails when it drifts from the models.
"""

import json
from typing import Any

from pydantic import BaseModel, RootModel
from pydantic.json_schema import models_json_schema

from opencomposer.agent.protocol import events, items
from opencomposer.agent.protocol.common import PROTOCOL_VERSION
from opencomposer.agent.protocol.methods import METHODS
from opencomposer.agent.protocol.threads import TurnWithItems

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


# Named wrappers so each union gets one definition that methods and clients can refer to.
class Event(RootModel[events.Event]):
    """Any event of a thread's log, tagged by `type`."""


class Item(RootModel[items.Item]):
    """Any item, tagged by `type`."""


class ItemDelta(RootModel[items.ItemDelta]):
    """Any item delta, tagged by `kind`."""


_NAMED_UNIONS: dict[Any, type[BaseModel]] = {
    events.Event: Event,
    items.Item: Item,
    items.ItemDelta: ItemDelta,
}


def _model(payload: Any) -> type[BaseModel]:
    return _NAMED_UNIONS.get(payload, payload)


def protocol_schema() -> dict[str, Any]:
    """One JSON Schema document: the method registry plus every payload under `$defs`."""
    models: list[type[BaseModel]] = [Event, Item, ItemDelta, TurnWithItems]
    for method in METHODS:
        models.append(_model(method.params))
        if method.result is not None:
            models.append(_model(method.result))
    unique = list(dict.fromkeys(models))
    refs, defs = models_json_schema(
        [(model, "validation") for model in unique], ref_template="#/$defs/{model}"
    )

    methods: dict[str, Any] = {}
    for method in METHODS:
        entry: dict[str, Any] = {
            "direction": method.direction,
            "kind": method.kind,
            "description": method.doc,
            "params": refs[(_model(method.params), "validation")],
        }
        if method.result is not None:
            entry["result"] = refs[(_model(method.result), "validation")]
        methods[method.name] = entry

    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": "opencomposer agent protocol",
        "description": "Threads, turns and items streamed as events; the same JSON over "
        "HTTP (SSE) and LSP (`opencomposer/<method>`).",
        "protocol_version": PROTOCOL_VERSION,
        "methods": methods,
        "$defs": defs["$defs"],
    }


def protocol_schema_json() -> str:
    return json.dumps(protocol_schema(), indent=2, ensure_ascii=False) + "\n"
