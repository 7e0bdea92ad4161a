"""The JSON-RPC answer to a line the MCP server cannot take as a message.

JSON-RPC 2.0 answers every request, a broken one too: `-32700` when the text is not JSON the
server can read (a syntax error, a string holding a lone surrogate, nesting past the
parser's depth), `-32600` when it is JSON but no message (a batch, which MCP does not use, a
line too long, a request without a method), `-32602` when a request's `params` is not an
object. The answer carries the request's id when the line shows one, else `null`; a broken
notification or response is never answered (JSON-RPC forbids it), only logged.
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp_types as types

from session_awareness.application.tools.tool_errors import shown
from session_awareness.logs import get_logger

log = get_logger()

#: How much of a line is searched for its id when the line cannot be parsed whole: clients
#: write `jsonrpc`, `id` and `method` first.
ID_SCAN = 1 << 16
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+', re.DOTALL)
NO_ID = object()
SURROGATE = "a string holds a lone surrogate, which is not Unicode"
TITLES = {
    types.PARSE_ERROR: "Parse error",
    types.INVALID_REQUEST: "Invalid Request",
    types.INVALID_PARAMS: "Invalid params",
}


def answers_for(
    text: str, error: Exception | None, *, too_long: bool = False
) -> list[types.JSONRPCError]:
    """The error responses to `text` (refused by the SDK's parser with `error`, or the head
    of a line longer than the server reads): none when nothing may answer it."""
    if too_long:
        return _answer(types.INVALID_REQUEST, "the message is too long", _scan_id(text), None)
    try:
        message: Any = json.loads(text)  # more lenient than the SDK's parser
    except (RecursionError, ValueError):
        return _answer(types.PARSE_ERROR, _parser_says(error), _scan_id(text), None)
    if isinstance(message, dict) and _json_invalid(error):
        reason = SURROGATE if _unreadable(message) else _parser_says(error)
        return _answer(types.PARSE_ERROR, reason, message.get("id", NO_ID), message.get("method"))
    if isinstance(message, list):
        return _batch(message)
    if not isinstance(message, dict):
        return _answer(types.INVALID_REQUEST, "a message is a JSON object", None, None)
    return _not_a_message(message)


def _not_a_message(message: dict[str, Any]) -> list[types.JSONRPCError]:
    """A JSON object the SDK refused as a message."""
    found, method = message.get("id", NO_ID), message.get("method")
    if method is None and ("result" in message or "error" in message):
        log.warning("mcp_message_dropped", reason="a malformed response")  # never answered
        return []
    if isinstance(method, str) and not isinstance(message.get("params", {}), dict):
        return _answer(types.INVALID_PARAMS, "params must be an object", found, method)
    return _answer(types.INVALID_REQUEST, "not a JSON-RPC 2.0 request", found, method)


def _answer(code: int, reason: str, found: Any, method: Any) -> list[types.JSONRPCError]:
    """The answer, or none (logged) for a notification: a message without an id."""
    if found is NO_ID and method is not None:
        log.warning("mcp_message_dropped", code=code, reason=reason, method=shown(method))
        return []
    return [_refusal(code, reason, found if _is_id(found) else None)]


def _batch(messages: list[Any]) -> list[types.JSONRPCError]:
    """A batch (JSON-RPC 2.0's array, which MCP does not use): each request in it is refused
    by its id; an empty one, or one where no request shows an id, as a whole; one of
    notifications only is not answered."""
    reason = "batches are not supported: send one message per line"
    requests = [m for m in messages if isinstance(m, dict) and "method" in m]
    ids = [m["id"] for m in requests if _is_id(m.get("id"))]
    if not ids:
        if messages and len(requests) == len(messages) and all("id" not in m for m in requests):
            log.warning("mcp_message_dropped", reason=reason, notifications=len(messages))
            return []
        ids = [None]
    return [_refusal(types.INVALID_REQUEST, reason, request_id) for request_id in ids]


def _refusal(code: int, reason: str, request_id: Any) -> types.JSONRPCError:
    log.warning("mcp_message_refused", code=code, id=_logged(request_id), reason=reason)
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(code=code, message=TITLES[code], data=reason),
    )


def _logged(request_id: Any) -> Any:
    return shown(request_id) if isinstance(request_id, str) else request_id


def _is_id(value: Any) -> bool:
    """A request id the answer can carry: a string (valid Unicode) or an integer."""
    if isinstance(value, str):
        return not _unreadable(value)
    return isinstance(value, int) and not isinstance(value, bool)


def _unreadable(value: Any) -> bool:
    """Whether a parsed value holds a string that cannot be written as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except (UnicodeEncodeError, RecursionError, ValueError):
        return True
    return False


def _json_invalid(error: Exception | None) -> bool:
    """Whether the SDK's parser refused the text as JSON (not as a message)."""
    errors = getattr(error, "errors", None)
    return callable(errors) and any(e.get("type") == "json_invalid" for e in errors())


def _parser_says(error: Exception | None) -> str:
    """What the SDK's parser said about the text, without the text itself."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        with_input = errors(include_input=False, include_url=False)
        if with_input:
            return str(with_input[0].get("msg", "not JSON"))
    return "not JSON"


def _scan_id(text: str) -> Any:
    """The top-level `id` of a JSON object the parser could not read whole, when its head
    shows one; `NO_ID` otherwise."""
    depth, key, expect_value, last_string = 0, None, False, None
    for match in _TOKEN.finditer(text[:ID_SCAN]):
        piece = match.group()
        if piece in "{[":
            depth += 1
            expect_value = False
        elif piece in "}]":
            depth -= 1
        elif piece == ":" and depth == 1:
            key, expect_value = last_string, True
        elif piece == ",":
            expect_value = False
        elif depth == 1 and expect_value and key == "id":
            try:
                return json.loads(piece)
            except ValueError:
                return NO_ID
        elif depth == 1 and piece.startswith('"'):
            last_string = _decoded(piece)
        if depth <= 0 and match.start() > 0:
            break
    return NO_ID


def _decoded(token: str) -> str | None:
    try:
        value = json.loads(token)
    except ValueError:
        return None
    return value if isinstance(value, str) else None
