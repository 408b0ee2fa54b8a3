"""The store's rules, written once above the backends: pure functions over named values.
A backend reads the rows a rule needs, calls it, and writes what it decides; the SQL and
the transactions stay the backend's own.

- ``out_of_attempts``: which claimed messages had no delivery left (the dead-letter
  decision; a lease that expired on a message's last attempt ends here at the next claim).
- ``destination``: where a message that ran out of attempts goes.
- ``group_heads`` and ``hold_back``: FIFO's rule for a settle.
- ``searchable_id``: what a search by message id asks the database for.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from ocd.store.values import DeadLetter, QueueRecord, Retry


def out_of_attempts(attempts: int, max_attempts: int) -> bool:
    """A claimed message whose stored ``attempts`` (before this claim) were already
    ``max_attempts`` is not delivered again: it is dead-lettered instead."""
    return attempts > max_attempts


class Destination(Enum):
    DELETE = "delete"  # no dead-letter queue, or it no longer exists
    MOVE = "move"  # into the dead-letter queue, ready at once, attempts from 0
    MOVE_FIFO = "move_fifo"  # the same, FIFO into FIFO: in order, with groups and dedup ids


def destination(
    queue: QueueRecord, dead_letter: DeadLetter, knows: Callable[[int], bool]
) -> Destination:
    """Where ``queue``'s exhausted messages go; ``knows`` says whether a queue key still
    names a queue (a dead-letter queue deleted since the claim is no place to move to)."""
    dlq = dead_letter.queue
    if dlq is None or not knows(dlq.key):
        return Destination.DELETE
    if dlq.fifo and queue.fifo:
        return Destination.MOVE_FIFO
    return Destination.MOVE


class Failing(NamedTuple):
    """A FIFO message retried or dead-lettered by a settle, as its row stands."""

    seq: int
    group: str | None
    fseq: int | None  # its place in its group
    lease: int | None


class Heads(NamedTuple):
    first: dict[str, Failing]  # per group, its failing message of lowest place
    later: set[int]  # the other failing messages of those groups


def failing_seqs(retries: Sequence[Retry], dead: Sequence[int]) -> list[int]:
    return [r.seq for r in retries] + list(dead)


def group_heads(rows: Iterable[Failing]) -> Heads:
    """Per group, the first of its failing messages; it keeps its fate."""
    rows = list(rows)
    first: dict[str, Failing] = {}
    for f in rows:
        if f.group is None or f.fseq is None:
            continue
        seen = first.get(f.group)
        if seen is None or seen.fseq is None or f.fseq < seen.fseq:
            first[f.group] = f
    later = {f.seq for f in rows if f.group is not None and first[f.group].seq != f.seq}
    return Heads(first, later)


@dataclass(frozen=True, slots=True)
class HoldBack:
    retries: list[Retry]  # the retries that stand
    dead: list[int]  # the dead-letters that stand
    back: list[int]  # handed back with their group's first failure, attempt given back
    groups: set[str]  # the groups touched


def hold_back(
    retries: Sequence[Retry],
    dead: Sequence[int],
    heads: Heads,
    behind: Iterable[int],
    acks: Collection[int],
) -> HoldBack:
    """FIFO's rule for a settle: per group, the first retried or dead-lettered message
    keeps its fate, and every later message of the group under the same lease that is not
    acked here (``behind``: those messages, as the backend found them) goes back with it,
    attempt given back, so that none overtakes it."""
    back = set(heads.later)
    back.update(s for s in behind if s not in acks)
    return HoldBack(
        [r for r in retries if r.seq not in back],
        [s for s in dead if s not in back],
        sorted(back),
        set(heads.first),
    )


def unchanged(retries: Sequence[Retry], dead: Sequence[int]) -> HoldBack:
    """A settle with nothing failing: nothing to hold back."""
    return HoldBack(list(retries), list(dead), [], set())


def searchable_id(message_id: str | None) -> str | None:
    """A message id to search for, as the database can hold it. An id with a NUL or an
    unpaired surrogate (from a JSON ``\\u0000`` or ``\\ud800``) names no message, since
    no message could be stored under it: it is searched as ``""``, which no message has,
    so the search matches nothing and still says how many messages it looked at."""
    if message_id is None:
        return None
    if "\x00" in message_id:
        return ""
    try:
        message_id.encode()
    except UnicodeEncodeError:
        return ""
    return message_id
