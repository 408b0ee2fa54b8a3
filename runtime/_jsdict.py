"""A dict that also answers attribute access, like the JsDict Python Workers hand out."""

from __future__ import annotations

from typing import Any


class JsDict(dict[str, Any]):
    """``d["backlogCount"]`` and ``d.backlogCount`` both work; nested dicts convert too."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to_py(self, *args: Any, **kwargs: Any) -> JsDict:
        """The dict itself: it is a Python value already (``message.body.to_py()``)."""
        return self

    @classmethod
    def deep(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return cls({k: cls.deep(v) for k, v in value.items()})
        return value
