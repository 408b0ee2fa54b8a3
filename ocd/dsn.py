"""Database connection strings for messages and logs: the one place a password is hidden.

A leaf module (nothing of ocd's imported), so that the config, which must not reach the
store, and the store, which must not reach the config, both use it.
"""

from __future__ import annotations

import re

_KEYWORD_PASSWORD = re.compile(r"((?:^|\s)password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)")
_QUERY_PASSWORD = re.compile(r"((?:^|&)password=)[^&#]*")


def redact_dsn(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***``.

    Handles URLs (``postgresql://user:secret@host/db``, ``?password=secret``) and libpq
    keyword/value strings (``host=db password=secret``, quoted or not).
    """
    scheme, sep, rest = dsn.partition("://")
    if not sep:
        return _KEYWORD_PASSWORD.sub(r"\1***", dsn)
    # An unencoded "@" or "/" may sit in the password: the user info ends at the last "@".
    location, question, query = rest.partition("?")
    userinfo, at, host = location.rpartition("@")
    if at and ":" in userinfo:
        location = f"{userinfo.partition(':')[0]}:***@{host}"
    query = _QUERY_PASSWORD.sub(r"\1***", query)
    return f"{scheme}://{location}{question}{query}"
