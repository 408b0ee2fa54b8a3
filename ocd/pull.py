"""HTTP pull consumers: leases, pulls, acks and retries (reference 4.5).

A lease id (and a peek ``ref``) is ``<payload>.<mac>``: the payload names the account, the
queue, the message's seq and id, and the attempt it was delivered as; the mac is an
HMAC-SHA256 of it under a key kept in the database, so lease ids survive restarts, cannot
be forged or moved to another queue or account, and are checked in constant time.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import hashlib
import hmac
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ocd import deadletters
from ocd.admin import Admin
from ocd.clock import Clock, wall_ms
from ocd.deadletters import Dead
from ocd.decide import spend
from ocd.errors import StoreError
from ocd.metrics import Metrics
from ocd.store import (
    Backlog,
    CatalogueReads,
    Claim,
    Coordination,
    DeadLetter,
    Delivery,
    LeaseKind,
    Messages,
    PullConsumer,
    QueueRecord,
    Retry,
)

log = logging.getLogger(__name__)

LEASE_SECRET = "lease-signing-key"
MAX_WAIT_MS = 20_000
_NOT_ISSUED = {  # the warning for an id this queue did not issue, by kind
    "lease": "invalid lease id: not issued for this queue",
    "ref": "invalid ref: not issued for this queue",
}


class Token(NamedTuple):  # a tuple: one is made per lease id checked
    seq: int
    id: str
    attempts: int


_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")


def _b64(data: bytes) -> str:
    """URL-safe base64 without padding (``base64.urlsafe_b64encode`` without its Python
    layers: a lease id is issued per message received)."""
    return binascii.b2a_base64(data, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode()


class _Keyed(Protocol):
    def copy(self) -> _Keyed: ...
    def update(self, msg: bytes, /) -> None: ...
    def digest(self) -> bytes: ...


def _hmac_sha256(key: bytes) -> _Keyed:
    """An HMAC-SHA256 keyed with ``key`` and fed nothing yet, to be copied per message: the
    key's pads are computed once. OpenSSL's object itself where Python has it (hmac.HMAC
    wraps it in a Python layer that costs a third of each copy and digest)."""
    try:
        import _hashlib

        return _hashlib.hmac_new(key, digestmod="sha256")
    except (ImportError, AttributeError, ValueError):  # a Python without OpenSSL's HMAC
        return hmac.new(key, digestmod=hashlib.sha256)


class Signer:
    """Issues and checks lease ids and peek refs for one queue of one account."""

    def __init__(self, key: bytes) -> None:
        self._keyed = _hmac_sha256(key)

    def _mac(self, payload: bytes) -> bytes:
        h = self._keyed.copy()
        h.update(payload)
        return h.digest()

    def issue(self, kind: str, queue: QueueRecord, seq: int, mid: str, attempts: int) -> str:
        payload = f"{kind}|{queue.account}|{queue.queue_id}|{seq}|{mid}|{attempts}".encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def check(self, kind: str, queue: QueueRecord, token: object) -> Token | None:
        """The message a token names, or None if it is malformed, forged or not for
        this kind, account and queue. The base64 is decoded as leniently as
        ``base64.urlsafe_b64decode`` (characters outside the alphabet are skipped); it and
        ``_mac`` are inline, as a check is made per message deleted."""
        if not isinstance(token, str) or len(token) > 512:
            return None
        try:
            raw = token.encode("ascii").translate(_FROM_URLSAFE)
        except UnicodeEncodeError:
            return None
        head, dot, mac = raw.partition(b".")
        if not dot or b"." in mac:
            return None
        try:
            payload = binascii.a2b_base64(head + b"=" * (-len(head) % 4))
            given = binascii.a2b_base64(mac + b"=" * (-len(mac) % 4))
        except ValueError:  # binascii.Error
            return None
        h = self._keyed.copy()
        h.update(payload)
        if not hmac.compare_digest(h.digest(), given):
            return None
        try:
            k, account, qid, seq, mid, attempts = payload.decode().split("|")
            if k != kind or account != queue.account or qid != queue.queue_id:
                return None
            return Token(int(seq), mid, int(attempts))
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class Pulled:
    deliveries: list[Delivery]
    refused: list[Delivery]  # v8 messages, handed back untouched
    exhausted: list[str]
    backlog: Backlog


@dataclass(frozen=True, slots=True)
class AckResult:
    acked: int
    retried: int
    warnings: dict[str, str]


class PullStore(CatalogueReads, Messages, Coordination, Protocol):
    """What the pull service uses of the store: claims, settles and releases of PULL leases,
    the catalogue and wake-ups, and the secret that signs lease ids."""


class PullService:
    def __init__(
        self,
        store: PullStore,
        signer: Signer,
        admin: Admin,
        clock: Clock = wall_ms,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.signer = signer
        self.admin = admin
        self.clock = clock
        self.metrics = metrics
        self._closing = asyncio.Event()

    def close(self) -> None:
        """Shutdown: long polls waiting now return at once, empty."""
        self._closing.set()

    @classmethod
    async def open(
        cls, store: PullStore, admin: Admin, clock: Clock = wall_ms, metrics: Metrics | None = None
    ) -> PullService:
        return cls(store, Signer(await store.secret(LEASE_SECRET)), admin, clock, metrics)

    async def _dead_letter(self, queue: QueueRecord, consumer: PullConsumer) -> DeadLetter:
        """The consumer's dead-letter queue; like Cloudflare, created if it is missing (it
        may have been deleted since the consumer named it), so no message is lost."""
        dlq = consumer.dead_letter_queue
        if not dlq:
            return DeadLetter(None)
        return DeadLetter(await self.admin.dead_letter(queue.account, dlq))

    async def _backlog(self, queue: QueueRecord, metrics: bool) -> Backlog:
        """The queue's backlog for a pull's answer: from the store, or (without
        ``metrics``, or while the database is away) the count this node knows."""
        if metrics:
            with contextlib.suppress(StoreError):
                return await self.store.backlog(queue)
        return Backlog(self.store.backlog_count(queue), 0, 0)

    async def pull(
        self,
        queue: QueueRecord,
        consumer: PullConsumer,
        batch_size: int,
        visibility_ms: int,
        wait_ms: int = 0,
        metrics: bool = True,
    ) -> Pulled:
        """Lease up to ``batch_size`` ready messages; with ``wait_ms``, hold until some
        arrive (woken by commits, or when a delay or a lease runs out) or the wait ends.
        Without ``metrics`` (a surface that does not answer them: SQS), ``Pulled.backlog``
        is only the count this node knows, read from memory."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        while True:
            woken = self.store.watch(queue)
            current = self.store.queue_by_id(queue.queue_id)
            if current is None or current.settings.delivery_paused or self._closing.is_set():
                # deleted or paused while this pull waited: it gets nothing more
                return Pulled([], [], [], await self._backlog(queue, metrics))
            now = self.clock()
            ask = Claim(
                limit=batch_size,
                now_ms=now,
                lease_until_ms=now + visibility_ms,
                max_attempts=consumer.max_retries + 1,
                dead_letter=await self._dead_letter(queue, consumer),
                kind=LeaseKind.PULL,
            )
            # A pull that will answer after this claim whatever it finds reads the backlog
            # beside it rather than after it (a claim changes none of its figures).
            early = None
            if metrics and deadline <= loop.time():
                early = asyncio.ensure_future(self._backlog(queue, metrics))
            try:
                claimed = await self.store.claim(queue, ask)
            except BaseException:
                if early is not None:
                    early.cancel()
                raise
            # Committed: from here on nothing may fail this pull, or its messages would stay
            # leased, an attempt spent, with no one holding the lease.
            deadletters.tell(
                self.metrics,
                queue,
                consumer.dead_letter_queue,
                (Dead(mid, ask.max_attempts) for mid in claimed.exhausted),
            )
            good = [d for d in claimed.deliveries if d.content_type != "v8"]
            refused = [d for d in claimed.deliveries if d.content_type == "v8"]
            if refused:
                try:
                    await self.store.release(queue, [d.seq for d in refused], now, LeaseKind.PULL)
                except StoreError as e:  # they come back when their lease lapses
                    log.warning("queue %s: could not hand back v8 messages: %s", queue.name, e)
            left = deadline - loop.time()
            if good or refused or left <= 0:
                backlog = await (early or self._backlog(queue, metrics))
                return Pulled(good, refused, claimed.exhausted, backlog)
            if early is not None:
                early.cancel()
            # Commits wake us; a message that is only delayed or leased becomes ready
            # without one, so also wake when the next of those is due.
            upcoming = (await self.store.ready(queue, now, 1)).next_visible_ms
            if upcoming is not None:
                left = min(left, max(upcoming - now, 1) / 1000)
            waits = {
                asyncio.ensure_future(woken.wait()),
                asyncio.ensure_future(self._closing.wait()),
            }
            try:
                await asyncio.wait(waits, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()

    def lease_id(self, queue: QueueRecord, d: Delivery) -> str:
        return self.signer.issue("lease", queue, d.seq, d.id, d.attempts)

    def ref(self, queue: QueueRecord, d: Delivery) -> str:
        return self.signer.issue("ref", queue, d.seq, d.id, d.attempts)

    async def ack(
        self,
        queue: QueueRecord,
        consumer: PullConsumer,
        acks: Sequence[str],
        retries: Sequence[tuple[str, int | None]],
        undecodable: Sequence[tuple[str, str]] = (),
    ) -> AckResult:
        """Settle leased messages: ``acks`` deleted, ``retries`` (lease id, delay or the
        consumer's) made ready again or, on their last attempt, dead-lettered, and
        ``undecodable`` (lease id, reason: bodies the consumer could not decode)
        dead-lettered at once. Lease ids not issued for this queue get a warning."""
        warnings: dict[str, str] = {}
        ack_seqs = self._seqs("lease", queue, acks, warnings)
        now = self.clock()
        retried: list[tuple[Token, int]] = []
        for lease, delay_s in retries:
            token = self.signer.check("lease", queue, lease)
            if token is None:
                warnings[str(lease)] = _NOT_ISSUED["lease"]
            else:
                retried.append((token, consumer.retry_delay_s if delay_s is None else delay_s))
        spent = spend(retried, consumer.max_retries, now)
        dead = [t.seq for t in spent.dead]
        for lease, reason in undecodable:
            token = self.signer.check("lease", queue, lease)
            if token is None:
                warnings[str(lease)] = _NOT_ISSUED["lease"]
                continue
            dead.append(token.seq)
            self._undecodable(queue, consumer, token, reason)
        settled = await self.store.settle(
            queue, ack_seqs, spent.retries, dead, await self._dead_letter(queue, consumer), now
        )
        deadletters.tell(
            self.metrics,
            queue,
            consumer.dead_letter_queue,
            (Dead(t.id, t.attempts) for t in spent.dead),
        )
        if self.metrics is not None:
            self.metrics.acked.labels(queue.account, queue.name).inc(settled.acked)
            self.metrics.retried.labels(queue.account, queue.name).inc(settled.retried)
        return AckResult(
            settled.acked, settled.retried + settled.dead_lettered + settled.deleted, warnings
        )

    def _undecodable(
        self, queue: QueueRecord, consumer: PullConsumer, token: Token, reason: str
    ) -> None:
        dlq = consumer.dead_letter_queue
        log.warning(
            "queue %s: message %s cannot be decoded by its pull consumer (%s); %s",
            queue.name,
            token.id,
            reason,
            deadletters.where(dlq),
            extra={
                "event": "message_undecodable",
                "queue": queue.name,
                "id": token.id,
                "attempts": token.attempts,
                "reason": reason,
                **({"dead_letter_queue": dlq} if dlq else {}),
            },
        )
        if self.metrics is not None:
            self.metrics.undecodable.labels(queue.account, queue.name).inc()

    async def change_visibility(
        self, queue: QueueRecord, changes: Sequence[tuple[str, int]]
    ) -> set[str]:
        """Make each leased message named by ``(lease id, visibility_ms)`` visible again that
        long from now, without counting an attempt or dead-lettering it (SQS's
        ChangeMessageVisibility; 0 makes it ready at once). Answers the lease ids this
        queue did not issue, which change nothing."""
        bad: set[str] = set()
        now = self.clock()
        rows: list[Retry] = []
        for lease, visibility_ms in changes:
            token = self.signer.check("lease", queue, lease)
            if token is None:
                bad.add(lease)
            else:
                rows.append(Retry(token.seq, now + visibility_ms))
        if rows:
            await self.store.settle(queue, [], rows, [], DeadLetter(None), now)
        return bad

    async def purge_refs(self, queue: QueueRecord, refs: Sequence[str]) -> dict[str, str]:
        warnings: dict[str, str] = {}
        await self.store.delete_messages(queue, self._seqs("ref", queue, refs, warnings))
        return warnings

    def _seqs(
        self, kind: str, queue: QueueRecord, ids: Sequence[str], warnings: dict[str, str]
    ) -> list[int]:
        """The messages that ``ids`` (leases or refs) name; each one not issued for this
        queue gets a warning instead."""
        seqs: list[int] = []
        for i in ids:
            token = self.signer.check(kind, queue, i)
            if token is None:
                warnings[str(i)] = _NOT_ISSUED[kind]
            else:
                seqs.append(token.seq)
        return seqs
