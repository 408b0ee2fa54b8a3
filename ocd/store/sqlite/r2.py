"""An R2 bucket's metadata: ``<data_dir>/r2/<bucket>/meta.sqlite``.

One row per object (its blob files, in order, as JSON ``[[blob_id, size], ...]``: one for a
put, one per part for a completed multipart upload), one per multipart upload, one per part
uploaded and not yet completed or aborted. The blob files themselves are ``ocd.r2``'s; this
file only names them. Calls are blocking and short: ``ocd.r2`` runs them in a thread, one at
a time per bucket, so each read-check-write is atomic without SQL tricks. Every write
commits with ``synchronous=FULL``: answered means on disk.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ocd.errors import StoreError
from ocd.files import new_file

SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    key TEXT PRIMARY KEY,
    version TEXT NOT NULL,
    size INTEGER NOT NULL,
    etag TEXT NOT NULL,
    uploaded_ms INTEGER NOT NULL,
    checksums TEXT NOT NULL,
    http_metadata TEXT NOT NULL,
    custom_metadata TEXT NOT NULL,
    blobs TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS uploads (
    upload_id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    http_metadata TEXT NOT NULL,
    custom_metadata TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'open'
);
CREATE TABLE IF NOT EXISTS parts (
    upload_id TEXT NOT NULL,
    part_number INTEGER NOT NULL,
    blob_id TEXT NOT NULL,
    size INTEGER NOT NULL,
    etag TEXT NOT NULL,
    md5 TEXT NOT NULL,
    PRIMARY KEY (upload_id, part_number)
);
"""

_COLUMNS = "key, version, size, etag, uploaded_ms, checksums, http_metadata, custom_metadata, blobs"
LIST_PAGE = 500


@dataclass(frozen=True, slots=True)
class ObjectRow:
    key: str
    version: str
    size: int
    etag: str
    uploaded_ms: int
    checksums: str  # JSON {"sha1": hex, ...}
    http_metadata: str  # JSON, R2's httpFields
    custom_metadata: str  # JSON {name: value}
    blobs: str  # JSON [[blob_id, size], ...]

    def blob_list(self) -> list[tuple[str, int]]:
        return [(b, n) for b, n in json.loads(self.blobs)]


@dataclass(frozen=True, slots=True)
class UploadRow:
    key: str
    http_metadata: str
    custom_metadata: str
    state: str  # open, completed, aborted


@dataclass(frozen=True, slots=True)
class PartRow:
    part_number: int
    blob_id: str
    size: int
    etag: str
    md5: str


class BucketMeta:
    def __init__(self, path: Path) -> None:
        if not path.exists():
            new_file(path)
        try:
            self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.executescript(SCHEMA)
        except sqlite3.Error as e:
            raise StoreError(f"{path}: {e}") from e

    def close(self) -> None:
        self.conn.close()

    def _tx(self, statements: list[tuple[str, tuple[object, ...]]]) -> None:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                for text, args in statements:
                    self.conn.execute(text, args)
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        except sqlite3.Error as e:
            raise StoreError(str(e)) from e

    def get(self, key: str) -> ObjectRow | None:
        row = self.conn.execute(f"SELECT {_COLUMNS} FROM objects WHERE key = ?", (key,)).fetchone()
        return None if row is None else ObjectRow(*row)

    def put(self, row: ObjectRow, closes: str | None = None) -> None:
        """Write ``row`` (replacing the key's object); ``closes``: the multipart upload it
        completes, whose part rows go (their blobs now belong to the object)."""
        statements: list[tuple[str, tuple[object, ...]]] = [
            (
                f"INSERT OR REPLACE INTO objects ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    row.key, row.version, row.size, row.etag, row.uploaded_ms, row.checksums,
                    row.http_metadata, row.custom_metadata, row.blobs,
                ),
            )
        ]  # fmt: skip
        if closes is not None:
            statements.append(("DELETE FROM parts WHERE upload_id = ?", (closes,)))
            statements.append(
                ("UPDATE uploads SET state = 'completed' WHERE upload_id = ?", (closes,))
            )
        self._tx(statements)

    def delete(self, keys: list[str]) -> None:
        self._tx([("DELETE FROM objects WHERE key = ?", (k,)) for k in keys])

    def scan(self, prefix: str, after: str | None) -> Iterator[ObjectRow]:
        """Objects whose key starts with ``prefix``, after ``after``, in key order (UTF-8
        byte order, which is code point order)."""
        lower, op = (after, ">") if after is not None and after >= prefix else (prefix, ">=")
        while True:
            rows = self.conn.execute(
                f"SELECT {_COLUMNS} FROM objects WHERE key {op} ? ORDER BY key LIMIT ?",
                (lower, LIST_PAGE),
            ).fetchall()
            for r in rows:
                if not r[0].startswith(prefix):
                    return
                yield ObjectRow(*r)
            if len(rows) < LIST_PAGE:
                return
            lower, op = rows[-1][0], ">"

    def create_upload(self, upload_id: str, key: str, http: str, custom: str) -> None:
        self._tx(
            [
                (
                    "INSERT INTO uploads (upload_id, key, http_metadata, custom_metadata) "
                    "VALUES (?,?,?,?)",
                    (upload_id, key, http, custom),
                )
            ]
        )

    def upload(self, upload_id: str, key: str) -> UploadRow | None:
        row = self.conn.execute(
            "SELECT key, http_metadata, custom_metadata, state FROM uploads "
            "WHERE upload_id = ? AND key = ?",
            (upload_id, key),
        ).fetchone()
        return None if row is None else UploadRow(*row)

    def parts(self, upload_id: str) -> dict[int, PartRow]:
        rows = self.conn.execute(
            "SELECT part_number, blob_id, size, etag, md5 FROM parts WHERE upload_id = ?",
            (upload_id,),
        ).fetchall()
        return {r[0]: PartRow(*r) for r in rows}

    def put_part(self, upload_id: str, part: PartRow) -> None:
        self._tx(
            [
                (
                    "INSERT OR REPLACE INTO parts "
                    "(upload_id, part_number, blob_id, size, etag, md5) VALUES (?,?,?,?,?,?)",
                    (upload_id, part.part_number, part.blob_id, part.size, part.etag, part.md5),
                )
            ]
        )

    def abort(self, upload_id: str) -> None:
        self._tx(
            [
                ("DELETE FROM parts WHERE upload_id = ?", (upload_id,)),
                ("UPDATE uploads SET state = 'aborted' WHERE upload_id = ?", (upload_id,)),
            ]
        )

    def blob_ids(self) -> set[str]:
        """Every blob a row names: what a sweep of the blob directory keeps."""
        out = {b for (b,) in self.conn.execute("SELECT blob_id FROM parts")}
        for (blobs,) in self.conn.execute("SELECT blobs FROM objects"):
            out.update(b for b, _ in json.loads(blobs))
        return out
