"""The tools' schemas in the shape each function-calling API expects (R-T1), generated
from the input models, with every `$ref` inlined.

- `json-schema`: `{"name", "description", "parameters"}`, `parameters` the full JSON Schema,
  optional fields shown as their plain type (leave them out, or send `null`).
- `openai`: the Chat Completions tool, `{"type": "function", "function": {…, "strict": false}}`.
- `openai-strict`: the same with `"strict": true` and parameters in the strict subset: every
  property required, optional ones nullable (`null` means "not given"), bounds in words.
- `anthropic`: `{"name", "description", "input_schema"}` within Anthropic's strict subset
  (optional fields stay optional; bounds in words).
- `mcp`: an MCP `Tool`, `{"name", "description", "inputSchema"}` with the full JSON Schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from session_awareness.application.errors import InvalidArgumentError
from session_awareness.application.tools.catalog import TOOLS, Tool
from session_awareness.application.tools.flavours import anthropic_strict, openai_strict

_NULL = {"type": "null"}
Flavor = Literal["json-schema", "openai", "openai-strict", "anthropic", "mcp"]
FLAVORS: tuple[Flavor, ...] = get_args(Flavor)


def tool_schemas(flavor: Flavor = "json-schema") -> list[dict[str, Any]]:
    """One entry per session tool, in catalog order, in the shape `flavor` names."""
    return schemas_of(TOOLS, flavor)


def schemas_of(tools: Mapping[str, Tool], flavor: Flavor) -> list[dict[str, Any]]:
    """One entry per tool of `tools` (a host's choice from the catalog), in the shape `flavor`
    names."""
    if flavor not in FLAVORS:
        raise InvalidArgumentError("flavor", f"must be one of {', '.join(FLAVORS)}")
    return [_entry(tool, flavor) for tool in tools.values()]


def _entry(tool: Tool, flavor: Flavor) -> dict[str, Any]:
    parameters = parameters_schema(tool.input.model_json_schema(by_alias=True))
    named = {"name": tool.name, "description": tool.description}
    if flavor == "openai":
        return {
            "type": "function",
            "function": {**named, "parameters": parameters, "strict": False},
        }
    if flavor == "openai-strict":
        strict = openai_strict(parameters)
        return {"type": "function", "function": {**named, "parameters": strict, "strict": True}}
    if flavor == "anthropic":
        return {**named, "input_schema": anthropic_strict(parameters)}
    if flavor == "mcp":
        return {**named, "inputSchema": parameters}
    return {**named, "parameters": parameters}


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
