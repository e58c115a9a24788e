"""The API's shapes as JSDoc typedefs, generated from its OpenAPI schema and the models of
the stream events' data, for the app's scripts (`static/api-types.js`: an editor that reads
JSDoc, or `// @ts-check`, then knows what each answer holds).

    ./scripts/api-types          # writes charlie/adapters/web/static/api-types.js

A test fails when the file is not what this prints, so it cannot fall behind `schemas.py`.
"""

from __future__ import annotations

import json
from typing import Any

from charlie.adapters.web import schemas as api_schemas

HEADER = """\
// The API's shapes, generated from its OpenAPI schema: do not edit by hand.
//   ./scripts/api-types
// Use one in a script: /** @type {import('./api-types.js').MemoryFile} */
export {};
"""


def js_type(schema: dict[str, Any]) -> str:
    """A JSON schema as a JSDoc type expression."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return "|".join(dict.fromkeys(js_type(s) for s in schema[key]))
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        item = js_type(schema.get("items", {}))
        return f"Array<{item}>"
    if kind == "object":
        values = schema.get("additionalProperties")
        inner = js_type(values) if isinstance(values, dict) else "*"
        return f"Object<string, {inner}>"
    return {"string": "string", "integer": "number", "number": "number", "boolean": "boolean",
            "null": "null"}.get(str(kind), "*")  # fmt: skip


def stream_events(known: dict[str, Any]) -> dict[str, Any]:
    """The JSON schemas of the stream events' data (`schemas.STREAM_EVENTS`), with the models
    they hold that `known` (the OpenAPI components) does not have already."""
    found: dict[str, Any] = {}
    for model in api_schemas.STREAM_EVENTS:
        schema = model.model_json_schema(
            ref_template="#/components/schemas/{model}", mode="serialization"
        )
        for name, held in schema.pop("$defs", {}).items():
            if name not in known:
                found[name] = held
        found[model.__name__] = schema
    return found


def typedefs(openapi: dict[str, Any]) -> str:
    """Every component schema of `openapi`, and every stream event's data, as a `@typedef`,
    in name order."""
    out = [HEADER]
    schemas = dict(openapi.get("components", {}).get("schemas", {}))
    schemas |= stream_events(schemas)
    for name in sorted(schemas):
        schema = schemas[name]
        lines = ["/**"]
        description = " ".join(str(schema.get("description", "")).split())
        if description:
            lines.append(f" * {description}")
        lines.append(f" * @typedef {{Object}} {name}")
        required = set(schema.get("required", []))
        for field, spec in schema.get("properties", {}).items():
            label = field if field in required else f"[{field}]"
            lines.append(f" * @property {{{js_type(spec)}}} {label}")
        lines.append(" */")
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"
