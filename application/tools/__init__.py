"""The agent-facing session tools (R-T1–R-T3): typed inputs and outputs, visibility, errors.

A host opens the service with `open_service(url, visibility="tree", dispatcher=deliver)` and
runs an agent's tool call with
`svc.tools.call("session_status", {"sessionKey": "current"}, caller="agent:main:main")`.
"""

from session_awareness.application.tools.catalog import TOOLS, Tool
from session_awareness.application.tools.inputs import (
    SessionsListInput,
    SessionsSendInput,
    SessionsSpawnInput,
    SessionStatusInput,
    SubagentsInput,
)
from session_awareness.application.tools.outputs import (
    SessionsListOutput,
    SessionsSendOutput,
    SessionsSpawnOutput,
    SessionStatusOutput,
    SubagentsCancelOutput,
    SubagentsListOutput,
)
from session_awareness.application.tools.session_tools import SessionTools
from session_awareness.application.tools.sessions_history import (
    SessionsHistoryInput,
    SessionsHistoryOutput,
)
from session_awareness.application.tools.tool_errors import ToolError
from session_awareness.application.tools.tool_schemas import FLAVORS, Flavor, tool_schemas

__all__ = [
    "FLAVORS",
    "TOOLS",
    "Flavor",
    "SessionStatusInput",
    "SessionStatusOutput",
    "SessionTools",
    "SessionsHistoryInput",
    "SessionsHistoryOutput",
    "SessionsListInput",
    "SessionsListOutput",
    "SessionsSendInput",
    "SessionsSendOutput",
    "SessionsSpawnInput",
    "SessionsSpawnOutput",
    "SubagentsCancelOutput",
    "SubagentsInput",
    "SubagentsListOutput",
    "Tool",
    "ToolError",
    "tool_schemas",
]
