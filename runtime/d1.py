"""The D1 API worker code sees: ``env.DB``, a D1 database.

As in Cloudflare's Workers: ``stmt = env.DB.prepare("SELECT * FROM t WHERE id = ?")``,
``stmt.bind(1)`` (a new statement), then ``await stmt.first()`` / ``first("col")``,
``all()``, ``raw()`` / ``raw(columnNames=True)``, ``run()``; ``await env.DB.batch([...])``
runs statements in one transaction (all or nothing); ``await env.DB.exec(sql)`` runs
newline-separated statements. Results are dicts with attribute access too
(``result.results``, ``result.meta.last_row_id``). A failure raises :class:`D1Error` with
the text a JS Worker's error has ("D1_ERROR: no such table: x: SQLITE_ERROR").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from runtime._jsdict import JsDict


class D1Error(Exception):
    """A D1 call failed; the batch it was in changed nothing."""


class D1Backend(Protocol):
    """What ocd plugs in behind a binding; worker code never sees it."""

    async def query(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[dict[str, Any]]:
        """Each statement's result (``results`` as columns and rows, ``meta``), run in one
        transaction; raises :class:`D1Error`."""
        ...


def _value(v: Any) -> Any:
    if v is None or isinstance(v, str | int | float):
        return int(v) if isinstance(v, bool) else v
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v)
    raise D1Error(f"D1_TYPE_ERROR: Type '{type(v).__name__}' not supported for value '{v}'")


def _objects(result: dict[str, Any]) -> JsDict:
    columns = result["results"]["columns"]
    rows = [JsDict(zip(columns, row, strict=True)) for row in result["results"]["rows"]]
    return JsDict(success=True, results=rows, meta=JsDict.deep(result["meta"]))


class D1PreparedStatement:
    def __init__(self, backend: D1Backend, sql: str, params: tuple[Any, ...] = ()) -> None:
        self._backend = backend
        self.statement = sql
        self.params = params

    def bind(self, *values: Any) -> D1PreparedStatement:
        return D1PreparedStatement(self._backend, self.statement, tuple(map(_value, values)))

    async def _one(self) -> dict[str, Any]:
        (result,) = await self._backend.query([(self.statement, self.params)])
        return result

    async def all(self) -> JsDict:
        return _objects(await self._one())

    async def run(self) -> JsDict:
        return _objects(await self._one())

    async def first(self, column: str | None = None) -> Any:
        rows = (await self.all()).results
        if not rows:
            return None
        if column is None:
            return rows[0]
        if column not in rows[0]:
            raise D1Error(f"D1_COLUMN_NOTFOUND: Column not found ({column})")
        return rows[0][column]

    async def raw(self, columnNames: bool = False, **options: Any) -> list[list[Any]]:
        result = (await self._one())["results"]
        names = columnNames or bool(options.get("column_names"))
        return ([list(result["columns"])] if names else []) + [list(r) for r in result["rows"]]


class D1Database:
    """A D1 binding, as ``env.<binding>``."""

    def __init__(self, backend: D1Backend) -> None:
        self._backend = backend

    def prepare(self, sql: str) -> D1PreparedStatement:
        return D1PreparedStatement(self._backend, sql)

    async def batch(self, statements: Sequence[D1PreparedStatement]) -> list[JsDict]:
        results = await self._backend.query([(s.statement, s.params) for s in statements])
        return [_objects(r) for r in results]

    async def exec(self, sql: str) -> JsDict:
        lines = [line for line in sql.strip().split("\n") if line.strip()]
        results = await self._backend.query([(line, ()) for line in lines])
        duration = sum(r["meta"]["duration"] for r in results)
        return JsDict(count=len(results), duration=duration)
