"""A small JSON Schema checker for the keywords the tool schemas use (`jsonschema` is not a
dependency): enough to show that a schema accepts the documents' examples and refuses wrong
types. An unknown keyword fails loudly, so the checker never passes a schema it cannot read."""

from __future__ import annotations

import re
from typing import Any

KNOWN = {
    "type", "properties", "required", "additionalProperties", "items", "enum", "anyOf",
    "minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength", "maxItems", "pattern",
    "description", "default",
}  # fmt: skip
TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def is_valid(schema: dict[str, Any], value: Any) -> bool:
    unknown = set(schema) - KNOWN
    assert not unknown, f"the checker cannot read {unknown}"
    if "anyOf" in schema and not any(is_valid(branch, value) for branch in schema["anyOf"]):
        return False
    if "type" in schema and not TYPES[schema["type"]](value):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    return _bounds_hold(schema, value) and _parts_hold(schema, value)


def _bounds_hold(schema: dict[str, Any], value: Any) -> bool:
    if TYPES["number"](value):
        return (
            value >= schema.get("minimum", value)
            and value <= schema.get("maximum", value)
            and value > schema.get("exclusiveMinimum", value - 1)
        )
    if isinstance(value, str):
        return (
            schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value))
            and re.search(schema.get("pattern", ""), value) is not None
        )
    return True


def _parts_hold(schema: dict[str, Any], value: Any) -> bool:
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", len(value)):
            return False
        return all(is_valid(schema.get("items", {}), item) for item in value)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        if any(name not in value for name in schema.get("required", [])):
            return False
        if schema.get("additionalProperties") is False and set(value) - set(properties):
            return False
        return all(is_valid(properties[k], v) for k, v in value.items() if k in properties)
    return True
