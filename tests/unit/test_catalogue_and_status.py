"""What the idle daemon's background tasks read without walking every queue: whether any
queue is FIFO (the retention sweep's deduplication prune), and the systemd status line,
which is not worked out at all without systemd to tell."""

from __future__ import annotations

import asyncio

import pytest

from ocd import summary
from ocd.notify import Notifier
from ocd.store import QueueRecord, QueueSettings
from ocd.store.catalogue import Catalogue

pytestmark = pytest.mark.timeout(10)


def record(key: int, name: str) -> QueueRecord:
    return QueueRecord(key, "local", name, f"{key:032x}", 0, 0, QueueSettings())


def test_any_fifo_follows_every_change_of_the_queues():
    c = Catalogue()
    assert not c.any_fifo()
    c.remember(record(1, "jobs"))
    assert not c.any_fifo()
    c.remember(record(2, "orders.fifo"))
    assert c.any_fifo()
    c.remember(record(2, "orders"))  # renamed: no FIFO queue left
    assert not c.any_fifo()
    c.remember(record(3, "b.fifo"))
    assert c.any_fifo()
    c.forget(record(3, "b.fifo"))
    assert not c.any_fifo()
    c.replace([record(4, "x.fifo")], [], {})
    assert c.any_fifo()


def test_the_queues_with_messages_follow_every_count_change():
    c = Catalogue()
    for key in (1, 2, 3):
        c.remember(record(key, f"q{key}"))
    assert c.with_messages() == set()
    c.add(1, 5, 50)  # a send committed
    c.set_counts(2, 3, 30, 0)  # a count read from the database
    assert c.with_messages() == {1, 2}
    c.add(1, -5, -50)  # all acked
    c.took(2, 1)
    assert c.with_messages() == {2}
    c.set_count(2, 0)
    c.add(3, 1, 1)
    assert c.with_messages() == {3}
    c.forget(record(3, "q3"))
    assert c.with_messages() == set()
    c.replace([record(4, "q4"), record(5, "q5")], [], {4: 2, 5: 0})
    assert c.with_messages() == {4}


async def test_without_systemd_the_status_line_is_never_worked_out():
    asked = []
    task = asyncio.ensure_future(
        summary.report_status(Notifier({}), lambda: asked.append(1) or "", every_s=0.001)
    )
    await asyncio.wait_for(task, 5)  # it returns: nothing to report to
    assert asked == []
