"""R2 buckets: objects as files on this node, their metadata in the bucket's SQLite file.

``<data_dir>/r2/<bucket>/blobs/<id>`` holds the bytes (a put is one blob, a completed
multipart upload one blob per part, read in order); ``meta.sqlite`` names them
(``ocd.store.sqlite.r2``). A blob is written to a temporary name, fsynced, renamed and its
directory fsynced before the row naming it commits, so an answered write survives kill -9
and a crash in between leaves only a file no row names, which the next open of the bucket
removes. R2's rules and texts (``R2Refused``) live here, for workerd's R2 protocol
(``ocd.js.r2``) and anything after it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import os
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from ocd import limits
from ocd.clock import Clock, wall_ms
from ocd.errors import R2Refused
from ocd.files import FILE_MODE, private_dir
from ocd.store.sqlite.r2 import BucketMeta, ObjectRow, PartRow

T = TypeVar("T")
READ_CHUNK = 256 * 1024
HASHES = ("sha1", "sha256", "sha384", "sha512")  # md5 is always computed: it is the etag


def no_such_key() -> R2Refused:
    return R2Refused(404, 10007, "The specified key does not exist.")


def no_such_upload() -> R2Refused:
    return R2Refused(400, 10024, "The specified multipart upload does not exist.")


def invalid(message: str) -> R2Refused:
    return R2Refused(400, 10029, message)


def check_key(key: str) -> None:
    try:
        n = len(key.encode())
    except UnicodeEncodeError:
        n = limits.R2_KEY_BYTES + 1
    if n > limits.R2_KEY_BYTES:
        raise R2Refused(400, 10020, "The specified object name is not valid.")


def check_custom(custom: dict[str, str]) -> None:
    n = sum(len(k.encode()) + len(v.encode()) for k, v in custom.items())
    if n > limits.R2_METADATA_BYTES:
        raise R2Refused(
            400, 10012, "Your metadata headers exceed the maximum allowed metadata size."
        )


@dataclass(frozen=True, slots=True)
class Etag:
    value: str
    kind: str  # strong, weak, wildcard


@dataclass(frozen=True, slots=True)
class Conditional:
    """``onlyIf``: RFC 7232's four preconditions, as R2 evaluates them."""

    etag_matches: tuple[Etag, ...] | None = None
    etag_does_not_match: tuple[Etag, ...] | None = None
    uploaded_before_ms: int | None = None
    uploaded_after_ms: int | None = None
    seconds: bool = False

    def holds(self, row: ObjectRow | None) -> bool:
        if row is None:
            return self.etag_matches is None and self.uploaded_after_ms is None

        def cut(ms: int) -> int:
            return ms // 1000 * 1000 if self.seconds else ms

        def has(tags: tuple[Etag, ...], strong: bool) -> bool:
            return any(
                t.kind == "wildcard" or (t.value == row.etag and (t.kind == "strong" or not strong))
                for t in tags
            )

        modified = cut(row.uploaded_ms)
        if_match = self.etag_matches is None or has(self.etag_matches, True)
        if_none = self.etag_does_not_match is None or not has(self.etag_does_not_match, False)
        since = (
            self.uploaded_after_ms is None
            or cut(self.uploaded_after_ms) < modified
            or (self.etag_does_not_match is not None and if_none)
        )
        unmodified = (
            self.uploaded_before_ms is None
            or modified < cut(self.uploaded_before_ms)
            or (self.etag_matches is not None and if_match)
        )
        return if_match and if_none and since and unmodified


def precondition_failed(current: ObjectRow | None = None) -> R2Refused:
    return R2Refused(
        412, 10031, "At least one of the pre-conditions you specified did not hold.", current
    )


def byte_range(
    size: int,
    offset: int | None,
    length: int | None,
    suffix: int | None,
    header: str | None,
) -> tuple[int, int]:
    """(start, length) of a get: the whole object unless a range is asked for; a range
    header R2 cannot serve as one range is ignored, as R2 does."""
    if header is not None:
        spec = header.strip()
        if spec.startswith("bytes=") and "," not in spec:
            first, _, last = spec[6:].strip().partition("-")
            try:
                if first == "":
                    n = min(int(last), size)
                    if n > 0:
                        return size - n, n
                else:
                    a = int(first)
                    b = size - 1 if last == "" else min(int(last), size - 1)
                    if a <= b:
                        return a, b - a + 1
            except ValueError:
                pass
        return 0, size
    if suffix is not None:
        if suffix <= 0:
            raise R2Refused(416, 10039, "The requested range is not satisfiable")
        n = min(suffix, size)
        return size - n, n
    if offset is None and length is None:
        return 0, size
    start = offset or 0
    n = size - start if length is None else length
    if start < 0 or start > size or n <= 0:
        raise R2Refused(416, 10039, "The requested range is not satisfiable")
    return start, min(n, size - start)


@dataclass
class Body:
    """The bytes of a get: open files (so a delete meanwhile takes nothing away)."""

    pieces: list[tuple[BinaryIO, int, int]] = field(default_factory=list)  # file, at, length

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            for f, at, n in self.pieces:
                f.seek(at)
                while n > 0:
                    chunk = await asyncio.to_thread(f.read, min(n, READ_CHUNK))
                    if not chunk:
                        raise OSError("an R2 blob is shorter than its row says")
                    n -= len(chunk)
                    yield chunk
        finally:
            self.close()

    def close(self) -> None:
        for f, _, _ in self.pieces:
            f.close()
        self.pieces.clear()


@dataclass(frozen=True, slots=True)
class Listing:
    objects: list[ObjectRow]
    prefixes: list[str]
    cursor: str | None  # None when not truncated


@dataclass(frozen=True, slots=True)
class Written:
    blob_id: str
    size: int
    digests: dict[str, bytes]


class Bucket:
    def __init__(self, root: Path, clock: Clock) -> None:
        self.root = private_dir(root)
        self.blobs = private_dir(root / "blobs")
        self.clock = clock
        self.meta = BucketMeta(root / "meta.sqlite")
        self.lock = asyncio.Lock()
        self._sweep()

    def _sweep(self) -> None:
        """Blob files no row names: a write that crashed before its commit, or a replaced
        object whose file was not yet removed."""
        keep = self.meta.blob_ids()
        for name in os.listdir(self.blobs):
            if name not in keep:
                (self.blobs / name).unlink(missing_ok=True)

    async def _meta(self, call: Callable[..., T], *args: Any) -> T:
        async with self.lock:
            return await asyncio.to_thread(call, *args)

    def _drop(self, blob_ids: list[str]) -> None:
        for b in blob_ids:
            (self.blobs / b).unlink(missing_ok=True)

    async def _write(self, chunks: AsyncIterator[bytes], digests: tuple[str, ...]) -> Written:
        blob_id = secrets.token_hex(16)
        tmp = self.blobs / f"{blob_id}.tmp"
        hashers = {name: hashlib.new(name) for name in ("md5", *digests)}
        size = 0
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
        try:
            try:
                async for chunk in chunks:
                    size += len(chunk)
                    for h in hashers.values():
                        h.update(chunk)
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view) :]
                await asyncio.to_thread(os.fsync, fd)
            finally:
                os.close(fd)
            os.rename(tmp, self.blobs / blob_id)
            await asyncio.to_thread(_fsync_dir, self.blobs)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return Written(blob_id, size, {k: h.digest() for k, h in hashers.items()})

    # ------------------------------------------------------------ reads

    async def head(self, key: str) -> ObjectRow:
        check_key(key)
        row = await self._meta(self.meta.get, key)
        if row is None:
            raise no_such_key()
        return row

    async def get(
        self,
        key: str,
        only_if: Conditional | None,
        ranged: Callable[[int], tuple[int, int]],
    ) -> tuple[ObjectRow, int, int, Body]:
        """(object, start, length, body); ``ranged`` turns the size into (start, length)."""
        check_key(key)
        async with self.lock:
            row = await asyncio.to_thread(self.meta.get, key)
            if row is None:
                raise no_such_key()
            if only_if is not None and not only_if.holds(row):
                raise precondition_failed(row)
            start, length = ranged(row.size)
            body = Body()
            at = 0
            try:
                for blob_id, n in row.blob_list():
                    lo, hi = max(start, at), min(start + length, at + n)
                    if lo < hi:
                        f = open(self.blobs / blob_id, "rb")
                        body.pieces.append((f, lo - at, hi - lo))
                    at += n
            except BaseException:
                body.close()
                raise
        return row, start, length, body

    async def listing(
        self,
        prefix: str,
        after: str | None,
        delimiter: str | None,
        limit: int,
    ) -> Listing:
        if limit not in limits.R2_LIST_KEYS:
            raise R2Refused(400, 10022, "MaxKeys params must be positive integer <= 1000.")
        return await self._meta(_page, self.meta.scan(prefix, after), prefix, delimiter, limit)

    # ------------------------------------------------------------ writes

    async def put(
        self,
        key: str,
        chunks: AsyncIterator[bytes],
        http: dict[str, Any],
        custom: dict[str, str],
        only_if: Conditional | None,
        hashes: dict[str, bytes],
    ) -> ObjectRow | None:
        """The new object, or None when ``only_if`` does not hold (nothing written)."""
        check_key(key)
        check_custom(custom)
        written = await self._write(chunks, tuple(h for h in HASHES if h in hashes))
        try:
            if written.size > limits.R2_OBJECT_BYTES:
                raise R2Refused(
                    400, 100100, "Your proposed upload exceeds the maximum allowed object size."
                )
            checksums: dict[str, str] = {}
            for name, given in hashes.items():
                got = written.digests[name]
                if given != got:
                    raise bad_digest(name, given, got)
                if name != "md5":
                    checksums[name] = got.hex()
            row = ObjectRow(
                key=key,
                version=secrets.token_hex(16),
                size=written.size,
                etag=written.digests["md5"].hex(),
                uploaded_ms=self.clock(),
                checksums=json.dumps(checksums),
                http_metadata=json.dumps(http),
                custom_metadata=json.dumps(custom),
                blobs=json.dumps([[written.blob_id, written.size]]),
            )
            async with self.lock:
                old = await asyncio.to_thread(self.meta.get, key)
                if only_if is not None and not only_if.holds(old):
                    self._drop([written.blob_id])
                    return None
                await asyncio.to_thread(self.meta.put, row)
        except BaseException:
            self._drop([written.blob_id])
            raise
        if old is not None:
            self._drop([b for b, _ in old.blob_list()])
        return row

    async def delete(self, keys: list[str]) -> None:
        for k in keys:
            check_key(k)
        async with self.lock:
            gone: list[str] = []
            for k in keys:
                old = await asyncio.to_thread(self.meta.get, k)
                if old is not None:
                    gone += [b for b, _ in old.blob_list()]
            await asyncio.to_thread(self.meta.delete, keys)
        self._drop(gone)

    async def create_upload(self, key: str, http: dict[str, Any], custom: dict[str, str]) -> str:
        check_key(key)
        check_custom(custom)
        upload_id = base64.urlsafe_b64encode(secrets.token_bytes(48)).decode()
        await self._meta(
            self.meta.create_upload, upload_id, key, json.dumps(http), json.dumps(custom)
        )
        return upload_id

    async def upload_part(
        self, key: str, upload_id: str, number: int, chunks: AsyncIterator[bytes]
    ) -> str:
        check_key(key)
        if number not in limits.R2_PARTS:
            raise invalid(f"Part number must be between 1 and {limits.R2_PARTS.high}.")
        written = await self._write(chunks, ())
        part = PartRow(
            number,
            written.blob_id,
            written.size,
            secrets.token_urlsafe(24),
            written.digests["md5"].hex(),
        )
        replaced: list[str] = []
        try:
            async with self.lock:
                upload = await asyncio.to_thread(self.meta.upload, upload_id, key)
                if upload is None or upload.state != "open":
                    raise no_such_upload()
                before = await asyncio.to_thread(self.meta.parts, upload_id)
                if number in before:
                    replaced.append(before[number].blob_id)
                await asyncio.to_thread(self.meta.put_part, upload_id, part)
        except BaseException:
            self._drop([written.blob_id])
            raise
        self._drop(replaced)
        return part.etag

    async def complete(self, key: str, upload_id: str, chosen: list[tuple[int, str]]) -> ObjectRow:
        check_key(key)
        async with self.lock:
            upload = await asyncio.to_thread(self.meta.upload, upload_id, key)
            if upload is None or upload.state != "open":
                raise no_such_upload()
            parts = await asyncio.to_thread(self.meta.parts, upload_id)
            numbers = [n for n, _ in chosen]
            if not chosen or len(set(numbers)) != len(numbers):
                raise invalid("One or more of the specified parts could not be found.")
            picked: list[PartRow] = []
            for n, etag in chosen:
                p = parts.get(n)
                if p is None or p.etag != etag:
                    raise R2Refused(
                        400, 10025, "One or more of the specified parts could not be found."
                    )
                picked.append(p)
            picked.sort(key=lambda p: p.part_number)
            _check_part_sizes(picked)
            md5 = hashlib.md5(b"".join(bytes.fromhex(p.md5) for p in picked))
            row = ObjectRow(
                key=key,
                version=secrets.token_hex(16),
                size=sum(p.size for p in picked),
                etag=f"{md5.hexdigest()}-{len(picked)}",
                uploaded_ms=self.clock(),
                checksums="{}",
                http_metadata=upload.http_metadata,
                custom_metadata=upload.custom_metadata,
                blobs=json.dumps([[p.blob_id, p.size] for p in picked]),
            )
            old = await asyncio.to_thread(self.meta.get, key)
            await asyncio.to_thread(self.meta.put, row, upload_id)
        unused = {p.blob_id for p in parts.values()} - {p.blob_id for p in picked}
        self._drop([*unused, *([b for b, _ in old.blob_list()] if old else [])])
        return row

    async def abort(self, key: str, upload_id: str) -> None:
        check_key(key)
        async with self.lock:
            upload = await asyncio.to_thread(self.meta.upload, upload_id, key)
            if upload is None:
                raise no_such_upload()
            if upload.state != "open":  # aborting twice, or after completing, is harmless
                return
            parts = await asyncio.to_thread(self.meta.parts, upload_id)
            await asyncio.to_thread(self.meta.abort, upload_id)
        self._drop([p.blob_id for p in parts.values()])


def _check_part_sizes(parts: list[PartRow]) -> None:
    """Every part but the last at least ``R2_PART_BYTES``, all of one size, the last no
    larger: R2's rule."""
    if len(parts) > limits.R2_PARTS.high:
        raise invalid(f"A multipart upload has at most {limits.R2_PARTS.high} parts.")
    head = parts[:-1]
    if any(p.size < limits.R2_PART_BYTES for p in head):
        raise R2Refused(
            400, 10011, "Your proposed upload is smaller than the minimum allowed object size."
        )
    if head and (len({p.size for p in head}) > 1 or parts[-1].size > head[0].size):
        raise R2Refused(500, 10048, "There was a problem with the multipart upload.")


def bad_digest(name: str, given: bytes, got: bytes) -> R2Refused:
    shown = {"md5": "MD5", "sha1": "SHA-1"}.get(name, name.upper().replace("SHA", "SHA-"))
    return R2Refused(
        400,
        10037,
        f"The {shown} checksum you specified did not match what we received.\n"
        f"You provided a {shown} checksum with value: {given.hex()}\n"
        f"Actual {shown} was: {got.hex()}",
    )


def _page(rows: Iterator[ObjectRow], prefix: str, delimiter: str | None, limit: int) -> Listing:
    """One page of a listing: objects and delimited prefixes, ``limit`` entries in all; the
    cursor is the last key the page covered (a whole prefix group counts as its last key),
    so keys written between pages are not skipped."""
    objects: list[ObjectRow] = []
    prefixes: list[str] = []
    last_key: list[str] = []  # per entry
    group: str | None = None
    for row in rows:
        rest = row.key[len(prefix) :]
        cut = rest.find(delimiter) if delimiter else -1
        if cut >= 0 and delimiter:
            p = prefix + rest[: cut + len(delimiter)]
            if p == group:
                last_key[-1] = row.key
                continue
            if len(last_key) == limit:
                return Listing(objects, prefixes, encode_cursor(last_key[-1]))
            group = p
            prefixes.append(p)
        else:
            if len(last_key) == limit:
                return Listing(objects, prefixes, encode_cursor(last_key[-1]))
            group = None
            objects.append(row)
        last_key.append(row.key)
    return Listing(objects, prefixes, None)


def encode_cursor(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode()


def decode_cursor(cursor: str) -> str:
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, ValueError):
        raise invalid("Invalid cursor") from None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class R2Service:
    """The node's buckets, each opened (and swept) at its first use."""

    def __init__(self, data_dir: Path, clock: Clock = wall_ms) -> None:
        self.root = data_dir / "r2"
        self.clock = clock
        self._buckets: dict[str, Bucket] = {}

    def bucket(self, name: str) -> Bucket:
        b = self._buckets.get(name)
        if b is None:
            private_dir(self.root)
            b = self._buckets[name] = Bucket(self.root / name, self.clock)
        return b

    def close(self) -> None:
        for b in self._buckets.values():
            b.meta.close()
        self._buckets.clear()
