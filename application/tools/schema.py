"""The tools' JSON Schemas in the shape function-calling APIs expect (SPEC R-T1):
`[{"name", "description", "parameters"}]`, generated from the input models, with every `$ref`
inlined and optional fields shown as their plain type (leave them out rather than send null)."""

from __future__ import annotations

from typing import Any

from session_awareness.application.tools.catalog import TOOLS

_NULL = {"type": "null"}


def tool_schemas() -> list[dict[str, Any]]:
    """One entry per tool, in catalog order."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "parameters": parameters_schema(tool.input.model_json_schema(by_alias=True)),
        }
        for tool in TOOLS.values()
    ]


def parameters_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A self-contained object schema: `$defs` inlined, titles and null branches dropped."""
    cleaned = _clean(schema, schema.get("$defs", {}))
    return {
        "type": "object",
        "properties": cleaned["properties"],
        "required": cleaned.get("required", []),
        "additionalProperties": False,
    }


def _clean(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_clean(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "$defs"):
            continue
        if key == "properties":
            out[key] = {name: _clean(prop, defs) for name, prop in value.items()}
        else:
            out[key] = _clean(value, defs)
    branches = out.get("anyOf")
    if isinstance(branches, list) and _NULL in branches:
        rest = [branch for branch in branches if branch != _NULL]
        del out["anyOf"]
        if "default" in out and out["default"] is None:
            del out["default"]
        if len(rest) == 1:
            out = {**rest[0], **out}
        else:
            out["anyOf"] = rest
    return out
