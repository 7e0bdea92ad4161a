"""Which database the service uses: the one decision every entry point shares.

The URL given (an argument, a `--database-url` option) wins; else `$SESSION_AWARENESS_DATABASE_URL`;
else the entry point's default: a SQLite file in the working directory for the library and the
operator CLI, a file in the state directory for the agent CLIs' hooks and servers (which start in
whatever directory the CLI runs). It sits at the package root and imports nothing else of the
package, so a hook's fast path reads it without loading the service (nor `typing`).
"""

from __future__ import annotations

import os

#: `typing.TYPE_CHECKING` without importing `typing` (a tenth of a relayed hook run); mypy
#: treats the name as true, and sees `typing.overload`. At run time an overload's stub is
#: replaced by the definition that follows it, so the decorator need not do anything.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import overload
else:

    def overload(function: object) -> object:
        return function


#: The environment variable that names the store when no URL is given.
DATABASE_URL_ENV = "SESSION_AWARENESS_DATABASE_URL"
#: The library's and the operator CLI's store when neither a URL nor the variable is given.
DEFAULT_DATABASE_URL = "sqlite:///session-awareness.db"


@overload
def url_in_force(given: str | None, *, default: str = DEFAULT_DATABASE_URL) -> str: ...
@overload  # ruff takes the overloads for redefinitions (F811): `overload` is typing's
def url_in_force(given: str | None, *, default: None) -> str | None: ...  # noqa: F811
def url_in_force(  # noqa: F811
    given: str | None, *, default: str | None = DEFAULT_DATABASE_URL
) -> str | None:
    """The URL in force: `given`, else `$SESSION_AWARENESS_DATABASE_URL`, else `default`
    (None: the caller leaves the choice to whoever it hands the URL to)."""
    return given or os.environ.get(DATABASE_URL_ENV) or default


__all__ = ["DATABASE_URL_ENV", "DEFAULT_DATABASE_URL", "url_in_force"]
