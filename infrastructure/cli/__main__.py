"""`python -m session_awareness.infrastructure.cli`: the CLI by module, as Claude Code's MCP
configuration runs it (this installation's Python, whatever is on PATH)."""

from session_awareness.infrastructure.cli import main

raise SystemExit(main())
