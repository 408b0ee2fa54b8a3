"""Reading request bodies: JSON objects with typed fields, or a 400 naming the field."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from ocd.http.body import read_body
from ocd.http.browsers import from_browser, json_type
from ocd.http.cloudflare.envelope import BODY_MALFORMED, ApiError, invalid

_MISSING: Any = object()


async def json_object(request: web.Request, *, optional: bool = False) -> dict[str, Any]:
    # A page can POST text/plain or a form cross-site without asking; application/json it
    # cannot. wrangler sends its JSON as text/plain, but no browser headers.
    if (
        request.body_exists
        and not json_type(request.headers.get("Content-Type"))
        and from_browser(request)
    ):
        raise ApiError(
            415,
            BODY_MALFORMED,
            "a request body must be JSON sent as Content-Type: application/json "
            "(curl: -H 'Content-Type: application/json', or --json)",
        )
    raw = await read_body(request)  # inflated here, within the limit; BodyError if not
    if not raw.strip():
        if optional:
            return {}
        raise ApiError(400, BODY_MALFORMED, "request body is empty; expected a JSON object")
    try:
        data = _DECODER.decode(raw.decode())
    except (ValueError, UnicodeDecodeError) as e:
        raise ApiError(400, BODY_MALFORMED, f"request body is not valid JSON: {e}") from None
    except RecursionError:  # valid JSON, but nested deeper than the parser's stack allows
        raise ApiError(400, BODY_MALFORMED, "request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise invalid("request body must be a JSON object")
    return data


def _no_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON (RFC 8259) and Cloudflare do not.
    raise ValueError(f"{name} is not a JSON value")


# One decoder for every request: json.loads with an option builds a new one each call.
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


class Fields:
    """Typed access to one JSON object; errors point at the field (``/settings/batch_size``)."""

    def __init__(self, data: object, pointer: str = "", known: tuple[str, ...] | None = None):
        if not isinstance(data, dict):
            raise invalid(f"{pointer or 'body'} must be a JSON object", pointer or None)
        self.data = data
        self.pointer = pointer
        if known is not None:
            for key in data:
                if key not in known:
                    raise invalid(f'unknown field "{key}"', self.where(key))

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def where(self, key: str) -> str:
        """The JSON pointer (RFC 6901) of ``key`` in this object."""
        return f"{self.pointer}/{key.replace('~', '~0').replace('/', '~1')}"

    def integer(self, key: str, lo: int, hi: int, default: Any = _MISSING) -> Any:
        value = self.data.get(key, _MISSING)
        if value is _MISSING or value is None:
            if default is _MISSING:
                raise invalid(f'"{key}" is required', self.where(key))
            return default
        # JSON has one number type: 5.0 is 5, 5.5 is not an integer.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise invalid(
                f'"{key}" must be an integer {lo}..{hi}, got {_shown(value)}', self.where(key)
            )
        return value

    def boolean(self, key: str, default: Any = _MISSING) -> Any:
        value = self.data.get(key, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise invalid(f'"{key}" is required', self.where(key))
            return default
        if not isinstance(value, bool):
            raise invalid(f'"{key}" must be true or false', self.where(key))
        return value

    def string(self, key: str, default: Any = _MISSING) -> Any:
        value = self.data.get(key, _MISSING)
        if value is _MISSING or value is None:
            if default is _MISSING:
                raise invalid(f'"{key}" is required', self.where(key))
            return default
        if not isinstance(value, str):
            raise invalid(f'"{key}" must be a string', self.where(key))
        return value

    def array(self, key: str, default: Any = _MISSING) -> Any:
        value = self.data.get(key, _MISSING)
        if value is _MISSING or value is None:
            if default is _MISSING:
                raise invalid(f'"{key}" is required', self.where(key))
            return default
        if not isinstance(value, list):
            raise invalid(f'"{key}" must be an array', self.where(key))
        return value

    def object(self, key: str, known: tuple[str, ...] | None = None) -> Fields:
        value = self.data.get(key)
        return Fields({} if value is None else value, self.where(key), known)


def _shown(value: object, limit: int = 80) -> str:
    """A rejected value as JSON for an error message, cut short: it may be huge or deep."""
    try:
        text = json.dumps(value)
    except RecursionError:
        text = f"a deeply nested {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
