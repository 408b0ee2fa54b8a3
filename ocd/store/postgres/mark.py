"""Each node's record of the PostgreSQL database it runs on (``<data_dir>/postgres.mark``),
so that a database replaced under it is refused instead of run on.

The database carries an identity: 16 random bytes in ``ocd_meta`` (``database_id``), made
the first time a node opens it; ``pg_dump`` keeps it, a new or another database has
another. A node records that identity and the highest message seq it knows the database
holds durably, the last value of the messages' ``seq`` sequence, read once a second and
at a clean shutdown (``pg_sequence_last_value``: no table scan).

The seq recorded is never ahead of the database: a value read from the sequence is
recorded only once the server's WAL is flushed past the point where it was read
(``pg_current_wal_flush_lsn`` at or beyond the earlier ``pg_current_wal_insert_lsn``), and
crash recovery never brings a sequence below a flushed value. The record lags the
database by up to a second or so, which only makes the check a little less sharp.

At start a node refuses (``StoreBehind``), unless ``ocd serve --accept-data-loss``:

* a database of another identity than its record: the DSN points at another database,
  or it was re-created (empty, or loaded by ``ocd migrate-store`` again);
* a database whose sequence is below the record: restored from an older dump or backup,
  or a replica that was behind.

No record (a new ``data_dir``, or ocd from before this check) is not an error: the node
starts one. A record that cannot be read is logged and started over. A ``data_dir`` that
cannot be written is logged once and the check is off, as it has nothing to go by.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from ocd.errors import StoreBehind

log = logging.getLogger(__name__)

RECORD_NAME = "postgres.mark"
DATABASE_ID_KEY = "database_id"
RECORD_EVERY_S = 1.0
ACCEPT = "ocd serve --accept-data-loss"

PUT_ID = "INSERT INTO ocd_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING"
GET_ID = "SELECT value FROM ocd_meta WHERE key = $1"
TABLES = "SELECT to_regclass('ocd_meta') IS NOT NULL, to_regclass('ocd_messages') IS NOT NULL"
# the sequence's last value (NULL before its first use), and where the WAL is
POSITION = """
SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('ocd_messages', 'seq')::regclass),
                0),
       pg_current_wal_insert_lsn()::text, pg_current_wal_flush_lsn()::text
"""
WAL = "SELECT 0, pg_current_wal_insert_lsn()::text, pg_current_wal_flush_lsn()::text"


@dataclass(frozen=True, slots=True)
class Record:
    database_id: str  # hex
    seq: int  # the messages' sequence had durably reached this
    where: str  # the DSN without its password, for the messages


class Unreadable(Exception):
    pass


def record_path(data_dir: Path) -> Path:
    return data_dir / RECORD_NAME


def read_record(path: Path) -> Record | None:
    """The record; None when there is none. Raises ``Unreadable`` or ``OSError``."""
    try:
        raw = path.read_text()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
        record = Record(str(data["database_id"]), int(data["seq"]), str(data.get("where", "")))
    except (ValueError, KeyError, TypeError) as e:
        raise Unreadable(f"{path} is not a record of ocd's ({e})") from None
    return record


def write_record(path: Path, record: Record) -> None:
    """Replace the record atomically (a temporary file of this process, renamed over it):
    two nodes sharing a data_dir never see half a record."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    data = json.dumps({"database_id": record.database_id, "seq": record.seq, "where": record.where})
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    with contextlib.suppress(OSError):
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


async def look(conn: asyncpg.Connection) -> tuple[str | None, tuple[int, int, int]]:
    """The database's identity (None: it has none, e.g. a new database) and ``position``,
    read without changing anything."""
    has_meta, has_messages = await conn.fetchrow(TABLES)
    found = await conn.fetchval(GET_ID, DATABASE_ID_KEY) if has_meta else None
    return (
        None if found is None else bytes(found).hex(),
        await position(conn) if has_messages else await _read(conn, WAL),
    )


async def identity(conn: asyncpg.Connection, new_id: bytes) -> str:
    """The database's identity, made (``new_id``) if it has none yet."""
    async with conn.transaction():
        await conn.execute("SET LOCAL synchronous_commit = on")
        await conn.execute(PUT_ID, DATABASE_ID_KEY, new_id)
        value = await conn.fetchval(GET_ID, DATABASE_ID_KEY)
    return bytes(value).hex()


async def position(conn: asyncpg.Connection) -> tuple[int, int, int]:
    """(the sequence's last value, the WAL's insert position, its flush position)."""
    return await _read(conn, POSITION)


async def _read(conn: asyncpg.Connection, query: str) -> tuple[int, int, int]:
    row = await conn.fetchrow(query)
    assert row is not None
    return int(row[0]), _lsn(row[1]), _lsn(row[2])


def _lsn(value: object) -> int:
    if isinstance(value, int):
        return value
    high, _, low = str(value).partition("/")
    return (int(high, 16) << 32) | int(low, 16)


class Recorder:
    """One node's record: what it has written, and a value read but not yet known to be
    durable (waiting for the WAL to be flushed past where it was read)."""

    def __init__(self, path: Path, database_id: str, seq: int, where: str) -> None:
        self.path = path
        self.database_id = database_id
        self.seq = seq
        self.where = where
        self._pending: tuple[int, int] | None = None  # (seq, WAL insert position)
        self._failing = False

    @property
    def settled(self) -> bool:
        """Nothing read is waiting for the WAL to be flushed."""
        return self._pending is None

    def start(self) -> bool:
        """Write the record as it stands; False (logged) when the data_dir cannot hold it."""
        return self._write()

    def observe(self, seq: int, insert_lsn: int, flush_lsn: int) -> None:
        """A reading of ``position``: record what is now known durable."""
        if self._pending is not None and flush_lsn >= self._pending[1]:
            self._advance(self._pending[0])
            self._pending = None
        if flush_lsn >= insert_lsn:
            self._advance(seq)  # everything read is on disk already
        elif seq > self.seq and self._pending is None:
            self._pending = (seq, insert_lsn)

    def _advance(self, seq: int) -> None:
        if seq > self.seq:
            self.seq = seq
            self._write()

    def _write(self) -> bool:
        try:
            write_record(self.path, Record(self.database_id, self.seq, self.where))
        except OSError as e:
            if not self._failing:
                self._failing = True
                log.error(
                    "cannot keep the record of database %s in %s (%s): a database replaced "
                    "under this node will not be detected",
                    self.where,
                    self.path,
                    e,
                    extra={"event": "pg_mark_unwritable", "path": str(self.path)},
                )
            return False
        if self._failing:
            self._failing = False
            log.info(
                "the record of database %s is kept again in %s",
                self.where,
                self.path,
                extra={"event": "pg_mark_writable", "path": str(self.path)},
            )
        return True


def judge(
    path: Path, database_id: str | None, seq: int, where: str, accept_data_loss: bool
) -> Record | None:
    """The record to carry on from (None: start one from the database), after refusing
    (``StoreBehind``) a database that is not the one recorded or is older than it, unless
    the loss is accepted: then said loudly, and the record starts over."""
    try:
        record = read_record(path)
    except (Unreadable, OSError) as e:
        log.warning(
            "the record of the database this node ran on cannot be read (%s); it starts over",
            e,
            extra={"event": "pg_mark_unreadable", "path": str(path)},
        )
        return None
    if record is None:
        return None
    missing = _missing(path, record, database_id, seq, where)
    if missing is None:
        return record
    if accept_data_loss:
        log.error(
            "%s. Starting anyway, as --accept-data-loss asks: what is missing is lost, and "
            "the record starts over from what the database holds",
            missing,
            extra={
                "event": "data_loss_accepted",
                "where": where,
                "record_seq": record.seq,
                "database_seq": seq,
            },
        )
        return None
    raise StoreBehind(
        f"{missing}. ocd will not run on it, so that nothing more is lost. Point dsn back "
        "at the database this node ran on, or restore the newest dump of it; to run on "
        f"this database as it is and accept the loss, start once with `{ACCEPT}`",
        record.seq - seq if record.database_id == database_id else None,
        where,
        "open",
    )


def _missing(
    path: Path, record: Record, database_id: str | None, seq: int, where: str
) -> str | None:
    if record.database_id != database_id:
        was = f" ({record.where})" if record.where else ""
        found = "it has none (a new database)" if database_id is None else database_id[:12]
        return (
            f"database {where} is not the one this node last ran on: its identity is "
            f"{found}, but {path} records {record.database_id[:12]}{was}, whose "
            f"messages reached seq {record.seq}. The DSN points at another database, or the "
            "database was dropped and created again (empty, or loaded again)"
        )
    if seq >= record.seq:
        return None
    return (
        f"database {where} is older than what this node saw committed to it: its messages' "
        f"sequence is at {seq}, but {path} records {record.seq} "
        f"({record.seq - seq} seq(s) are missing, and the messages that had them). It was "
        "restored from an older dump or backup, or is a replica that was behind"
    )
