"""The tools' parameter schemas reduced to what strict function calling compiles.

Strict decoders (OpenAI strict function calling, Anthropic strict tool use) take a subset of
JSON Schema: types, `properties`, `required`, `additionalProperties: false`, `items`, `enum`,
`anyOf` and `description`. Every other keyword the input models emit (length, range, pattern
and item-count bounds, defaults) is moved into the property's description, in words, and stays
enforced by the input models' validation, which reports a breach as a typed `invalid_input`.

OpenAI strict mode also wants every property listed in `required`; an optional property is
then nullable, and the tools read `null` as "not given" (`ToolInput`).
"""

from __future__ import annotations

import json
from typing import Any

#: The keywords every strict decoder compiles; all others are described, not sent.
STRUCTURE = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "anyOf"}
)
_LENGTH = ("minLength", "maxLength")
_RANGE = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
_ITEMS = ("minItems", "maxItems")
_NULL = {"type": "null"}


def openai_strict(parameters: dict[str, Any]) -> dict[str, Any]:
    """`parameters` (an object schema from `parameters_schema`) for OpenAI strict mode: every
    property required, an optional one nullable; what `to_strict_json_schema` leaves as it is."""
    return _strict(parameters, all_required=True, enum_type=True)


def anthropic_strict(parameters: dict[str, Any]) -> dict[str, Any]:
    """`parameters` within Anthropic's strict tool-use subset: optional properties stay
    optional; an `enum` stands without a `type` (what the SDK's `transform_schema` keeps)."""
    return _strict(parameters, all_required=False, enum_type=False)


def _strict(parameters: dict[str, Any], *, all_required: bool, enum_type: bool) -> dict[str, Any]:
    required = parameters.get("required", [])
    properties: dict[str, Any] = {}
    for name, schema in parameters["properties"].items():
        optional = name not in required
        node, limits = _reduced(schema, enum_type=enum_type)
        if all_required and optional:
            node = _nullable(node)
            limits.append(_null_reading(schema))
        elif "default" in schema:
            limits.append(f"default {json.dumps(schema['default'])}")
        if limits:
            node["description"] = _described(node.get("description"), limits)
        properties[name] = node
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if all_required else list(required),
        "additionalProperties": False,
    }


def _reduced(schema: dict[str, Any], *, enum_type: bool) -> tuple[dict[str, Any], list[str]]:
    """The structural part of `schema`, and its other keywords as phrases."""
    node: dict[str, Any] = {}
    limits: list[str] = []
    for key, value in schema.items():
        if key == "description":
            node[key] = value
        elif key == "items":
            node[key], inner = _reduced(value, enum_type=enum_type)
            limits.extend(f"each item {phrase}" for phrase in inner)
        elif key == "type" and "enum" in schema and not enum_type:
            continue
        elif key == "anyOf":
            node[key] = []
            for branch in value:
                reduced, inner = _reduced(branch, enum_type=enum_type)
                node[key].append(reduced)
                if inner:
                    limits.append(f"as {_a(reduced.get('type'))}, {', '.join(inner)}")
        elif key == "properties":
            raise ValueError("nested objects are not reduced: the tools take flat arguments")
        elif key in STRUCTURE:
            node[key] = value
    limits.extend(_phrases(schema))
    return node, limits


def _phrases(schema: dict[str, Any]) -> list[str]:
    """The non-structural keywords of one schema node, in words. A keyword without words
    fails loudly, so none is ever dropped unsaid."""
    unknown = set(schema) - STRUCTURE - {"description", "pattern", "default"}
    unknown -= {*_LENGTH, *_RANGE, *_ITEMS}
    if unknown:
        raise ValueError(f"no strict-mode wording for {sorted(unknown)}")
    phrases = []
    if any(key in schema for key in _LENGTH):
        phrases.append(_span(schema.get("minLength"), schema.get("maxLength"), "characters"))
    if any(key in schema for key in _RANGE):
        phrases.append(_range(schema))
    if any(key in schema for key in _ITEMS):
        phrases.append(_span(schema.get("minItems"), schema.get("maxItems"), "items"))
    if "pattern" in schema:
        phrases.append(f"matching the regular expression {schema['pattern']}")
    return phrases


def _span(low: int | None, high: int | None, unit: str) -> str:
    if low is not None and high is not None:
        return f"{low} to {high} {unit}"
    if low is not None:
        return f"at least {low} {unit[:-1] if low == 1 else unit}"
    return f"at most {high} {unit[:-1] if high == 1 else unit}"


def _range(schema: dict[str, Any]) -> str:
    if "minimum" in schema and "maximum" in schema and len(schema.keys() & set(_RANGE)) == 2:
        return f"from {schema['minimum']} to {schema['maximum']}"
    bounds = []
    if "minimum" in schema:
        bounds.append(f"at least {schema['minimum']}")
    if "exclusiveMinimum" in schema:
        bounds.append(f"greater than {schema['exclusiveMinimum']}")
    if "maximum" in schema:
        bounds.append(f"at most {schema['maximum']}")
    if "exclusiveMaximum" in schema:
        bounds.append(f"less than {schema['exclusiveMaximum']}")
    return " and ".join(bounds)


def _a(kind: object) -> str:
    return {"integer": "an integer", "string": "a string", "number": "a number"}.get(
        str(kind), str(kind)
    )


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """`node` that also takes `null`: a type list, or a `null` branch of an `anyOf`."""
    if "anyOf" in node:
        return {**node, "anyOf": [*node["anyOf"], _NULL]}
    kind = node["type"]
    if "enum" in node:  # an enum lists every value it takes, null included
        return {**node, "type": [kind, "null"], "enum": [*node["enum"], None]}
    return {**node, "type": [kind, "null"]}


def _null_reading(schema: dict[str, Any]) -> str:
    if "default" in schema:
        return f"null for the default, {json.dumps(schema['default'])}"
    return "null when not given"


def _described(description: str | None, limits: list[str]) -> str:
    said = "; ".join(limits)
    said = said[0].upper() + said[1:]
    return f"{description} {said}." if description else f"{said}."
